//! Many simulated Envoys on one standalone zone-cp process (issue 21): the zone starts from a
//! data dir with `dpps` DPPs of `outbounds` outbounds with `endpoints` endpoints each and
//! `policies` policies of every implemented type, then
//! - **footprint**: the zone's RSS per DPP once every Live snapshot is generated, and again
//!   with a simulated Envoy connected for every DPP (less the RSS of the same zone with no
//!   DPPs), and its CPU use over 10 s with every Envoy connected and nothing changing;
//! - **reconnect storm**: every Envoy connects, then all are dropped and reconnect at the same
//!   instant; the time until all have ACKed CDS, EDS and LDS, and the slowest first response of
//!   any type on any stream (from the subscription to the response).

use std::sync::Arc;
use std::time::{Duration, Instant};

use umbra_e2e::CpProcess;
use umbra_zone_cp::synthetic;

use crate::cluster::{self, WorkDir};
use crate::measure::{cpu_ticks, rss_kib, settle, Row, Target};
use crate::mesh;
use umbra_e2e::envoy_sim::{self, Events};

/// The scenario's size.
#[derive(Debug, Clone, Copy)]
pub struct Size {
    /// DPPs (and simulated Envoys).
    pub dpps: usize,
    /// Outbounds per DPP.
    pub outbounds: usize,
    /// Endpoints per outbound.
    pub endpoints: usize,
    /// Policies of every type.
    pub policies: usize,
}

impl Size {
    /// Services in the mesh: DPPs are spread over them, `endpoints` per service, and each
    /// DPP's outbounds name other services.
    pub(crate) fn services(self) -> usize {
        (self.dpps / self.endpoints.max(1)).max(self.outbounds + 1)
    }

    fn shape(self) -> String {
        format!(
            "{} DPPs, {} outbounds of {} endpoints, {} policies",
            self.dpps, self.outbounds, self.endpoints, self.policies
        )
    }
}

async fn zone(work: &WorkDir, size: Size, dpps: usize, z: usize) -> anyhow::Result<CpProcess> {
    let policies: Vec<String> = mesh::every_type(size.policies, 4, size.services())
        .into_iter()
        .map(|(_, _, y)| y)
        .collect();
    let data = cluster::zone_dir(
        &work.0,
        z,
        &policies,
        (0..dpps).map(|i| synthetic::dataplane(0, i, size.services(), size.outbounds)),
    )?;
    let zone = cluster::start_zone(&work.0, None, z, &data).await?;
    let pid = zone.pid().unwrap_or(0);
    settle(&[pid], 5, Duration::from_secs(900)).await?;
    Ok(zone)
}

