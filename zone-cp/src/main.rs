//! `zone-cp`: parse arguments, set up logging, run until Ctrl-C/SIGTERM.

use clap::Parser as _;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::from_default_env().add_directive("info".parse()?),
        )
        .init();
    let args = umbra_zone_cp::Args::parse();
    umbra_zone_cp::run(args, async {
        let _ = tokio::signal::ctrl_c().await;
    })
    .await
}
