//! Unit tests of [`super`]: the view, allocation, Kuma's persisted format, VIP outbounds and
//! VirtualOutbound rendering.

use super::*;
use serde_json::json;

fn dp(v: serde_json::Value) -> DataplaneSpec {
    serde_json::from_value(v).unwrap()
}

fn es(address: &str, service: &str, extra: serde_json::Value) -> ExternalService {
    let mut networking = json!({"address": address});
    if let Some(o) = extra.as_object() {
        for (k, v) in o {
            networking[k] = v.clone();
        }
    }
    serde_json::from_value(json!({"networking": networking, "tags": {"kuma.io/service": service}}))
        .unwrap()
}

fn resources(yaml: &str) -> Vec<Resource> {
    Resource::all_from_bytes(yaml.as_bytes()).unwrap()
}

fn view(dps: &[&DataplaneSpec], ess: &[(&str, &ExternalService)], vos: &[&Resource]) -> VipView {
    let (v, conflicts) = desired_view(ViewInputs {
        dataplanes: dps,
        remote_services: &[],
        external_services: ess,
        virtual_outbounds: vos,
    });
    assert!(conflicts.is_empty(), "{conflicts:?}");
    v
}

fn addresses(v: &VipView) -> Vec<(String, String)> {
    v.entries
        .iter()
        .map(|(k, e)| (k.key(), e.address.clone()))
        .collect()
}

