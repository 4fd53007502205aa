//! The `zone-cp` command, built inside umbra-e2e so its tests can run it as a separate process
//! (`CARGO_BIN_EXE_e2e-zone-cp`) and SIGKILL it.

fn main() -> anyhow::Result<()> {
    umbra_zone_cp::cli_main()
}
