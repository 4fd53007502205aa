//! The `zone-cp` binary refuses a malformed flag at startup (issue 33): it exits quickly with
//! status 2 and a message naming the flag, before it binds anything. A federated zone that
//! has never reached its Global answers `/ready` with 503 and says why; a standalone zone is
//! ready.

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use umbra_runtime::testing::{assert_refused, free_addr};

const ZONE_CP: &str = env!("CARGO_BIN_EXE_zone-cp");

/// A scratch directory for this test process.
fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("umbra-zone-flags-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// [`assert_refused`] for `zone-cp` (free `--api-addr` and `--ads-addr` unless given).
fn refused(args: &[&str], flag: &str) {
    assert_refused(ZONE_CP, &["--api-addr", "--ads-addr"], args, flag);
}

#[test]
fn a_malformed_global_kds_address_is_refused() {
    let t = ["--zone", "z1", "--kds-token", "t", "--global-kds-address"];
    for bad in [
        // Not one URI (the report of issue 33); several are separated by commas.
        "http://127.0.0.1:5685 http://127.0.0.1:5686",
        "http://127.0.0.1:5685,",
        // Several that cannot go together: TLS and plaintext mixed, one Global twice.
        "http://127.0.0.1:5685,https://127.0.0.1:5686",
        "http://127.0.0.1:5685,grpc://127.0.0.1:5685",
        "127.0.0.1:5685",
        "http://127.0.0.1",
        "ftp://global:5685",
        "http://global:5685/kds",
        "http://user:pw@global:5685",
        "http://bad_host!:5685",
        "",
    ] {
        let args: Vec<&str> = t.iter().copied().chain([bad]).collect();
        refused(&args, "--global-kds-address");
    }
    // Well formed, but TLS without the CA to verify the Global with.
    refused(
        &[
            "--zone",
            "z1",
            "--kds-token",
            "t",
            "--global-kds-address",
            "grpcs://global:5685",
        ],
        "--kds-ca-file",
    );
    // Well formed, but without a zone token.
    refused(
        &[
            "--zone",
            "z1",
            "--global-kds-address",
            "http://127.0.0.1:5685",
        ],
        "--kds-token",
    );
}

#[test]
fn other_malformed_zone_flags_are_refused() {
    let dir = temp_dir("other");
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let empty = dir.join("empty.token");
    std::fs::write(&empty, "\n").unwrap();
    let (not_pem, empty) = (not_pem.display().to_string(), empty.display().to_string());
    let kds = ["--global-kds-address", "http://127.0.0.1:5685"];
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--zone", "Zone_1"], "--zone"),
        (vec!["--zone", ""], "--zone"),
        (
            vec!["--zone", "z1", "--api-addr", "localhost"],
            "--api-addr",
        ),
        (
            vec!["--zone", "z1", "--ads-addr", "127.0.0.1:99999"],
            "--ads-addr",
        ),
        (vec!["--zone", "z1", "--dp-auth", "maybe"], "--dp-auth"),
        (
            vec!["--zone", "z1", "--localhost-is-admin", "yes please"],
            "--localhost-is-admin",
        ),
        (
            vec!["--zone", "z1", "--dp-server-hostname", "https://cp:5678"],
            "--dp-server-hostname",
        ),
        (vec!["--zone", "z1", "--data-dir", &not_pem], "--data-dir"),
        (
            vec!["--zone", "z1", "--kds-token", "t"],
            "--global-kds-address",
        ),
        (
            [
                &[
                    "--zone",
                    "z1",
                    "--kds-token-file",
                    "/nonexistent/zone.token",
                ][..],
                &kds,
            ]
            .concat(),
            "--kds-token-file",
        ),
        (
            [&["--zone", "z1", "--kds-token-file", &empty][..], &kds].concat(),
            "--kds-token-file",
        ),
        (
            [
                &[
                    "--zone",
                    "z1",
                    "--kds-token",
                    "t",
                    "--kds-ca-file",
                    &not_pem,
                ][..],
                &kds,
            ]
            .concat(),
            "--kds-ca-file",
        ),
        (
            vec![
                "--zone",
                "z1",
                "--dp-server-tls-cert-file",
                &not_pem,
                "--dp-server-tls-key-file",
                &not_pem,
            ],
            "--dp-server-tls-cert-file",
        ),
    ];
    for (args, flag) in cases {
        refused(&args, flag);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_data_plane_server_key_that_is_not_the_certificates_is_refused() {
    let dir = temp_dir("tls");
    let cert_key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["zone-cp".to_owned()])
        .unwrap()
        .self_signed(&cert_key)
        .unwrap();
    let other_key = rcgen::KeyPair::generate().unwrap();
    let (cert_file, key_file) = (dir.join("dp.crt"), dir.join("dp.key"));
    std::fs::write(&cert_file, cert.pem()).unwrap();
    std::fs::write(&key_file, other_key.serialize_pem()).unwrap();
    refused(
        &[
            "--zone",
            "z1",
            "--dp-server-tls-cert-file",
            &cert_file.display().to_string(),
            "--dp-server-tls-key-file",
            &key_file.display().to_string(),
        ],
        "--dp-server-tls-key-file",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_api_and_ads_ports_must_differ() {
    let same = free_addr().to_string();
    refused(
        &["--zone", "z1", "--ads-addr", &same, "--api-addr", &same],
        "--ads-addr",
    );
}

/// A `zone-cp` process, killed on drop.
struct Running(std::process::Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET /ready` on `api` once it answers: status and JSON body.
async fn ready(api: SocketAddr) -> (u16, serde_json::Value) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        if let Ok(r) = reqwest::get(format!("http://{api}/ready")).await {
            let status = r.status().as_u16();
            let body = r.text().await.unwrap_or_default();
            return (status, serde_json::from_str(&body).unwrap_or_default());
        }
        assert!(Instant::now() < deadline, "no answer from {api}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test]
async fn a_zone_that_never_reached_its_global_is_not_ready() {
    let (api, standalone_api) = (free_addr(), free_addr());
    let nobody = free_addr();
    let start = |api: SocketAddr, extra: &[String]| {
        Running(
            Command::new(ZONE_CP)
                .args(["--zone", "z1", "--api-addr", &api.to_string()])
                .args(["--ads-addr", &free_addr().to_string()])
                .args(extra)
                .env("UMBRA_KDS_TOKEN", "a-token-nobody-checks")
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("zone-cp starts"),
        )
    };
    let _federated = start(
        api,
        &["--global-kds-address".into(), format!("http://{nobody}")],
    );
    // A standalone zone has no Global to wait for (and takes no token).
    let _standalone = {
        let mut c = Command::new(ZONE_CP);
        c.args(["--zone", "z1", "--api-addr", &standalone_api.to_string()])
            .args(["--ads-addr", &free_addr().to_string()])
            .env_remove("UMBRA_KDS_TOKEN")
            .env_remove("UMBRA_GLOBAL_KDS_ADDRESS")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        Running(c.spawn().expect("zone-cp starts"))
    };

    // Until it has tried and failed at least once, and after.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = ready(api).await;
        assert_eq!(status, 503, "{body}");
        assert_eq!(body["status"], "notReady", "{body}");
        assert_eq!(body["federated"], true, "{body}");
        assert_eq!(body["global"]["connected"], false, "{body}");
        assert_eq!(body["global"]["synced"], false, "{body}");
        let reason = body["reason"].as_str().unwrap_or_default();
        assert!(reason.contains("not synced with its Global"), "{body}");
        if body["global"]["attempts"].as_u64() >= Some(2) {
            assert!(
                reason.contains("cannot connect") && body["global"]["lastError"].is_string(),
                "the reason says why: {body}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "no second attempt: {body}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let (status, body) = ready(standalone_api).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["status"], "ready", "{body}");
    assert_eq!(body["federated"], false, "{body}");
}

/// `UMBRA_GLOBAL_KDS_ADDRESS` takes several addresses, comma-separated: the zone tries each
/// in turn (its log names both failures), reports the one it tries in `/ready` and lists them
/// all in `/config`. A list that mixes TLS and plaintext is refused there too, naming the flag.
#[tokio::test]
async fn the_environment_takes_several_global_addresses_comma_separated() {
    let (api, a, b) = (free_addr(), free_addr(), free_addr());
    let (first, second) = (format!("http://{a}"), format!("grpc://{b}"));
    let dir = temp_dir("env");
    let log = dir.join("zone.log");
    let zone = |list: &str, stderr: Stdio| {
        let mut c = Command::new(ZONE_CP);
        c.args(["--zone", "z1", "--api-addr", &api.to_string()])
            .args(["--ads-addr", &free_addr().to_string()])
            .env("UMBRA_GLOBAL_KDS_ADDRESS", list)
            .env("UMBRA_KDS_TOKEN", "a-token-nobody-checks")
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr);
        c
    };
    let mut mixed = zone(&format!("{first},https://{b}"), Stdio::piped())
        .output()
        .expect("zone-cp runs");
    let stderr = String::from_utf8_lossy(&std::mem::take(&mut mixed.stderr)).into_owned();
    assert_eq!(mixed.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--global-kds-address") && stderr.contains("is TLS"),
        "{stderr}"
    );

    let _zone = Running(
        zone(
            &format!("{first}, {second}"),
            std::fs::File::create(&log).unwrap().into(),
        )
        .spawn()
        .expect("zone-cp starts"),
    );
    // Nobody listens at either address: the client goes round both.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (status, body) = ready(api).await;
        assert_eq!(status, 503, "{body}");
        let trying = body["global"]["globalAddress"].as_str().unwrap_or_default();
        assert!(trying == first || trying == second, "{body}");
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        let tried = |address: &str| text.contains(&format!("cannot connect to {address}"));
        if tried(&first) && tried(&second) {
            break;
        }
        assert!(Instant::now() < deadline, "not both tried:\n{text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let config = reqwest::get(format!("http://{api}/config"))
        .await
        .expect("/config answers")
        .text()
        .await
        .expect("a body");
    let config: serde_json::Value = serde_json::from_str(&config).expect("JSON");
    assert_eq!(
        config["umbra"]["globalKdsAddress"],
        serde_json::json!([first, second]),
        "{config}"
    );
    assert_eq!(
        config["multizone"]["zone"]["globalAddress"],
        format!("{first},{second}"),
        "{config}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}
