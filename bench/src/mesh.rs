//! Synthetic meshes for the harness and the criterion benches: the generation mesh (one client
//! DPP with many outbounds in a mesh of many services, issue 3's fixture), per-outbound
//! MeshHTTPRoutes (issue 16's), and policies of every implemented `targetRef` type with a share
//! of them labelled `kuma.io/effect: shadow`. Fleet Dataplanes come from
//! [`umbra_zone_cp::synthetic`], so the in-process zone bench and this harness build the same
//! topology.

use umbra_core::dataplane::DataplaneSpec;
use umbra_core::mesh::MeshSpec;
use umbra_core::resource::{Resource, Spec};
use umbra_xds::context::MeshContext;
use umbra_xds::generate::Proxy;

/// The Mesh every synthetic fleet lives in, without default policies.
pub const MESH: &str = "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n";

/// The generation mesh as multi-document YAML: a Mesh, `services` one-DPP HTTP services
/// (`svc-<i>`, tags `version: v0|v1|v2`), a DPP `client` (tag `team: a`) with one HTTP inbound
/// and `outbounds` outbounds to `svc-0..`, and 20 policies of mixed types (MeshTimeout,
/// MeshCircuitBreaker, MeshFaultInjection, MeshTrafficPermission), every other one shadow.
pub fn generation_mesh(services: usize, outbounds: usize) -> String {
    let mut y = String::from("type: Mesh\nname: default\n");
    for i in 0..services {
        y.push_str(&format!(
            "---\ntype: Dataplane\nmesh: default\nname: svc-{i}\nnetworking:\n  address: 10.{}.{}.{}\n  inbound:\n  - port: 8080\n    tags: {{kuma.io/service: svc-{i}, kuma.io/protocol: http, version: v{}}}\n",
            i / 65536 + 1,
            (i / 256) % 256,
            i % 256,
            i % 3
        ));
    }
    y.push_str("---\ntype: Dataplane\nmesh: default\nname: client\nnetworking:\n  address: 10.200.0.1\n  inbound:\n  - port: 9000\n    tags: {kuma.io/service: client, kuma.io/protocol: http, team: a}\n  outbound:\n");
    for i in 0..outbounds {
        y.push_str(&format!(
            "  - {{port: {}, address: 127.0.0.1, tags: {{kuma.io/service: svc-{i}}}}}\n",
            10_000 + i
        ));
    }
    for p in 0..20 {
        let shadow = if p % 2 == 1 {
            "labels: {kuma.io/effect: shadow}\n"
        } else {
            ""
        };
        let body = match p % 5 {
            0 => format!("type: MeshTimeout\nmesh: default\nname: mt-{p}\n{shadow}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: svc-{p}}}\n    default: {{connectionTimeout: {}s, idleTimeout: 30s, http: {{requestTimeout: 5s, streamIdleTimeout: 10s}}}}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default: {{idleTimeout: 60s}}\n", p + 1),
            1 => format!("type: MeshTimeout\nmesh: default\nname: mt-all-{p}\n{shadow}spec:\n  targetRef: {{kind: MeshSubset, tags: {{team: a}}}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionTimeout: 2s, http: {{requestTimeout: {}s}}}}\n", p + 10),
            2 => format!("type: MeshCircuitBreaker\nmesh: default\nname: mcb-{p}\n{shadow}spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: Mesh}}\n    default: {{connectionLimits: {{maxConnections: {}}}, outlierDetection: {{detectors: {{totalFailures: {{consecutive: 5}}}}}}}}\n", 100 + p),
            3 => format!("type: MeshFaultInjection\nmesh: default\nname: mfi-{p}\n{shadow}spec:\n  targetRef: {{kind: MeshService, name: client}}\n  from:\n  - targetRef: {{kind: MeshService, name: svc-{p}}}\n    default: {{http: [{{abort: {{httpStatus: 503, percentage: 10}}}}]}}\n"),
            _ => format!("type: MeshTrafficPermission\nmesh: default\nname: mtp-{p}\n{shadow}spec:\n  targetRef: {{kind: Mesh}}\n  from:\n  - targetRef: {{kind: MeshService, name: svc-{p}}}\n    default: {{action: Allow}}\n"),
        };
        y.push_str("---\n");
        y.push_str(&body);
    }
    y
}

