//! `global-cp`: see [`umbra_global_cp::cli_main`].

/// jemalloc, as in `zone-cp`: the Global's fan-out aggregation and KDS responses also allocate
/// many small, short-lived buffers, and one allocator for both binaries keeps their memory
/// behaviour alike.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    umbra_global_cp::cli_main()
}
