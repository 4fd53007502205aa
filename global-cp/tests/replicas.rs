//! High availability (issue 36): two replicas of the Global on one PostgreSQL database, each
//! its own `global-cp` process (as deployed: process-local state, such as a lock, is not
//! shared), called over HTTP as a load balancer would, alternating.
//!
//! - Migration plans made at once through both replicas are all kept: each save is a
//!   compare-and-swap of the mesh's list (a process-local lock used to serialise them, so
//!   replicas overwrote each other's plans and a plan answered 200 was later unknown).
//! - Revocations made at once through both replicas are all kept in the store, and a token
//!   revoked through one replica is refused by the other within seconds (each replica re-reads
//!   the revocation lists periodically).
//! - Zone tokens: a revocation stored by one replica reaches the other's [`ZoneTokens`] (what
//!   its KDS server checks, and what ends the open streams of the revoked token).
//!
//! Everything reaches PostgreSQL through [`lag_proxy`], which delays each chunk by [`LAG`], as
//! a database across a network does: on loopback a read-modify-write takes well under a
//! millisecond and two replicas' updates seldom overlap in a test; in production they do.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::testing::{free_port, TempPostgres};
use umbra_global_cp::tokens::{ZoneTokens, REVOCATION_POLL};

const GLOBAL_CP: &str = env!("CARGO_BIN_EXE_global-cp");

/// How long a revocation may take to reach the other replica: its poll period and then some.
const PROPAGATION: Duration = Duration::from_secs(10);

/// The delay [`lag_proxy`] adds to each chunk, each way.
const LAG: Duration = Duration::from_millis(3);

/// A TCP proxy to `127.0.0.1:upstream` that forwards each chunk [`LAG`] late, in order, both
/// ways; returns its port. It runs until the test's runtime ends.
async fn lag_proxy(upstream: u16) -> u16 {
    async fn pump(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
    ) {
        let mut buf = vec![0u8; 64 * 1024];
        while let Ok(n @ 1..) = from.read(&mut buf).await {
            tokio::time::sleep(LAG).await;
            if to.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let Ok(server) = tokio::net::TcpStream::connect(("127.0.0.1", upstream)).await else {
                continue;
            };
            let (cr, cw) = client.into_split();
            let (sr, sw) = server.into_split();
            tokio::spawn(pump(cr, sw));
            tokio::spawn(pump(sr, cw));
        }
    });
    port
}

/// A fresh database on a fresh server, and its URL through a [`lag_proxy`] (`None`:
/// PostgreSQL is not installed and this is not CI).
async fn database(name: &str) -> Option<(TempPostgres, String)> {
    let pg = TempPostgres::start_or_skip()?;
    let direct = pg.create_database(name).await.unwrap();
    let port: u16 = direct
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split_once('/'))
        .and_then(|(port, _)| port.parse().ok())
        .unwrap();
    let proxy = lag_proxy(port).await;
    let url = direct.replace(&format!(":{port}/"), &format!(":{proxy}/"));
    Some((pg, url))
}

/// One replica: a `global-cp` process on PostgreSQL (loopback callers are the admin), killed
/// on drop.
struct Replica {
    url: String,
    child: std::process::Child,
}

