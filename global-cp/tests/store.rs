//! The store suite, run on both implementations: the memory store and the PostgreSQL store on
//! a real PostgreSQL server started by the harness ([`umbra_global_cp::testing`]).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use umbra_core::resource::{Resource, ResourceKey, ResourceType};
use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::postgres::{ConnectError, PostgresStore};
use umbra_global_cp::store::{
    DataplaneFilter, GatewayFilter, ListQuery, Op, Store, StoreError, Write,
};
use umbra_global_cp::testing::TempPostgres;

fn res(yaml: &str) -> Resource {
    Resource::from_bytes(yaml.as_bytes()).unwrap()
}

fn timeout(mesh: &str, name: &str, idle: &str, labels: &str) -> Resource {
    res(&format!(
        "type: MeshTimeout\nmesh: {mesh}\nname: {name}\n{labels}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: {idle}}}\n"
    ))
}

fn key(ty: ResourceType, mesh: &str, name: &str) -> ResourceKey {
    ResourceKey {
        ty,
        mesh: mesh.into(),
        name: name.into(),
    }
}

fn query(ty: ResourceType, mesh: &str, offset: u64, size: u64) -> ListQuery {
    ListQuery {
        ty,
        mesh: Some(mesh.into()),
        labels: BTreeMap::new(),
        name_contains: None,
        dataplane: Default::default(),
        offset,
        size,
    }
}

