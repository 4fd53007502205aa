//! # umbra-store
//!
//! The one resource store contract both CPs implement: the [`Store`] trait, its [`StoreError`],
//! and the helpers every implementation shares. Implementations: [`memory::MemoryStore`] (the
//! Global's embedded default, and the zone's store, durable under `--data-dir`), PostgreSQL in
//! `umbra-global-cp`; [`metered::Metered`] measures any of them.
//!
//! Semantics (DESIGN.md, "Global CP"; the same on a zone):
//! - resources are keyed `(type, mesh, name)` (a Mesh has an empty mesh) and carry an integer
//!   `version`, 1 on creation and +1 per change. A write may name the version it expects
//!   (`0` = must not exist): a mismatch is [`StoreError::Conflict`], never a lost update;
//! - writing identical content (spec and labels) changes nothing: no new version, no change;
//! - every change appends to a change log under a store-wide `revision` that increases by one
//!   per change, in commit order, so a consumer that saw revision `r` resumes with
//!   [`Store::changes_since`]`(r)` after any gap and misses nothing. [`Store::subscribe`] is
//!   only a wake-up (PostgreSQL's LISTEN/NOTIFY behind it), never the source of truth;
//! - a mesh-scoped resource needs its Mesh; deleting a Mesh deletes what it owns (each
//!   deletion is logged);
//! - each resource records the zone that owns it (`None` for resources created where they are
//!   stored);
//! - a write is durable when it returns `Ok` (PostgreSQL commits; a durable memory store has
//!   appended and fsynced its journal), so an API may answer 200 right after it;
//! - besides resources, a store keeps small keys by purpose (signing keys, revocation lists,
//!   migration plans), outside the change log. Several CPs may share a store (replicas of the
//!   Global on one PostgreSQL), so a key that changes is read-modified-written only through
//!   [`update_key`] (a [`Store::swap_key`] compare-and-swap, retried on a lost race), never
//!   guarded by a process-local lock.

pub mod journal;
pub mod memory;
pub mod metered;

use std::collections::BTreeMap;

use serde_json::{Map, Value};
use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey, ResourceType};

/// A stored resource.
#[derive(Debug, Clone, PartialEq)]
pub struct Stored {
    /// The resource, with `creation_time` and `modification_time` (RFC 3339) filled.
    pub resource: Resource,
    /// Version for compare-and-swap: 1 on creation, +1 per change.
    pub version: u64,
    /// The zone that owns it (`None`: created on the Global).
    pub zone: Option<String>,
    /// The revision of the change that wrote this content.
    pub revision: u64,
}

/// What a change did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// Created or updated.
    Put,
    /// Deleted.
    Delete,
}

/// One change-log entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    /// Its revision (consecutive, starting at 1).
    pub revision: u64,
    /// The resource.
    pub key: ResourceKey,
    /// What happened.
    pub op: Op,
    /// The resource version written (for a delete: the version deleted).
    pub version: u64,
}

/// A paged list query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// Type to list.
    pub ty: ResourceType,
    /// Mesh (ignored for Mesh; `None` lists every mesh).
    pub mesh: Option<String>,
    /// Every label given must be present with this value.
    pub labels: BTreeMap<String, String>,
    /// Only resources whose name contains this text (case-sensitive, taken literally: no
    /// wildcards; Kuma's `name=` list filter).
    pub name_contains: Option<String>,
    /// Kuma's Dataplane filters (`tag=`, `gateway=`); empty matches every resource.
    pub dataplane: DataplaneFilter,
    /// Items to skip (ordered by mesh, then name).
    pub offset: u64,
    /// Page size (at most [`MAX_PAGE`]).
    pub size: u64,
}

