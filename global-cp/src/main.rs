//! `global-cp`: see [`umbra_global_cp::cli_main`].

fn main() -> anyhow::Result<()> {
    umbra_global_cp::cli_main()
}
