//! Global replicas (issue 36): the coordination every control-plane role shares
//! ([`umbra_postgres::replicas`], re-exported here: [`Coordinator`], [`Single`], the
//! PostgreSQL coordinator in [`postgres`]) and what only the Global adds on top: the per-zone
//! KDS lease kept with the in-process registry ([`lease`]), the zone insights shared by every
//! replica ([`insights`]), and the zones' status as every replica sees it ([`zone_statuses`]).

pub mod insights;
pub mod lease;

pub use umbra_postgres::replicas::*;

use std::collections::BTreeMap;

use crate::store::StoreError;

/// Every zone this replica knows (`local`, its registry) or the replicas hold, with its
/// status: a zone connected to another live replica is online there (`replica` and
/// `connection` name it; the sync counters stay that replica's own). `me` names this replica.
///
/// # Errors
/// [`StoreError::Unavailable`].
pub async fn zone_statuses(
    local: &crate::zones::ZoneRegistry,
    coordinator: &dyn Coordinator,
    me: &str,
) -> Result<BTreeMap<String, crate::zones::ZoneStatus>, StoreError> {
    let mut out: BTreeMap<String, crate::zones::ZoneStatus> = local
        .list()
        .into_iter()
        .map(|mut z| {
            if z.online {
                z.replica = Some(me.to_owned());
            }
            (z.name.clone(), z)
        })
        .collect();
    for (zone, hold) in coordinator.zones().await? {
        let status = out
            .entry(zone.clone())
            .or_insert_with(|| crate::zones::ZoneStatus {
                name: zone,
                ..Default::default()
            });
        if status.online {
            continue;
        }
        if let ZoneHold::Held {
            replica_name,
            connection,
            ..
        } = hold
        {
            status.online = true;
            status.replica = Some(replica_name);
            status.connection = Some(connection);
        }
    }
    Ok(out)
}
