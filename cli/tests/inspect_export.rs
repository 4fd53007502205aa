//! `umbractl inspect dataplanes|meshes|zones|services` and `export` as a script runs them: the
//! real binary against a real in-process Global (memory store) holding the seed's policies
//! (`deploy/policies.yaml`) and Dataplanes a zone would have synced.

mod common;

use umbra_core::resource::Resource;

const SEED: &str = include_str!("../../deploy/policies.yaml");

/// Run umbractl against `url` with `args`, feeding `stdin`: `(exit code, stdout, stderr)`.
async fn umbractl(url: &str, args: &[&str], stdin: &str) -> (i32, String, String) {
    common::text(&common::umbractl(url, args, stdin).await)
}

fn rows(out: &str) -> Vec<Vec<&str>> {
    out.lines()
        .map(|l| l.split_whitespace().collect())
        .collect()
}

/// A Dataplane of zone-1 as the Global stores one a zone synced (`<name>` plus the zone and
/// display-name labels).
async fn put_dataplane(global: &common::Global, mesh: &str, name: &str, service: &str) {
    let yaml = format!(
        "type: Dataplane\nmesh: {mesh}\nname: {name}\nlabels: {{kuma.io/zone: zone-1, kuma.io/display-name: {name}}}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 8080\n    tags: {{kuma.io/service: {service}, version: v1}}\n"
    );
    let r = Resource::from_bytes(yaml.as_bytes()).unwrap();
    global.store.put(r, None, Some("zone-1")).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspect_tables_from_a_global() {
    let global = common::Global::start().await;
    let url = global.url.clone();
    let (code, out, err) = umbractl(&url, &["apply", "-f", "-"], SEED).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, out, err) = umbractl(
        &url,
        &["apply", "-f", "-"],
        "type: Mesh\nname: other\nskipCreatingInitialPolicies: ['*']\n",
    )
    .await;
    assert_eq!(code, 0, "{out}{err}");
    put_dataplane(&global, "default", "web-1", "web").await;
    put_dataplane(&global, "default", "web-2", "web").await;
    put_dataplane(&global, "default", "backend-1", "backend").await;
    let zi = "type: ZoneIngress\nname: zi-1\nnetworking: {address: 10.0.0.9, port: 10001, advertisedAddress: 10.0.0.9, advertisedPort: 10001}\n";
    let zi = Resource::from_bytes(zi.as_bytes()).unwrap();
    global.store.put(zi, None, Some("zone-1")).await.unwrap();

    // dataplanes: every mesh, then filtered by mesh, tag and name.
    let (code, out, err) = umbractl(&url, &["inspect", "dataplanes"], "").await;
    assert_eq!(code, 0, "{err}");
    let r = rows(&out);
    assert_eq!(
        r[0],
        [
            "MESH",
            "NAME",
            "ZONE",
            "TAGS",
            "STATUS",
            "LAST",
            "CONNECTED",
            "AGO",
            "TOTAL",
            "UPDATES",
            "TOTAL",
            "ERRORS",
            "CERT",
            "EXPIRATION",
            "CERT",
            "REGENERATIONS",
            "ENVOY",
            "VERSION",
            "NACKS"
        ]
    );
    assert_eq!(r.len(), 4, "{out}");
    let web1 = r.iter().find(|r| r[1] == "web-1").expect("web-1 listed");
    assert_eq!(
        web1,
        &[
            "default",
            "web-1",
            "zone-1",
            "kuma.io/service=web",
            "version=v1",
            "Offline",
            "never",
            "-",
            "-",
            "-",
            "-",
            "-",
            "0"
        ]
    );
    let (code, out, _) = umbractl(
        &url,
        &[
            "inspect",
            "dataplanes",
            "-m",
            "default",
            "--tag",
            "kuma.io/service:web",
        ],
        "",
    )
    .await;
    assert_eq!(code, 0);
    let names: Vec<&str> = rows(&out)[1..].iter().map(|r| r[1]).collect();
    assert_eq!(names, ["web-1", "web-2"], "{out}");
    let (_, out, _) = umbractl(&url, &["inspect", "dataplanes", "--name", "backend"], "").await;
    assert_eq!(rows(&out).len(), 2, "{out}");
    let (code, out, _) = umbractl(&url, &["inspect", "dataplanes", "-m", "other"], "").await;
    assert_eq!((code, out.trim()), (0, "No dataplanes found."));
    let (code, out, _) = umbractl(&url, &["inspect", "dataplanes", "-o", "json"], "").await;
    assert_eq!(code, 0);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["total"], 3);
    assert_eq!(v["items"][0]["type"], "DataplaneOverview");
    let (code, _, err) = umbractl(&url, &["inspect", "dataplanes", "--tag", "novalue"], "").await;
    assert_eq!(code, 2, "{err}");
    let (code, _, err) = umbractl(&url, &["inspect", "dataplanes", "-m", "nope"], "").await;
    assert_eq!(code, 4, "{err}");

    // meshes: mTLS, DPPs, policies (the seed's eight).
    let (code, out, err) = umbractl(&url, &["inspect", "meshes"], "").await;
    assert_eq!(code, 0, "{err}");
    let r = rows(&out);
    assert_eq!(r[0], ["NAME", "MTLS", "DATAPLANES", "POLICIES", "AGE"]);
    assert_eq!(&r[1][..4], ["default", "builtin/ca-1", "3", "8"], "{out}");
    assert_eq!(&r[2][..4], ["other", "off", "0", "0"], "{out}");
    let (_, out, _) = umbractl(&url, &["inspect", "meshes", "-o", "json"], "").await;
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["items"][0]["policies"]["MeshTimeout"], 4, "{v}");
    assert_eq!(v["items"][0]["policies"]["Timeout"], 3, "{v}");

    // services: the mesh's service insights (never connected: offline).
    let (code, out, err) = umbractl(&url, &["inspect", "services", "-m", "default"], "").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        rows(&out),
        [
            vec!["MESH", "SERVICE", "STATUS", "DPPS", "ONLINE", "NACKED"],
            vec!["default", "backend", "offline", "1", "0", "0"],
            vec!["default", "web", "offline", "2", "0", "0"],
        ]
    );
    let (_, yaml, _) = umbractl(&url, &["inspect", "services", "-o", "yaml"], "").await;
    assert!(yaml.contains("name: web") && yaml.contains("---"), "{yaml}");

    // zones: zone-1 holds resources but has not connected to this Global.
    let (code, out, err) = umbractl(&url, &["inspect", "zones"], "").await;
    assert_eq!(code, 0, "{err}");
    let r = rows(&out);
    assert_eq!(r[0][..3], ["NAME", "STATUS", "LAST"]);
    assert_eq!(
        r[1],
        ["zone-1", "Offline", "never", "0", "-", "-", "3"],
        "{out}"
    );
    global.stop().await;
}

