//! Why a command failed ([`CliError`]) and the exit status scripts see.

/// Why a command failed; its [`exit_code`](CliError::exit_code) is what scripts see.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad local input (file, YAML, resource); nothing was sent. Exit 2.
    #[error("{0}")]
    Input(String),
    /// The control plane refused the request (4xx other than 404). Exit 1.
    #[error("{0}")]
    Refused(String),
    /// 404. Exit 4.
    #[error("{0}")]
    NotFound(String),
    /// Unreachable, timed out, or a 5xx. Exit 3.
    #[error("{0}")]
    Unavailable(String),
    /// Any of the above with what was being done. Exits as the inner error. (Not named
    /// `source`: that would make it the error's cause too, and `{:#}` would print it twice.)
    #[error("{context}: {error}")]
    Context {
        /// What was being done.
        context: String,
        /// The failure.
        error: Box<CliError>,
    },
}

impl CliError {
    /// The process exit status for this error (see the crate docs).
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Refused(_) => 1,
            CliError::Input(_) => 2,
            CliError::Unavailable(_) => 3,
            CliError::NotFound(_) => 4,
            CliError::Context { error, .. } => error.exit_code(),
        }
    }

    /// This error, prefixed with what was being done.
    pub fn context(self, context: impl Into<String>) -> CliError {
        CliError::Context {
            context: context.into(),
            error: Box::new(self),
        }
    }
}
