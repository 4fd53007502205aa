//! End to end (issue 37): an app behind a transparent proxy calls `backend.mesh` and reaches
//! the backend, as on a VM where `kumactl install transparent-proxy` ran.
//!
//! The `web` host is a network namespace the test makes (removed on drop, [`Lab`]). In it run
//! web's real Envoy, bootstrapped as kuma-dp bootstraps it (node metadata
//! `dataplane.dns.port`), and the app: a Python client running as `nobody`, whose TCP
//! connections iptables redirects to Envoy's outbound redirect port 15001 (Kuma's
//! `--redirect-outbound-port`; Kuma exempts Envoy by its uid, here everything else is root).
//! The zone CP (its data-plane server listening on the bridge address) and the backend (its
//! app and sidecar, on the bridge address) run on the test's own host.
//!
//! The app, knowing nothing of the mesh:
//! 1. resolves `backend.mesh` with Envoy's `kuma:dns` listener (what kuma-dp's CoreDNS asks):
//!    a VIP in 240.0.0.0/4, the one the zone persisted;
//! 2. calls `http://<vip>:80/` and gets the backend's answer (redirect → Envoy's
//!    `outbound:passthrough:ipv4` listener → the VIP's outbound listener → the backend's
//!    sidecar);
//! 3. with a VirtualOutbound naming every service `<service>.vo.test:8080`, resolves
//!    `backend.vo.test` (a VIP of its own) and reaches the backend on port 8080;
//! 4. calls a server outside the mesh by its address and gets its answer (redirect → the
//!    passthrough cluster to the original destination);
//! 5. with the Mesh's `networking.outbound.passthrough: false`, that call fails while the VIP
//!    still works.

use std::net::{Ipv4Addr, SocketAddr};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use umbra_e2e::hosts::{Lab, Proc, Subnet};
use umbra_e2e::{echo_app, envoy_binary, free_port, put_yaml, wait_until, DpServer, Envoy};

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const NO_PASSTHROUGH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\nnetworking:\n  outbound:\n    passthrough: false\n";
const DNS_PORT: u16 = 15054;
const NOBODY: u32 = 65534;

/// The app: resolve `name` through Envoy's DNS listener (a hand-made A query), then GET
/// `http://<address>:<port>/` (`address` may be `@name` to use what was resolved). Prints
/// `resolved <ip>` and `status <code> <body>` or `error <what>`.
const CLIENT: &str = r#"
import socket, struct, sys, http.client
name, target, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
ip = None
if name != "-":
    q = struct.pack(">HHHHHH", 0x1234, 0x0100, 1, 0, 0, 0)
    for label in name.split("."):
        q += bytes([len(label)]) + label.encode()
    q += b"\x00" + struct.pack(">HH", 1, 1)
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.settimeout(2)
    s.sendto(q, ("127.0.0.1", int(sys.argv[4])))
    r = s.recv(512)
    ancount = struct.unpack(">H", r[6:8])[0]
    if ancount and r[-6:-4] == b"\x00\x04":
        ip = socket.inet_ntoa(r[-4:])
    print("resolved", ip)
host = ip if target == "@name" else target
try:
    c = http.client.HTTPConnection(host, port, timeout=3)
    c.request("GET", "/")
    resp = c.getresponse()
    print("status", resp.status, resp.read().decode())
except Exception as e:
    print("error", type(e).__name__, e)
"#;

/// A server outside the mesh at `addr`, answering every request `200 outside`.
async fn outside_server(addr: SocketAddr) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    Ok(tokio::spawn(async move {
        while let Ok((mut sock, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = vec![0u8; 4096];
                let mut got = Vec::new();
                while !got.windows(4).any(|w| w == b"\r\n\r\n") {
                    match sock.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => got.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = sock
                    .write_all(
                        b"HTTP/1.1 200 OK\r\ncontent-length: 7\r\nconnection: close\r\n\r\noutside",
                    )
                    .await;
            });
        }
    }))
}