/// Kuma's Dataplane list filters (`tag=<key>:<value>`, `gateway=`), applied by every store
/// before paging so that `total` and the next offset count only the matching DPPs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DataplaneFilter {
    /// Kuma's `MatchTagsFuzzy`: the gateway's tags (on a gateway DPP), else at least one
    /// inbound's tags, have every key with a value that *contains* the given value.
    pub tags: BTreeMap<String, String>,
    /// Which kind of DPP (`gateway=`).
    pub gateway: Option<GatewayFilter>,
}

/// Kuma's `gateway=` list filter.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GatewayFilter {
    /// `true`: gateway DPPs of either type.
    Any,
    /// `false`: DPPs without `networking.gateway`.
    None,
    /// `builtin`: gateways of type `BUILTIN`.
    Builtin,
    /// `delegated`: gateways of type `DELEGATED` (the default type).
    Delegated,
}

impl DataplaneFilter {
    /// No filter given.
    pub fn is_empty(&self) -> bool {
        self.tags.is_empty() && self.gateway.is_none()
    }

    /// Whether `spec` passes: an empty filter passes everything; a non-empty one passes only
    /// Dataplanes that match both the tags and the gateway kind, and ExternalServices whose
    /// `tags` match (when no gateway kind is asked for).
    pub fn matches(&self, spec: &umbra_core::resource::Spec) -> bool {
        use umbra_core::dataplane::GatewayType;
        if self.is_empty() {
            return true;
        }
        let fuzzy = |tags: &BTreeMap<String, String>| {
            self.tags
                .iter()
                .all(|(k, v)| tags.get(k).is_some_and(|t| t.contains(v.as_str())))
        };
        let dp = match spec {
            umbra_core::resource::Spec::Dataplane(dp) => dp,
            umbra_core::resource::Spec::ExternalService(es) => {
                return self.gateway.is_none() && fuzzy(&es.tags);
            }
            _ => return false,
        };
        let gateway = dp.networking.gateway.as_ref();
        let kind_ok = match self.gateway {
            None => true,
            Some(GatewayFilter::Any) => gateway.is_some(),
            Some(GatewayFilter::None) => gateway.is_none(),
            Some(GatewayFilter::Builtin) => {
                gateway.is_some_and(|g| g.gateway_type == Some(GatewayType::Builtin))
            }
            Some(GatewayFilter::Delegated) => gateway.is_some_and(|g| {
                g.gateway_type.unwrap_or(GatewayType::Delegated) == GatewayType::Delegated
            }),
        };
        let tags_ok = self.tags.is_empty()
            || match gateway {
                Some(g) => fuzzy(&g.tags),
                None => dp.networking.inbound.iter().any(|i| fuzzy(&i.tags)),
            };
        kind_ok && tags_ok
    }
}

/// The largest page a list returns.
pub const MAX_PAGE: u64 = 1000;

/// Every resource of `ty` (in `mesh`, or every mesh) carrying `labels`, read page by page.
///
/// # Errors
/// The first store error.
pub async fn list_all(
    store: &dyn Store,
    ty: ResourceType,
    mesh: Option<&str>,
    labels: &BTreeMap<String, String>,
) -> Result<Vec<Stored>, StoreError> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let page = store
            .list(&ListQuery {
                ty,
                mesh: mesh.map(str::to_owned),
                labels: labels.clone(),
                name_contains: None,
                dataplane: DataplaneFilter::default(),
                offset,
                size: MAX_PAGE,
            })
            .await?;
        out.extend(page.items);
        match page.next_offset {
            Some(next) => offset = next,
            None => return Ok(out),
        }
    }
}

/// A page of a list.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    /// The items, by mesh then name.
    pub items: Vec<Stored>,
    /// Items matching the query in total.
    pub total: u64,
    /// Offset of the next page, if any.
    pub next_offset: Option<u64>,
}

impl Page {
    /// The page of `items` starting at `offset` out of `total`.
    pub fn new(items: Vec<Stored>, offset: u64, total: u64) -> Page {
        let end = offset.saturating_add(items.len() as u64);
        Page {
            items,
            total,
            next_offset: (end < total).then_some(end),
        }
    }
}

