//! What an ADS response carries of a DPP's snapshot (used by [`crate::ads`], SotW and delta):
//! its resources packed as `Any`s from the wire bytes the snapshot keeps, encoded once per
//! resource version and shared by every stream (issue 39).

use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};
use umbra_xds::interner::Shared;
use umbra_xds::snapshot::Snapshot;
use umbra_xds_protocol::type_url::{
    CLUSTER_TYPE, ENDPOINT_TYPE, LISTENER_TYPE, ROUTE_TYPE, RUNTIME_TYPE, SECRET_TYPE,
};

/// `r` as an `Any`, its value the encoding the snapshot keeps ([`Shared::wire`]): computed once
/// with the resource's version and shared by every stream of every DPP holding the resource,
/// so serving a resource copies bytes and encodes nothing (issue 39).
pub(crate) fn pack<M: Message + Name>(r: &Shared<M>) -> Any {
    Any {
        type_url: M::type_url(),
        value: r.wire().to_vec(),
    }
}

/// The resources of `type_url` in `dp`'s snapshot that a SotW subscription to `names` (empty:
/// all) gets, packed, in name order.
pub(crate) fn resources(
    dp: &crate::reconciler::DpSnapshot,
    type_url: &str,
    names: &[String],
) -> Vec<Any> {
    dp.resources
        .get(type_url)
        .into_iter()
        .flat_map(|versions| versions.keys())
        .filter(|n| names.is_empty() || names.contains(n))
        .filter_map(|n| resource(&dp.snapshot, type_url, n))
        .collect()
}

/// One resource of `snap`, packed.
pub(crate) fn resource(snap: &Snapshot, type_url: &str, name: &str) -> Option<Any> {
    match type_url {
        CLUSTER_TYPE => snap.clusters.get(name).map(pack),
        ENDPOINT_TYPE => snap.endpoints.get(name).map(pack),
        LISTENER_TYPE => snap.listeners.get(name).map(pack),
        ROUTE_TYPE => snap.routes.get(name).map(pack),
        SECRET_TYPE => snap.secrets.get(name).map(pack),
        RUNTIME_TYPE => snap.runtimes.get(name).map(pack),
        _ => None,
    }
}
