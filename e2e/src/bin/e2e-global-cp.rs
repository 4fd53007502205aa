//! The `global-cp` command, built inside umbra-e2e so its tests can run it as a separate
//! process (`CARGO_BIN_EXE_e2e-global-cp`) and SIGKILL it.

/// The allocator of the `global-cp` binary (see its `main.rs`), so tests and benches run the same
/// process.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    umbra_global_cp::cli_main()
}
