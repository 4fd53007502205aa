//! Global replicas on one real PostgreSQL (issue 36): leader election, per-zone KDS leases and
//! cleanup marks across replicas ([`umbra_global_cp::replicas::postgres`]), with sessions ended
//! from the database side the way a dying replica's end.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::watch;
use umbra_global_cp::replicas::postgres::{PgCoordinator, Registration, LEADER_GRACE};
use umbra_global_cp::replicas::{Coordinator, LeaseRefused, ZoneHold};
use umbra_global_cp::store::postgres::PostgresStore;
use umbra_global_cp::testing::TempPostgres;

struct Replica {
    coordinator: Arc<PgCoordinator>,
    stop: watch::Sender<bool>,
}

async fn replica(url: &str, name: &str) -> Replica {
    let _ = tracing_subscriber::fmt().with_test_writer().try_init();
    let stop = watch::channel(false).0;
    let coordinator = PgCoordinator::start(
        url,
        Registration {
            name: name.into(),
            inter_cp: format!("{name}:5682"),
            api: format!("{name}:5681"),
            ..Default::default()
        },
        stop.subscribe(),
    )
    .await
    .expect("registered");
    Replica { coordinator, stop }
}

/// A database with Umbra's schema (the store migrates it).
async fn database(pg: &TempPostgres, db: &str) -> String {
    let url = pg.create_database(db).await.expect("database");
    PostgresStore::connect(&url, 2).await.expect("migrated");
    url
}

/// End `replica`'s database session from the server side, as PostgreSQL does when the
/// replica's process dies.
async fn cut(url: &str, replica: &PgCoordinator) {
    let id = replica.me().expect("registered").id;
    let pool = sqlx::PgPool::connect(url).await.expect("connect");
    let ended: bool =
        sqlx::query_scalar("SELECT pg_terminate_backend(pid) FROM cp_replicas WHERE id = $1")
            .bind(id)
            .fetch_one(&pool)
            .await
            .expect("terminate");
    assert!(ended, "replica {id}'s session was not ended");
}

