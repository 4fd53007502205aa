//! The zone's ZoneEgresses in a reconciliation pass: their identity per mesh (a certificate
//! for `spiffe://<mesh>/zone-egress` from the mesh CA, [`identities`]) and their snapshots
//! ([`generate`]), which the reconciler publishes keyed [`DpKey::zone_egress`], generated on
//! every pass like the ingresses (a handful per zone).

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use umbra_core::dataplane::{DataplaneSpec, DpKey, ZONE_EGRESS_KEY_MESH};
use umbra_core::mesh::MtlsBackend;
use umbra_core::zone_egress::ZoneEgressSpec;
use umbra_pki::identity::{Authority, Identity};
use umbra_xds::egress::{generate_egress, EgressMesh};
use umbra_xds::generate::mesh_secrets;
use umbra_xds::snapshot::Snapshot;

/// The name the identity of ZoneEgress `egress` is issued under, in each mesh: no Dataplane
/// can be called so (`:` is in no resource name), so it never meets a DPP's.
pub(crate) fn identity_name(egress: &str) -> String {
    format!("{ZONE_EGRESS_KEY_MESH}/{egress}")
}

/// `true` for the identity key of a ZoneEgress ([`identity_name`]), not a DPP's.
pub(crate) fn is_identity_name(name: &str) -> bool {
    name.starts_with(ZONE_EGRESS_KEY_MESH)
}

/// The Dataplane an egress identity is issued for: one inbound of service `zone-egress`.
fn identity_dataplane() -> DataplaneSpec {
    let mut dp = DataplaneSpec::default();
    dp.networking.address = "127.0.0.1".to_owned();
    dp.networking.inbound.push(umbra_core::dataplane::Inbound {
        port: 1,
        tags: std::iter::once((
            umbra_core::target_ref::SERVICE_TAG.to_owned(),
            umbra_xds::base::outbound::ZONE_EGRESS_SERVICE.to_owned(),
        ))
        .collect(),
        ..Default::default()
    });
    dp.synthetic = true;
    dp
}

/// The identities of `egresses` in `mesh` (mTLS backend `backend`, trusted builtin backends
/// `trusted`), by egress name: issued or the cached ones (see [`Authority::identity`]).
pub(crate) fn identities(
    ca: &Authority,
    mesh: &str,
    backend: Result<&MtlsBackend, &String>,
    trusted: &[String],
    egresses: &[(String, ZoneEgressSpec)],
    now: std::time::SystemTime,
) -> Vec<(String, Result<Arc<Identity>, String>)> {
    let dp = identity_dataplane();
    egresses
        .iter()
        .map(|(name, _)| {
            let identity = backend.map_err(Clone::clone).and_then(|b| {
                ca.identity(mesh, &identity_name(name), b, trusted, &dp, now)
                    .map_err(|e| e.to_string())
            });
            (name.clone(), identity)
        })
        .collect()
}

/// Per egress name, then per mesh: its identity there.
pub(crate) type EgressIdentities =
    BTreeMap<String, BTreeMap<String, Result<Arc<Identity>, String>>>;

/// The snapshot of ZoneEgress `name` (`ze`) of zone `zone` over `meshes` (in mesh order),
/// with its identity secrets per mesh (`identities`, by mesh); the identities it holds are
/// recorded in `with_identity`. An identity that could not be issued fails the whole egress
/// (it keeps its last good snapshot).
pub(super) fn generate(
    (name, ze): (&str, &ZoneEgressSpec),
    zone: &str,
    meshes: &[EgressMesh<'_>],
    identities: Option<&BTreeMap<String, Result<Arc<Identity>, String>>>,
    with_identity: &mut HashSet<DpKey>,
) -> Result<Snapshot, String> {
    let mut snapshot = generate_egress(ze, zone, meshes).map_err(|e| e.to_string())?;
    for (mesh, identity) in identities.into_iter().flatten() {
        let id = identity
            .as_ref()
            .map_err(|e| format!("mesh {mesh}: no egress identity: {e}"))?;
        with_identity.insert(DpKey::new(mesh.as_str(), identity_name(name)));
        for secret in mesh_secrets(
            mesh,
            id.cert_pem.as_bytes(),
            id.key_pem.as_bytes(),
            id.ca_pem.as_bytes(),
        ) {
            snapshot.secrets.insert(secret.name.clone(), secret.into());
        }
    }
    Ok(snapshot)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn egress_identity_names_are_no_dataplane_names() {
        let name = identity_name("ze-1");
        assert_eq!(name, ":zoneegress/ze-1");
        assert!(is_identity_name(&name));
        assert!(!is_identity_name("ze-1"));
        let sans = umbra_pki::identity::identity_sans("default", &identity_dataplane());
        assert_eq!(
            sans.into_iter().collect::<Vec<_>>(),
            ["spiffe://default/zone-egress"]
        );
    }
}
