//! The zone's DNS VIPs (issue 37): a reconciliation pass allocates them, persists them in
//! Kuma's format, gives transparent proxies their VIP outbounds (and not the others), keeps
//! every address across a restart of the zone (its `--data-dir`) and as services come and go.

use umbra_core::resource::Resource;
use umbra_core::vips::VipView;
use umbra_zone_cp::reconciler::Reconciler;
use umbra_zone_cp::store::Store;

const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";

fn put(store: &Store, yaml: &str) {
    for r in Resource::all_from_bytes(yaml.as_bytes()).unwrap() {
        store.put(r, None).unwrap();
    }
}

const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";
const BACKEND: &str = "type: Dataplane\nmesh: default\nname: backend\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 8080\n    tags: {kuma.io/service: backend, kuma.io/protocol: http}\n";
const WEB: &str = "type: Dataplane\nmesh: default\nname: web\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 8080\n    tags: {kuma.io/service: web}\n  outbound:\n  - port: 9000\n    tags: {kuma.io/service: backend}\n  transparentProxying: {redirectPortInbound: 15006, redirectPortOutbound: 15001}\n";
const PLAIN: &str = "type: Dataplane\nmesh: default\nname: plain\nnetworking:\n  address: 10.0.0.3\n  inbound:\n  - port: 8080\n    tags: {kuma.io/service: plain}\n  outbound:\n  - port: 9000\n    tags: {kuma.io/service: backend}\n";
const HTTPBIN: &str = "type: ExternalService\nmesh: default\nname: httpbin\ntags: {kuma.io/service: httpbin}\nnetworking: {address: 'httpbin.org:443'}\n";

fn listeners(r: &Reconciler, name: &str) -> Vec<String> {
    let snap = r.get("default", name).expect("generated");
    let doc = snap.snapshot.to_document().unwrap();
    let mut names: Vec<String> = doc[LISTENER]
        .as_object()
        .map(|o| o.keys().cloned().collect())
        .unwrap_or_default();
    names.retain(|n| n.starts_with("outbound:"));
    names
}

fn addresses(store: &Store) -> Vec<(String, String)> {
    let view = VipView::from_json(&store.dns_vips("default").expect("persisted")).unwrap();
    view.entries
        .iter()
        .map(|(k, e)| (k.name.clone(), e.address.clone()))
        .collect()
}

#[test]
fn vips_are_allocated_persisted_and_kept() {
    let dir = std::env::temp_dir().join(format!("umbra-vips-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let store = Store::open(&dir).unwrap();
    put(
        &store,
        &format!("{MESH}---\n{BACKEND}---\n{WEB}---\n{PLAIN}---\n{HTTPBIN}"),
    );
    let r = Reconciler::new(store.clone());
    r.reconcile_once();
    let first = addresses(&store);
    assert_eq!(
        first,
        [
            ("backend", "240.0.0.0"),
            ("httpbin", "240.0.0.1"),
            ("plain", "240.0.0.2"),
            ("web", "240.0.0.3"),
            ("httpbin.org", "240.0.0.4"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // The transparent proxy gets every VIP outbound, then its own; the other only its own.
    let web = listeners(&r, "web");
    for l in [
        "outbound:240.0.0.0:80",
        "outbound:240.0.0.1:443",
        "outbound:240.0.0.1:80",
        "outbound:240.0.0.3:80",
        "outbound:240.0.0.4:443",
        "outbound:127.0.0.1:9000",
    ] {
        assert!(web.contains(&l.to_owned()), "{l} missing from {web:?}");
    }
    assert_eq!(listeners(&r, "plain"), ["outbound:127.0.0.1:9000"]);

    // A restart reads the same VIPs; a new service gets a new address, the others keep theirs.
    drop(r);
    drop(store);
    let store = Store::open(&dir).unwrap();
    let r = Reconciler::new(store.clone());
    r.reconcile_once();
    assert_eq!(addresses(&store), first);
    put(
        &store,
        "type: Dataplane\nmesh: default\nname: alpha\nnetworking:\n  address: 10.0.0.9\n  inbound:\n  - port: 8080\n    tags: {kuma.io/service: alpha}\n",
    );
    r.reconcile_once();
    let now = addresses(&store);
    assert_eq!(now[0], ("alpha".to_owned(), "240.0.0.5".to_owned()));
    for kept in &first {
        assert!(now.contains(kept), "{kept:?} moved: {now:?}");
    }
    assert!(listeners(&r, "web").contains(&"outbound:240.0.0.5:80".to_owned()));
    let _ = std::fs::remove_dir_all(&dir);
}
