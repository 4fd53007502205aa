//! Nothing a Global operation, an expired token or an impostor does makes a zone lose what it
//! owns (issue 23), end to end with global-cp and zone-cp processes on loopback:
//!
//! - a Mesh with a zone's Dataplanes attached cannot be deleted on the Global (409), and the
//!   zone keeps its Dataplanes; once they are gone, the Mesh goes with its policies;
//! - a zone token that expires, or is revoked, while its streams are open ends them
//!   (Unauthenticated); the zone reconnects once its token file holds a valid token;
//! - a second process presenting the same zone's token is refused while the first holds the
//!   zone's connection, and cannot write that zone's Dataplanes; it takes over once the first
//!   is gone.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;
use umbra_e2e::{
    dataplane_yaml, free_port, start_federated_zone, wait_until, zone_token, CpProcess,
};

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");
const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "umbra-safety-{tag}-{}-{}",
        std::process::id(),
        free_port()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn global(dir: &std::path::Path) -> CpProcess {
    CpProcess::start(GLOBAL, "--kds-addr", &[], &[], dir.join("global.log"))
        .await
        .unwrap()
}

/// The Global's view of `zone`.
async fn zone_status(global: &CpProcess, zone: &str) -> Value {
    global
        .call("GET", &format!("/zones/{zone}"), None)
        .await
        .map(|(_, v)| v)
        .unwrap_or_default()
}

async fn total(cp: &CpProcess, path: &str) -> u64 {
    match cp.call("GET", path, None).await {
        Ok((200, v)) => v["total"].as_u64().unwrap_or(0),
        _ => 0,
    }
}

/// Register Dataplane `web` (inbound `port`) on `zone` and wait until the Global has it.
async fn register_web(global: &CpProcess, zone: &CpProcess, port: u16) {
    zone.apply(
        "/meshes/default/dataplanes/web",
        &dataplane_yaml("web", "web", port, port + 10_000, None),
    )
    .await
    .unwrap();
    eventually("the Dataplane reached the Global", global, zone, || async {
        total(global, "/meshes/default/dataplanes").await == 1
    })
    .await;
}

/// Wait until `zone-1` has its three KDS streams open on the Global.
async fn connected(global: &CpProcess, zone: &CpProcess, what: &str) {
    eventually(what, global, zone, || async {
        zone_status(global, "zone-1").await["streams"] == 3
    })
    .await;
}

