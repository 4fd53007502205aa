//! The KDS client's typed errors: a `--global-kds-address` that cannot be dialed, or a list
//! of them the client cannot use together ([`AddressError`]), and what stops the client from building its endpoint, sending its token
//! or connecting ([`KdsClientError`]). Their messages are what the flag checks and the KDS
//! status show.

/// What the accepted address form is, appended to most [`AddressError`]s.
pub const FORM: &str = "expected one URI like grpcs://global:5685 or http://127.0.0.1:5685";

/// Why a `--global-kds-address` is refused: one value ([`super::KdsAddress`]'s parser), or
/// the list of them ([`super::KdsAddresses::new`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AddressError {
    /// Not a URI at all (the parser's reason).
    #[error("not a URI ({0}); {FORM}")]
    NotUri(String),
    /// A scheme other than `http`, `https`, `grpc`, `grpcs`.
    #[error("scheme {0:?} is not one of http, https, grpc, grpcs; {FORM}")]
    Scheme(String),
    /// No scheme.
    #[error("no scheme; {FORM}")]
    NoScheme,
    /// No host.
    #[error("no host; {FORM}")]
    NoHost,
    /// `user@` in the authority.
    #[error("user info in the address is not used (the zone token goes in --kds-token or --kds-token-file)")]
    UserInfo,
    /// A host that is neither a DNS name nor an IP address.
    #[error("host {0:?} is not a DNS name or an IP address; {FORM}")]
    Host(String),
    /// No port.
    #[error("no port (the Global's KDS port, 5685 by default); {FORM}")]
    NoPort,
    /// Port 0.
    #[error("port 0 cannot be dialed")]
    PortZero,
    /// A path or query after `host:port`.
    #[error("a path or query after host:port is not used; {FORM}")]
    Path,
    /// No address at all.
    #[error("no address given")]
    NoAddress,
    /// TLS and plaintext addresses in one list (as given): one `--kds-ca-file` serves them all.
    #[error("{tls} is TLS but {plaintext} is plaintext: every address must be TLS (https://, grpcs://, with --kds-ca-file) or every one plaintext (http://, grpc://)")]
    MixedTls {
        /// A TLS address.
        tls: String,
        /// A plaintext address.
        plaintext: String,
    },
    /// The same Global twice (as given; compared as dialed, so `grpc://g:1` is `http://g:1`).
    #[error("{first} is given twice (again as {again}): give each Global replica once")]
    Duplicate {
        /// Its first occurrence.
        first: String,
        /// The repeat.
        again: String,
    },
}

/// Why the KDS client cannot build its endpoint, send its zone token or connect.
#[derive(Debug, thiserror::Error)]
pub enum KdsClientError {
    /// tonic refused the TLS configuration (CA certificates it cannot load).
    #[error("TLS configuration: {0}")]
    Tls(#[source] tonic::transport::Error),
    /// A TLS address (as given) without `--kds-ca-file`.
    #[error("{0} is TLS and needs --kds-ca-file (the CA that signed the Global's KDS certificate; system roots are not used)")]
    NeedsCa(String),
    /// A plaintext address (as given) with `--kds-ca-file`.
    #[error("{0} is plaintext, so --kds-ca-file would not be used; give an https:// or grpcs:// address")]
    CaUnused(String),
    /// An empty token (or token file).
    #[error("the zone token is empty")]
    EmptyToken,
    /// A token gRPC metadata cannot carry.
    #[error("the zone token contains characters not allowed in gRPC metadata")]
    TokenNotMetadata,
    /// An unreadable token file.
    #[error("zone token file {}: {source}", path.display())]
    TokenFile {
        /// The file.
        path: std::path::PathBuf,
        /// Why it cannot be read.
        #[source]
        source: std::io::Error,
    },
    /// The connection to the Global (address as given) failed.
    #[error("cannot connect to {address}: {source:?}")]
    Connect {
        /// The Global's address.
        address: String,
        /// tonic's error (shown with its causes).
        #[source]
        source: tonic::transport::Error,
    },
}
