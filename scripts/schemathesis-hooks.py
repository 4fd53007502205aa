"""Schemathesis hooks of scripts/schemathesis (loaded through SCHEMATHESIS_HOOKS).

A resource PUT body must agree with its path, and a few of its fields with each other, in ways
OpenAPI 3.0 cannot express; both documents state these rules in prose (`MeshInput`,
`GlobalSecretInput`, `ZoneIngressInput`, `ZoneEgressInput`, `ResourceInput`) and answer a body that breaks one with
a 400 naming the field. A client fills these fields from the path as it builds the request; this
hook does the same to the requests Schemathesis generates as valid, so that every other property
of a generated body is held to the strict check (a schema-valid body must be accepted):

- `name` (and `mesh`, for a resource in a mesh) are the path's;
- a Mesh's `mtls.backends` have distinct names, and `mtls.enabledBackend`, when not empty, names
  one of them;
- a ZoneIngress's `networking.admin.port` differs from `port` and `advertisedPort` (0 when not
  set);
- a ZoneEgress's `networking.admin.port` differs from `port` (Kuma refuses the same port only on
  a loopback or wildcard address; the hook keeps them apart whatever the address).

Requests generated to be invalid are left as they are.
"""

import schemathesis

PUT_PATHS = {
    "/meshes/{name}",
    "/global-secrets/{name}",
    "/zone-ingresses/{name}",
    "/zoneingresses/{name}",
    "/zoneegresses/{name}",
    "/meshes/{mesh}/{plural}/{name}",
}


def _positive(case):
    meta = case.meta
    return meta is not None and meta.generation.mode.is_positive


def _mesh_mtls(mtls):
    mtls = dict(mtls)
    names = []
    backends = mtls.get("backends")
    if isinstance(backends, list):
        renamed = []
        for i, backend in enumerate(backends):
            if isinstance(backend, dict) and isinstance(backend.get("name"), str):
                backend = dict(backend)
                name = backend["name"]
                while name in names:
                    name = f"{name}-{i}"
                backend["name"] = name
                names.append(name)
            renamed.append(backend)
        mtls["backends"] = renamed
    enabled = mtls.get("enabledBackend")
    if isinstance(enabled, str) and enabled and enabled not in names:
        if names:
            mtls["enabledBackend"] = names[0]
        else:
            del mtls["enabledBackend"]
    return mtls


def _ingress_networking(networking):
    admin = networking.get("admin")
    if not isinstance(admin, dict):
        return networking
    taken = {networking.get("port"), networking.get("advertisedPort", 0)}
    port = admin.get("port")
    if isinstance(port, int) and not isinstance(port, bool) and port in taken:
        free = 1
        while free in taken:
            free += 1
        networking = dict(networking, admin=dict(admin, port=free))
    return networking


def _egress_networking(networking):
    admin = networking.get("admin")
    if not isinstance(admin, dict):
        return networking
    port = admin.get("port")
    if port == networking.get("port") and isinstance(port, int) and not isinstance(port, bool):
        free = 1 if port != 1 else 2
        networking = dict(networking, admin=dict(admin, port=free))
    return networking


@schemathesis.hook
def map_case(context, case):
    path = case.operation.path
    if case.method.upper() != "PUT" or path not in PUT_PATHS:
        return case
    if not isinstance(case.body, dict) or not _positive(case):
        return case
    params = case.path_parameters or {}
    body = dict(case.body)
    for field in ("name", "mesh"):
        if isinstance(params.get(field), str):
            body[field] = params[field]
    if path == "/meshes/{name}" and isinstance(body.get("mtls"), dict):
        body["mtls"] = _mesh_mtls(body["mtls"])
    if path in ("/zone-ingresses/{name}", "/zoneingresses/{name}") and isinstance(
        body.get("networking"), dict
    ):
        body["networking"] = _ingress_networking(body["networking"])
    if path == "/zoneegresses/{name}" and isinstance(body.get("networking"), dict):
        body["networking"] = _egress_networking(body["networking"])
    case.body = body
    return case