async fn until(what: &str, limit: Duration, mut ok: impl FnMut() -> bool) -> Duration {
    let start = Instant::now();
    while !ok() {
        assert!(start.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    start.elapsed()
}

fn leads(r: &Replica) -> bool {
    *r.coordinator.leader().borrow()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_leader_at_a_time_and_it_moves_when_the_leader_goes() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = database(&pg, "leaders").await;
    let replicas = [
        replica(&url, "a").await,
        replica(&url, "b").await,
        replica(&url, "c").await,
    ];
    let leaders = || replicas.iter().filter(|r| leads(r)).count();
    until("a leader", LEADER_GRACE * 3, || leaders() == 1).await;

    // Twice: the leader's session ends from the database side (its process died), then the
    // next leader stops cleanly. Sampled all along: never two leaders.
    let mut gone: Vec<Option<i32>> = Vec::new();
    for round in 0..2 {
        let leader = replicas.iter().position(leads).expect("a leader");
        gone.push(replicas[leader].coordinator.me().map(|m| m.id));
        if round == 0 {
            cut(&url, &replicas[leader].coordinator).await;
        } else {
            replicas[leader].stop.send_replace(true);
        }
        let start = Instant::now();
        let mut moved = None;
        let mut dropped = false;
        while start.elapsed() < LEADER_GRACE * 4 {
            let n = leaders();
            assert!(n <= 1, "round {round}: {n} replicas lead at once");
            // The old leader steps down (its session is gone; stopped, it stays down); a
            // leader emerges: another replica, or after a cut, possibly the old one again
            // under its new registration.
            dropped |= !leads(&replicas[leader]);
            let new_leader = replicas.iter().enumerate().any(|(i, r)| {
                leads(r) && (i != leader || r.coordinator.me().map(|m| m.id) != gone[round])
            });
            if dropped && new_leader {
                moved = Some(start.elapsed());
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let moved = moved.unwrap_or_else(|| panic!("round {round}: no new leader"));
        eprintln!("round {round}: a new leader in {moved:?}");
        assert!(moved <= LEADER_GRACE + Duration::from_secs(4));
    }

    // Every replica that is still registered sees exactly one live leader.
    let listed = replicas[2].coordinator.replicas().await.expect("replicas");
    let alive_leaders: Vec<_> = listed.iter().filter(|r| r.alive && r.leader).collect();
    assert_eq!(alive_leaders.len(), 1, "{listed:?}");
    for r in &replicas {
        r.stop.send_replace(true);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_is_held_by_one_replica_and_freed_when_it_dies() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = database(&pg, "leases").await;
    let (a, b) = (replica(&url, "a").await, replica(&url, "b").await);

    a.coordinator
        .acquire_zone("z1", "10.0.0.1:1")
        .await
        .expect("a takes z1");
    // Again on the same replica (another stream of the connection): kept.
    a.coordinator
        .acquire_zone("z1", "10.0.0.1:1")
        .await
        .expect("a keeps z1");
    match b.coordinator.acquire_zone("z1", "10.0.0.1:2").await {
        Err(LeaseRefused::Held {
            replica,
            connection,
            ..
        }) => {
            assert_eq!(replica, "a");
            assert_eq!(connection, "10.0.0.1:1");
        }
        other => panic!("b took a held zone: {other:?}"),
    }
    let holds = b.coordinator.zones().await.expect("zones");
    assert!(
        matches!(&holds["z1"], ZoneHold::Held { replica_name, .. } if replica_name == "a"),
        "{holds:?}"
    );
    // A held zone is not cleaned up.
    assert!(!b.coordinator.begin_cleanup("z1").await.expect("cleanup"));

    // Released: b may take it, and then a may not.
    a.coordinator.release_zone("z1").await;
    assert!(matches!(
        b.coordinator.zones().await.expect("zones")["z1"],
        ZoneHold::Free { .. }
    ));
    b.coordinator
        .acquire_zone("z1", "10.0.0.1:3")
        .await
        .expect("b takes z1");
    assert!(a
        .coordinator
        .acquire_zone("z1", "10.0.0.1:1")
        .await
        .is_err());

    // b dies: its lease is free at once (no TTL to wait for), and b, registered again, has
    // a new session epoch (its streams end) and holds nothing.
    let epoch = *b.coordinator.session().borrow();
    cut(&url, &b.coordinator).await;
    let freed = Instant::now();
    loop {
        match a.coordinator.acquire_zone("z1", "10.0.0.1:1").await {
            Ok(()) => break,
            Err(e) => {
                assert!(freed.elapsed() < Duration::from_secs(2), "still held: {e}");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    eprintln!(
        "a dead replica's lease was taken over in {:?}",
        freed.elapsed()
    );
    until("b's session lost", Duration::from_secs(6), || {
        *b.coordinator.session().borrow() != epoch
    })
    .await;
    until("b registered again", Duration::from_secs(6), || {
        b.coordinator.me().is_some()
    })
    .await;
    assert!(b
        .coordinator
        .acquire_zone("z1", "10.0.0.1:3")
        .await
        .is_err());

    // Cleanup marks: a free zone can be marked by one replica only, and a marked zone cannot
    // be taken until the mark ends.
    a.coordinator.release_zone("z1").await;
    assert!(a.coordinator.begin_cleanup("z1").await.expect("mark"));
    assert!(!b.coordinator.begin_cleanup("z1").await.expect("mark"));
    assert!(matches!(
        b.coordinator.acquire_zone("z1", "x").await,
        Err(LeaseRefused::Cleaning(_))
    ));
    a.coordinator.end_cleanup("z1").await;
    b.coordinator
        .acquire_zone("z1", "x")
        .await
        .expect("after cleanup");
    // A zone never seen can be marked (and is then known, free).
    assert!(a.coordinator.begin_cleanup("z9").await.expect("mark"));
    a.coordinator.end_cleanup("z9").await;
    a.stop.send_replace(true);
    b.stop.send_replace(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn racing_replicas_never_both_hold_a_zone() {
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = database(&pg, "races").await;
    let (a, b) = (replica(&url, "a").await, replica(&url, "b").await);
    for round in 0..40 {
        let zone = format!("zone-{round}");
        // Alternate which one is asked first.
        let (first, second) = if round % 2 == 0 { (&a, &b) } else { (&b, &a) };
        let (x, y) = tokio::join!(
            first.coordinator.acquire_zone(&zone, "1"),
            second.coordinator.acquire_zone(&zone, "2")
        );
        assert!(
            x.is_ok() != y.is_ok(),
            "round {round}: exactly one replica must hold {zone}: {x:?} {y:?}"
        );
        // The loser takes it once the winner lets go.
        let (winner, loser) = if x.is_ok() {
            (first, second)
        } else {
            (second, first)
        };
        winner.coordinator.release_zone(&zone).await;
        loser
            .coordinator
            .acquire_zone(&zone, "3")
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
    }
    a.stop.send_replace(true);
    b.stop.send_replace(true);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_insights_reach_every_replica() {
    use umbra_global_cp::replicas::insights::InsightMirror;
    use umbra_global_cp::zones::ZoneRegistry;
    use umbra_kds::resource::Item;
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = database(&pg, "insights").await;
    let (here, there) = (
        Arc::new(ZoneRegistry::default()),
        Arc::new(ZoneRegistry::default()),
    );
    let writer = InsightMirror::connect(&url, here.clone())
        .await
        .expect("mirror");
    let reader = InsightMirror::connect(&url, there.clone())
        .await
        .expect("mirror");
    let stop = watch::channel(false).0;
    tokio::spawn(reader.follow("there".into(), watch::channel(true).1, stop.subscribe()));
    // The zone is connected "here" (the writer's replica).
    here.stream_opened("z1", "10.0.0.1:1").expect("open");
    let item = |n: u32| Item::from_doc(&serde_json::json!({"subscriptions": [{"id": n}]}));
    let puts: Vec<(String, Item)> = (0..50).map(|i| (format!("m/dp-{i}"), item(i))).collect();
    writer.write("z1", &puts, &[]).await.expect("write");
    until("mirrored", Duration::from_secs(5), || {
        there.insight_versions("z1").len() == 50
    })
    .await;
    assert_eq!(there.insight_versions("z1"), {
        let mut v = umbra_xds_protocol::version::ResourceVersions::new();
        for (n, i) in &puts {
            v.insert(n.clone(), i.version.clone());
        }
        v
    });
    assert_eq!(
        there.insight("z1", "m", "dp-7"),
        Some(serde_json::json!({"subscriptions": [{"id": 7}]}))
    );
    // An update and a removal arrive too.
    writer
        .write("z1", &[("m/dp-1".into(), item(100))], &["m/dp-2".into()])
        .await
        .expect("write");
    until(
        "update and removal mirrored",
        Duration::from_secs(5),
        || {
            there.insight("z1", "m", "dp-2").is_none()
                && there.insight("z1", "m", "dp-1")
                    == Some(serde_json::json!({"subscriptions": [{"id": 100}]}))
        },
    )
    .await;
    stop.send_replace(true);
}

/// Each replica records its own subscription of the zones it held; rows are rewritten only when
/// the subscription changed, and read back by any replica with when they were written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zone_subscriptions_are_recorded_per_replica() {
    use std::collections::HashMap;
    use umbra_global_cp::replicas::insights::InsightMirror;
    use umbra_global_cp::zones::ZoneRegistry;
    let Some(pg) = TempPostgres::start_or_skip() else {
        return;
    };
    let url = database(&pg, "subscriptions").await;
    let (a, b) = (
        Arc::new(ZoneRegistry::default()),
        Arc::new(ZoneRegistry::default()),
    );
    let on_a = InsightMirror::connect(&url, a.clone())
        .await
        .expect("mirror");
    let on_b = InsightMirror::connect(&url, b.clone())
        .await
        .expect("mirror");
    let (mut written_a, mut written_b) = (HashMap::new(), HashMap::new());
    // z1 and z2 on a; nothing on b yet.
    a.stream_opened("z1", "10.0.0.1:1").expect("open");
    a.stream_opened("z2", "10.0.0.2:1").expect("open");
    on_a.publish_subscriptions("a", &mut written_a)
        .await
        .expect("publish");
    on_b.publish_subscriptions("b", &mut written_b)
        .await
        .expect("publish");
    let all = on_b.subscriptions(None).await.expect("read");
    assert_eq!(all.keys().collect::<Vec<_>>(), ["z1", "z2"]);
    let z1 = &all["z1"];
    assert_eq!(z1.len(), 1);
    assert_eq!(z1[0].replica, "a");
    assert_eq!(z1[0].subscription["globalInstanceId"], "a");
    assert!(z1[0].subscription["disconnectTime"].is_null());
    assert!(
        z1[0].at.ends_with('Z') && z1[0].at.len() == 20,
        "{}",
        z1[0].at
    );
    // Unchanged: not written again (the row keeps its time).
    let before = on_b.subscriptions(Some("z1")).await.expect("read");
    tokio::time::sleep(Duration::from_millis(1100)).await;
    on_a.publish_subscriptions("a", &mut written_a)
        .await
        .expect("publish");
    assert_eq!(on_b.subscriptions(Some("z1")).await.expect("read"), before);
    // z1 moves to b: a records its end, b its start; both rows are read.
    a.stream_closed("z1", None);
    b.stream_opened("z1", "10.0.0.1:2").expect("open");
    on_a.publish_subscriptions("a", &mut written_a)
        .await
        .expect("publish");
    on_b.publish_subscriptions("b", &mut written_b)
        .await
        .expect("publish");
    let z1 = on_a.subscriptions(Some("z1")).await.expect("read");
    let z1 = &z1["z1"];
    let by = |r: &str| {
        &z1.iter()
            .find(|s| s.replica == r)
            .expect("a row")
            .subscription
    };
    assert_eq!(z1.len(), 2);
    assert!(by("a")["disconnectTime"].is_string(), "{z1:?}");
    assert!(by("b")["disconnectTime"].is_null(), "{z1:?}");
    assert!(on_a
        .subscriptions(Some("z9"))
        .await
        .expect("read")
        .is_empty());
}
