//! Zone CP replicas' shared store (issue 36, item 4), in one process against a real
//! PostgreSQL: two [`Store::shared`] handles on one zone database, each with its mirror
//! following the database ([`replica::follow`]), stand for two replicas.
//!
//! - A write through one replica is in its own mirror when it returns and reaches the other's;
//!   a batch synced from the Global applies as one transaction, or write by write with each
//!   refusal reported (a Mesh with Dataplanes cannot be deleted), never half-silently.
//! - The keys every replica reads in memory (trust bundle, mesh CAs) reach the other replica
//!   and are announced ([`replica::key_changes`]).
//! - Two replicas that each issued a DPP an identity end up serving the first one stored; an
//!   Envoy-admin certificate one replica issued is the one the other serves.
//! - The leader-only work ([`replica::while_leader`]) runs on one replica at a time, and moves
//!   to the other when the leader's session ends, within the coordinator's bounds.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey};
use umbra_e2e::wait_until;
use umbra_global_cp::testing::TempPostgres;
use umbra_postgres::replicas::postgres::{PgCoordinator, Registration, LEADER_GRACE, REPLICA_TTL};
use umbra_postgres::replicas::Role;
use umbra_postgres::store::PostgresStore;
use umbra_zone_cp::replica;
use umbra_zone_cp::store::{ReplicaWrite, Store, StoreError};

fn res(y: &str) -> Resource {
    Resource::from_bytes(y.as_bytes()).unwrap()
}

const MESH: &str = "type: Mesh\nname: m\n";

fn timeout(name: &str, idle: &str) -> Resource {
    res(&format!("type: MeshTimeout\nmesh: m\nname: {name}\nspec: {{targetRef: {{kind: Mesh}}, to: [{{targetRef: {{kind: Mesh}}, default: {{idleTimeout: {idle}}}}}]}}\n"))
}

fn dataplane(name: &str) -> Resource {
    res(&format!("type: Dataplane\nmesh: m\nname: {name}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: web}}\n"))
}

/// A replica's store on the database at `url`, loaded and followed until `stop`.
async fn replica_store(url: &str, stop: &watch::Receiver<bool>) -> Store {
    let pg = PostgresStore::connect(url, 4).await.unwrap();
    let store = Store::shared(Arc::new(pg));
    replica::load(&store).await.unwrap();
    tokio::spawn(replica::follow(store.clone(), stop.clone()));
    store
}

async fn shows(store: &Store, key: &ResourceKey, present: bool) -> bool {
    let s = store.clone();
    let key = key.clone();
    wait_until(Duration::from_secs(5), move || {
        let (s, key) = (s.clone(), key.clone());
        async move { s.get(&key).is_some() == present }
    })
    .await
    .is_ok()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_replicas_share_resources_keys_and_identities() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("zone_store_replicas").await.unwrap();
    let (stop_tx, stop) = watch::channel(false);
    let a = replica_store(&url, &stop).await;
    let b = replica_store(&url, &stop).await;
    assert!(a.is_shared() && b.is_shared());

    // Read-your-writes on the writer, the change on the other.
    let (mesh, created) = a.put(res(MESH), Some(0)).unwrap();
    assert!(created);
    assert_eq!(a.get(&mesh.resource.key()).unwrap().version, mesh.version);
    assert!(shows(&b, &mesh.resource.key(), true).await);
    let (dp, _) = b.put(dataplane("web-1"), None).unwrap();
    assert!(shows(&a, &dp.resource.key(), true).await);
    assert_eq!(
        a.get(&dp.resource.key()).unwrap().version,
        dp.version,
        "the mirror keeps the database's versions (an API compare-and-swap reads them)"
    );

    // A batch synced from the Global: one transaction.
    let outcomes = a.apply_synced(vec![
        ReplicaWrite::Put(Box::new(timeout("t-1", "1s"))),
        ReplicaWrite::Put(Box::new(timeout("t-2", "2s"))),
    ]);
    assert_eq!(outcomes, vec![Ok(true), Ok(true)]);
    let t1 = timeout("t-1", "1s").key();
    assert!(shows(&b, &t1, true).await);
    // The same again changes nothing.
    assert_eq!(
        a.apply_synced(vec![ReplicaWrite::Put(Box::new(timeout("t-1", "1s")))]),
        vec![Ok(false)]
    );
    // A batch that cannot apply whole: every write gets its own outcome. The Mesh has a
    // Dataplane of this zone, so its deletion is refused; the rest applies.
    let outcomes = b.apply_synced(vec![
        ReplicaWrite::Delete(t1.clone()),
        ReplicaWrite::Delete(ResourceKey::mesh("m")),
        ReplicaWrite::Delete(timeout("gone", "1s").key()),
        ReplicaWrite::Put(Box::new(timeout("t-2", "9s"))),
    ]);
    assert_eq!(outcomes[0], Ok(true));
    assert!(
        matches!(outcomes[1], Err(StoreError::InUse { .. })),
        "{outcomes:?}"
    );
    assert_eq!(
        outcomes[2],
        Ok(false),
        "deleting what is absent changes nothing"
    );
    assert_eq!(outcomes[3], Ok(true));
    assert!(shows(&a, &t1, false).await);
    assert!(a.get(&ResourceKey::mesh("m")).is_some());

    // Keys: what the leader keeps reaches the other replica's memory, announced.
    let mut announced = replica::key_changes(&b).unwrap();
    let mut bundle = umbra_auth::TrustBundle::default();
    bundle.revoked.user.insert("jti-1".into());
    a.record_trust_bundle(&bundle).unwrap();
    let cas: umbra_pki::mesh_ca::MeshCas = [(
        umbra_pki::mesh_ca::ca_name("m", "ca-1"),
        umbra_pki::mesh_ca::generate_root("m", "ca-1", std::time::SystemTime::now()).unwrap(),
    )]
    .into_iter()
    .collect();
    a.record_mesh_cas(&cas).unwrap();
    let keys = wait_until(Duration::from_secs(5), || {
        let b = b.clone();
        let cas = cas.clone();
        async move {
            b.trust_bundle()
                .is_some_and(|t| t.revoked.user.contains("jti-1"))
                && b.mesh_cas() == cas
        }
    })
    .await;
    assert!(keys.is_ok(), "the keys did not reach the other replica");
    assert!(announced.has_changed().unwrap());
    announced.borrow_and_update();

    // Identities: both replicas issue the DPP one; the first stored is what both serve.
    let (ca_a, ca_b) = (
        umbra_pki::identity::Authority::new(),
        umbra_pki::identity::Authority::new(),
    );
    assert!(ca_a.set_cas(&cas).is_empty() && ca_b.set_cas(&cas).is_empty());
    let backend: umbra_core::mesh::MtlsBackend =
        serde_json::from_value(serde_json::json!({"name": "ca-1", "type": "builtin"})).unwrap();
    let spec = dp.resource.as_dataplane().unwrap();
    let now = std::time::SystemTime::now();
    let first = ca_a
        .identity("m", "web-1", &backend, &[], spec, now)
        .unwrap();
    let second = ca_b
        .identity("m", "web-1", &backend, &[], spec, now)
        .unwrap();
    assert_ne!(first.cert_pem, second.cert_pem);
    let known = |_: &str, name: &str| name == "web-1";
    assert_eq!(
        a.record_identities(ca_a.export().unwrap(), &known).unwrap(),
        None,
        "the first one stored needs nothing adopted"
    );
    let merged = b
        .record_identities(ca_b.export().unwrap(), &known)
        .unwrap()
        .expect("the second replica adopts the first one's identity");
    ca_b.restore(&merged);
    let served = ca_b
        .identity("m", "web-1", &backend, &[], spec, now)
        .unwrap();
    assert_eq!(served.cert_pem, first.cert_pem);

    // An Envoy-admin certificate: issued once, by whichever replica asks first.
    let issued = a
        .shared_certificate("envoy-admin-certs", "10.0.0.1", || {
            Some(("cert-a".into(), "key-a".into()))
        })
        .unwrap();
    assert_eq!(issued, ("cert-a".into(), "key-a".into()));
    let theirs = b
        .shared_certificate("envoy-admin-certs", "10.0.0.1", || {
            Some(("cert-b".into(), "key-b".into()))
        })
        .unwrap();
    assert_eq!(theirs, issued);
    stop_tx.send_replace(true);
}