/// A zone CP answers 404 to `/zones+insights` and says so at `/`: a fake one, enough for that.
async fn fake_zone_cp() -> String {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let request = String::from_utf8_lossy(&buf);
                let (status, body) = if request.starts_with("GET / ") {
                    ("200 OK", r#"{"product": "Umbra", "mode": "zone"}"#)
                } else {
                    (
                        "404 Not Found",
                        r#"{"title": "Not Found", "status": 404, "detail": "no such route"}"#,
                    )
                };
                let answer = format!(
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(answer.as_bytes()).await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zones_on_a_zone_cp_say_they_are_the_globals() {
    let url = fake_zone_cp().await;
    let (code, out, err) = umbractl(&url, &["inspect", "zones"], "").await;
    assert_eq!(code, 4, "{out}{err}");
    assert!(
        err.contains("zones are the Global's") && err.contains("zone control plane"),
        "{err}"
    );
}

/// Export the seed's mesh from a Global, delete the mesh, apply the export, export again: the
/// same text. Secrets and Dataplanes only when asked for.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_applies_back_to_the_same_mesh() {
    let global = common::Global::start().await;
    let url = global.url.clone();
    let (code, out, err) = umbractl(&url, &["apply", "-f", "-"], SEED).await;
    assert_eq!(code, 0, "{out}{err}");
    put_dataplane(&global, "default", "web-1", "web").await;
    let secret = "type: Secret\nmesh: default\nname: token\ndata: c2VjcmV0\n";
    let (code, out, err) = umbractl(&url, &["apply", "-f", "-"], secret).await;
    assert_eq!(code, 0, "{out}{err}");

    let (code, first, err) = umbractl(
        &url,
        &["export", "--mesh", "default", "--format", "universal"],
        "",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    let docs =
        umbra_core::codec::decode_documents(first.as_bytes(), umbra_core::codec::Limits::default())
            .unwrap();
    let kinds: Vec<String> = docs
        .iter()
        .map(|d| {
            format!(
                "{}/{}",
                d["type"].as_str().unwrap(),
                d["name"].as_str().unwrap()
            )
        })
        .collect();
    assert_eq!(kinds[0], "Mesh/default");
    assert_eq!(
        kinds.len(),
        9,
        "the Mesh and the seed's eight policies: {kinds:?}"
    );
    assert!(
        kinds.contains(&"MeshTimeout/timeout-global".to_owned()),
        "{kinds:?}"
    );
    assert!(!first.contains("creationTime"), "{first}");
    assert!(!first.contains("type: Secret") && !first.contains("type: Dataplane"));

    let (code, with, err) = umbractl(
        &url,
        &[
            "export",
            "--include-secrets",
            "--include-dataplanes",
            "-o",
            "yaml",
        ],
        "",
    )
    .await;
    assert_eq!(code, 0, "{err}");
    assert!(
        with.contains("type: Secret") && with.contains("type: Dataplane"),
        "{with}"
    );

    // Delete the mesh (and everything in it), apply the export, export again.
    // (A Global refuses to delete a zone's Dataplane; the zone would, and sync that.)
    let key = umbra_core::resource::ResourceKey::dataplane("default", "web-1");
    global.store.delete(&key, None).await.unwrap();
    let (code, out, err) = umbractl(&url, &["delete", "mesh", "default"], "").await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, _, _) = umbractl(&url, &["get", "meshtimeouts"], "").await;
    assert_eq!(code, 4, "the mesh is gone");
    let (code, out, err) = umbractl(&url, &["apply", "-f", "-"], &first).await;
    assert_eq!(code, 0, "{out}{err}");
    let (code, second, err) = umbractl(&url, &["export"], "").await;
    assert_eq!(code, 0, "{err}");
    assert_eq!(first, second);
    global.stop().await;
}
