//! `zone-cp`: see [`umbra_zone_cp::cli_main`].

/// jemalloc instead of glibc's malloc. Generating and diffing snapshots allocates many small,
/// short-lived buffers, and glibc's malloc and free were about a third of the zone's CPU in the
/// shadow-diff profile. Measured in BENCHMARKS.md ("Allocator"): the zone shadow diff takes
/// about 40% less time per DPP, and RSS per DPP rises from 79 to 99 KiB. mimalloc was faster
/// than glibc but doubled RSS.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() -> anyhow::Result<()> {
    umbra_zone_cp::cli_main()
}