/// One write of a [`Store::transact`]. Resources written by a transaction are the store's own
/// (no owning zone).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Create or replace the resource, only at `expected` version when given (0: must not
    /// exist).
    Put {
        /// The resource.
        resource: Box<Resource>,
        /// The version precondition.
        expected: Option<u64>,
    },
    /// Delete the resource (not a Mesh), only at `expected` version when given.
    Delete {
        /// The resource.
        key: ResourceKey,
        /// The version precondition.
        expected: Option<u64>,
    },
    /// Write nothing, but only commit if nothing of `mesh` (the Mesh, its policies and other
    /// resources; Dataplanes and ZoneIngresses aside, which zones keep changing) changed after
    /// revision `since`: pins everything a transaction's decision read at `since`, including
    /// what did not exist yet.
    MeshUnchanged {
        /// The mesh.
        mesh: String,
        /// The revision the decision read the mesh at.
        since: u64,
    },
}

/// What [`Store::transact`] did.
#[derive(Debug, Clone, PartialEq)]
pub struct Transacted {
    /// The revision of the transaction's last change (the store's revision before it when it
    /// changed nothing).
    pub revision: u64,
    /// Per write, what a put stored (`None` for a delete or a check).
    pub stored: Vec<Option<Stored>>,
}

/// `true` for a change to `mesh` that [`Write::MeshUnchanged`] refuses: its Mesh, or a
/// mesh-scoped resource other than a Dataplane or ZoneIngress.
pub fn changes_mesh(key: &ResourceKey, mesh: &str) -> bool {
    if key.ty == ResourceType::Mesh {
        return key.name == mesh;
    }
    key.mesh == mesh && !matches!(key.ty, ResourceType::Dataplane | ResourceType::ZoneIngress)
}

impl Write {
    /// The resource written.
    pub fn key(&self) -> ResourceKey {
        match self {
            Write::Put { resource, .. } => resource.key(),
            Write::Delete { key, .. } => key.clone(),
            Write::MeshUnchanged { mesh, .. } => ResourceKey::mesh(mesh.as_str()),
        }
    }
}

/// The error of a transaction that deletes a Mesh (not supported: deleting a Mesh takes what
/// it owns with it, which a transaction's preconditions cannot cover).
pub fn mesh_delete_in_transaction(key: &ResourceKey) -> StoreError {
    StoreError::InUse {
        mesh: key.name.clone(),
        attached: "a transaction cannot delete a Mesh; delete it on its own".to_owned(),
    }
}

/// Why a store operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The resource does not exist.
    #[error("{0} not found")]
    NotFound(ResourceKey),
    /// A version precondition failed.
    #[error("{key} is at version {current}, not {expected}")]
    Conflict {
        /// The resource.
        key: ResourceKey,
        /// The version the writer expected (0: must not exist).
        expected: u64,
        /// The version stored (0: absent).
        current: u64,
    },
    /// The mesh a resource belongs to does not exist.
    #[error("mesh {0:?} does not exist")]
    NoMesh(String),
    /// The Mesh cannot be deleted while resources that zones own still reference it (Kuma:
    /// "unable to delete mesh, there are still some dataplanes attached").
    #[error(
        "unable to delete mesh {mesh:?}, there are still some dataplanes attached: {attached}"
    )]
    InUse {
        /// The mesh.
        mesh: String,
        /// Which resources, summarised (`3 Dataplanes (a, b, c)`).
        attached: String,
    },
    /// Something of the mesh changed after the revision a transaction read it at
    /// ([`Write::MeshUnchanged`]).
    #[error("mesh {mesh:?} changed after revision {since}: {key} at revision {revision}")]
    Changed {
        /// The mesh.
        mesh: String,
        /// The revision the transaction read it at.
        since: u64,
        /// The first resource that changed.
        key: ResourceKey,
        /// The revision of that change.
        revision: u64,
    },
    /// The backing database cannot be reached or failed; nothing was written.
    #[error("the store is unavailable: {0}")]
    Unavailable(String),
    /// A stored row cannot be decoded (written by an incompatible version?).
    #[error("stored {key} cannot be decoded: {reason}")]
    Corrupt {
        /// The resource.
        key: ResourceKey,
        /// Why.
        reason: String,
    },
    /// [`update_key`] lost the race for the key `purpose` to other writers (other replicas)
    /// [`KEY_UPDATE_ATTEMPTS`] times in a row; nothing was written. Retrying later may work.
    #[error("the key {purpose:?} kept changing under {attempts} attempts to update it; nothing was written, retry later")]
    Contended {
        /// The key.
        purpose: String,
        /// Attempts made.
        attempts: u32,
    },
}

