//! `-o` output formats of the commands that print the API's answers.

/// Output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Output {
    /// Readable text (diffs per resource, coloured on a terminal).
    Text,
    /// The API's JSON, pretty-printed.
    Json,
}
