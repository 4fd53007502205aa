//! The compose deployment on separate hosts: `docker-compose.yml` itself, run by the compose
//! runner (`umbra_e2e::compose`) on network namespaces (`umbra_e2e::hosts`) with real
//! PostgreSQL, Envoy and the CP binaries. Needs root (CAP_NET_ADMIN + CAP_SYS_ADMIN): without
//! it the test fails saying so.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use umbra_e2e::compose::deployment::{
    acked, all_acked, converged, fetch, global_cps, idle_timeout, runs_idle_timeout, wait_for,
    zone_call, zone_cps, SIDECARS,
};
use umbra_e2e::compose::{deployment, Project, UpOptions};

fn options() -> UpOptions {
    deployment::options(
        env!("CARGO_BIN_EXE_e2e-global-cp"),
        env!("CARGO_BIN_EXE_e2e-zone-cp"),
        env!("CARGO_BIN_EXE_e2e-umbractl"),
        Duration::from_secs(90),
    )
    .expect("privilege for test hosts, the CP binaries and envoy")
}

/// Connect to each `(address, port)` from inside `service`'s host; one line per target,
/// `ok` or the error's class name (`ConnectionRefusedError`, `OSError`...).
fn connect_from(
    p: &Project,
    service: &str,
    targets: &[(Ipv4Addr, u16)],
) -> anyhow::Result<Vec<String>> {
    let list: Vec<String> = targets
        .iter()
        .map(|(a, port)| format!("(\"{a}\", {port})"))
        .collect();
    let code = format!(
        "import socket\nfor t in [{}]:\n    s = socket.socket(); s.settimeout(2)\n    try:\n        s.connect(t); print('ok')\n    except Exception as e:\n        print(type(e).__name__)\n    s.close()\n",
        list.join(", ")
    );
    let (status, out) = p.exec(service, &["python", "-c", &code], Duration::from_secs(20))?;
    anyhow::ensure!(status == 0, "connect script in {service}: {out}");
    Ok(out.lines().map(str::to_owned).collect())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compose_project_on_separate_hosts() -> anyhow::Result<()> {
    let started = Instant::now();
    let p = Project::up(&options()).await?;
    let up_took = started.elapsed();
    assert!(
        !p.admin_token()?.is_empty(),
        "the credentials one-shot wrote the admin token"
    );

    // Every sidecar connected and ACKed (CDS, LDS; no NACK), on its zone (on every replica of
    // zone-1)...
    for (zone, dp) in SIDECARS {
        for cp in zone_cps(&p, zone) {
            let path = format!("/meshes/default/dataplanes+insights/{dp}");
            let seen = wait_for(
                Duration::from_secs(30),
                &format!("{dp} ACKed on {cp}"),
                || async {
                    let (s, body) = p.call(&cp, 5681, "GET", &path, None).await.ok()?;
                    (s == 200 && acked(&body["dataplaneInsight"])).then_some(())
                },
            )
            .await;
            if let Err(e) = seen {
                let (_, body) = p.call(&cp, 5681, "GET", &path, None).await?;
                let app = dp.rsplit_once('-').map_or(dp, |(a, _)| a);
                anyhow::bail!(
                    "{e}: {body}\n{}\n{}",
                    p.log_tail(&format!("{zone}-{app}-sidecar"), 30),
                    p.report()
                );
            }
        }
    }
    // ... and on the Global (named `<name>-<hash>`, labelled with zone and display name).
    let everyone = wait_for(
        Duration::from_secs(30),
        "the six sidecars ACKed on the Global",
        || async {
            let (s, list) = p
                .call(
                    "global-cp",
                    5681,
                    "GET",
                    "/meshes/default/dataplanes+insights",
                    None,
                )
                .await
                .ok()?;
            let items = list["items"].as_array()?.clone();
            (s == 200
                && items.len() == SIDECARS.len()
                && items.iter().all(|i| acked(&i["dataplaneInsight"])))
            .then_some(items)
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", p.report()))?;
    for (zone, dp) in SIDECARS {
        assert!(
            everyone
                .iter()
                .any(|i| i["labels"]["kuma.io/display-name"] == dp
                    && i["labels"]["kuma.io/zone"] == zone),
            "{dp} of {zone} on the Global: {everyone:?}"
        );
    }
    // Both ingresses registered (their zone filled in what they offer) and reached the other
    // zone through the Global; each Envoy bound its listener on its own `ingress` address.
    for (zone, other, addr) in [
        ("zone-1", "zone-2", "10.77.0.11"),
        ("zone-2", "zone-1", "10.77.0.12"),
    ] {
        let ingress = format!("{zone}-ingress");
        let (s, list) = zone_call(&p, other, "GET", "/zone-ingresses", None).await?;
        assert_eq!(s, 200, "{list}");
        let item = list["items"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|i| i["zone"] == zone)
            .unwrap_or_else(|| panic!("{ingress} on {other}: {list}"));
        assert_eq!(item["networking"]["advertisedAddress"], addr, "{item}");
        assert!(
            item["availableServices"]
                .as_array()
                .is_some_and(|a| !a.is_empty()),
            "{item}"
        );
        let want = (addr.parse::<Ipv4Addr>()?, 10001);
        wait_for(
            Duration::from_secs(20),
            &format!("{ingress}'s listener on {addr}:10001"),
            || async {
                p.host(&ingress)
                    .tcp_listeners()
                    .ok()?
                    .contains(&want)
                    .then_some(())
            },
        )
        .await
        .map_err(|e| anyhow::anyhow!("{e}\n{}", p.log_tail(&ingress, 30)))?;
    }

    // Traffic across hosts, from inside the frontend's host: backend (same zone, another
    // host) and payments (zone-2 only, through zone-2's ingress).
    for (url, want) in [
        ("http://127.0.0.1:3001", "backend (zone-1)"),
        ("http://127.0.0.1:5001", "payments (zone-2)"),
    ] {
        let got = wait_for(
            Duration::from_secs(30),
            &format!("{want} from zone-1-frontend via {url}"),
            || async {
                fetch(&p, "zone-1-frontend", url)
                    .ok()
                    .filter(|(c, out)| *c == 0 && out.contains(want))
            },
        )
        .await;
        if let Err(e) = got {
            anyhow::bail!(
                "{e}: last answer {:?}\n{}\n{}",
                fetch(&p, "zone-1-frontend", url),
                p.log_tail("zone-1-frontend-sidecar", 20),
                p.log_tail("zone-2-ingress", 20)
            );
        }
    }

    // The fleet-wide shadow diff answers through the Global, from both zones.
    let (s, diff) = p
        .call(
            "global-cp",
            5681,
            "GET",
            "/meshes/default/_shadow-diff",
            None,
        )
        .await?;
    assert_eq!(s, 200, "{diff}");
    assert_eq!(diff["partial"], false, "{diff}");
    assert!(diff["totals"]["changed"].as_u64() > Some(0), "{diff}");
    for z in ["zone-1", "zone-2"] {
        assert!(
            diff["zones"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["zone"] == z && e["status"] == "ok"),
            "{z} answered: {diff}"
        );
    }

    // Nothing crosses hosts over loopback. The CPs, the Global's load balancer and PostgreSQL
    // listen on every address of their host, as the compose flags say; each sidecar's inbound
    // listener is on its app's address; the Global sees each zone's KDS connection from the
    // load balancer's `control` address (it passes TCP connections on).
    let mut expected = vec![
        ("postgres".to_owned(), 5432),
        ("global-cp".to_owned(), 5681),
    ];
    expected.push(("global-cp".to_owned(), 5685));
    for g in global_cps(&p) {
        expected.extend([(g.clone(), 5681), (g.clone(), 5685), (g, 5682)]);
    }
    for zone in ["zone-1", "zone-2"] {
        for cp in zone_cps(&p, zone) {
            expected.extend([(cp.clone(), 5681), (cp, 5678)]);
        }
    }
    assert_eq!(global_cps(&p), ["global-cp-a", "global-cp-b"]);
    assert_eq!(zone_cps(&p, "zone-1"), ["zone-1-cp-a", "zone-1-cp-b"]);
    for (service, port) in expected {
        let service = service.as_str();
        let listeners = p.host(service).tcp_listeners()?;
        assert!(
            listeners.contains(&(Ipv4Addr::UNSPECIFIED, port)),
            "{service} listens on 0.0.0.0:{port}: {listeners:?}"
        );
    }
    let frontend = p.addr_on("zone-1-frontend", "zone-1").expect("on zone-1");
    assert_eq!(frontend, Ipv4Addr::new(10, 77, 1, 11));
    assert!(p
        .host("zone-1-frontend")
        .tcp_listeners()?
        .contains(&(frontend, 8080)));
    for zone in ["zone-1", "zone-2"] {
        let (_, z) = p
            .call(
                "global-cp",
                5681,
                "GET",
                &format!("/zones/{zone}+insights"),
                None,
            )
            .await?;
        let from = z["umbra"]["connection"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let control = p.addr_on("global-cp", "control").expect("on control");
        assert!(
            from.starts_with(&format!("{control}:")),
            "{zone}'s KDS peer is {from:?}, not the load balancer's {control}: {z}"
        );
        assert_eq!(z["umbra"]["online"], true, "{z}");
    }
    // From the frontend's host: the CPs' ports on 127.0.0.1 are refused (they are other
    // hosts), each zone-1 replica's ADS answers at its fixed zone-1 address, and the Global
    // (its load balancer and replicas: another network) is unreachable.
    let zone_cp = p.addr_on("zone-1-cp-a", "zone-1").expect("on zone-1");
    assert_eq!(zone_cp, Ipv4Addr::new(10, 77, 1, 5));
    let zone_cp_b = p.addr_on("zone-1-cp-b", "zone-1").expect("on zone-1");
    assert_eq!(zone_cp_b, Ipv4Addr::new(10, 77, 1, 6));
    let global = p.addr("global-cp");
    let global_a = p.addr("global-cp-a");
    let seen = connect_from(
        &p,
        "zone-1-frontend",
        &[
            (Ipv4Addr::LOCALHOST, 5681),
            (Ipv4Addr::LOCALHOST, 5678),
            (Ipv4Addr::LOCALHOST, 5685),
            (Ipv4Addr::LOCALHOST, 5432),
            (zone_cp, 5678),
            (zone_cp_b, 5678),
            (global, 5681),
            (global_a, 5681),
        ],
    )?;
    assert_eq!(
        seen[..4],
        ["ConnectionRefusedError"; 4],
        "loopback of zone-1-frontend's host: {seen:?}"
    );
    assert_eq!(seen[4], "ok", "zone-1-cp-a's ADS at {zone_cp}: {seen:?}");
    assert_eq!(seen[5], "ok", "zone-1-cp-b's ADS at {zone_cp_b}: {seen:?}");
    assert_ne!(seen[6], "ok", "the Global is on another network: {seen:?}");
    assert_ne!(seen[7], "ok", "the Global is on another network: {seen:?}");

    // Each zone-1 replica's data-plane server certificate (from the zone's one CA) verifies,
    // from a sidecar's host, for the name the sidecars check (`zone-1-cp`, shared) and for the
    // address it advertises (which `POST /bootstrap` lists).
    let code = "import socket, ssl\nctx = ssl.create_default_context(cafile='/dp/ca.pem')\nfor addr, name in [('10.77.1.5', 'zone-1-cp'), ('10.77.1.5', '10.77.1.5'), ('10.77.1.6', 'zone-1-cp'), ('10.77.1.6', '10.77.1.6')]:\n    try:\n        with socket.create_connection((addr, 5678), timeout=3) as s:\n            with ctx.wrap_socket(s, server_hostname=name):\n                print('ok')\n    except Exception as e:\n        print(type(e).__name__, e)\n";
    let (status, out) = p.exec(
        "zone-1-frontend-sidecar",
        &["python3", "-c", code],
        Duration::from_secs(20),
    )?;
    assert_eq!(status, 0, "{out}");
    assert_eq!(
        out.lines().collect::<Vec<_>>(),
        ["ok"; 4],
        "zone-1-cp-a, zone-1-cp-b: verified for zone-1-cp and their own address"
    );

    // Nothing crashed or was restarted.
    for service in p.services() {
        assert_eq!(
            p.restarts(&service),
            0,
            "{service} restarted:\n{}",
            p.log_tail(&service, 30)
        );
        if let Some(code) = p.exit_code(&service) {
            assert_eq!(
                code,
                0,
                "{service} exited {code}:\n{}",
                p.log_tail(&service, 30)
            );
        }
    }
    println!(
        "multi-host: compose up took {up_took:?}, the whole test {:?}",
        started.elapsed()
    );
    Ok(())
}

/// Issue 35 item 5: zone-2's CP host off the network (what either side acknowledged
/// meanwhile reaches the other once the link is back), then a sidecar host off its zone CP.
/// Prints the measured times (BENCHMARKS.md, "Partitions").
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partitions_are_survived() -> anyhow::Result<()> {
    let p = Project::up(&options()).await?;
    all_acked(&p, &["zone-1", "zone-2"], Duration::from_secs(30)).await?;

    // The admin views of a proxy on another host, through its zone and through the Global.
    let (_, list) = p
        .call(
            "global-cp",
            5681,
            "GET",
            "/meshes/default/dataplanes?name=frontend-1",
            None,
        )
        .await?;
    let global_name = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["labels"]["kuma.io/display-name"] == "frontend-1")
        .and_then(|i| i["name"].as_str())
        .unwrap_or("frontend-1")
        .to_owned();
    for (cp, name) in [
        ("zone-1-cp-a", "frontend-1"),
        ("zone-1-cp-b", "frontend-1"),
        ("global-cp", global_name.as_str()),
    ] {
        for view in ["xds", "stats", "clusters"] {
            let path = format!("/meshes/default/dataplanes/{name}/{view}");
            let (s, body) = p.call(cp, 5681, "GET", &path, None).await?;
            assert_eq!(s, 200, "{cp} {path}: {body}");
            if view == "xds" {
                let text = body.to_string();
                assert!(text.contains("kuma:envoy:admin"), "{text:.300}");
                assert!(text.contains("[redacted]"), "the token is redacted");
            }
        }
    }
    // A zone ingress's too (its listener is on its zone-2 address), on its zone and the Global.
    let (_, list) = p
        .call("global-cp", 5681, "GET", "/zone-ingresses", None)
        .await?;
    let ingress_on_global = list["items"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|i| i["zone"] == "zone-2")
        .and_then(|i| i["name"].as_str())
        .unwrap_or("zone-2-ingress")
        .to_owned();
    for (cp, name) in [
        ("zone-2-cp", "zone-2-ingress"),
        ("global-cp", ingress_on_global.as_str()),
    ] {
        let path = format!("/zoneingresses/{name}/stats");
        let (s, body) = p.call(cp, 5681, "GET", &path, None).await?;
        assert_eq!(s, 200, "{cp} {path}: {body}");
        assert!(
            body.as_str()
                .is_some_and(|t| t.contains("kuma_envoy_admin")),
            "{cp} {path}: read through kuma:envoy:admin: {body:.300}"
        );
    }

    // zone-2's CP host drops off the network.
    let zone2 = p.host("zone-2-cp");
    let down = Instant::now();
    zone2.down()?;
    let offline = wait_for(
        Duration::from_secs(40),
        "the Global reports zone-2 offline",
        || async {
            let (_, z) = p
                .call("global-cp", 5681, "GET", "/zones/zone-2+insights", None)
                .await
                .ok()?;
            (z["umbra"]["online"] == false).then(|| down.elapsed())
        },
    )
    .await?;
    let (s, diff) = p
        .call(
            "global-cp",
            5681,
            "GET",
            "/meshes/default/_shadow-diff",
            None,
        )
        .await?;
    assert_eq!(s, 200, "{diff}");
    assert_eq!(diff["partial"], true, "{diff}");
    assert!(
        diff["zones"]
            .as_array()
            .into_iter()
            .flatten()
            .any(|e| e["zone"] == "zone-2" && e["status"] != "ok"),
        "the partial diff names zone-2: {diff}"
    );
    // zone-2's Envoys keep serving traffic on their last config.
    let (code, out) = fetch(&p, "zone-2-frontend", "http://127.0.0.1:3001")?;
    assert!(
        code == 0 && out.contains("backend (zone-2)"),
        "{code} {out}"
    );
    // zone-2 acknowledges a write of its own meanwhile (a Dataplane registered on its API,
    // from its own host): the Global gets it once the link is back.
    let token = p.admin_token()?;
    let offline_dp = serde_json::json!({
        "type": "Dataplane", "mesh": "default", "name": "registered-offline",
        "networking": {"address": "10.77.2.99", "inbound": [
            {"port": 8080, "tags": {"kuma.io/service": "registered-offline"}}]},
    })
    .to_string();
    let auth = format!("Authorization: Bearer {token}");
    let (code, status) = zone2.run(
        &[
            "curl",
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_code}",
            "-X",
            "PUT",
            "-H",
            &auth,
            "-H",
            "content-type: application/json",
            "--data",
            &offline_dp,
            "http://127.0.0.1:5681/meshes/default/dataplanes/registered-offline",
        ],
        Duration::from_secs(10),
    )?;
    assert!(
        code == 0 && (status.trim() == "201" || status.trim() == "200"),
        "zone-2 acknowledges a Dataplane while cut off: {code} {status}"
    );
    // A policy written on the Global meanwhile reaches zone-1 at once...
    let (s, body) = p
        .call(
            "global-cp",
            5681,
            "PUT",
            "/meshes/default/meshtimeouts/partition-probe",
            Some(&idle_timeout("partition-probe", 1234)),
        )
        .await?;
    assert!(s == 200 || s == 201, "{s} {body}");
    converged(&p, &["zone-1"], 1234, Duration::from_secs(20)).await?;
    // ... and zone-2 within seconds of the link coming back, every Envoy ACKing it.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let up = Instant::now();
    zone2.up()?;
    let zone2_converged = converged(&p, &["zone-2"], 1234, Duration::from_secs(60)).await?;
    wait_for(Duration::from_secs(30), "zone-2 online again", || async {
        let (_, z) = p
            .call("global-cp", 5681, "GET", "/zones/zone-2+insights", None)
            .await
            .ok()?;
        (z["umbra"]["online"] == true).then_some(())
    })
    .await?;
    all_acked(&p, &["zone-1", "zone-2"], Duration::from_secs(10)).await?;
    let after_up = up.elapsed();
    wait_for(
        Duration::from_secs(15),
        "the Dataplane zone-2 acknowledged while cut off, on the Global",
        || async {
            let (_, list) = p
                .call("global-cp", 5681, "GET", "/meshes/default/dataplanes", None)
                .await
                .ok()?;
            list["items"]
                .as_array()?
                .iter()
                .any(|i| {
                    i["labels"]["kuma.io/display-name"] == "registered-offline"
                        && i["labels"]["kuma.io/zone"] == "zone-2"
                })
                .then_some(())
        },
    )
    .await?;

    // One sidecar's host off its zone CP: its Envoy keeps its config, reconnects, NACKs
    // nothing.
    let backend = p.host("zone-2-backend");
    backend.down()?;
    let (s, body) = p
        .call(
            "global-cp",
            5681,
            "PUT",
            "/meshes/default/meshtimeouts/partition-probe",
            Some(&idle_timeout("partition-probe", 4321)),
        )
        .await?;
    assert!(s == 200 || s == 201, "{s} {body}");
    tokio::time::sleep(Duration::from_secs(3)).await;
    let sidecar_up = Instant::now();
    backend.up()?;
    let (_, dp) = ("zone-2", "backend-2");
    wait_for(
        Duration::from_secs(60),
        "backend-2 running an idle timeout of 4321s",
        || async {
            runs_idle_timeout(&p, "zone-2", dp, 4321)
                .await
                .then_some(())
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", p.log_tail("zone-2-backend-sidecar", 30)))?;
    let sidecar_converged = sidecar_up.elapsed();
    all_acked(&p, &["zone-1", "zone-2"], Duration::from_secs(10)).await?;
    // Traffic to the sidecar that was cut off comes back (the caller's Envoy may hold
    // failed connections for a moment).
    wait_for(
        Duration::from_secs(30),
        "frontend-2 -> backend-2 again",
        || async {
            fetch(&p, "zone-2-frontend", "http://127.0.0.1:3001")
                .ok()
                .filter(|(c, out)| *c == 0 && out.contains("backend (zone-2)"))
        },
    )
    .await
    .map_err(|e| anyhow::anyhow!("{e}\n{}", p.log_tail("zone-2-frontend-sidecar", 30)))?;
    println!(
        "partitions: zone-2 reported offline {offline:?} after its link went down; every zone-2 Envoy ran the write made during the partition {zone2_converged:?} after the link came back (all ACKed, zone online: {after_up:?}); a sidecar host reconnected and ran the new write {sidecar_converged:?} after its link came back"
    );
    Ok(())
}