/// Connect a simulated Envoy for each of `dpps` DPPs of `zone` at once; how long until all
/// have ACKed CDS, EDS and LDS, and the slowest first response.
async fn connect_all(
    zone: &CpProcess,
    dpps: usize,
    clients: &mut tokio::task::JoinSet<anyhow::Result<()>>,
) -> anyhow::Result<(Duration, Duration, Events)> {
    let access = Arc::new(cluster::ads_access(zone, zone).await?);
    let events: Events = Arc::default();
    let start = Instant::now();
    for i in 0..dpps {
        clients.spawn(envoy_sim::run(
            zone.grpc,
            format!("default.dp-{i}"),
            i,
            access.clone(),
            events.clone(),
        ));
    }
    loop {
        let ready = envoy_sim::ready_clients(&envoy_sim::events_since(&events, 0)).len();
        if ready == dpps {
            break;
        }
        if let Some(done) = clients.try_join_next() {
            done??;
            anyhow::bail!("a simulated Envoy's stream ended");
        }
        anyhow::ensure!(
            start.elapsed() < Duration::from_secs(300),
            "only {ready} of {dpps} simulated Envoys got their config"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let all = start.elapsed();
    let slowest = envoy_sim::events_since(&events, 0)
        .iter()
        .filter_map(|e| e.waited)
        .max()
        .unwrap_or_default();
    Ok((all, slowest, events))
}

/// Footprint: RSS per DPP (registered, then connected) and idle CPU with every Envoy connected.
///
/// # Errors
/// A zone that does not start or settle; a simulated Envoy that fails.
pub async fn footprint(size: Size) -> anyhow::Result<Vec<Row>> {
    let work = WorkDir::new("footprint")?;
    let empty = zone(&work, size, 0, 0).await?;
    let base = rss_kib(empty.pid().unwrap_or(0));
    drop(empty);
    let loaded = zone(&work, size, size.dpps, 1).await?;
    let pid = loaded.pid().unwrap_or(0);
    let registered = rss_kib(pid);
    let mut clients = tokio::task::JoinSet::new();
    let (all, _, _) = connect_all(&loaded, size.dpps, &mut clients).await?;
    settle(&[pid], 5, Duration::from_secs(120)).await?;
    let connected = rss_kib(pid);
    let (t0, c0) = (Instant::now(), cpu_ticks(pid));
    tokio::time::sleep(Duration::from_secs(10)).await;
    let idle = (cpu_ticks(pid) - c0) as f64 / t0.elapsed().as_secs_f64();
    clients.abort_all();
    let n = size.dpps.max(1) as f64;
    let per = |rss: u64| rss.saturating_sub(base) as f64 * 1.024 / n;
    println!(
        "footprint: {}; RSS empty {} MiB, generated {} MiB, with every Envoy connected {} MiB; connect + ACK {:.1} s; idle {idle:.2}% of one core",
        size.shape(),
        base / 1024,
        registered / 1024,
        connected / 1024,
        all.as_secs_f64()
    );
    let command = format!(
        "cargo run --release -p umbra-bench -- footprint --dpps {} --outbounds {} --endpoints {}",
        size.dpps, size.outbounds, size.endpoints
    );
    Ok(vec![
        Row {
            what: format!("zone RSS per DPP, every Envoy connected, {}", size.shape()),
            value: per(connected),
            unit: "KB",
            target: Target::AtMost(300.0),
            anchor: "Kuma: ~1 MB per DPP; Istio: 0.75-2 MB per sidecar (istiod)",
            command: command.clone(),
        },
        Row {
            what: format!(
                "zone RSS per DPP, snapshots generated, no Envoy connected, {}",
                size.shape()
            ),
            value: per(registered),
            unit: "KB",
            target: Target::None,
            anchor: "-",
            command: command.clone(),
        },
        Row {
            what: format!(
                "zone idle CPU, {} Envoys connected, nothing changing (10 s)",
                size.dpps
            ),
            value: idle,
            unit: "% of one core",
            target: Target::AtMost(1.0),
            anchor: "Kuma: 1 s xDS ticker per DPP regenerates while idle",
            command,
        },
    ])
}

/// Reconnect storm: every Envoy connects, all are dropped, all reconnect at once.
///
/// # Errors
/// A zone that does not start or settle; a simulated Envoy that fails.
pub async fn reconnect(size: Size) -> anyhow::Result<Vec<Row>> {
    let work = WorkDir::new("reconnect")?;
    let zone = zone(&work, size, size.dpps, 0).await?;
    let pid = zone.pid().unwrap_or(0);
    let mut clients = tokio::task::JoinSet::new();
    let (first, _, _) = connect_all(&zone, size.dpps, &mut clients).await?;
    clients.abort_all();
    while clients.join_next().await.is_some() {}
    settle(&[pid], 5, Duration::from_secs(120)).await?;
    let (all, slowest, _) = connect_all(&zone, size.dpps, &mut clients).await?;
    clients.abort_all();
    println!(
        "reconnect: {}; first connect {:.2} s; storm: all ACKed in {:.2} s, slowest first response {:.0} ms",
        size.shape(),
        first.as_secs_f64(),
        all.as_secs_f64(),
        slowest.as_secs_f64() * 1e3
    );
    let command = format!(
        "cargo run --release -p umbra-bench -- reconnect --dpps {} --outbounds {} --endpoints {}",
        size.dpps, size.outbounds, size.endpoints
    );
    Ok(vec![
        Row {
            what: format!("reconnect storm, all ACKed, {}", size.shape()),
            value: all.as_secs_f64(),
            unit: "s",
            target: Target::AtMost(10.0),
            anchor: "-",
            command: command.clone(),
        },
        Row {
            what: format!("reconnect storm, slowest single response, {}", size.shape()),
            value: slowest.as_secs_f64(),
            unit: "s",
            target: Target::AtMost(2.0),
            anchor: "-",
            command,
        },
    ])
}
