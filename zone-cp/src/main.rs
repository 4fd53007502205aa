//! `zone-cp`: see [`umbra_zone_cp::cli_main`].

fn main() -> anyhow::Result<()> {
    umbra_zone_cp::cli_main()
}