/// `outbounds` MeshHTTPRoutes as YAML documents, one per outbound service of the generation
/// mesh's `client`, 5 rules each: a header match, a `/api` prefix with a URL rewrite, an exact
/// path, a method plus query parameter with a header modifier, and a 90/10 subset split.
pub fn routes(outbounds: usize) -> String {
    let mut y = String::new();
    for i in 0..outbounds {
        y.push_str(&format!(
            "---\ntype: MeshHTTPRoute\nmesh: default\nname: route-{i}\nspec:\n  targetRef: {{kind: MeshService, name: client}}\n  to:\n  - targetRef: {{kind: MeshService, name: svc-{i}}}\n    rules:\n    - matches: [{{path: {{type: PathPrefix, value: /}}, headers: [{{name: x-version, value: v1}}]}}]\n      default: {{backendRefs: [{{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v1}}}}]}}\n    - matches: [{{path: {{type: PathPrefix, value: /api}}}}]\n      default:\n        filters: [{{type: URLRewrite, urlRewrite: {{path: {{type: ReplacePrefixMatch, replacePrefixMatch: /v2/}}}}}}]\n        backendRefs: [{{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v2}}}}]\n    - matches: [{{path: {{type: Exact, value: /health}}}}]\n      default: {{}}\n    - matches: [{{method: POST, queryParams: [{{type: Exact, name: dry, value: 'true'}}]}}]\n      default: {{filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-dry, value: '1'}}]}}}}]}}\n    - matches: [{{path: {{type: PathPrefix, value: /}}}}]\n      default:\n        backendRefs:\n        - {{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v0}}, weight: 90}}\n        - {{kind: MeshServiceSubset, name: svc-{i}, tags: {{version: v1}}, weight: 10}}\n"
        ));
    }
    y
}

/// The implemented `targetRef` policy types, in the order [`every_type`] cycles through them.
pub const POLICY_TYPES: [&str; 13] = [
    "MeshTimeout",
    "MeshCircuitBreaker",
    "MeshRetry",
    "MeshHealthCheck",
    "MeshLoadBalancingStrategy",
    "MeshHTTPRoute",
    "MeshTCPRoute",
    "MeshFaultInjection",
    "MeshRateLimit",
    "MeshTrafficPermission",
    "MeshAccessLog",
    "MeshTrace",
    "MeshProxyPatch",
];

/// `count` policies cycling through [`POLICY_TYPES`], as `(type, name, YAML)`; every
/// `shadow_every`-th one (1-based; 0 for none) is labelled `kuma.io/effect: shadow`. Policy `k`
/// targets service `svc-(k % services)` (its outbounds for `to` rules, its inbounds for `from`
/// rules), except MeshTrace and MeshProxyPatch, which apply Mesh-wide with a conf that differs
/// per policy. The services' Dataplanes are [`umbra_zone_cp::synthetic::dataplane`]'s.
pub fn every_type(
    count: usize,
    shadow_every: usize,
    services: usize,
) -> Vec<(String, String, String)> {
    (0..count)
        .map(|k| {
            let ty = POLICY_TYPES[k % POLICY_TYPES.len()];
            let name = format!("{}-{k}", ty.to_ascii_lowercase());
            let svc = format!("svc-{}", k % services.max(1));
            let shadow = if shadow_every > 0 && (k + 1) % shadow_every == 0 {
                "labels: {kuma.io/effect: shadow}\n"
            } else {
                ""
            };
            let to = |conf: &str| {
                format!("spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: {svc}}}\n    default: {conf}\n")
            };
            let from = |conf: &str| {
                format!("spec:\n  targetRef: {{kind: MeshService, name: {svc}}}\n  from:\n  - targetRef: {{kind: Mesh}}\n    default: {conf}\n")
            };
            let spec = match ty {
                "MeshTimeout" => to(&format!("{{connectionTimeout: {}s, idleTimeout: 30s, http: {{requestTimeout: 5s}}}}", 1 + k % 9)),
                "MeshCircuitBreaker" => to(&format!("{{connectionLimits: {{maxConnections: {}}}, outlierDetection: {{detectors: {{totalFailures: {{consecutive: 5}}}}}}}}", 100 + k)),
                "MeshRetry" => to(&format!("{{http: {{numRetries: {}}}}}", 1 + k % 4)),
                "MeshHealthCheck" => to("{interval: 10s, timeout: 2s, unhealthyThreshold: 3, healthyThreshold: 1, http: {path: /health}}"),
                "MeshLoadBalancingStrategy" => to("{loadBalancer: {type: LeastRequest, leastRequest: {choiceCount: 3}}}"),
                "MeshHTTPRoute" => format!("spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: {svc}}}\n    rules:\n    - matches: [{{path: {{type: PathPrefix, value: /api}}}}]\n      default:\n        filters: [{{type: RequestHeaderModifier, requestHeaderModifier: {{set: [{{name: x-route, value: '{k}'}}]}}}}]\n"),
                "MeshTCPRoute" => format!("spec:\n  targetRef: {{kind: Mesh}}\n  to:\n  - targetRef: {{kind: MeshService, name: {svc}}}\n    rules:\n    - default:\n        backendRefs: [{{kind: MeshService, name: {svc}}}]\n"),
                "MeshFaultInjection" => from(&format!("{{http: [{{abort: {{httpStatus: 503, percentage: {}}}}}]}}", 1 + k % 50)),
                "MeshRateLimit" => from(&format!("{{local: {{http: {{requestRate: {{num: {}, interval: 10s}}}}}}}}", 100 + k)),
                "MeshTrafficPermission" => from("{action: Allow}"),
                "MeshAccessLog" => to(&format!("{{backends: [{{type: File, file: {{path: /tmp/umbra-bench-{k}.log}}}}]}}")),
                "MeshTrace" => format!("spec:\n  targetRef: {{kind: Mesh}}\n  default:\n    backends: [{{type: Zipkin, zipkin: {{url: 'http://zipkin.bench:9411/api/v2/spans'}}}}]\n    sampling: {{overall: {}}}\n", 1 + k % 100),
                _ => format!("spec:\n  targetRef: {{kind: Mesh}}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {{origin: outbound}}\n        value: |\n          perConnectionBufferLimitBytes: {}\n", 32_768 + k),
            };
            let yaml = format!("type: {ty}\nmesh: default\nname: {name}\n{shadow}{spec}");
            (ty.to_owned(), name, yaml)
        })
        .collect()
}