/// The store. Implementations are cheap to share (`Arc<dyn Store>`).
#[async_trait::async_trait]
pub trait Store: Send + Sync + std::fmt::Debug {
    /// Create or replace `resource` (owned by `zone`), optionally only at `expected` version
    /// (0: must not exist). Returns what is stored and whether it was created.
    ///
    /// # Errors
    /// [`StoreError::Conflict`], [`StoreError::NoMesh`], [`StoreError::Unavailable`].
    async fn put(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
    ) -> Result<(Stored, bool), StoreError>;

    /// [`Store::put`], and when that creates `resource`, also create each of `companions` that
    /// does not exist yet, in the same durable step: a Mesh and Kuma's default policies
    /// (issue 17), so an acknowledged Mesh never lacks them and a failure leaves neither.
    /// Companions live in the mesh `resource` creates (or in an existing one). Returns what
    /// [`Store::put`] returns for `resource`.
    ///
    /// # Errors
    /// As [`Store::put`].
    async fn put_creating(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
        companions: Vec<Resource>,
    ) -> Result<(Stored, bool), StoreError>;

    /// Delete a resource (a Mesh with everything it owns), optionally only at `expected`.
    ///
    /// # Errors
    /// [`StoreError::NotFound`], [`StoreError::Conflict`], [`StoreError::Unavailable`].
    async fn delete(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError>;

    /// Apply `writes` in order as one transaction: every precondition is checked first, then
    /// every change commits durably under consecutive revisions, or nothing does (issue 19:
    /// a migration promotes its new policies and deletes the old ones in one step, and checks
    /// that nothing else it read moved). A put that changes nothing is skipped. Returns the
    /// revision of its last change and, per write, what a put stored.
    ///
    /// # Errors
    /// [`StoreError::Conflict`] (the first precondition that fails), [`StoreError::Changed`],
    /// [`StoreError::NotFound`] (a delete of a missing resource), [`StoreError::NoMesh`],
    /// [`StoreError::InUse`] for a Mesh deletion ([`mesh_delete_in_transaction`]),
    /// [`StoreError::Unavailable`]; nothing is written then.
    async fn transact(&self, writes: Vec<Write>) -> Result<Transacted, StoreError>;

    /// One resource.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Corrupt`].
    async fn get(&self, key: &ResourceKey) -> Result<Option<Stored>, StoreError>;

    /// A page of resources.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`], [`StoreError::Corrupt`].
    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError>;

    /// Up to `limit` changes with revision greater than `revision`, oldest first.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError>;

    /// The latest revision (0 before any change).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn revision(&self) -> Result<u64, StoreError>;

    /// The signing key for `purpose` (e.g. `zone-token`): created from `fresh` on first use,
    /// the stored one afterwards (so tokens outlive restarts; the memory store keeps it for
    /// the process's life only).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn signing_key(&self, purpose: &str, fresh: Vec<u8>) -> Result<Vec<u8>, StoreError>;

    /// The key kept for `purpose`, if any (nothing is created).
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn get_key(&self, purpose: &str) -> Result<Option<Vec<u8>>, StoreError>;

    /// Replace the key kept for `purpose` with `value` (e.g. a list of revoked token IDs),
    /// durably before it returns.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`].
    async fn set_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError>;

    /// Compare-and-swap the key kept for `purpose`: store `value` only when the stored value
    /// is `expected` (`None`: no key is stored; an empty value is a stored value, not an
    /// absent one), in one atomic step, durably before it returns. Returns whether it wrote
    /// (`false`: another writer got there first; read the key again). Several CPs sharing a
    /// store (replicas of the Global on one PostgreSQL) update a key safely only through this
    /// (see [`update_key`]); [`Store::set_key`] overwrites blindly.
    ///
    /// # Errors
    /// [`StoreError::Unavailable`]; nothing was written then.
    async fn swap_key(
        &self,
        purpose: &str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError>;

    /// Wake-ups carrying the latest revision the store has seen. A wake-up may be late or
    /// coalesced; read [`Store::changes_since`] for the truth.
    fn subscribe(&self) -> watch::Receiver<u64>;
}

/// How many times [`update_key`] reads and swaps a key before giving up with
/// [`StoreError::Contended`].
pub const KEY_UPDATE_ATTEMPTS: u32 = 32;

/// The longest pause [`update_key`] takes between two attempts (the first is 1-2 ms; each
/// bound doubles up to this one, and each pause is random within half its bound, so that
/// racing writers spread out).
pub const KEY_UPDATE_MAX_PAUSE: std::time::Duration = std::time::Duration::from_millis(64);

/// What [`update_key`] left in the store.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyUpdate {
    /// The key's value now: what was written, or, when the update had nothing to write, the
    /// value it read (`None`: no key is stored).
    pub value: Option<Vec<u8>>,
    /// Whether this call wrote it.
    pub written: bool,
}

/// Read-modify-write the key kept for `purpose`, safe against other writers of the same
/// store (other replicas of the Global): read the value, ask `f` what to write given it
/// (`None` read: no key; `f` returns `Ok(None)` when there is nothing to write), and
/// [`Store::swap_key`] it in against the value read. When another writer changed the key in
/// between, `f` runs again on the fresh value, after a short random pause, up to
/// [`KEY_UPDATE_ATTEMPTS`] times. `f` must be a pure function of the value it is given (a
/// revocation list: the union of what is stored and the new ID), since any run but the last
/// is thrown away.
///
/// # Errors
/// `f`'s error (nothing written); [`StoreError::Contended`] when every attempt lost the race;
/// [`StoreError::Unavailable`] from the store.
pub async fn update_key<E, F>(store: &dyn Store, purpose: &str, mut f: F) -> Result<KeyUpdate, E>
where
    F: FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, E>,
    E: From<StoreError>,
{
    let mut bound = std::time::Duration::from_millis(2);
    for attempt in 1..=KEY_UPDATE_ATTEMPTS {
        let current = store.get_key(purpose).await?;
        let Some(value) = f(current.as_deref())? else {
            return Ok(KeyUpdate {
                value: current,
                written: false,
            });
        };
        if store.swap_key(purpose, current, value.clone()).await? {
            return Ok(KeyUpdate {
                value: Some(value),
                written: true,
            });
        }
        if attempt < KEY_UPDATE_ATTEMPTS {
            tokio::time::sleep(jitter(bound)).await;
            bound = (bound * 2).min(KEY_UPDATE_MAX_PAUSE);
        }
    }
    Err(StoreError::Contended {
        purpose: purpose.to_owned(),
        attempts: KEY_UPDATE_ATTEMPTS,
    }
    .into())
}

/// A random pause between half of `bound` and `bound`.
fn jitter(bound: std::time::Duration) -> std::time::Duration {
    use std::hash::BuildHasher as _;
    // Each `RandomState` is keyed afresh: random enough to spread racing writers out.
    let random = std::collections::hash_map::RandomState::new().hash_one(std::time::Instant::now());
    let half = u64::try_from(bound.as_micros() / 2).unwrap_or(u64::MAX);
    std::time::Duration::from_micros(half.saturating_add(random % half.saturating_add(1)))
}

/// The body of a resource without its identity and metadata (what the `spec` column holds):
/// Kuma's universal document minus `type`, `mesh`, `name`, `labels` and the times.
pub fn spec_of(resource: &Resource) -> Value {
    let mut v = resource.to_value();
    if let Some(o) = v.as_object_mut() {
        for k in [
            "type",
            "mesh",
            "name",
            "labels",
            "creationTime",
            "modificationTime",
        ] {
            o.remove(k);
        }
    }
    v
}

/// Rebuild a resource from its stored parts.
///
/// # Errors
/// [`StoreError::Corrupt`] when the parts do not decode.
pub fn resource_from_parts(
    key: &ResourceKey,
    spec: Value,
    labels: &BTreeMap<String, String>,
    creation_time: String,
    modification_time: String,
) -> Result<Resource, StoreError> {
    let mut doc = match spec {
        Value::Object(o) => o,
        _ => Map::new(),
    };
    doc.insert("type".into(), Value::String(key.ty.name().into()));
    if key.ty.is_mesh_scoped() {
        doc.insert("mesh".into(), Value::String(key.mesh.clone()));
    }
    doc.insert("name".into(), Value::String(key.name.clone()));
    if !labels.is_empty() {
        doc.insert(
            "labels".into(),
            serde_json::to_value(labels).unwrap_or_default(),
        );
    }
    let mut r = Resource::from_value(Value::Object(doc)).map_err(|e| StoreError::Corrupt {
        key: key.clone(),
        reason: e.to_string(),
    })?;
    r.meta.creation_time = Some(creation_time);
    r.meta.modification_time = Some(modification_time);
    Ok(r)
}

/// Now as RFC 3339 with milliseconds (UTC).
pub fn now_rfc3339() -> String {
    let now = time::OffsetDateTime::now_utc();
    let now = now
        .replace_nanosecond(u32::from(now.millisecond()) * 1_000_000)
        .unwrap_or(now);
    now.format(&time::format_description::well_known::Rfc3339)
        .unwrap_or_default()
}

/// The compare-and-swap precondition: `expected` (when given) must be the `current` version
/// (0: absent).
///
/// # Errors
/// [`StoreError::Conflict`] on a mismatch.
pub fn check_expected(
    key: &ResourceKey,
    expected: Option<u64>,
    current: u64,
) -> Result<(), StoreError> {
    match expected {
        Some(expected) if expected != current => Err(StoreError::Conflict {
            key: key.clone(),
            expected,
            current,
        }),
        _ => Ok(()),
    }
}

/// `true` when writing `resource` (owned by `zone`) over `existing` would change nothing
/// (same spec, labels and owner): such a write is not a change.
pub fn unchanged(existing: &Stored, resource: &Resource, zone: Option<&str>) -> bool {
    existing.resource.spec == resource.spec
        && existing.resource.meta.labels == resource.meta.labels
        && existing.zone.as_deref() == zone
}

/// Stamp the times of a write: creation time kept from `existing`, modification time now.
pub fn stamp_times(resource: &mut Resource, existing: Option<&Stored>) {
    let now = now_rfc3339();
    resource.meta.creation_time = existing
        .and_then(|s| s.resource.meta.creation_time.clone())
        .or_else(|| Some(now.clone()));
    resource.meta.modification_time = Some(now);
}

/// The store-identity key's purpose ([`Store::signing_key`]): random bytes created with the
/// store, kept with its data. A zone records the identity of the Global it synced from; a
/// different one later means the Global lost its data (or is another Global), and the zone
/// does not apply its deletions until an operator confirms.
pub const STORE_IDENTITY: &str = "store-identity";

/// This store's identity (hex of [`STORE_IDENTITY`]'s bytes; `fresh` becomes it on first use).
///
/// # Errors
/// [`StoreError::Unavailable`].
pub async fn identity(store: &dyn Store, fresh: Vec<u8>) -> Result<String, StoreError> {
    let bytes = store.signing_key(STORE_IDENTITY, fresh).await?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Resource types that keep their Mesh from being deleted: what zones register, which a
/// deletion must never take with it (Kuma refuses to delete a Mesh with Dataplanes attached).
pub const MESH_USERS: &[ResourceType] = &[ResourceType::Dataplane];

/// The [`StoreError::InUse`] for deleting `mesh` while `attached` (keys of [`MESH_USERS`]) still
/// reference it, naming up to five of them; `Ok` when none do.
///
/// # Errors
/// [`StoreError::InUse`].
pub fn check_unused(mesh: &str, attached: &[ResourceKey]) -> Result<(), StoreError> {
    if attached.is_empty() {
        return Ok(());
    }
    let mut by_type: BTreeMap<ResourceType, Vec<&str>> = BTreeMap::new();
    for k in attached {
        by_type.entry(k.ty).or_default().push(&k.name);
    }
    let attached = by_type
        .iter()
        .map(|(ty, names)| {
            let shown: Vec<&str> = names.iter().take(5).copied().collect();
            let more = if names.len() > shown.len() {
                ", ..."
            } else {
                ""
            };
            format!(
                "{} {}s ({}{more})",
                names.len(),
                ty.name(),
                shown.join(", ")
            )
        })
        .collect::<Vec<_>>()
        .join(", ");
    Err(StoreError::InUse {
        mesh: mesh.to_owned(),
        attached,
    })
}

/// The key of the Mesh a mesh-scoped key belongs to.
pub fn mesh_key(mesh: &str) -> ResourceKey {
    ResourceKey::mesh(mesh)
}

/// `true` when `labels` holds every `(k, v)` of `filter`.
pub fn labels_match(filter: &BTreeMap<String, String>, labels: &BTreeMap<String, String>) -> bool {
    filter.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The mesh a query lists: `Some("")` for Mesh (a Mesh has no mesh), else the query's mesh
/// (`None`: every mesh).
pub fn query_mesh(query: &ListQuery) -> Option<String> {
    if !query.ty.is_mesh_scoped() {
        Some(String::new())
    } else {
        query.mesh.clone()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    use super::*;
    use crate::memory::MemoryStore;

    /// A memory store where another writer appends `+` to a key right after each of the first
    /// `races` reads of it, as a replica racing this one would.
    #[derive(Debug)]
    struct Racing {
        inner: MemoryStore,
        races: AtomicU32,
    }

    #[async_trait::async_trait]
    impl Store for Racing {
        async fn put(
            &self,
            resource: Resource,
            expected: Option<u64>,
            zone: Option<&str>,
        ) -> Result<(Stored, bool), StoreError> {
            self.inner.put(resource, expected, zone).await
        }
        async fn put_creating(
            &self,
            resource: Resource,
            expected: Option<u64>,
            zone: Option<&str>,
            companions: Vec<Resource>,
        ) -> Result<(Stored, bool), StoreError> {
            self.inner
                .put_creating(resource, expected, zone, companions)
                .await
        }
        async fn delete(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError> {
            self.inner.delete(key, expected).await
        }
        async fn transact(&self, writes: Vec<Write>) -> Result<Transacted, StoreError> {
            self.inner.transact(writes).await
        }
        async fn get(&self, key: &ResourceKey) -> Result<Option<Stored>, StoreError> {
            self.inner.get(key).await
        }
        async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
            self.inner.list(query).await
        }
        async fn changes_since(
            &self,
            revision: u64,
            limit: usize,
        ) -> Result<Vec<Change>, StoreError> {
            self.inner.changes_since(revision, limit).await
        }
        async fn revision(&self) -> Result<u64, StoreError> {
            self.inner.revision().await
        }
        async fn signing_key(&self, purpose: &str, fresh: Vec<u8>) -> Result<Vec<u8>, StoreError> {
            self.inner.signing_key(purpose, fresh).await
        }
        async fn get_key(&self, purpose: &str) -> Result<Option<Vec<u8>>, StoreError> {
            let read = self.inner.get_key(purpose).await?;
            let racing = self
                .races
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
                .is_ok();
            if racing {
                let mut other = self.inner.key(purpose).unwrap_or_default();
                other.push(b'+');
                self.inner.put_key(purpose, other)?;
            }
            Ok(read)
        }
        async fn set_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
            self.inner.set_key(purpose, value).await
        }
        async fn swap_key(
            &self,
            purpose: &str,
            expected: Option<Vec<u8>>,
            value: Vec<u8>,
        ) -> Result<bool, StoreError> {
            self.inner.swap_key(purpose, expected, value).await
        }
        fn subscribe(&self) -> watch::Receiver<u64> {
            self.inner.subscribe()
        }
    }

    fn racing(races: u32) -> Arc<Racing> {
        Arc::new(Racing {
            inner: MemoryStore::new(),
            races: AtomicU32::new(races),
        })
    }

    /// Append `c` to what is stored.
    fn append(c: u8) -> impl FnMut(Option<&[u8]>) -> Result<Option<Vec<u8>>, StoreError> {
        move |stored| {
            let mut v = stored.unwrap_or_default().to_vec();
            v.push(c);
            Ok(Some(v))
        }
    }

    #[tokio::test]
    async fn update_key_writes_what_f_makes_of_the_stored_value() {
        let store = racing(0);
        let done = update_key(&*store, "k", append(b'a')).await.unwrap();
        assert_eq!(
            (done.value.as_deref(), done.written),
            (Some(&b"a"[..]), true)
        );
        let done = update_key(&*store, "k", append(b'b')).await.unwrap();
        assert_eq!(done.value.as_deref(), Some(&b"ab"[..]));
        // Nothing to write: the value read, untouched.
        let done = update_key(&*store, "k", |_| Ok::<_, StoreError>(None))
            .await
            .unwrap();
        assert_eq!(
            (done.value.as_deref(), done.written),
            (Some(&b"ab"[..]), false)
        );
        let done = update_key(&*store, "absent", |_| Ok::<_, StoreError>(None))
            .await
            .unwrap();
        assert_eq!((done.value, done.written), (None, false));
        // f's error: nothing written.
        let err = update_key(&*store, "k", |_| {
            Err::<Option<Vec<u8>>, _>(StoreError::Unavailable("no".into()))
        })
        .await
        .unwrap_err();
        assert_eq!(err, StoreError::Unavailable("no".into()));
        assert_eq!(store.inner.key("k"), Some(b"ab".to_vec()));
    }

    #[tokio::test]
    async fn update_key_retries_on_a_lost_race_keeping_the_winners_write() {
        let store = racing(3);
        let mut runs = 0;
        let mut f = append(b'x');
        let done = update_key(&*store, "k", |stored| {
            runs += 1;
            f(stored)
        })
        .await
        .unwrap();
        assert_eq!(runs, 4, "three lost races, then a swap");
        assert_eq!(done.value.as_deref(), Some(&b"+++x"[..]));
        assert_eq!(store.inner.key("k"), Some(b"+++x".to_vec()));
    }

    #[tokio::test]
    async fn update_key_gives_up_after_its_attempts() {
        let store = racing(u32::MAX);
        let mut runs = 0;
        let err = update_key(&*store, "k", |_| {
            runs += 1;
            Ok::<_, StoreError>(Some(b"mine".to_vec()))
        })
        .await
        .unwrap_err();
        assert_eq!(runs, KEY_UPDATE_ATTEMPTS);
        assert_eq!(
            err,
            StoreError::Contended {
                purpose: "k".into(),
                attempts: KEY_UPDATE_ATTEMPTS
            }
        );
        assert!(err.to_string().contains("retry later"), "{err}");
        assert!(!store.inner.key("k").unwrap().ends_with(b"mine"));
    }
}
