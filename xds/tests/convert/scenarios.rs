//! Scenario pieces the families' equivalence tests share: the Mesh, seed 000's kuma-demo
//! topology and Dataplanes. A family's policies (and a Mesh section only it needs) stay in its
//! own file.

/// The Mesh `default` without Kuma's default policies (each scenario brings its own); a family
/// that needs more of the Mesh (mTLS, logging or tracing backends) appends its section.
pub const MESH: &str = "
type: Mesh
name: default
skipCreatingInitialPolicies: ['*']
";

/// The Dataplanes of [`kuma_demo`].
pub const KUMA_DEMO_DPPS: &[&str] = &["frontend", "backend", "redis"];

/// Seed 000's kuma-demo topology: the [`MESH`], frontend calling backend (HTTP) and redis (TCP)
/// (and the outbounds `more_frontend_outbounds`, YAML list items), backend calling redis, and
/// redis.
pub fn kuma_demo(more_frontend_outbounds: &str) -> String {
    format!(
        "{MESH}---
type: Dataplane
mesh: default
name: frontend
networking:
  address: 10.42.0.29
  inbound:
  - port: 8080
    tags:
      kuma.io/service: frontend
      kuma.io/protocol: http
  outbound:
  - port: 3001
    address: 10.43.13.71
    tags:
      kuma.io/service: backend
  - port: 6379
    address: 10.43.83.105
    tags:
      kuma.io/service: redis
{more_frontend_outbounds}---
type: Dataplane
mesh: default
name: backend
networking:
  address: 10.42.0.30
  inbound:
  - port: 3001
    tags:
      kuma.io/service: backend
      kuma.io/protocol: http
  outbound:
  - port: 6379
    address: 10.43.83.105
    tags:
      kuma.io/service: redis
---
type: Dataplane
mesh: default
name: redis
networking:
  address: 10.42.0.28
  inbound:
  - port: 6379
    tags:
      kuma.io/service: redis
      kuma.io/protocol: tcp
"
    )
}

/// A Dataplane of the service `name`: one inbound of `protocol` at `address:port`, and an
/// outbound on 127.0.0.1 per `(port, service)` of `outbounds`. A document to append to a
/// scenario (it starts with `---`).
pub fn dataplane(
    name: &str,
    address: &str,
    port: u16,
    protocol: &str,
    outbounds: &[(u16, &str)],
) -> String {
    let tags = format!("kuma.io/service: {name}, kuma.io/protocol: {protocol}");
    tagged_dataplane(name, address, port, &tags, outbounds)
}

/// [`dataplane`] whose inbound has the tags `tags` (the entries of a YAML flow mapping).
pub fn tagged_dataplane(
    name: &str,
    address: &str,
    port: u16,
    tags: &str,
    outbounds: &[(u16, &str)],
) -> String {
    let mut doc = format!(
        "---
type: Dataplane
mesh: default
name: {name}
networking:
  address: {address}
  inbound:
  - port: {port}
    tags: {{{tags}}}
"
    );
    if !outbounds.is_empty() {
        doc.push_str("  outbound:\n");
        for (port, service) in outbounds {
            doc.push_str(&format!(
                "  - {{port: {port}, tags: {{kuma.io/service: {service}}}}}\n"
            ));
        }
    }
    doc
}

/// The callees of the health check and retry scenarios: api (HTTP, calling http-service and
/// tcp-service) and http-service, grpc-service and tcp-service, each of its protocol.
pub fn api_and_protocol_services() -> String {
    [
        dataplane(
            "api",
            "10.0.0.20",
            8080,
            "http",
            &[(10001, "http-service"), (10003, "tcp-service")],
        ),
        dataplane("http-service", "10.0.0.11", 80, "http", &[]),
        dataplane("grpc-service", "10.0.0.12", 80, "grpc", &[]),
        dataplane("tcp-service", "10.0.0.13", 80, "tcp", &[]),
    ]
    .concat()
}
