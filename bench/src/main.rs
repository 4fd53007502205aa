//! `umbra-bench`: run one scenario of the scale harness (or `all`) and print the result table.
//! See the library's docs (`umbra_bench`) for what each scenario measures; BENCHMARKS.md holds
//! the figures. Run it in release: `cargo run --release -p umbra-bench -- all`.

use clap::{Parser, Subcommand};
use umbra_bench::measure::{table, Row};
use umbra_bench::scenarios::{fleet_diff, fleet_envoys, generate, propagation, reconcile};

/// The CPs' allocator, so the re-executed CPs and the in-process figures match the real binaries.
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

#[derive(Parser, Debug)]
#[command(name = "umbra-bench", about = "Umbra's scale harness (issue 21)")]
struct Cli {
    #[command(subcommand)]
    scenario: Scenario,
}

#[derive(Subcommand, Debug)]
enum Scenario {
    /// Generation vs prost encoding, matching, render and diff of one DPP, in process.
    Generate {
        /// Iterations per figure.
        #[arg(long, default_value_t = 200)]
        iters: u32,
    },
    /// The fleet-wide shadow diff across zone processes, then asked again.
    FleetDiff {
        #[arg(long, default_value_t = 5)]
        zones: usize,
        #[arg(long, default_value_t = 2000)]
        dpps: usize,
        /// Endpoints per outbound per zone.
        #[arg(long, default_value_t = 2)]
        endpoints: usize,
        #[arg(long, default_value_t = 3)]
        runs: usize,
        /// The shadow policies: `migration` (issue 6's Timeouts and their MeshTimeout
        /// replacements, every DPP changes) or `one-service` (one shadow MeshTimeout to one
        /// service).
        #[arg(long, default_value = "migration")]
        shadow: String,
    },
    /// Global PUT to every affected simulated Envoy's ACK, across zone processes.
    Propagation {
        #[arg(long, default_value_t = 5)]
        zones: usize,
        #[arg(long, default_value_t = 1000)]
        dpps: usize,
        #[arg(long, default_value_t = 10)]
        outbounds: usize,
        #[arg(long, default_value_t = 10)]
        endpoints: usize,
        #[arg(long, default_value_t = 26)]
        policies: usize,
    },
    /// One zone's reconcile pass in process, at the propagation scenario's size per zone.
    Reconcile {
        #[arg(long, default_value_t = 1000)]
        dpps: usize,
        #[arg(long, default_value_t = 10)]
        outbounds: usize,
        #[arg(long, default_value_t = 10)]
        endpoints: usize,
        #[arg(long, default_value_t = 26)]
        policies: usize,
        #[arg(long, default_value_t = 9)]
        runs: usize,
    },
    /// Zone RSS per DPP and idle CPU with every simulated Envoy connected.
    Footprint {
        #[arg(long, default_value_t = 10_000)]
        dpps: usize,
        #[arg(long, default_value_t = 50)]
        outbounds: usize,
        #[arg(long, default_value_t = 20)]
        endpoints: usize,
        #[arg(long, default_value_t = 26)]
        policies: usize,
    },
    /// Every simulated Envoy of one zone reconnects at once.
    Reconnect {
        #[arg(long, default_value_t = 5000)]
        dpps: usize,
        #[arg(long, default_value_t = 50)]
        outbounds: usize,
        #[arg(long, default_value_t = 20)]
        endpoints: usize,
        #[arg(long, default_value_t = 26)]
        policies: usize,
    },
    /// Every scenario at issue 21's sizes, one table.
    All,
}

async fn run(scenario: Scenario) -> anyhow::Result<Vec<Row>> {
    Ok(match scenario {
        Scenario::Generate { iters } => generate::run(iters)?,
        Scenario::FleetDiff {
            zones,
            dpps,
            endpoints,
            runs,
            shadow,
        } => {
            fleet_diff::run(fleet_diff::Size {
                zones,
                dpps,
                endpoints,
                runs,
                shadow,
            })
            .await?
        }
        Scenario::Propagation {
            zones,
            dpps,
            outbounds,
            endpoints,
            policies,
        } => {
            propagation::run(propagation::Size {
                zones,
                dpps,
                outbounds,
                endpoints,
                policies,
            })
            .await?
        }
        Scenario::Reconcile {
            dpps,
            outbounds,
            endpoints,
            policies,
            runs,
        } => reconcile::run(
            fleet_envoys::Size {
                dpps,
                outbounds,
                endpoints,
                policies,
            },
            runs,
        )?,
        Scenario::Footprint {
            dpps,
            outbounds,
            endpoints,
            policies,
        } => {
            fleet_envoys::footprint(fleet_envoys::Size {
                dpps,
                outbounds,
                endpoints,
                policies,
            })
            .await?
        }
        Scenario::Reconnect {
            dpps,
            outbounds,
            endpoints,
            policies,
        } => {
            fleet_envoys::reconnect(fleet_envoys::Size {
                dpps,
                outbounds,
                endpoints,
                policies,
            })
            .await?
        }
        Scenario::All => {
            let mut rows = generate::run(200)?;
            for endpoints in [2, 20] {
                rows.extend(
                    fleet_diff::run(fleet_diff::Size {
                        zones: 5,
                        dpps: 2000,
                        endpoints,
                        runs: 3,
                        shadow: "migration".into(),
                    })
                    .await?,
                );
            }
            rows.extend(
                propagation::run(propagation::Size {
                    zones: 5,
                    dpps: 1000,
                    outbounds: 10,
                    endpoints: 10,
                    policies: 26,
                })
                .await?,
            );
            let heavy = fleet_envoys::Size {
                dpps: 10_000,
                outbounds: 50,
                endpoints: 20,
                policies: 26,
            };
            rows.extend(
                fleet_envoys::reconnect(fleet_envoys::Size {
                    dpps: 5000,
                    ..heavy
                })
                .await?,
            );
            rows.extend(fleet_envoys::footprint(heavy).await?);
            rows
        }
    })
}

fn main() -> anyhow::Result<()> {
    if let Some(cp) = umbra_bench::cluster::run_role() {
        return cp;
    }
    let cli = Cli::parse();
    let rows = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?
        .block_on(run(cli.scenario))?;
    println!();
    print!("{}", table(&rows));
    Ok(())
}