/// A zone replica's coordinator on `url`, stopped when `stop` turns `true`.
async fn coordinator(url: &str, name: &str, stop: watch::Receiver<bool>) -> Arc<PgCoordinator> {
    PgCoordinator::start(
        url,
        Registration {
            name: name.into(),
            xds: format!("{name}:5678"),
            role: Role::Zone,
            ..Default::default()
        },
        stop,
    )
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leader_only_work_runs_on_one_replica_and_moves_when_the_leader_goes() {
    use umbra_postgres::replicas::Coordinator as _;
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = pg.create_database("zone_leader").await.unwrap();
    // The schema first (the coordinator needs the replicas table).
    drop(PostgresStore::connect(&url, 1).await.unwrap());
    let stops = [watch::channel(false), watch::channel(false)];
    let running = Arc::new(AtomicUsize::new(0));
    let overlaps = Arc::new(AtomicUsize::new(0));
    let starts: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let mut coordinators = Vec::new();
    for (i, name) in ["a", "b"].into_iter().enumerate() {
        let c = coordinator(&url, name, stops[i].1.clone()).await;
        let (running, overlaps, starts) = (running.clone(), overlaps.clone(), starts.clone());
        let task = move |mut stop: watch::Receiver<bool>| {
            let (running, overlaps, starts) = (running.clone(), overlaps.clone(), starts.clone());
            async move {
                starts[i].fetch_add(1, Ordering::SeqCst);
                if running.fetch_add(1, Ordering::SeqCst) > 0 {
                    overlaps.fetch_add(1, Ordering::SeqCst);
                }
                let _ = stop.wait_for(|s| *s).await;
                running.fetch_sub(1, Ordering::SeqCst);
            }
        };
        tokio::spawn(replica::while_leader(
            "test",
            c.leader(),
            stops[i].1.clone(),
            task,
        ));
        coordinators.push(c);
    }
    let one = wait_until(LEADER_GRACE * 3, || async {
        running.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(one.is_ok(), "nobody leads");
    let leader = usize::from(starts[1].load(Ordering::SeqCst) == 1);
    let other = 1 - leader;
    assert_eq!(starts[other].load(Ordering::SeqCst), 0);
    assert!(*coordinators[leader].leader().borrow());
    assert!(!*coordinators[other].leader().borrow());
    // The leader goes (its session ends): the other replica takes over within the bounds.
    let gone = Instant::now();
    stops[leader].0.send_replace(true);
    let moved = wait_until(REPLICA_TTL + LEADER_GRACE * 2, || async {
        starts[other].load(Ordering::SeqCst) == 1 && running.load(Ordering::SeqCst) == 1
    })
    .await;
    assert!(moved.is_ok(), "leadership did not move");
    println!("the leader's work moved after {:?}", gone.elapsed());
    assert_eq!(
        overlaps.load(Ordering::SeqCst),
        0,
        "two replicas ran it at once"
    );
    stops[other].0.send_replace(true);
}
