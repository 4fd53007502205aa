//! The kuma-dp bootstrap the zone hands out: a golden file for a fixed request (any change to
//! the generated Envoy config shows up in review; `UMBRA_UPDATE_GOLDEN=1` rewrites it), and the
//! real Envoy accepts it (`envoy --mode validate`) with a CA from the zone's own authority.

use std::path::PathBuf;
use std::process::Command;

use umbra_zone_cp::bootstrap::{generate, BootstrapParams, BootstrapRequest};

const DATAPLANE: &str = "type: Dataplane\nmesh: default\nname: frontend-1\nnetworking:\n  address: 10.77.1.11\n  inbound:\n  - port: 8080\n    servicePort: 18080\n    serviceAddress: 127.0.0.1\n    tags: {kuma.io/service: frontend, kuma.io/protocol: http}\n  outbound:\n  - port: 3001\n    tags: {kuma.io/service: backend}\n";

fn request(ca: &str) -> BootstrapRequest {
    serde_json::from_value(serde_json::json!({
        "mesh": "default", "name": "frontend-1", "proxyType": "dataplane", "adminPort": 9901,
        "dataplaneToken": "header.payload.signature", "dataplaneResource": DATAPLANE,
        "version": {"kumaDp": {"version": "2.7.29"}, "envoy": {"version": "1.30.2", "kumaDpCompatible": true}},
        "caCert": ca, "dynamicMetadata": {"team": "web"}, "features": ["feature-bind-outbounds"],
    }))
    .unwrap()
}

fn bootstrap(host: &str, ca: &str) -> Vec<u8> {
    let req = request(ca);
    let dp = req.validate().unwrap().unwrap();
    generate(
        &req,
        &dp,
        &BootstrapParams {
            ads_host: host.into(),
            ads_port: 5678,
            ca_pem: String::new(),
            replicas: Vec::new(),
        },
    )
    .bootstrap
}

/// The bootstrap a replica of a zone on PostgreSQL hands out: every live replica's data-plane
/// server (this one first, as reached), a SAN for each, and a short ADS retry backoff.
fn replicated(ca: &str) -> Vec<u8> {
    let req = request(ca);
    let dp = req.validate().unwrap().unwrap();
    generate(
        &req,
        &dp,
        &BootstrapParams {
            ads_host: "10.77.0.2".into(),
            ads_port: 5678,
            ca_pem: String::new(),
            replicas: vec![
                ("10.77.0.2".into(), 5678),
                ("10.77.0.3".into(), 5678),
                ("zone-1-cp-c".into(), 5679),
            ],
        },
    )
    .bootstrap
}

#[test]
fn a_replicated_zone_lists_every_replica() {
    let text = String::from_utf8(replicated("ca")).unwrap();
    let doc = umbra_core::codec::decode_one(text.as_bytes(), Default::default()).unwrap();
    let cluster = &doc["static_resources"]["clusters"][0];
    let endpoints: Vec<String> = cluster["load_assignment"]["endpoints"][0]["lb_endpoints"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let a = &e["endpoint"]["address"]["socket_address"];
            format!("{}:{}", a["address"].as_str().unwrap(), a["port_value"])
        })
        .collect();
    assert_eq!(
        endpoints,
        ["10.77.0.2:5678", "10.77.0.3:5678", "zone-1-cp-c:5679"]
    );
    assert_eq!(cluster["type"], "STRICT_DNS", "a name among them");
    let sans = &cluster["transport_socket"]["typed_config"]["common_tls_context"]
        ["validation_context"]["match_typed_subject_alt_names"];
    assert_eq!(sans.as_array().unwrap().len(), 3);
    assert_eq!(sans[2]["san_type"], "DNS");
    assert_eq!(
        doc["dynamic_resources"]["ads_config"]["grpc_services"][0]["envoy_grpc"]["retry_policy"]
            ["retry_back_off"]["base_interval"],
        "0.2s"
    );
    // One replica: no retry policy of ours (the golden file above is that case).
    let single = String::from_utf8(bootstrap("zone-1-cp", "ca")).unwrap();
    assert!(!single.contains("retry_policy"));
}

#[test]
fn the_bootstrap_matches_its_golden_file() {
    let ca = "-----BEGIN CERTIFICATE-----\nMIIB-the-zone-ca\n-----END CERTIFICATE-----\n";
    let text = String::from_utf8(bootstrap("zone-1-cp", ca)).unwrap();
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/golden/bootstrap/frontend-1.yaml");
    if std::env::var_os("UMBRA_UPDATE_GOLDEN").is_some() {
        std::fs::write(&path, &text).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (UMBRA_UPDATE_GOLDEN=1 creates it)", path.display()));
    assert_eq!(
        expected,
        text,
        "{} differs (UMBRA_UPDATE_GOLDEN=1 rewrites it)",
        path.display()
    );
}

/// `UMBRA_ENVOY`, else `envoy` on `PATH`; `None` (skip) locally without it, a failure in CI.
fn envoy() -> Option<String> {
    if let Some(p) = std::env::var_os("UMBRA_ENVOY") {
        return Some(p.to_string_lossy().into_owned());
    }
    let found = Command::new("envoy")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        found || std::env::var_os("CI").is_none(),
        "envoy not found on PATH"
    );
    found.then(|| "envoy".to_owned())
}