impl Replica {
    /// A `global-cp` on `db`, once its API answers.
    async fn start(db: &str) -> Replica {
        let (api, kds) = (free_port(), free_port());
        let child = std::process::Command::new(GLOBAL_CP)
            .args(["--store", "postgres", "--postgres-url", db])
            .args(["--api-addr", &format!("127.0.0.1:{api}")])
            .args(["--kds-addr", &format!("127.0.0.1:{kds}")])
            .args(["--inter-cp-addr", &format!("127.0.0.1:{}", free_port())])
            .env("RUST_LOG", "error")
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let mut replica = Replica {
            url: format!("http://127.0.0.1:{api}"),
            child,
        };
        let client = reqwest::Client::new();
        for _ in 0..200 {
            if let Ok(Some(status)) = replica.child.try_wait() {
                panic!("global-cp exited: {status}");
            }
            let ready = client
                .get(format!("{}/ready", replica.url))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if ready {
                return replica;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("the replica at {} does not answer", replica.url);
    }
}

impl Drop for Replica {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Two replicas on a fresh database (`None`: PostgreSQL is not installed and this is not CI).
async fn replicas(name: &str) -> Option<(TempPostgres, String, Replica, Replica)> {
    let (pg, url) = database(name).await?;
    // One at a time: the first migrates the schema.
    let a = Replica::start(&url).await;
    let b = Replica::start(&url).await;
    Some((pg, url, a, b))
}

/// `method url` with an optional JSON body and bearer token: the status and the body (JSON, or
/// a JSON string when it is not JSON).
async fn call(
    client: &reqwest::Client,
    method: reqwest::Method,
    url: &str,
    body: Option<&Value>,
    token: Option<&str>,
) -> (reqwest::StatusCode, Value) {
    let mut req = client.request(method, url);
    if let Some(body) = body {
        req = req
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    if let Some(token) = token {
        req = req.header("authorization", format!("Bearer {token}"));
    }
    let resp = req.send().await.unwrap();
    let status = resp.status();
    let text = resp.text().await.unwrap();
    let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, body)
}

async fn put_yaml(client: &reqwest::Client, url: &str, yaml: &str) {
    let resp = client
        .put(url)
        .header("content-type", "application/yaml")
        .body(yaml.to_owned())
        .send()
        .await
        .unwrap();
    let status = resp.status();
    assert!(
        status.is_success(),
        "PUT {url}: {status} {}",
        resp.text().await.unwrap()
    );
}

fn shadow_timeout(name: &str) -> String {
    format!("type: MeshTimeout\nmesh: default\nname: {name}\nlabels: {{kuma.io/effect: shadow}}\nspec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 5s}}\n")
}

/// 16 plans made at once through both replicas: every one answered 200, and every one is then
/// known to both (the user's report: 3 to 5 of 16 were unknown afterwards).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plans_made_at_once_through_two_replicas_are_all_kept() {
    const PLANS: usize = 16;
    let Some((_pg, url, a, b)) = replicas("plans").await else {
        return;
    };
    let client = reqwest::Client::new();
    put_yaml(
        &client,
        &format!("{}/meshes/default", a.url),
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
    )
    .await;
    for i in 0..PLANS {
        let name = format!("shadow-{i}");
        put_yaml(
            &client,
            &format!("{}/meshes/default/meshtimeouts/{name}", a.url),
            &shadow_timeout(&name),
        )
        .await;
    }
    let bases = [a.url.clone(), b.url.clone()];
    let mut planning = tokio::task::JoinSet::new();
    for i in 0..PLANS {
        let (client, base) = (client.clone(), bases[i % 2].clone());
        planning.spawn(async move {
            let (s, plan) = call(
                &client,
                reqwest::Method::POST,
                &format!("{base}/meshes/default/_migration/plan"),
                Some(&json!({"policies": [format!("MeshTimeout/shadow-{i}")]})),
                None,
            )
            .await;
            assert_eq!(
                s,
                reqwest::StatusCode::OK,
                "plan {i} through {base}: {plan}"
            );
            plan["fingerprint"].as_str().unwrap().to_owned()
        });
    }
    let mut fingerprints = BTreeSet::new();
    while let Some(fp) = planning.join_next().await {
        fingerprints.insert(fp.unwrap());
    }
    assert_eq!(fingerprints.len(), PLANS, "one plan per promotion");

    // Every plan is known to both replicas. There is no read-only plan endpoint: a rollback of
    // a plan that is not applied is refused with 409 naming it, after finding it (an unknown
    // plan is 404), and writes nothing.
    for fp in &fingerprints {
        for base in &bases {
            let (s, b) = call(
                &client,
                reqwest::Method::POST,
                &format!("{base}/meshes/default/_migration/rollback"),
                Some(&json!({"plan": fp})),
                None,
            )
            .await;
            assert_eq!(
                s,
                reqwest::StatusCode::CONFLICT,
                "plan {fp} through {base}: {b}"
            );
            assert!(b["detail"].as_str().unwrap().contains("not applied"), "{b}");
        }
    }
    // And the store holds them all.
    let store = PostgresStore::connect(&url, 2).await.unwrap();
    let stored: Vec<Value> = serde_json::from_slice(
        &store
            .get_key("migration-plans/default")
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap();
    let kept: BTreeSet<String> = stored
        .iter()
        .map(|p| p["fingerprint"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(kept, fingerprints);
    drop((a, b));
}

/// User tokens revoked at once through both replicas are all in the stored list; a token
/// revoked through one replica is refused by the other within seconds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_token_revoked_through_one_replica_is_refused_by_the_other() {
    const TOKENS: usize = 8;
    let Some((_pg, url, a, b)) = replicas("revocations").await else {
        return;
    };
    let client = reqwest::Client::new();
    let issue = |base: String, name: String| {
        let client = client.clone();
        async move {
            let (s, token) = call(
                &client,
                reqwest::Method::POST,
                &format!("{base}/tokens/user"),
                Some(&json!({"name": name, "groups": ["team"]})),
                None,
            )
            .await;
            assert_eq!(s, reqwest::StatusCode::OK, "{token}");
            token.as_str().unwrap().to_owned()
        }
    };
    let meshes = |base: &str, token: &str| {
        let (client, url, token) = (client.clone(), format!("{base}/meshes"), token.to_owned());
        async move {
            call(&client, reqwest::Method::GET, &url, None, Some(&token))
                .await
                .0
        }
    };

    // Issued through A, accepted by both (they share the signing key).
    let token = issue(a.url.clone(), "alice".into()).await;
    assert_eq!(meshes(&a.url, &token).await, reqwest::StatusCode::OK);
    assert_eq!(meshes(&b.url, &token).await, reqwest::StatusCode::OK);

    // Revoked through A: refused by A at once, and by B within the propagation bound.
    let (s, revoked) = call(
        &client,
        reqwest::Method::POST,
        &format!("{}/tokens/user/revocations", a.url),
        Some(&json!({ "token": token })),
        None,
    )
    .await;
    assert_eq!(s, reqwest::StatusCode::OK, "{revoked}");
    assert_eq!(
        meshes(&a.url, &token).await,
        reqwest::StatusCode::UNAUTHORIZED
    );
    let start = tokio::time::Instant::now();
    loop {
        let s = meshes(&b.url, &token).await;
        if s == reqwest::StatusCode::UNAUTHORIZED {
            break;
        }
        assert_eq!(s, reqwest::StatusCode::OK);
        assert!(
            start.elapsed() < PROPAGATION,
            "replica B still accepts the token revoked through A after {:?}",
            start.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    eprintln!(
        "revocation reached the other replica in {:?}",
        start.elapsed()
    );

    // Revocations at once through both replicas: every one is kept.
    let mut tokens = Vec::new();
    for i in 0..TOKENS {
        tokens.push(issue(a.url.clone(), format!("user-{i}")).await);
    }
    let mut revoking = tokio::task::JoinSet::new();
    for (i, token) in tokens.iter().enumerate() {
        let (client, base, token) = (
            client.clone(),
            [&a.url, &b.url][i % 2].clone(),
            token.clone(),
        );
        revoking.spawn(async move {
            let (s, body) = call(
                &client,
                reqwest::Method::POST,
                &format!("{base}/tokens/user/revocations"),
                Some(&json!({ "token": token })),
                None,
            )
            .await;
            assert_eq!(s, reqwest::StatusCode::OK, "{body}");
            body["revoked"].as_str().unwrap().to_owned()
        });
    }
    let mut ids = BTreeSet::new();
    while let Some(id) = revoking.join_next().await {
        ids.insert(id.unwrap());
    }
    ids.insert(revoked["revoked"].as_str().unwrap().to_owned());
    let store = PostgresStore::connect(&url, 2).await.unwrap();
    let stored: BTreeSet<String> = String::from_utf8(
        store
            .get_key("user-token-revocations")
            .await
            .unwrap()
            .unwrap(),
    )
    .unwrap()
    .lines()
    .map(str::to_owned)
    .collect();
    assert_eq!(stored, ids, "every revocation is in the stored list");
    // And every revoked token is refused by both replicas (within the propagation bound).
    let start = tokio::time::Instant::now();
    for token in &tokens {
        for base in [&a.url, &b.url] {
            while meshes(base, token).await != reqwest::StatusCode::UNAUTHORIZED {
                assert!(
                    start.elapsed() < PROPAGATION,
                    "{base} accepts a revoked token"
                );
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    drop((a, b));
}

/// A zone token revoked through one replica's store is refused by the other replica's
/// [`ZoneTokens`] within seconds, waking its open KDS streams; revocations made at once through
/// both are all kept.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_token_revoked_through_one_replica_is_refused_by_the_other() {
    let Some((_pg, url)) = database("zone_tokens").await else {
        return;
    };
    let sa: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
    let sb: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 4).await.unwrap());
    let a = ZoneTokens::load(&*sa).await.unwrap();
    let b = ZoneTokens::load(&*sb).await.unwrap();
    let (stop_tx, stop) = tokio::sync::watch::channel(false);
    let following = tokio::spawn(b.clone().follow(sb.clone(), stop));
    let mut woken = b.revocations();

    let token = a.issue("zone-1", Duration::from_secs(3600)).unwrap();
    assert_eq!(b.verify(&token).unwrap(), "zone-1", "one signing key");
    let id = a.token_id(&token).unwrap();
    a.revoke(&*sa, &id).await.unwrap();
    assert!(a.verify(&token).is_err());
    tokio::time::timeout(REVOCATION_POLL * 3, woken.changed())
        .await
        .expect("B's streams are woken within its poll")
        .unwrap();
    assert!(b.is_revoked(&id));
    assert!(b.verify(&token).is_err());

    // At once through both: every ID is kept, and both know every one.
    let ids: Vec<String> = (0..10).map(|i| format!("{i:02x}")).collect();
    let mut revoking = tokio::task::JoinSet::new();
    for (i, id) in ids.iter().enumerate() {
        let (tokens, store, id) = if i % 2 == 0 {
            (a.clone(), sa.clone(), id.clone())
        } else {
            (b.clone(), sb.clone(), id.clone())
        };
        revoking.spawn(async move { tokens.revoke(&*store, &id).await.unwrap() });
    }
    while let Some(done) = revoking.join_next().await {
        done.unwrap();
    }
    a.refresh(&*sa).await.unwrap();
    b.refresh(&*sb).await.unwrap();
    for id in &ids {
        assert!(a.is_revoked(id) && b.is_revoked(id), "{id}");
    }
    stop_tx.send_replace(true);
    tokio::time::timeout(Duration::from_secs(5), following)
        .await
        .unwrap()
        .unwrap();
}