/// The Mesh and the resources of `yaml` (multi-document), decoded.
///
/// # Panics
/// When the YAML is not valid Umbra resources (a bug in this module; the unit tests check it).
pub fn decode(yaml: &str) -> (MeshSpec, Vec<Resource>) {
    let resources = Resource::all_from_bytes(yaml.as_bytes()).expect("synthetic mesh decodes");
    let mesh = resources
        .iter()
        .find_map(|r| match &r.spec {
            Spec::Mesh(m) => Some(m.clone()),
            _ => None,
        })
        .expect("synthetic mesh has a Mesh");
    (mesh, resources)
}

/// The generation mesh ([`generation_mesh`]) decoded, with its [`MeshContext`]: what the
/// `generate` scenario and the criterion benches measure one DPP (`client`) against.
#[derive(Debug)]
pub struct GenerationFixture {
    /// The Mesh.
    pub mesh: MeshSpec,
    /// Every resource of the mesh.
    pub resources: Vec<Resource>,
    /// Its mesh context (every Dataplane).
    pub ctx: MeshContext,
}

impl GenerationFixture {
    /// The generation mesh of `services` services and a client with `outbounds` outbounds.
    pub fn new(services: usize, outbounds: usize) -> Self {
        let (mesh, resources) = decode(&generation_mesh(services, outbounds));
        let ctx = Self::context(&mesh, &resources);
        Self {
            mesh,
            resources,
            ctx,
        }
    }

    /// A fresh mesh context of `resources` (what building one costs is a figure too).
    pub fn context(mesh: &MeshSpec, resources: &[Resource]) -> MeshContext {
        MeshContext::build(
            "default",
            mesh,
            resources.iter().filter_map(Resource::as_dataplane),
        )
    }

    /// The measured DPP's Dataplane.
    ///
    /// # Panics
    /// Never for a fixture built by [`GenerationFixture::new`] (it has a `client`).
    pub fn client(&self) -> &DataplaneSpec {
        self.resources
            .iter()
            .find(|r| r.meta.name == "client")
            .and_then(Resource::as_dataplane)
            .expect("the generation mesh has a client DPP")
    }

    /// The measured DPP as generation takes it.
    pub fn proxy(&self) -> Proxy<'_> {
        Proxy {
            name: "client",
            dataplane: self.client(),
            admin: None,
            dns: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use umbra_core::resource::Resource;

    #[test]
    fn every_policy_is_valid_and_every_type_appears() {
        let ps = super::every_type(26, 4, 100);
        for (_, _, y) in &ps {
            let r = Resource::from_bytes(y.as_bytes()).unwrap();
            let v = r.validate();
            assert!(!v.has_violations(), "{y}\n{v:?}");
        }
        for t in super::POLICY_TYPES {
            assert_eq!(ps.iter().filter(|(ty, _, _)| ty == t).count(), 2, "{t}");
        }
        let shadow = ps.iter().filter(|(_, _, y)| y.contains("shadow")).count();
        assert_eq!(shadow, 6);
    }

    #[test]
    fn generation_mesh_and_routes_decode() {
        let (_, rs) = super::decode(&format!(
            "{}{}",
            super::generation_mesh(60, 50),
            super::routes(50)
        ));
        assert_eq!(rs.len(), 1 + 61 + 20 + 50);
        for r in &rs {
            assert!(!r.validate().has_violations(), "{}", r.meta.name);
        }
    }
}