#[test]
fn services_external_hosts_and_ips_get_vips_in_kumas_order() {
    let backend = dp(json!({"networking": {"address": "10.0.0.1", "inbound": [
        {"port": 80, "tags": {"kuma.io/service": "backend"}},
        {"port": 81, "tags": {"kuma.io/service": "ignored"}, "state": "Ignored"}]}}));
    let frontend = dp(json!({"networking": {"address": "10.0.0.2", "inbound": [
        {"port": 80, "tags": {"kuma.io/service": "frontend"}}]}}));
    let httpbin = es("httpbin.org:443", "httpbin", json!({}));
    let by_ip = es("10.0.0.5:8080", "legacy-db", json!({}));
    let hidden = es(
        "hidden.example.com:443",
        "hidden",
        json!({"disableHostDNSEntry": true}),
    );
    let new = view(
        &[&frontend, &backend],
        &[
            ("legacy-db", &by_ip),
            ("httpbin", &httpbin),
            ("hidden", &hidden),
        ],
        &[],
    );
    let (v, problems) = allocate(&VipView::default(), new.clone(), DEFAULT_CIDR).unwrap();
    assert!(problems.is_empty());
    assert_eq!(
        addresses(&v),
        [
            ("0:backend", "240.0.0.0"),
            ("0:frontend", "240.0.0.1"),
            ("0:hidden", "240.0.0.2"),
            ("0:httpbin", "240.0.0.3"),
            ("0:legacy-db", "240.0.0.4"),
            ("1:10.0.0.5", "10.0.0.5"),
            ("1:httpbin.org", "240.0.0.5"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    // Persisted and read back: the same view, in Kuma's format.
    let text = String::from_utf8(v.to_json()).unwrap();
    assert!(
        text.starts_with(r#"{"0:backend":{"address":"240.0.0.0","outbounds":[{"Port":0,"TagSet":{"kuma.io/service":"backend"},"Origin":"service"}]}"#),
        "{text}"
    );
    assert_eq!(VipView::from_json(text.as_bytes()).unwrap(), v);
    assert!(VipView::from_json(br#"{"7:x":{}}"#).is_err());

    // Stable: the same inputs, the same addresses; a removed service's address is not reused
    // in the pass that removes it.
    let (again, _) = allocate(&v, new, DEFAULT_CIDR).unwrap();
    assert_eq!(again, v);
    let alpha = dp(json!({"networking": {"address": "10.0.0.3", "inbound": [
        {"port": 80, "tags": {"kuma.io/service": "alpha"}}]}}));
    let next = view(&[&frontend, &alpha], &[("httpbin", &httpbin)], &[]);
    let (next, _) = allocate(&v, next, DEFAULT_CIDR).unwrap();
    assert_eq!(
        next.entries[&HostnameEntry {
            ty: EntryType::Service,
            name: "alpha".into()
        }]
            .address,
        "240.0.0.6"
    );
    assert_eq!(
        next.entries[&HostnameEntry {
            ty: EntryType::Service,
            name: "frontend".into()
        }]
            .address,
        "240.0.0.1"
    );
}

#[test]
fn a_small_cidr_runs_out_and_outside_addresses_move() {
    let a = dp(json!({"networking": {"address": "10.0.0.1", "inbound": [
        {"port": 80, "tags": {"kuma.io/service": "a"}},
        {"port": 81, "tags": {"kuma.io/service": "b"}},
        {"port": 82, "tags": {"kuma.io/service": "c"}}]}}));
    let (v, problems) =
        allocate(&VipView::default(), view(&[&a], &[], &[]), "10.9.0.0/31").unwrap();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(addresses(&v)[2].1, "", "c gets none");
    let (moved, problems) = allocate(&v, view(&[&a], &[], &[]), "10.8.0.0/30").unwrap();
    assert_eq!(problems.len(), 2, "{problems:?}");
    assert!(moved
        .entries
        .values()
        .all(|e| e.address.starts_with("10.8.0.")));
    assert!(allocate(&v, VipView::default(), "nope").is_err());
}

#[test]
fn outbounds_and_names_of_a_view() {
    let backend = dp(json!({"networking": {"address": "10.0.0.1", "inbound": [
        {"port": 80, "tags": {"kuma.io/service": "backend_ns_svc_8080"}}]}}));
    let httpbin = es("httpbin.org:443", "httpbin", json!({}));
    let by_ip = es("10.0.0.5:8080", "legacy-db", json!({}));
    let (v, _) = allocate(
        &VipView::default(),
        view(
            &[&backend],
            &[("httpbin", &httpbin), ("legacy-db", &by_ip)],
            &[],
        ),
        DEFAULT_CIDR,
    )
    .unwrap();
    let (domains, outbounds) = vip_outbounds(&v, DEFAULT_DOMAIN, DEFAULT_SERVICE_VIP_PORT);
    let names: Vec<(&str, &str)> = domains
        .iter()
        .map(|d| (d.name.as_str(), d.address.as_str()))
        .collect();
    assert_eq!(
        names,
        [
            ("backend_ns_svc_8080.mesh", "240.0.0.0"),
            ("backend.ns.svc.8080.mesh", "240.0.0.0"),
            ("httpbin.mesh", "240.0.0.1"),
            ("legacy-db.mesh", "240.0.0.2"),
            ("httpbin.org", "240.0.0.3"),
        ]
    );
    let obs: Vec<String> = outbounds
        .iter()
        .map(|o| format!("{}:{} {}", o.address, o.port, o.service()))
        .collect();
    assert_eq!(
        obs,
        [
            "240.0.0.0:80 backend_ns_svc_8080",
            "240.0.0.1:443 httpbin",
            "240.0.0.1:80 httpbin",
            "240.0.0.2:8080 legacy-db",
            "240.0.0.2:80 legacy-db",
            "10.0.0.5:8080 legacy-db",
            "240.0.0.3:443 httpbin",
            "240.0.0.3:80 httpbin",
        ]
    );

    // A transparent proxy gets them (narrowed by reachableServices), then its own outbounds
    // but those on a VIP address.
    let web = dp(json!({"networking": {"address": "10.0.0.9",
        "inbound": [{"port": 8080, "tags": {"kuma.io/service": "web"}}],
        "outbound": [{"port": 80, "address": "240.0.0.0", "tags": {"kuma.io/service": "x"}},
                     {"port": 9000, "tags": {"kuma.io/service": "y"}}],
        "transparentProxying": {"redirectPortInbound": 15006, "redirectPortOutbound": 15001,
                                "reachableServices": ["httpbin"]}}}));
    let resolved = with_vip_outbounds(&web, &outbounds).unwrap();
    let got: Vec<String> = resolved
        .networking
        .outbound
        .iter()
        .map(|o| format!("{}:{} {}", o.address, o.port, o.service()))
        .collect();
    assert_eq!(
        got,
        [
            "240.0.0.1:443 httpbin",
            "240.0.0.1:80 httpbin",
            "240.0.0.3:443 httpbin",
            "240.0.0.3:80 httpbin",
            ":9000 y"
        ]
    );
    let plain = dp(json!({"networking": {"address": "10.0.0.9",
        "inbound": [{"port": 8080, "tags": {"kuma.io/service": "web"}}]}}));
    assert!(with_vip_outbounds(&plain, &outbounds).is_none());
}

#[test]
fn virtual_outbounds_render_hosts_for_matching_destinations() {
    let vos = resources(
        "type: VirtualOutbound\nmesh: default\nname: instances\nselectors: [{match: {kuma.io/service: '*', instance: '*'}}]\nconf:\n  host: '{{.svc}}.{{ .instance }}'\n  port: '8080'\n  parameters:\n  - {name: svc, tagKey: kuma.io/service}\n  - {name: instance}\n",
    );
    let refs: Vec<&Resource> = vos.iter().collect();
    let with_instance = dp(json!({"networking": {"address": "10.0.0.1", "inbound": [
        {"port": 80, "tags": {"kuma.io/service": "backend", "instance": "1"}},
        {"port": 81, "tags": {"kuma.io/service": "lonely"}}]}}));
    let v = view(&[&with_instance], &[], &refs);
    let fqdn = &v.entries[&HostnameEntry {
        ty: EntryType::Fqdn,
        name: "backend.1".into(),
    }];
    assert_eq!(
        fqdn.outbounds,
        [OutboundEntry {
            port: 8080,
            tag_set: BTreeMap::from([
                ("instance".into(), "1".into()),
                ("kuma.io/service".into(), "backend".into())
            ]),
            origin: "virtual-outbound:instances".into()
        }]
    );
    assert_eq!(v.entries.len(), 3, "lonely has no instance tag: no FQDN");

    let conf = |host: &str, port: &str| {
        json!({"host": host, "port": port, "parameters": [{"name": "svc", "tagKey": "kuma.io/service"}]})
            .as_object()
            .unwrap()
            .clone()
    };
    let tags = BTreeMap::from([("kuma.io/service".to_owned(), "web".to_owned())]);
    assert_eq!(
        render(&conf("{{.svc}}.mesh", "80"), &tags).unwrap().host,
        "web.mesh"
    );
    assert!(render(&conf("{{.missing}}", "80"), &tags)
        .unwrap_err()
        .contains("<no value>"));
    assert!(render(&conf("{{.svc}}", "0"), &tags).is_err());
    assert!(render(&conf("{{if .svc}}x{{end}}", "80"), &tags)
        .unwrap_err()
        .contains("only"));
}
