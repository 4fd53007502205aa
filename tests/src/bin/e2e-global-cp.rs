//! The `global-cp` command, built inside umbra-e2e so its tests can run it as a separate
//! process (`CARGO_BIN_EXE_e2e-global-cp`) and SIGKILL it.

fn main() -> anyhow::Result<()> {
    umbra_global_cp::cli_main()
}
