//! The `umbractl` command, built inside umbra-e2e so the compose runner
//! (`umbra_e2e::compose`) can put it on a service's `PATH` (`CARGO_BIN_EXE_e2e-umbractl`).
//! Exit status: `umbractl::CliError::exit_code`, as the real binary.

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