/// Every behaviour the trait promises, on a fresh store.
async fn suite(store: Arc<dyn Store>) {
    // Mesh-scoped resources need their Mesh.
    assert_eq!(
        store.put(timeout("m", "t", "1s", ""), None, None).await,
        Err(StoreError::NoMesh("m".into()))
    );
    let (mesh, created) = store
        .put(res("type: Mesh\nname: m\n"), Some(0), None)
        .await
        .unwrap();
    assert!(created);
    assert_eq!((mesh.version, mesh.revision), (1, 1));
    assert!(mesh.resource.meta.creation_time.is_some());

    // CAS: create-only, stale update, update at the right version.
    let (t, _) = store
        .put(timeout("m", "t", "1s", ""), Some(0), None)
        .await
        .unwrap();
    assert_eq!(t.version, 1);
    assert!(matches!(
        store.put(timeout("m", "t", "2s", ""), Some(0), None).await,
        Err(StoreError::Conflict {
            expected: 0,
            current: 1,
            ..
        })
    ));
    let (t2, created) = store
        .put(timeout("m", "t", "2s", ""), Some(1), None)
        .await
        .unwrap();
    assert!(!created);
    assert_eq!(t2.version, 2);
    assert_eq!(
        t2.resource.meta.creation_time, t.resource.meta.creation_time,
        "creation time survives updates"
    );
    let got = store
        .get(&key(ResourceType::MeshTimeout, "m", "t"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        got.resource.spec, t2.resource.spec,
        "round trip through the store"
    );
    assert_eq!(got.version, 2);

    // Identical content: nothing changes.
    let rev = store.revision().await.unwrap();
    let (same, _) = store
        .put(timeout("m", "t", "2s", ""), None, None)
        .await
        .unwrap();
    assert_eq!(same.version, 2);
    assert_eq!(store.revision().await.unwrap(), rev);

    // Delete with a stale version is a conflict; unknown is not found.
    let tk = key(ResourceType::MeshTimeout, "m", "t");
    assert!(matches!(
        store.delete(&tk, Some(1)).await,
        Err(StoreError::Conflict { .. })
    ));
    store.delete(&tk, Some(2)).await.unwrap();
    assert_eq!(
        store.delete(&tk, None).await,
        Err(StoreError::NotFound(tk.clone()))
    );
    assert_eq!(store.get(&tk).await.unwrap(), None);

    // Paging and label filters.
    for i in 0..25 {
        let labels = if i % 5 == 0 {
            "labels: {kuma.io/effect: shadow, team: a}\n"
        } else {
            "labels: {team: b}\n"
        };
        store
            .put(
                timeout("m", &format!("p{i:02}"), "1s", labels),
                None,
                Some("zone-1"),
            )
            .await
            .unwrap();
    }
    let page = store
        .list(&query(ResourceType::MeshTimeout, "m", 0, 10))
        .await
        .unwrap();
    assert_eq!(
        (page.items.len(), page.total, page.next_offset),
        (10, 25, Some(10))
    );
    assert_eq!(page.items[0].resource.meta.name, "p00");
    assert_eq!(page.items[0].zone.as_deref(), Some("zone-1"));
    let last = store
        .list(&query(ResourceType::MeshTimeout, "m", 20, 10))
        .await
        .unwrap();
    assert_eq!((last.items.len(), last.next_offset), (5, None));
    assert_eq!(last.items[4].resource.meta.name, "p24");
    let mut shadow = query(ResourceType::MeshTimeout, "m", 0, 100);
    shadow.labels = BTreeMap::from([("kuma.io/effect".into(), "shadow".into())]);
    let shadow = store.list(&shadow).await.unwrap();
    assert_eq!(shadow.total, 5);
    assert!(shadow.items.iter().all(|s| s.resource.meta.is_shadow()));

    // Name filter: a literal, case-sensitive substring (`_` and `%` are no wildcards),
    // combined with labels and paging, across meshes too.
    for name in ["x_y%z", "xay%z", "xAy_z"] {
        store
            .put(timeout("m", name, "1s", "labels: {team: c}\n"), None, None)
            .await
            .unwrap();
    }
    let named = |name: &str, offset: u64, size: u64| {
        let mut q = query(ResourceType::MeshTimeout, "m", offset, size);
        q.name_contains = Some(name.to_owned());
        q
    };
    let names = |page: &umbra_global_cp::store::Page| -> Vec<String> {
        page.items
            .iter()
            .map(|s| s.resource.meta.name.clone())
            .collect()
    };
    let page = store.list(&named("_y%", 0, 10)).await.unwrap();
    assert_eq!((names(&page), page.total), (vec!["x_y%z".to_owned()], 1));
    let page = store.list(&named("y%z", 0, 10)).await.unwrap();
    assert_eq!(names(&page), ["x_y%z", "xay%z"]);
    let page = store.list(&named("ay", 0, 10)).await.unwrap();
    assert_eq!(names(&page), ["xay%z"], "case-sensitive");
    let page = store.list(&named("p1", 0, 4)).await.unwrap();
    assert_eq!(
        (names(&page), page.total, page.next_offset),
        (
            vec!["p10".into(), "p11".into(), "p12".into(), "p13".into()],
            10,
            Some(4)
        )
    );
    let mut labelled = named("p1", 0, 100);
    labelled.labels = BTreeMap::from([("team".into(), "a".into())]);
    let page = store.list(&labelled).await.unwrap();
    assert_eq!(
        (names(&page), page.total),
        (vec!["p10".into(), "p15".into()], 2)
    );
    let mut anywhere = named("%z", 0, 100);
    anywhere.mesh = None;
    assert_eq!(store.list(&anywhere).await.unwrap().total, 2);
    assert_eq!(store.list(&named("nothing", 0, 10)).await.unwrap().total, 0);
    for name in ["x_y%z", "xay%z", "xAy_z"] {
        store
            .delete(&key(ResourceType::MeshTimeout, "m", name), None)
            .await
            .unwrap();
    }

    dataplane_filters(&*store).await;

    let meshes = store
        .list(&query(ResourceType::Mesh, "ignored", 0, 10))
        .await
        .unwrap();
    assert_eq!(meshes.total, 1);

    // The change log: consecutive revisions; resume after a gap sees exactly the rest.
    let all = store.changes_since(0, 10_000).await.unwrap();
    let revisions: Vec<u64> = all.iter().map(|c| c.revision).collect();
    assert_eq!(revisions, (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all.len() as u64, store.revision().await.unwrap());
    let seen = all.len() as u64;
    store
        .put(timeout("m", "late-1", "1s", ""), None, None)
        .await
        .unwrap();
    store
        .put(timeout("m", "late-2", "1s", ""), None, None)
        .await
        .unwrap();
    let rest = store.changes_since(seen, 10_000).await.unwrap();
    let names: Vec<&str> = rest.iter().map(|c| c.key.name.as_str()).collect();
    assert_eq!(names, ["late-1", "late-2"]);
    assert_eq!(rest[0].revision, seen + 1);
    assert_eq!(
        store.changes_since(seen, 1).await.unwrap().len(),
        1,
        "limit"
    );

    // A Mesh with a zone's Dataplanes attached cannot be deleted; nothing is.
    let dp = |name: &str| {
        res(&format!("type: Dataplane\nmesh: m\nname: {name}\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {{kuma.io/service: web}}\n"))
    };
    for name in ["web-1", "web-2"] {
        store.put(dp(name), None, Some("zone-1")).await.unwrap();
    }
    let before = store.revision().await.unwrap();
    let timeouts = store
        .list(&query(ResourceType::MeshTimeout, "m", 0, 10))
        .await
        .unwrap()
        .total;
    assert!(timeouts > 0);
    let refused = store
        .delete(&key(ResourceType::Mesh, "", "m"), None)
        .await
        .unwrap_err();
    assert!(
        matches!(&refused, StoreError::InUse { mesh, attached } if mesh == "m" && attached == "2 Dataplanes (web-1, web-2)"),
        "{refused:?}"
    );
    assert_eq!(
        store.revision().await.unwrap(),
        before,
        "nothing was deleted"
    );
    assert_eq!(
        store
            .list(&query(ResourceType::MeshTimeout, "m", 0, 10))
            .await
            .unwrap()
            .total,
        timeouts,
        "the Mesh's policies stay"
    );
    for name in ["web-1", "web-2"] {
        store
            .delete(&key(ResourceType::Dataplane, "m", name), None)
            .await
            .unwrap();
    }

    // Deleting a Mesh deletes what it owns, each deletion logged.
    let before = store.revision().await.unwrap();
    store
        .delete(&key(ResourceType::Mesh, "", "m"), None)
        .await
        .unwrap();
    let deleted = store.changes_since(before, 10_000).await.unwrap();
    assert_eq!(deleted.len(), 28, "25 paged + 2 late + the mesh");
    assert!(deleted.iter().all(|c| c.op == Op::Delete));
    assert_eq!(deleted.last().unwrap().key.ty, ResourceType::Mesh);
    assert_eq!(
        store
            .list(&query(ResourceType::MeshTimeout, "m", 0, 10))
            .await
            .unwrap()
            .total,
        0
    );

    // Concurrent compare-and-swap: no lost update, no gap in the log.
    store
        .put(res("type: Mesh\nname: c\n"), None, None)
        .await
        .unwrap();
    store
        .put(timeout("c", "counter", "1s", ""), None, None)
        .await
        .unwrap();
    let start = store.revision().await.unwrap();
    let mut tasks = tokio::task::JoinSet::new();
    for w in 0..6u32 {
        let store = store.clone();
        tasks.spawn(async move {
            let mut wins = 0u32;
            for i in 0..15u32 {
                // Read-modify-write of one shared resource, retried on conflict.
                loop {
                    let k = key(ResourceType::MeshTimeout, "c", "counter");
                    let cur = store.get(&k).await.unwrap().unwrap();
                    let next = timeout("c", "counter", &format!("{}s", cur.version + 1), "");
                    match store.put(next, Some(cur.version), None).await {
                        Ok(_) => {
                            wins += 1;
                            break;
                        }
                        Err(StoreError::Conflict { .. }) => continue,
                        Err(e) => panic!("{e}"),
                    }
                }
                // And writes of its own.
                store
                    .put(timeout("c", &format!("w{w}-{i}"), "1s", ""), None, None)
                    .await
                    .unwrap();
            }
            wins
        });
    }
    let mut wins = 0;
    while let Some(w) = tasks.join_next().await {
        wins += w.unwrap();
    }
    assert_eq!(wins, 90);
    let counter = store
        .get(&key(ResourceType::MeshTimeout, "c", "counter"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(counter.version, 91, "every successful CAS counted once");
    let log = store.changes_since(start, 10_000).await.unwrap();
    assert_eq!(log.len(), 180);
    assert!(log.iter().zip(start + 1..).all(|(c, r)| c.revision == r));

    // Wake-ups follow the head.
    let mut rx = store.subscribe();
    store
        .put(timeout("c", "wake", "1s", ""), None, None)
        .await
        .unwrap();
    let head = store.revision().await.unwrap();
    tokio::time::timeout(Duration::from_secs(5), rx.wait_for(|r| *r >= head))
        .await
        .expect("woken")
        .unwrap();

    // Signing keys: created once, then the stored one is returned.
    let k1 = store.signing_key("zone-token", vec![1; 32]).await.unwrap();
    assert_eq!(k1, vec![1; 32]);
    let k2 = store.signing_key("zone-token", vec![2; 32]).await.unwrap();
    assert_eq!(k2, k1, "the first key stays");
    assert_eq!(store.signing_key("other", vec![3]).await.unwrap(), vec![3]);
    // Keys that change (revocation lists): replaced, and read back as replaced.
    store.set_key("other", vec![4, 5]).await.unwrap();
    assert_eq!(
        store.signing_key("other", vec![6]).await.unwrap(),
        vec![4, 5]
    );
    store.set_key("new", vec![7]).await.unwrap();
    assert_eq!(store.signing_key("new", vec![8]).await.unwrap(), vec![7]);
    assert_eq!(store.get_key("new").await.unwrap(), Some(vec![7]));
    assert_eq!(store.get_key("absent").await.unwrap(), None);
    assert_eq!(
        store.get_key("absent").await.unwrap(),
        None,
        "reading creates nothing"
    );
    key_swaps(&*store).await;

    transactions(&*store).await;
}

/// [`Store::swap_key`]: writes only over the expected value (`None`: absent; empty is a value).
async fn key_swaps(store: &dyn Store) {
    assert!(!store
        .swap_key("cas", Some(Vec::new()), vec![1])
        .await
        .unwrap());
    assert_eq!(store.get_key("cas").await.unwrap(), None, "nothing written");
    assert!(store.swap_key("cas", None, vec![1]).await.unwrap());
    assert!(!store.swap_key("cas", None, vec![2]).await.unwrap());
    assert!(!store.swap_key("cas", Some(vec![9]), vec![2]).await.unwrap());
    assert_eq!(store.get_key("cas").await.unwrap(), Some(vec![1]));
    assert!(store
        .swap_key("cas", Some(vec![1]), Vec::new())
        .await
        .unwrap());
    assert!(!store.swap_key("cas", None, vec![3]).await.unwrap());
    assert!(store
        .swap_key("cas", Some(Vec::new()), vec![3])
        .await
        .unwrap());
    assert!(store.swap_key("cas", Some(vec![3]), vec![3]).await.unwrap());
    assert_eq!(store.get_key("cas").await.unwrap(), Some(vec![3]));
    // The shared read-modify-write on top of it.
    let done = umbra_global_cp::store::update_key(store, "cas", |v| {
        let mut v = v.unwrap_or_default().to_vec();
        v.push(4);
        Ok::<_, StoreError>(Some(v))
    })
    .await
    .unwrap();
    assert_eq!((done.value, done.written), (Some(vec![3, 4]), true));
}

/// [`Store::transact`]: all or nothing, consecutive revisions, preconditions checked first.
/// `tag=`/`gateway=` (Kuma's `MatchTagsFuzzy` and gateway kinds), counted before paging.
async fn dataplane_filters(store: &dyn Store) {
    let dps = [
        ("a-web", "networking: {address: 10.0.0.1, inbound: [{port: 80, tags: {kuma.io/service: web, version: v1}}, {port: 81, tags: {kuma.io/service: web-admin}}]}"),
        ("b-web", "networking: {address: 10.0.0.2, inbound: [{port: 80, tags: {kuma.io/service: web, version: v2}}]}"),
        ("c-api", "networking: {address: 10.0.0.3, inbound: [{port: 80, tags: {kuma.io/service: api}}]}"),
        ("d-edge", "networking: {address: 10.0.0.4, gateway: {type: BUILTIN, tags: {kuma.io/service: edge-web}}}"),
        ("e-kong", "networking: {address: 10.0.0.5, gateway: {tags: {kuma.io/service: kong}}}"),
    ];
    for (name, spec) in dps {
        store
            .put(
                res(&format!("type: Dataplane\nmesh: m\nname: {name}\n{spec}\n")),
                None,
                None,
            )
            .await
            .unwrap();
    }
    // A page of `ty` under the filter: names, total, next offset.
    let filtered = |ty: ResourceType,
                    tags: &[(&str, &str)],
                    gateway: Option<GatewayFilter>,
                    offset: u64,
                    size: u64| {
        let mut q = query(ty, "m", offset, size);
        q.dataplane = DataplaneFilter {
            tags: tags
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            gateway,
        };
        async move {
            let page = store.list(&q).await.unwrap();
            let names: Vec<String> = page
                .items
                .iter()
                .map(|s| s.resource.meta.name.clone())
                .collect();
            (names, page.total, page.next_offset)
        }
    };
    let list = |tags: &[(&str, &str)], gateway: Option<GatewayFilter>, offset: u64, size: u64| {
        filtered(ResourceType::Dataplane, tags, gateway, offset, size)
    };
    let svc = "kuma.io/service";
    // Fuzzy: the value is a substring; any inbound, or the gateway's tags.
    assert_eq!(
        list(&[(svc, "web")], None, 0, 10).await,
        (
            vec!["a-web".into(), "b-web".into(), "d-edge".into()],
            3,
            None
        )
    );
    // Paging counts only the matches.
    assert_eq!(
        list(&[(svc, "web")], None, 1, 1).await,
        (vec!["b-web".into()], 3, Some(2))
    );
    // Every tag must match on one inbound.
    assert_eq!(
        list(&[(svc, "web"), ("version", "v2")], None, 0, 10)
            .await
            .0,
        ["b-web"]
    );
    assert_eq!(
        list(&[(svc, "web-admin"), ("version", "v1")], None, 0, 10)
            .await
            .1,
        0
    );
    assert_eq!(
        list(&[("zone", "")], None, 0, 10).await.1,
        0,
        "key must exist"
    );
    assert_eq!(
        list(&[], Some(GatewayFilter::Any), 0, 10).await.0,
        ["d-edge", "e-kong"]
    );
    assert_eq!(list(&[], Some(GatewayFilter::None), 0, 10).await.1, 3);
    assert_eq!(
        list(&[], Some(GatewayFilter::Builtin), 0, 10).await.0,
        ["d-edge"]
    );
    assert_eq!(
        list(&[], Some(GatewayFilter::Delegated), 0, 10).await.0,
        ["e-kong"]
    );
    assert_eq!(
        list(&[(svc, "web")], Some(GatewayFilter::None), 0, 10)
            .await
            .1,
        2
    );
    // A Dataplane filter matches no other type.
    let mut other = query(ResourceType::MeshTimeout, "m", 0, 10);
    other.dataplane.gateway = Some(GatewayFilter::None);
    assert_eq!(store.list(&other).await.unwrap().total, 0);
    // ExternalServices filter by their tags (fuzzy), never by a gateway kind.
    for (name, tags) in [
        ("httpbin", "{kuma.io/service: httpbin, env: prod}"),
        ("payments", "{kuma.io/service: payments-ext}"),
    ] {
        store
            .put(
                res(&format!("type: ExternalService\nmesh: m\nname: {name}\ntags: {tags}\nnetworking: {{address: 'x.example:443'}}\n")),
                None,
                None,
            )
            .await
            .unwrap();
    }
    let external = |tags: &[(&str, &str)], gateway: Option<GatewayFilter>| {
        let page = filtered(ResourceType::ExternalService, tags, gateway, 0, 10);
        async move { page.await.0 }
    };
    assert_eq!(external(&[(svc, "pay")], None).await, ["payments"]);
    assert_eq!(
        external(&[(svc, "http"), ("env", "prod")], None).await,
        ["httpbin"]
    );
    assert!(external(&[("env", "dev")], None).await.is_empty());
    assert!(external(&[], Some(GatewayFilter::None)).await.is_empty());
    for name in ["httpbin", "payments"] {
        store
            .delete(&key(ResourceType::ExternalService, "m", name), None)
            .await
            .unwrap();
    }
    for (name, _) in dps {
        store
            .delete(&key(ResourceType::Dataplane, "m", name), None)
            .await
            .unwrap();
    }
}

async fn transactions(store: &dyn Store) {
    store
        .put(res("type: Mesh\nname: tx\n"), None, None)
        .await
        .unwrap();
    let (old, _) = store
        .put(timeout("tx", "old", "1s", ""), None, None)
        .await
        .unwrap();
    let (shadow, _) = store
        .put(
            timeout("tx", "new", "2s", "labels: {kuma.io/effect: shadow}\n"),
            None,
            None,
        )
        .await
        .unwrap();
    let head = store.revision().await.unwrap();
    let promote = |expected| Write::Put {
        resource: Box::new(timeout("tx", "new", "2s", "")),
        expected: Some(expected),
    };
    let retire = |expected| Write::Delete {
        key: old.resource.key(),
        expected: Some(expected),
    };
    // A stale precondition on the last write: nothing of the batch is written.
    let stale = store
        .transact(vec![promote(shadow.version), retire(old.version + 1)])
        .await;
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    assert_eq!(store.revision().await.unwrap(), head, "nothing written");
    assert!(store
        .get(&shadow.resource.key())
        .await
        .unwrap()
        .unwrap()
        .resource
        .meta
        .is_shadow());
    // A delete of a missing resource, a Mesh deletion, a missing mesh: refused whole.
    let missing = Write::Delete {
        key: key(ResourceType::MeshTimeout, "tx", "absent"),
        expected: None,
    };
    assert!(matches!(
        store.transact(vec![promote(shadow.version), missing]).await,
        Err(StoreError::NotFound(_))
    ));
    let mesh_delete = Write::Delete {
        key: ResourceKey::mesh("tx"),
        expected: None,
    };
    assert!(matches!(
        store.transact(vec![mesh_delete]).await,
        Err(StoreError::InUse { .. })
    ));
    let no_mesh = Write::Put {
        resource: Box::new(timeout("nowhere", "t", "1s", "")),
        expected: None,
    };
    assert!(matches!(
        store.transact(vec![promote(shadow.version), no_mesh]).await,
        Err(StoreError::NoMesh(_))
    ));
    assert_eq!(store.revision().await.unwrap(), head, "nothing written");
    // The mesh must be unchanged since a revision: a policy created after it (or an edit)
    // refuses the batch; a Dataplane does not count.
    let unchanged_since = |since| Write::MeshUnchanged {
        mesh: "tx".into(),
        since,
    };
    store
        .put(timeout("tx", "created", "9s", ""), None, None)
        .await
        .unwrap();
    let refused = store
        .transact(vec![promote(shadow.version), unchanged_since(head)])
        .await;
    assert!(
        matches!(&refused, Err(StoreError::Changed { key, revision, .. }) if key.name == "created" && *revision == head + 1),
        "{refused:?}"
    );
    assert_eq!(store.revision().await.unwrap(), head + 1, "nothing written");
    store
        .delete(&key(ResourceType::MeshTimeout, "tx", "created"), None)
        .await
        .unwrap();
    let head = store.revision().await.unwrap();
    store
        .put(
            res("type: Dataplane\nmesh: tx\nname: dp\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web}\n"),
            None,
            Some("zone-1"),
        )
        .await
        .unwrap();
    // Both at once, the mesh pinned: consecutive revisions, one commit.
    let done = store
        .transact(vec![
            promote(shadow.version),
            retire(old.version),
            unchanged_since(head),
        ])
        .await
        .unwrap();
    let out = done.stored;
    assert_eq!(out.len(), 3);
    let promoted = out[0].clone().unwrap();
    assert_eq!(promoted.version, shadow.version + 1);
    assert!(!promoted.resource.meta.is_shadow());
    assert!(out[1].is_none());
    let head = head + 1; // the Dataplane
    assert_eq!(done.revision, head + 2);
    assert_eq!(store.revision().await.unwrap(), head + 2);
    let log = store.changes_since(head, 10).await.unwrap();
    assert_eq!(
        log.iter()
            .map(|c| (c.revision, c.key.name.as_str(), c.op))
            .collect::<Vec<_>>(),
        [(head + 1, "new", Op::Put), (head + 2, "old", Op::Delete)]
    );
    assert!(store.get(&old.resource.key()).await.unwrap().is_none());
    // Rolling back: re-create what was deleted (expected 0) and re-label, in one step.
    let back = store
        .transact(vec![
            Write::Put {
                resource: Box::new(shadow.resource.clone()),
                expected: Some(promoted.version),
            },
            Write::Put {
                resource: Box::new(old.resource.clone()),
                expected: Some(0),
            },
        ])
        .await
        .unwrap()
        .stored;
    assert_eq!(back[1].as_ref().unwrap().version, 1);
    assert!(back[0].as_ref().unwrap().resource.meta.is_shadow());
    // A batch that changes nothing writes nothing; a put of the same content counts as the
    // same version for a later precondition on it.
    let head = store.revision().await.unwrap();
    let same = store
        .transact(vec![
            Write::Put {
                resource: Box::new(old.resource.clone()),
                expected: None,
            },
            Write::Put {
                resource: Box::new(old.resource.clone()),
                expected: Some(1),
            },
        ])
        .await
        .unwrap();
    assert_eq!(same.revision, head);
    assert_eq!(store.revision().await.unwrap(), head);
}

#[tokio::test]
async fn memory_store_suite() {
    suite(Arc::new(MemoryStore::new())).await;
}

/// One PostgreSQL server for the PostgreSQL tests of this binary is too much sharing; each test
/// starts its own (about a second).
fn postgres() -> Option<TempPostgres> {
    TempPostgres::start_or_skip()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_store_suite() {
    let Some(pg) = postgres() else { return };
    let url = pg.create_database("suite").await.unwrap();
    let store = PostgresStore::connect(&url, 8).await.unwrap();
    suite(Arc::new(store.clone())).await;
    // Data survives a new connection (and migrations are idempotent).
    let again = PostgresStore::connect(&url, 2).await.unwrap();
    assert!(again
        .get(&key(ResourceType::MeshTimeout, "c", "counter"))
        .await
        .unwrap()
        .is_some());
    assert_eq!(
        again.signing_key("zone-token", vec![9]).await.unwrap(),
        vec![1; 32],
        "zone tokens outlive a restart"
    );
}

/// Two replicas of the Global on one database (issue 36): a key updated through both at once
/// loses nothing. Each replica runs `WORKERS` concurrent writers appending `PER_WORKER` IDs to
/// one list with [`update_key`]; every ID is there once. And of two swaps from the same value,
/// exactly one writes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_lose_no_key_update() {
    const WORKERS: usize = 5;
    const PER_WORKER: usize = 10;
    let Some(pg) = postgres() else { return };
    let url = pg.create_database("replicas").await.unwrap();
    let a: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 8).await.unwrap());
    let b: Arc<dyn Store> = Arc::new(PostgresStore::connect(&url, 8).await.unwrap());

    // Both create the key at once: one wins, the other sees the winner's value.
    let (wa, wb) = tokio::join!(
        a.swap_key("created", None, b"a".to_vec()),
        b.swap_key("created", None, b"b".to_vec())
    );
    let (wa, wb) = (wa.unwrap(), wb.unwrap());
    assert!(wa ^ wb, "exactly one creates it: {wa} {wb}");
    let winner = if wa { b"a".to_vec() } else { b"b".to_vec() };
    assert_eq!(b.get_key("created").await.unwrap(), Some(winner.clone()));
    // Both replace it at once, from the same value: one wins.
    let (wa, wb) = tokio::join!(
        a.swap_key("created", Some(winner.clone()), b"a2".to_vec()),
        b.swap_key("created", Some(winner.clone()), b"b2".to_vec())
    );
    assert!(wa.unwrap() ^ wb.unwrap());

    let mut writers = tokio::task::JoinSet::new();
    for (replica, store) in [("a", &a), ("b", &b)] {
        for worker in 0..WORKERS {
            let store = store.clone();
            writers.spawn(async move {
                for n in 0..PER_WORKER {
                    let id = format!("{replica}-{worker}-{n}");
                    umbra_global_cp::store::update_key(&*store, "list", |stored| {
                        let mut text =
                            String::from_utf8_lossy(stored.unwrap_or_default()).into_owned();
                        text.push_str(&id);
                        text.push('\n');
                        Ok::<_, StoreError>(Some(text.into_bytes()))
                    })
                    .await
                    .unwrap();
                }
            });
        }
    }
    while let Some(done) = writers.join_next().await {
        done.unwrap();
    }
    let list = a.get_key("list").await.unwrap().unwrap();
    let ids: Vec<String> = String::from_utf8(list)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    let unique: std::collections::BTreeSet<&String> = ids.iter().collect();
    assert_eq!(ids.len(), 2 * WORKERS * PER_WORKER, "{ids:?}");
    assert_eq!(unique.len(), ids.len(), "no ID twice: {ids:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_refuses_a_schema_newer_than_the_code() {
    let Some(pg) = postgres() else { return };
    let url = pg.create_database("newer").await.unwrap();
    let store = PostgresStore::connect(&url, 2).await.unwrap();
    sqlx::query(
        "INSERT INTO _sqlx_migrations (version, description, success, checksum, execution_time) VALUES (99991231000000, 'from the future', true, '\\x00', 0)",
    )
    .execute(store.pool())
    .await
    .unwrap();
    let err = PostgresStore::connect(&url, 2).await.unwrap_err();
    assert!(
        matches!(
            err,
            ConnectError::TooNew {
                found: 99991231000000,
                ..
            }
        ),
        "{err}"
    );
    assert!(
        err.to_string().contains("newer than this global-cp"),
        "{err}"
    );
}

/// Writers keep writing while PostgreSQL restarts: writes fail with `Unavailable` during the
/// outage, the same store recovers without a restart, and every acknowledged write is there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_restart_under_load_loses_no_acknowledged_write() {
    let Some(pg) = postgres() else { return };
    let url = pg.create_database("restart").await.unwrap();
    let store = Arc::new(PostgresStore::connect(&url, 8).await.unwrap());
    store
        .put(res("type: Mesh\nname: m\n"), None, None)
        .await
        .unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..4u32 {
        let (store, stop) = (store.clone(), stop.clone());
        writers.spawn(async move {
            let mut acked: Vec<(String, u64)> = Vec::new();
            let mut unavailable = 0u32;
            let mut longest = Duration::ZERO;
            let mut i = 0u32;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let name = format!("w{w}-{i}");
                let began = std::time::Instant::now();
                let put = store.put(timeout("m", &name, "1s", ""), None, None).await;
                longest = longest.max(began.elapsed());
                match put {
                    Ok((s, _)) => {
                        acked.push((name, s.version));
                        i += 1;
                    }
                    Err(StoreError::Unavailable(_)) => {
                        unavailable += 1;
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
            (acked, unavailable, longest)
        });
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    pg.stop().unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    pg.restart().unwrap();
    // Give the writers time to get through again.
    let recovered = async {
        loop {
            if store.revision().await.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(30), recovered)
        .await
        .expect("the store recovers without a restart");
    tokio::time::sleep(Duration::from_millis(300)).await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (mut acked, mut unavailable, mut longest) = (Vec::new(), 0, Duration::ZERO);
    while let Some(r) = writers.join_next().await {
        let (a, u, l) = r.unwrap();
        acked.extend(a);
        unavailable += u;
        longest = longest.max(l);
    }
    // Writers saw the outage: refused, or (puts are committed in groups, one transaction at
    // a time) held until the server was back and then committed.
    assert!(
        unavailable > 0 || longest >= Duration::from_millis(400),
        "the outage was seen by writers ({unavailable} refused, longest put {longest:?})"
    );
    assert!(acked.len() > 10, "writes went through before and after");
    for (name, version) in &acked {
        let got = store
            .get(&key(ResourceType::MeshTimeout, "m", name))
            .await
            .unwrap();
        assert_eq!(
            got.map(|s| s.version),
            Some(*version),
            "{name} was acknowledged"
        );
    }
    // A write whose commit reached the server just as it stopped may be in without having
    // been acknowledged; never the other way round.
    let log = store.changes_since(0, 1_000_000).await.unwrap();
    assert!(
        log.len() > acked.len(),
        "every acknowledged write is in the change log"
    );
}

/// Issue 21's group commit: 16 writers put at once (so puts share transactions), each its own
/// resources, one resource they all update, puts into a missing Mesh and stale `If-Match`
/// puts mixed in. Every acknowledged put is in the change log under its own revision, with
/// its key and version; the log is consecutive from where it started; the shared resource's
/// versions have no gap; the refused puts changed nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_group_commit_keeps_the_change_log_consecutive_and_lossless() {
    let Some(pg) = postgres() else { return };
    let url = pg.create_database("group_commit").await.unwrap();
    let store = Arc::new(PostgresStore::connect(&url, 8).await.unwrap());
    store
        .put(res("type: Mesh\nname: m\n"), None, None)
        .await
        .unwrap();
    let base = store.revision().await.unwrap();
    let mut writers = tokio::task::JoinSet::new();
    for w in 0..16u32 {
        let store = store.clone();
        writers.spawn(async move {
            let mut acked: Vec<(String, u64, u64)> = Vec::new();
            for i in 0..40u32 {
                let name = if i % 4 == 0 {
                    "shared".to_owned()
                } else {
                    format!("w{w}-{i}")
                };
                let idle = format!("{}s", w * 100 + i + 1);
                let (s, _) = store
                    .put(timeout("m", &name, &idle, ""), None, None)
                    .await
                    .unwrap();
                acked.push((name.clone(), s.version, s.revision));
                if i % 10 == 1 {
                    assert_eq!(
                        store.put(timeout("nope", "x", "1s", ""), None, None).await,
                        Err(StoreError::NoMesh("nope".into()))
                    );
                    assert!(matches!(
                        store
                            .put(timeout("m", &name, "999s", ""), Some(0), None)
                            .await,
                        Err(StoreError::Conflict { .. })
                    ));
                }
            }
            acked
        });
    }
    let mut acked = Vec::new();
    while let Some(r) = writers.join_next().await {
        acked.extend(r.unwrap());
    }
    let log = store.changes_since(base, 1_000_000).await.unwrap();
    assert_eq!(log.len(), acked.len(), "one change per acknowledged put");
    let revisions: Vec<u64> = log.iter().map(|c| c.revision).collect();
    let expected: Vec<u64> = (base + 1..=base + acked.len() as u64).collect();
    assert_eq!(revisions, expected, "consecutive, in commit order");
    let by_revision: BTreeMap<u64, (String, u64)> = log
        .iter()
        .map(|c| (c.revision, (c.key.name.clone(), c.version)))
        .collect();
    for (name, version, revision) in &acked {
        assert_eq!(
            by_revision.get(revision),
            Some(&(name.clone(), *version)),
            "{name} v{version} acknowledged at revision {revision}"
        );
    }
    let mut shared: Vec<u64> = acked
        .iter()
        .filter(|(n, _, _)| n == "shared")
        .map(|(_, v, _)| *v)
        .collect();
    shared.sort_unstable();
    assert_eq!(shared, (1..=160).collect::<Vec<u64>>());
    let stored = store
        .get(&key(ResourceType::MeshTimeout, "m", "shared"))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(stored.version, 160);
    assert!(store
        .get(&key(ResourceType::MeshTimeout, "nope", "x"))
        .await
        .unwrap()
        .is_none());
}
