//! `umbractl`: see the library docs.

use clap::Parser as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> anyhow::Result<()> {
    umbractl::run(umbractl::Cli::parse()).await
}