#[tokio::test]
async fn envoy_accepts_the_bootstrap_for_a_name_an_ip_and_a_bare_request() {
    let Some(envoy) = envoy() else {
        eprintln!("skipping: envoy not installed");
        return;
    };
    let store = umbra_store::memory::MemoryStore::new();
    let tls = umbra_zone_cp::dp_server::generated(&store, "zone-1", &["zone-1-cp".into()])
        .await
        .unwrap();
    let dir = std::env::temp_dir().join(format!("umbra-bootstrap-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // The bare request kuma-dp could send (no version, token, features or Dataplane: nulls and
    // empty lists in node metadata), with the zone's CA.
    let bare: BootstrapRequest =
        serde_json::from_value(serde_json::json!({"mesh": "default", "name": "frontend-1"}))
            .unwrap();
    let dp = request("").validate().unwrap().unwrap();
    let params = BootstrapParams {
        ads_host: "zone-1-cp".into(),
        ads_port: 5678,
        ca_pem: tls.ca_pem.clone(),
        replicas: Vec::new(),
    };
    let bare = generate(&bare, &dp, &params).bootstrap;
    // A builtin gateway's: its runtime adds the `gateway` layer and the RTDS layer over ADS.
    let gateway_req: BootstrapRequest = serde_json::from_value(serde_json::json!({
        "mesh": "default", "name": "edge-1",
        "dataplaneResource": "type: Dataplane\nmesh: default\nname: edge-1\nnetworking:\n  address: 10.77.1.12\n  gateway:\n    type: BUILTIN\n    tags: {kuma.io/service: edge}\n",
    }))
    .unwrap();
    let gateway_dp = gateway_req.validate().unwrap().unwrap();
    let gateway = generate(&gateway_req, &gateway_dp, &params).bootstrap;
    assert!(
        String::from_utf8_lossy(&gateway).contains("rtds_layer"),
        "{}",
        String::from_utf8_lossy(&gateway)
    );
    let cases = [
        ("gateway", gateway),
        ("zone-1-cp", bootstrap("zone-1-cp", &tls.ca_pem)),
        ("127.0.0.1", bootstrap("127.0.0.1", &tls.ca_pem)),
        ("bare", bare),
        ("replicas", replicated(&tls.ca_pem)),
    ];
    for (host, text) in cases {
        let path = dir.join(format!("{host}.yaml"));
        std::fs::write(&path, text).unwrap();
        let out = Command::new(&envoy)
            .args(["--mode", "validate", "--log-level", "critical", "-c"])
            .arg(&path)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{host}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `POST /bootstrap` names the ADS address the request came to, unless
/// `--bootstrap-xds-host`/`--bootstrap-xds-port` say otherwise (kuma-dp reaching the zone
/// through a load balancer or a NAT whose address its Envoy must not use).
#[tokio::test]
async fn the_bootstrap_points_at_the_configured_xds_address() {
    use base64::Engine as _;
    let store = umbra_zone_cp::store::Store::new();
    store
        .put(
            umbra_core::resource::Resource::from_bytes(b"type: Mesh\nname: default\n").unwrap(),
            None,
        )
        .unwrap();
    let body = serde_json::json!({
        "mesh": "default", "name": "frontend-1", "proxyType": "dataplane", "adminPort": 9901,
        "dataplaneResource": DATAPLANE,
        "version": {"kumaDp": {"version": "2.7.29"}, "envoy": {"version": "1.30.2", "kumaDpCompatible": true}},
    })
    .to_string();
    let ads_of = |xds_host: Option<&str>, xds_port: Option<u16>| {
        let app = umbra_zone_cp::dp_server::router(umbra_zone_cp::dp_server::BootstrapState {
            store: store.clone(),
            gate: umbra_zone_cp::dp_auth::Gate::open(),
            ca_pem: String::new(),
            port: 5678,
            xds_host: xds_host.map(str::to_owned),
            xds_port,
            replicas: None,
        });
        let body = body.clone();
        async move {
            let (status, answer, _) = umbra_api::testing::call(
                &app,
                "POST",
                "/bootstrap",
                &[
                    ("content-type", "application/json"),
                    ("host", "10.9.9.9:30678"),
                ],
                Some(&body),
            )
            .await;
            assert_eq!(status, 200, "{answer}");
            let config = base64::engine::general_purpose::STANDARD
                .decode(answer["bootstrap"].as_str().unwrap())
                .unwrap();
            String::from_utf8(config).unwrap()
        }
    };
    let by_request = ads_of(None, None).await;
    assert!(
        by_request.contains("10.9.9.9") && by_request.contains("30678"),
        "{by_request}"
    );
    let configured = ads_of(Some("zone-1-cp"), Some(5678)).await;
    assert!(
        configured.contains("zone-1-cp")
            && configured.contains("5678")
            && !configured.contains("10.9.9.9"),
        "{configured}"
    );
}
