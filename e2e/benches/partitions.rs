//! Partitions on test hosts (issue 35): the compose deployment (`docker-compose.yml`) on
//! network namespaces, zone-2's CP host taken off the network for partitions of several
//! lengths, a MeshTimeout written on the Global during each, and the time from the link coming
//! back until every zone-2 Envoy runs it (read from each Envoy's config dump through its zone,
//! so through its mTLS admin listener), plus the Global's time to report zone-2 offline.
//! Prints one table; needs root (`cargo bench -p umbra-e2e --bench partitions`).
//!
//! `UMBRA_PARTITIONS` overrides the partition lengths in seconds (comma-separated; default
//! `2,5,10,20,40,60`), `UMBRA_PARTITION_ROUNDS` the rounds per length (default 2).

use std::time::{Duration, Instant};

use umbra_e2e::compose::deployment::{self, all_acked, converged, idle_timeout, wait_for};
use umbra_e2e::compose::Project;

fn lengths() -> Vec<u64> {
    std::env::var("UMBRA_PARTITIONS")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![2, 5, 10, 20, 40, 60])
}

async fn zone_online(p: &Project) -> Option<bool> {
    let (_, z) = p
        .call("global-cp", 5681, "GET", "/zones/zone-2+insights", None)
        .await
        .ok()?;
    z["umbra"]["online"].as_bool()
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let options = deployment::options(
        env!("CARGO_BIN_EXE_e2e-global-cp"),
        env!("CARGO_BIN_EXE_e2e-zone-cp"),
        env!("CARGO_BIN_EXE_e2e-umbractl"),
        Duration::from_secs(120),
    )?;
    let rounds: usize = std::env::var("UMBRA_PARTITION_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2);
    let p = Project::up(&options).await?;
    all_acked(&p, &["zone-1", "zone-2"], Duration::from_secs(60)).await?;
    let zone2 = p.host("zone-2-cp");
    println!("| partition | offline reported after | link up -> every zone-2 Envoy runs the write | zone online again after |");
    println!("|---|---|---|---|");
    let mut converge = Vec::new();
    let mut value = 1000;
    for length in lengths() {
        for _ in 0..rounds {
            value += 1;
            let down = Instant::now();
            zone2.down()?;
            let (s, body) = p
                .call(
                    "global-cp",
                    5681,
                    "PUT",
                    "/meshes/default/meshtimeouts/partition-probe",
                    Some(&idle_timeout("partition-probe", value)),
                )
                .await?;
            anyhow::ensure!(s == 200 || s == 201, "{s} {body}");
            let partition = Duration::from_secs(length);
            let mut offline = None;
            while down.elapsed() < partition {
                if offline.is_none() && zone_online(&p).await == Some(false) {
                    offline = Some(down.elapsed());
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
            let up = Instant::now();
            zone2.up()?;
            let took = converged(&p, &["zone-2"], value, Duration::from_secs(120)).await?;
            converge.push(took);
            let online = wait_for(Duration::from_secs(120), "zone-2 online", || async {
                (zone_online(&p).await == Some(true)).then(|| up.elapsed())
            })
            .await?;
            all_acked(&p, &["zone-1", "zone-2"], Duration::from_secs(30)).await?;
            println!(
                "| {length} s | {} | {:.2} s | {:.2} s |",
                offline.map_or("not within the partition".to_owned(), |d| format!(
                    "{:.1} s",
                    d.as_secs_f64()
                )),
                took.as_secs_f64(),
                online.as_secs_f64()
            );
        }
    }
    converge.sort();
    let p99 = converge[(converge.len() * 99).div_ceil(100).saturating_sub(1)];
    println!(
        "\n{} partitions: link up -> every zone-2 Envoy runs the write: median {:.2} s, p99 {:.2} s, max {:.2} s (target: p99 < 5 s)",
        converge.len(),
        converge[converge.len() / 2].as_secs_f64(),
        p99.as_secs_f64(),
        converge.last().map_or(0.0, Duration::as_secs_f64)
    );
    Ok(())
}
