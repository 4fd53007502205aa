//! The compose deployment on separate hosts: `docker-compose.yml` itself, run by the compose
//! runner (`umbra_e2e::compose`) on network namespaces (`umbra_e2e::hosts`) with real
//! PostgreSQL, Envoy and the CP binaries. Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN): without
//! it the test fails saying so.

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use umbra_e2e::compose::{Programs, Project, UpOptions};

fn options() -> UpOptions {
    let programs = Programs::new(
        env!("CARGO_BIN_EXE_e2e-global-cp"),
        env!("CARGO_BIN_EXE_e2e-zone-cp"),
        env!("CARGO_BIN_EXE_e2e-umbractl"),
    )
    .expect("the CP binaries and envoy");
    UpOptions {
        file: PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docker-compose.yml"
        )),
        programs,
        timeout: Duration::from_secs(90),
    }
}

const SIDECARS: [(&str, &str); 6] = [
    ("zone-1", "frontend-1"),
    ("zone-1", "backend-1"),
    ("zone-1", "redis-1"),
    ("zone-2", "frontend-2"),
    ("zone-2", "backend-2"),
    ("zone-2", "payments-2"),
];

/// Poll `check` every 250 ms until it returns `Some`, up to `bound`; the error names `what`.
async fn wait_for<T, F, Fut>(bound: Duration, what: &str, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + bound;
    loop {
        if let Some(v) = check().await {
            return Ok(v);
        }
        anyhow::ensure!(Instant::now() < deadline, "waited {bound:?} for {what}");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// Whether an insight (Kuma's `dataplaneInsight`/`zoneIngressInsight`) shows a connected
/// stream that ACKed CDS and LDS and NACKed nothing.
fn acked(insight: &serde_json::Value) -> bool {
    let Some(sub) = insight["subscriptions"].as_array().and_then(|s| s.last()) else {
        return false;
    };
    let n = |v: &serde_json::Value| {
        v.as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .or_else(|| v.as_u64())
            .unwrap_or(0)
    };
    sub["disconnectTime"].is_null()
        && n(&sub["status"]["cds"]["responsesAcknowledged"]) > 0
        && n(&sub["status"]["lds"]["responsesAcknowledged"]) > 0
        && n(&sub["status"]["total"]["responsesRejected"]) == 0
}

/// `python -c` fetching `url` inside `service`'s host (the deploy/README.md check).
fn fetch(p: &Project, service: &str, url: &str) -> anyhow::Result<(i32, String)> {
    let code = format!(
        "import urllib.request; print(urllib.request.urlopen({url:?}, timeout=3).read().decode())"
    );
    p.exec(service, &["python", "-c", &code], Duration::from_secs(10))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_project_on_separate_hosts() -> anyhow::Result<()> {
    let started = Instant::now();
    let p = Project::up(&options()).await?;
    let up_took = started.elapsed();
    let token = p.admin_token()?;
    assert!(!token.is_empty());

    // Every sidecar and ingress is connected and ACKed, on its zone and on the Global.
    for (zone, dp) in SIDECARS {
        let cp = format!("{zone}-cp");
        let path = format!("/meshes/default/dataplanes+insights/{dp}");
        let seen = wait_for(
            Duration::from_secs(30),
            &format!("{dp} ACKed on {cp}"),
            || async {
                let (s, body) = p.call(&cp, 5681, "GET", &path, None).await.ok()?;
                (s == 200 && acked(&body["dataplaneInsight"])).then_some(body)
            },
        )
        .await;
        if let Err(e) = seen {
            let (_, body) = p.call(&cp, 5681, "GET", &path, None).await?;
            anyhow::bail!(
                "{e}: {body}\n{}\n{}",
                p.log_tail(
                    &format!("{zone}-{}-sidecar", dp.trim_end_matches(['-', '1', '2'])),
                    30
                ),
                p.report()
            );
        }
    }
    let (s, body) = p
        .call(
            "global-cp",
            5681,
            "GET",
            "/meshes/default/dataplanes+insights",
            None,
        )
        .await?;
    println!("global dataplanes+insights {s}: {body}");
    let (s, body) = p
        .call("zone-1-cp", 5681, "GET", "/zone-ingresses", None)
        .await?;
    println!("zone-1 zone-ingresses {s}: {body}");
    let (s, body) = p
        .call("global-cp", 5681, "GET", "/zones/zone-2+insights", None)
        .await?;
    println!("global zones/zone-2 {s}: {body}");

    // Traffic across hosts, from inside the frontend's host.
    let backend = wait_for(
        Duration::from_secs(30),
        "frontend-1 -> backend through the mesh",
        || async {
            fetch(&p, "zone-1-frontend", "http://127.0.0.1:3001")
                .ok()
                .filter(|(c, _)| *c == 0)
                .map(|(_, o)| o)
        },
    )
    .await;
    let payments = wait_for(
        Duration::from_secs(30),
        "frontend-1 -> payments (zone-2) through zone-2's ingress",
        || async {
            fetch(&p, "zone-1-frontend", "http://127.0.0.1:5001")
                .ok()
                .filter(|(c, _)| *c == 0)
                .map(|(_, o)| o)
        },
    )
    .await;
    println!("backend: {backend:?} payments: {payments:?}");
    let (s, diff) = p
        .call(
            "global-cp",
            5681,
            "GET",
            "/meshes/default/_shadow-diff",
            None,
        )
        .await?;
    println!("shadow diff {s}: {diff}");

    // Nothing reaches another host over 127.0.0.1.
    for (service, port) in [
        ("global-cp", 5681),
        ("global-cp", 5685),
        ("zone-1-cp", 5678),
        ("zone-2-cp", 5681),
    ] {
        let listeners = p.host(service).tcp_listeners()?;
        assert!(
            listeners.contains(&(Ipv4Addr::UNSPECIFIED, port)),
            "{service} listens on 0.0.0.0:{port}: {listeners:?}"
        );
    }
    println!("up took {up_took:?}, total {:?}", started.elapsed());
    Ok(())
}