/// Wait until `check` holds, or fail with both processes' logs.
async fn eventually<F, Fut>(what: &str, global: &CpProcess, zone: &CpProcess, check: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    if wait_until(Duration::from_secs(30), check).await.is_err() {
        panic!(
            "{what}\n--- zone:\n{}\n--- global:\n{}",
            zone.log_tail(),
            global.log_tail()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mesh_with_a_zones_dataplanes_cannot_be_deleted_on_the_global() {
    let dir = temp_dir("mesh");
    let global = global(&dir).await;
    global.apply("/meshes/default", MESH).await.unwrap();
    global
        .apply(
            "/meshes/default/meshtimeouts/idle",
            "type: MeshTimeout\nmesh: default\nname: idle\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 5s}\n",
        )
        .await
        .unwrap();
    let token = zone_token(&global, "zone-1").await.unwrap();
    let zone = start_federated_zone(ZONE, &global, "zone-1", &token, &[], dir.join("zone.log"))
        .await
        .unwrap();
    eventually("the Mesh reached the zone", &global, &zone, || async {
        matches!(
            zone.call("GET", "/meshes/default", None).await,
            Ok((200, _))
        )
    })
    .await;
    register_web(&global, &zone, 20_001).await;

    let (status, body) = global
        .call("DELETE", "/meshes/default", None)
        .await
        .unwrap();
    assert_eq!(status, 409, "{body}");
    assert!(
        body["detail"]
            .as_str()
            .is_some_and(|d| d.contains("dataplanes attached") && d.contains("1 Dataplanes")),
        "{body}"
    );
    // Refused on the Global: nothing was deleted there, so nothing reaches the zone.
    assert_eq!(total(&global, "/meshes/default/meshtimeouts").await, 1);
    assert_eq!(total(&zone, "/meshes/default/dataplanes").await, 1);

    // Once the zone's Dataplane is gone, the Mesh goes, with its policies, everywhere.
    let (status, _) = zone
        .call("DELETE", "/meshes/default/dataplanes/web", None)
        .await
        .unwrap();
    assert_eq!(status, 200);
    eventually("the Dataplane left the Global", &global, &zone, || async {
        total(&global, "/meshes/default/dataplanes").await == 0
    })
    .await;
    let (status, body) = global
        .call("DELETE", "/meshes/default", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    eventually("the Mesh left the zone", &global, &zone, || async {
        matches!(
            zone.call("GET", "/meshes/default", None).await,
            Ok((404, _))
        )
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_expired_or_revoked_zone_token_ends_open_streams_and_a_new_one_reconnects() {
    let dir = temp_dir("expiry");
    let global = global(&dir).await;
    global.apply("/meshes/default", MESH).await.unwrap();
    let (status, short) = global
        .call(
            "POST",
            "/tokens/zone",
            Some(r#"{"zone": "zone-1", "validFor": "2s"}"#),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{short}");
    let token_file = dir.join("zone-1.token");
    std::fs::write(&token_file, short.as_str().unwrap()).unwrap();
    let args = vec![
        "--zone".to_owned(),
        "zone-1".to_owned(),
        "--global-kds-address".to_owned(),
        format!("http://{}", global.grpc),
        "--kds-token-file".to_owned(),
        token_file.display().to_string(),
    ];
    let zone = CpProcess::start(ZONE, "--ads-addr", &args, &[], dir.join("zone.log"))
        .await
        .unwrap();
    connected(&global, &zone, "the zone connected").await;
    // 2 s of validity and 5 s of leeway later, the Global ends every stream.
    eventually(
        "the expired token's streams ended",
        &global,
        &zone,
        || async {
            let z = zone_status(&global, "zone-1").await;
            z["online"] == false
                && z["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("expired"))
        },
    )
    .await;
    eventually("the zone saw why", &global, &zone, || async {
        matches!(zone.call("GET", "/ready", None).await,
            Ok((200, r)) if r["global"]["connected"] == false
                && r["global"]["lastError"].as_str().is_some_and(|e| e.contains("expired")))
    })
    .await;
    // A fresh token in the file: the zone's next attempt reads it and connects.
    let fresh = zone_token(&global, "zone-1").await.unwrap();
    std::fs::write(&token_file, &fresh).unwrap();
    connected(&global, &zone, "the zone reconnected with the new token").await;

    // Revoking that token ends the open streams at once, and it is refused from then on.
    let (status, body) = global
        .call(
            "POST",
            "/tokens/zone/revocations",
            Some(&serde_json::json!({ "token": fresh }).to_string()),
        )
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(
        !body.to_string().contains(&fresh),
        "the answer never carries the token"
    );
    eventually(
        "the revoked token's streams ended",
        &global,
        &zone,
        || async {
            let z = zone_status(&global, "zone-1").await;
            z["online"] == false
                && z["lastError"]
                    .as_str()
                    .is_some_and(|e| e.contains("revoked"))
        },
    )
    .await;
    std::fs::write(&token_file, zone_token(&global, "zone-1").await.unwrap()).unwrap();
    connected(&global, &zone, "the zone reconnected with another token").await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_connection_for_a_connected_zone_is_refused_until_the_first_is_gone() {
    let dir = temp_dir("lease");
    let global = global(&dir).await;
    global.apply("/meshes/default", MESH).await.unwrap();
    let token = zone_token(&global, "zone-1").await.unwrap();
    let mut first =
        start_federated_zone(ZONE, &global, "zone-1", &token, &[], dir.join("first.log"))
            .await
            .unwrap();
    connected(&global, &first, "the first zone connected").await;
    eventually(
        "the Mesh reached the first zone",
        &global,
        &first,
        || async {
            matches!(
                first.call("GET", "/meshes/default", None).await,
                Ok((200, _))
            )
        },
    )
    .await;
    register_web(&global, &first, 20_011).await;

    // An impostor with a valid token for the same zone, its own Dataplane and no Mesh yet.
    let second = start_federated_zone(ZONE, &global, "zone-1", &token, &[], dir.join("second.log"))
        .await
        .unwrap();
    // It never synced, so it is not ready, and says why.
    eventually("the second connection was refused", &global, &second, || async {
        matches!(second.call("GET", "/ready", None).await,
            Ok((503, r)) if r["global"]["lastError"].as_str().is_some_and(|e| e.contains("already connected")))
    })
    .await;
    let z = zone_status(&global, "zone-1").await;
    assert_eq!(
        z["streams"], 3,
        "the first zone's streams are untouched: {z}"
    );
    let refused_before = z["refusedConnections"].as_u64().unwrap();
    assert!(refused_before >= 1, "{z}");
    // Refused again after that: it never opened a stream, so nothing of its own reached the
    // Global, and the first zone's Dataplane is still there.
    eventually(
        "the second zone retried and was refused again",
        &global,
        &second,
        || async {
            zone_status(&global, "zone-1").await["refusedConnections"]
                .as_u64()
                .is_some_and(|n| n > refused_before)
        },
    )
    .await;
    let (_, dps) = global
        .call("GET", "/meshes/default/dataplanes", None)
        .await
        .unwrap();
    assert_eq!(dps["total"], 1, "{dps}");
    assert_eq!(
        dps["items"][0]["labels"]["kuma.io/display-name"], "web",
        "{dps}"
    );

    // The first zone goes away for good: the second takes the zone over.
    first.kill();
    eventually("the second zone took over", &global, &second, || async {
        zone_status(&global, "zone-1").await["streams"] == 3
            && matches!(
                second.call("GET", "/meshes/default", None).await,
                Ok((200, _))
            )
    })
    .await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Rewrite a memory-store Global's data directory as a Global that lost its data but kept its
/// signing key would have it: no resources, no store identity, the same zone-token key.
fn lose_data_keep_key(data: &std::path::Path) {
    let mut keys = serde_json::Map::new();
    if let Ok(bytes) = std::fs::read(data.join("store.json")) {
        let snapshot: Value = serde_json::from_slice(&bytes).unwrap();
        if let Some(k) = snapshot["keys"].as_object() {
            keys.extend(k.clone());
        }
    }
    if let Ok(text) = std::fs::read_to_string(data.join("journal.ndjson")) {
        // One line per write: an array of records.
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            for record in v.as_array().unwrap() {
                if let Some(k) = record.get("key") {
                    keys.insert(
                        k["purpose"].as_str().unwrap().to_owned(),
                        k["value"].clone(),
                    );
                }
            }
        }
    }
    keys.remove("store-identity");
    assert!(keys.contains_key("zone-token"), "{keys:?}");
    let snapshot = serde_json::json!({"format": 2, "revision": 0, "resources": [], "keys": keys});
    std::fs::write(
        data.join("store.json"),
        serde_json::to_vec(&snapshot).unwrap(),
    )
    .unwrap();
    let _ = std::fs::remove_file(data.join("journal.ndjson"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_keeps_its_state_when_the_global_lost_its_data_until_an_operator_confirms() {
    let dir = temp_dir("lost");
    let global_data = dir.join("global-data");
    let mut global = CpProcess::start(
        GLOBAL,
        "--kds-addr",
        &["--data-dir".to_owned(), global_data.display().to_string()],
        &[],
        dir.join("global.log"),
    )
    .await
    .unwrap();
    global.apply("/meshes/default", MESH).await.unwrap();
    global
        .apply(
            "/meshes/default/meshtimeouts/idle",
            "type: MeshTimeout\nmesh: default\nname: idle\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: Mesh}\n    default: {idleTimeout: 5s}\n",
        )
        .await
        .unwrap();
    let token = zone_token(&global, "zone-1").await.unwrap();
    let zone_data = vec![
        "--data-dir".to_owned(),
        dir.join("zone-data").display().to_string(),
    ];
    let zone = start_federated_zone(
        ZONE,
        &global,
        "zone-1",
        &token,
        &zone_data,
        dir.join("zone.log"),
    )
    .await
    .unwrap();
    eventually("the policy reached the zone", &global, &zone, || async {
        total(&zone, "/meshes/default/meshtimeouts").await == 1
    })
    .await;
    register_web(&global, &zone, 20_021).await;

    // The Global comes back without its data (same signing key, so the zone's token works).
    global.kill();
    lose_data_keep_key(&global_data);
    global.restart().await.unwrap();
    eventually(
        "the zone saw a Global that is not the store it synced from and refused its removals",
        &global,
        &zone,
        || async {
            matches!(zone.call("GET", "/ready", None).await,
            Ok((200, r)) if r["global"]["globalStoreChanged"] == true
                && r["global"]["lastRejected"].as_array().is_some_and(|a| !a.is_empty()))
        },
    )
    .await;
    // It keeps serving everything it had.
    assert_eq!(total(&zone, "/meshes/default/meshtimeouts").await, 1);
    assert_eq!(total(&zone, "/meshes/default/dataplanes").await, 1);
    assert!(matches!(
        zone.call("GET", "/meshes/default", None).await,
        Ok((200, _))
    ));
    eventually(
        "the Global reports the zone's condition",
        &global,
        &zone,
        || async { zone_status(&global, "zone-1").await["storeChanged"] == true },
    )
    .await;

    // An operator confirms: the zone follows this Global from now on. Its policy goes; its
    // Dataplane stays, and so does the Mesh it is attached to.
    let (status, body) = zone
        .call("POST", "/global/accept-store", None)
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    eventually("the zone resynced with the accepted Global", &global, &zone, || async {
        total(&zone, "/meshes/default/meshtimeouts").await == 0
            && matches!(zone.call("GET", "/ready", None).await,
                Ok((200, r)) if r["global"]["globalStoreChanged"] == false && r["global"]["connected"] == true)
    })
    .await;
    assert_eq!(total(&zone, "/meshes/default/dataplanes").await, 1);
    let (status, _) = zone
        .call("POST", "/global/accept-store", None)
        .await
        .unwrap();
    assert_eq!(status, 409, "nothing left to accept");
    let _ = std::fs::remove_dir_all(&dir);
}
