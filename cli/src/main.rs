//! `umbractl`: see the library docs. Exit status: `umbractl::CliError::exit_code`.

use std::process::ExitCode;

use clap::Parser as _;

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    match umbractl::run(umbractl::Cli::parse()).await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("Error: {e:#}");
            let code = e
                .downcast_ref::<umbractl::CliError>()
                .map_or(1, umbractl::CliError::exit_code);
            ExitCode::from(code)
        }
    }
}
