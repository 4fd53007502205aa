//! Rebuilds the crate when a migration is added or changed: `sqlx::migrate!` embeds the
//! `../migrations` directory at compile time and does not tell Cargo to watch it (sqlx's
//! documented build script).

fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
