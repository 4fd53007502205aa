//! The command-line values both CPs take for PostgreSQL and replicas, checked the same way.

/// Checks `--postgres-url`: a `postgres://` or `postgresql://` URL that sqlx reads (the parser
/// the store connects with). Not a value parser: clap's error would print the URL, password
/// included; this message never does.
///
/// # Errors
/// The message names the flag and the expected form.
pub fn check_postgres_url(text: &str) -> Result<(), String> {
    const FORM: &str = "expected a URL like postgres://user:password@host:5432/db";
    let scheme = text.split_once("://").map(|(s, _)| s);
    if !matches!(scheme, Some("postgres" | "postgresql")) {
        return Err(format!("--postgres-url: {FORM}"));
    }
    text.parse::<sqlx::postgres::PgConnectOptions>()
        .map(|_| ())
        .map_err(|e| format!("--postgres-url: {e}; {FORM}"))
}

/// `--replica-name`: 1 to 253 characters, no control characters.
///
/// # Errors
/// Why the name is refused.
pub fn replica_name(text: &str) -> Result<String, String> {
    if text.is_empty() || text.len() > 253 || text.chars().any(char::is_control) {
        return Err("must be 1 to 253 characters, without control characters".into());
    }
    Ok(text.to_owned())
}

/// This host's name (`/proc/sys/kernel/hostname`), or `fallback` when it cannot be read: a
/// replica's default name.
pub fn host_name(fallback: &str) -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| fallback.to_owned())
}

/// Which store backs a control plane (`--store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// In memory: one process alone, lost on exit unless `--data-dir` keeps it.
    Memory,
    /// PostgreSQL (`--postgres-url`), for production and replicas.
    Postgres,
}