fn python() -> &'static str {
    // The app runs as `nobody`: a system interpreter it may execute.
    "/usr/bin/python3"
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_reaches_backend_mesh_through_its_transparent_proxy() -> anyhow::Result<()> {
    let Some(envoy) = envoy_binary() else {
        eprintln!("skipping: envoy not installed");
        return Ok(());
    };
    if std::env::var_os("CI").is_none() && umbra_e2e::hosts::require_privilege().is_err() {
        eprintln!("skipping: test hosts need root");
        return Ok(());
    }
    anyhow::ensure!(
        std::path::Path::new(python()).exists(),
        "{} is needed for the app",
        python()
    );
    let subnet = Subnet::parse("10.79.37.0/24")?;
    if let Some(user) = umbra_e2e::hosts::subnet_in_use(subnet) {
        anyhow::bail!("{subnet} is in use by {user}");
    }
    let mut lab = Lab::new()?;
    lab.add_network("mesh", subnet)?;
    let gw = subnet.gateway();
    let web_addr: Ipv4Addr = subnet.host(11).expect("a host address");
    let web = lab.add_host("web", &[("mesh", web_addr)])?.clone();

    // The zone, its data-plane server on the bridge address (the web host reaches it there).
    let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
    let ads: SocketAddr = format!("{gw}:{}", free_port()).parse()?;
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let zone = tokio::spawn(umbra_zone_cp::run(
        umbra_zone_cp::Args::new("zone-1", api, ads),
        async move {
            let _ = stop_rx.await;
        },
    ));
    wait_until(Duration::from_secs(10), || async {
        tokio::net::TcpStream::connect(api).await.is_ok()
    })
    .await?;
    put_yaml(api, "/meshes/default", MESH).await?;

    // The backend: its app and sidecar on the bridge address.
    let (app_port, inbound) = (free_port(), free_port());
    let _backend_app = echo_app(app_port, "backend").await?;
    put_yaml(
        api,
        "/meshes/default/dataplanes/backend",
        &format!("type: Dataplane\nmesh: default\nname: backend\nnetworking:\n  address: {gw}\n  inbound:\n  - port: {inbound}\n    servicePort: {app_port}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: backend, kuma.io/protocol: http}}\n"),
    )
    .await?;
    // web: transparent proxying, no outbound of its own.
    put_yaml(
        api,
        "/meshes/default/dataplanes/web",
        &format!("type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: {web_addr}\n  inbound:\n  - port: 20000\n    tags: {{kuma.io/service: web}}\n  transparentProxying: {{redirectPortInbound: 15006, redirectPortOutbound: 15001}}\n"),
    )
    .await?;
    // A server outside the mesh.
    let outside_port = free_port();
    let outside: SocketAddr = format!("{gw}:{outside_port}").parse()?;
    let _outside_app = outside_server(outside).await?;

    let dp = DpServer::of(api, ads, api).await?;
    let backend = Envoy::start(&envoy, "default", "backend", &dp).await?;
    let token = dp.token("default", "web").await?;
    let bootstrap = serde_json::json!({
        "node": {"id": "default.web", "cluster": "web", "metadata": {
            "dataplane.admin.port": "9901", "dataplane.dns.port": DNS_PORT.to_string()}},
        "admin": {"address": {"socketAddress": {"address": "127.0.0.1", "portValue": 9901}}},
        "dynamicResources": {
            "adsConfig": {"apiType": "GRPC", "transportApiVersion": "V3", "grpcServices": [
                {"envoyGrpc": {"clusterName": "ads_cluster"},
                 "initialMetadata": [{"key": "authorization", "value": token}]}]},
            "cdsConfig": {"ads": {}, "resourceApiVersion": "V3"},
            "ldsConfig": {"ads": {}, "resourceApiVersion": "V3"}},
        "staticResources": {"clusters": [{
            "name": "ads_cluster", "type": "STATIC", "connectTimeout": "1s",
            "transportSocket": {"name": "envoy.transport_sockets.tls", "typedConfig": {
                "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                "sni": "localhost",
                "commonTlsContext": {"alpnProtocols": ["h2"],
                    "validationContext": {"trustedCa": {"inlineString": dp.ca_pem}}}}},
            "typedExtensionProtocolOptions": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                "explicitHttpConfig": {"http2ProtocolOptions": {}}}},
            "loadAssignment": {"clusterName": "ads_cluster", "endpoints": [{"lbEndpoints": [
                {"endpoint": {"address": {"socketAddress": {"address": gw.to_string(), "portValue": ads.port()}}}}]}]}}]}
    });
    let dir = std::env::temp_dir().join(format!("umbra-tproxy-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("bootstrap.json"), serde_json::to_vec(&bootstrap)?)?;
    std::fs::write(dir.join("client.py"), CLIENT)?;
    // `nobody` reads the client.
    std::process::Command::new("chmod")
        .args(["-R", "a+rX"])
        .arg(&dir)
        .status()?;
    let mut cmd = web.command(&envoy);
    cmd.arg("-c").arg(dir.join("bootstrap.json")).args([
        "--disable-hot-restart",
        "--log-level",
        "info",
        "--drain-time-s",
        "0",
    ]);
    let mut web_envoy = Proc::spawn(cmd, &dir.join("envoy.log"))?;
    // A VM has a default route: without one, a connection to a VIP fails before iptables sees
    // it (test hosts have none).
    let (code, out) = web.run(
        &["ip", "route", "add", "default", "via", &gw.to_string()],
        Duration::from_secs(10),
    )?;
    anyhow::ensure!(code == 0, "ip route: {out}");
    // The app's TCP goes to Envoy's outbound redirect port (Kuma's iptables OUTPUT rule).
    let (code, out) = web.run(
        &[
            "iptables",
            "-t",
            "nat",
            "-A",
            "OUTPUT",
            "-p",
            "tcp",
            "-m",
            "owner",
            "--uid-owner",
            &NOBODY.to_string(),
            "-j",
            "REDIRECT",
            "--to-ports",
            "15001",
        ],
        Duration::from_secs(10),
    )?;
    anyhow::ensure!(code == 0, "iptables: {out}");

    let client = dir.join("client.py");
    let app = |name: &str, target: &str, port: u16| -> String {
        let uid = NOBODY.to_string();
        let argv = [
            "setpriv",
            "--reuid",
            &uid,
            "--regid",
            &uid,
            "--clear-groups",
            python(),
            client.to_str().unwrap_or_default(),
            name,
            target,
            &port.to_string(),
            &DNS_PORT.to_string(),
        ];
        web.run(&argv, Duration::from_secs(15))
            .map(|(_, out)| out)
            .unwrap_or_else(|e| e.to_string())
    };

    // 1 and 2: backend.mesh resolves to the persisted VIP, and the VIP reaches the backend.
    let mut last = String::new();
    let reached = wait_until(Duration::from_secs(30), || {
        last = app("backend.mesh", "@name", 80);
        let ok = last.contains("status 200 backend");
        async move { ok }
    })
    .await;
    assert!(
        reached.is_ok(),
        "backend.mesh not reached: {last}\nweb envoy:\n{}\nbackend envoy:\n{}",
        web_envoy.log_tail(40),
        backend.log_tail()
    );
    let vip = last
        .lines()
        .find_map(|l| l.strip_prefix("resolved "))
        .unwrap_or_default()
        .to_owned();
    assert!(vip.starts_with("240."), "a VIP: {last}");
    let (_, vips) = umbra_e2e::http_with(
        api,
        "GET",
        "/meshes/default/dataplanes/web/_config",
        None,
        &[],
    )
    .await?;
    assert!(
        vips.contains(&format!("outbound:{vip}:80")),
        "the VIP's outbound listener is in web's config"
    );

    // 2b: a VirtualOutbound names every service `<service>.vo.test:8080`: the name resolves
    // to a VIP of its own and carries the app's call to the backend.
    put_yaml(
        api,
        "/meshes/default/virtual-outbounds/by-service",
        "type: VirtualOutbound\nmesh: default\nname: by-service\nselectors:\n- match: {kuma.io/service: '*'}\nconf:\n  host: '{{.svc}}.vo.test'\n  port: '8080'\n  parameters:\n  - {name: svc, tagKey: kuma.io/service}\n",
    )
    .await?;
    let mut last = String::new();
    let reached = wait_until(Duration::from_secs(30), || {
        last = app("backend.vo.test", "@name", 8080);
        let ok = last.contains("status 200 backend");
        async move { ok }
    })
    .await;
    assert!(
        reached.is_ok(),
        "backend.vo.test:8080 not reached: {last}\nweb envoy:\n{}",
        web_envoy.log_tail(40)
    );
    let vo_vip = last
        .lines()
        .find_map(|l| l.strip_prefix("resolved "))
        .unwrap_or_default()
        .to_owned();
    assert!(
        vo_vip.starts_with("240.") && vo_vip != vip,
        "a VIP of its own: {vo_vip} (backend.mesh: {vip})"
    );

    // 3: outside the mesh, through the passthrough cluster.
    let out = app("-", &gw.to_string(), outside_port);
    assert!(out.contains("status 200 outside"), "passthrough: {out}");

    // 4: passthrough off: the outside call fails, the mesh still works.
    put_yaml(api, "/meshes/default", NO_PASSTHROUGH).await?;
    let cut = wait_until(Duration::from_secs(20), || {
        let out = app("-", &gw.to_string(), outside_port);
        async move { !out.contains("status 200") }
    })
    .await;
    assert!(cut.is_ok(), "passthrough still on");
    assert!(app("backend.mesh", "@name", 80).contains("status 200 backend"));

    web_envoy.kill();
    drop(backend);
    let _ = stop_tx.send(());
    zone.await??;
    drop(lab);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
