//! The reconciler: keeps every DPP's Live snapshot current. It wakes on store revision changes
//! (coalescing bursts) and regenerates only the DPPs a change can affect: each DPP's inputs
//! ([`umbra_core::dependencies`]: the Mesh, its Dataplane, the policies selecting it, the superseded old
//! types and the endpoints of its outbound services) are fingerprinted by store revision, and
//! a DPP whose fingerprint is unchanged is not regenerated. Affected DPPs are regenerated in
//! parallel. Only snapshots whose content changed are published (per-resource versions are
//! content hashes, see [`Snapshot::resource_versions`]). If a DPP's generation fails because of
//! a policy, that DPP keeps its last good snapshot and the error (naming the policy) is
//! recorded; every other DPP is unaffected. Nothing runs while nothing changes.
//!
//! In a multi-zone deployment ([`Reconciler::with_zone`]) each mesh's endpoints include other
//! zones' ingresses ([`MeshContext::build_in_zone`]); a DPP's fingerprint covers the endpoints
//! of its outbound services as built, remote ones included. The zone's own ZoneIngresses are generated in
//! the same pass ([`umbra_xds::ingress`]), keyed `("", <name>)`, and regenerated on every pass
//! (a handful per zone); only a changed result is published.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use rayon::prelude::*;
use tokio::sync::watch;
use umbra_core::resource::{ResourceKey, ResourceType, Spec};
use umbra_core::view::{PolicySet, View};
use umbra_xds::context::{MeshContext, Zones};
use umbra_xds::generate::{generate, mesh_secrets, Proxy};
use umbra_xds::ingress::{generate_ingress, IngressMesh};
use umbra_xds::snapshot::Snapshot;

use crate::store::{Store, Stored};
use umbra_pki::identity::{Authority, Identity};

mod egress;
mod inputs;
mod snapshot;
pub mod vips;

use inputs::service_digests;
use snapshot::{publish, AdminInput};
pub use snapshot::{DpSnapshot, Fingerprint, TYPE_ORDER};
mod wake;

/// The least time between the end of a reconciliation pass and the start of the next: changes
/// within it wait for it and are handled by one pass.
pub const COALESCE: Duration = Duration::from_millis(20);

/// How long a pass waits after the change that woke it, for the writes that come with it (a
/// new ADS stream stores its Dataplane, then its Envoy's admin port; an API call writing
/// several resources), so that one pass sees them together.
pub const SETTLE: Duration = Duration::from_millis(5);

/// The longest a new ADS stream's first answer waits for the snapshot generated with the
/// admin port its Envoy just reported ([`Reconciler::admin_settled`]).
pub const ADMIN_SETTLE: Duration = Duration::from_secs(2);

/// Every proxy's published entry, by key.
type Published = HashMap<DpKey, Arc<DpSnapshot>>;

/// Key of a DPP: `(mesh, name)`.
pub use umbra_core::dataplane::DpKey;

/// What one DPP's turn in a reconciliation pass produced.
struct Regenerated {
    /// The DPP.
    key: DpKey,
    /// Its snapshot now: the previous one when its inputs did not change.
    snapshot: Arc<DpSnapshot>,
    /// It was generated again (its inputs changed).
    regenerated: bool,
    /// What Envoy receives changed.
    changed: bool,
    /// It holds a workload identity (an mTLS mesh whose CA issued one).
    has_identity: bool,
}

/// What one reconciliation did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// DPPs whose inputs changed and were regenerated.
    pub regenerated: usize,
    /// DPPs whose published state changed (new content, new or cleared error, removed).
    pub changed: usize,
}

/// The reconciler; share it with `Arc`.
#[derive(Debug)]
pub struct Reconciler {
    store: Store,
    state: RwLock<HashMap<DpKey, Arc<DpSnapshot>>>,
    /// The store revision `state` was computed from (written under `state`'s write lock, so a
    /// reader holding the read lock sees a matching pair); `u64::MAX` before the first pass.
    state_revision: std::sync::atomic::AtomicU64,
    /// [`Reconciler::reconciled_revision`].
    reconciled: std::sync::atomic::AtomicU64,
    changed: watch::Sender<u64>,
    /// Trace context of the latest pass, when it continued a trace: pushes it wakes join it.
    push_trace: std::sync::Mutex<Option<umbra_runtime::process::TraceContext>>,
    ca: Authority,
    /// Wakes [`Reconciler::run`] for a pass ([`Reconciler::adopt_identities`]).
    kick: tokio::sync::Notify,
    /// Per mesh, the EDS resources of the latest pass's [`MeshContext`]: the next pass adopts
    /// those whose content did not change, so every DPP's snapshot keeps sharing one
    /// allocation per service across passes (DPPs that are not regenerated keep theirs).
    load_assignments: std::sync::Mutex<HashMap<String, LoadAssignments>>,
    /// Equal clusters and listeners of the DPPs' snapshots, held once.
    interned: umbra_xds::snapshot::SnapshotInterner,
    /// This zone's name (what its ingresses answer with).
    zone: String,
    /// Part of a multi-zone deployment: endpoints get localities and other zones' ingresses.
    multi_zone: bool,
    /// The mesh CAs identities are issued from ([`Reconciler::with_cas`]).
    cas: watch::Receiver<Arc<umbra_pki::mesh_ca::MeshCas>>,
    /// Where each pass reports the DPPs' mTLS status ([`Reconciler::with_insights`]).
    insights: Option<Arc<crate::insight::Insights>>,
    /// [`Authority::changes`] as of the last mTLS report into `insights`.
    mtls_reported: std::sync::atomic::AtomicU64,
    /// The Envoy-admin CA the admin listeners are generated from ([`Reconciler::with_admin_tls`]).
    admin_tls: Option<Arc<crate::admin_tls::AdminTls>>,
    /// The DNS VIPs last allocated per mesh ([`vips`]).
    vips: vips::VipsCache,
}

type LoadAssignments = BTreeMap<
    String,
    umbra_xds::interner::Shared<
        envoy_types::pb::envoy::config::endpoint::v3::ClusterLoadAssignment,
    >,
>;

impl Reconciler {
    /// A reconciler over `store` (nothing generated until [`Reconciler::reconcile_once`] or
    /// [`Reconciler::run`]).
    pub fn new(store: Store) -> Self {
        let (changed, _) = watch::channel(0);
        let ca = Authority::new();
        if let Some(kept) = store.identities() {
            ca.restore(&kept);
        }
        Self {
            store,
            state: RwLock::new(HashMap::new()),
            state_revision: std::sync::atomic::AtomicU64::new(u64::MAX),
            reconciled: std::sync::atomic::AtomicU64::new(0),
            changed,
            push_trace: std::sync::Mutex::default(),
            ca,
            kick: tokio::sync::Notify::new(),
            load_assignments: std::sync::Mutex::default(),
            interned: umbra_xds::snapshot::SnapshotInterner::default(),
            zone: String::new(),
            multi_zone: false,
            cas: watch::channel(Arc::default()).1,
            insights: None,
            mtls_reported: std::sync::atomic::AtomicU64::new(u64::MAX),
            admin_tls: None,
            vips: vips::VipsCache::default(),
        }
    }

    /// This reconciler generating Kuma's mTLS admin listener ([`umbra_xds::base::admin`]) for
    /// every proxy whose admin port an Envoy reported ([`crate::insight::Insights::admin_port`];
    /// needs [`Reconciler::with_insights`]), with certificates from `tls`.
    #[must_use]
    pub fn with_admin_tls(mut self, tls: Arc<crate::admin_tls::AdminTls>) -> Self {
        self.admin_tls = Some(tls);
        self
    }

    /// Whether snapshots follow the admin ports Envoys report ([`Reconciler::with_insights`]):
    /// then [`DpSnapshot::admin_port`] says which one a snapshot was generated with.
    pub fn follows_admin_ports(&self) -> bool {
        self.insights.is_some()
    }

    /// The Envoy-admin certificates and client ([`Reconciler::with_admin_tls`]).
    pub fn admin_tls(&self) -> Option<&Arc<crate::admin_tls::AdminTls>> {
        self.admin_tls.as_ref()
    }

    /// This reconciler reporting each DPP's mTLS status into `insights` (Kuma's
    /// `DataplaneInsight.mTLS`) after every pass.
    #[must_use]
    pub fn with_insights(mut self, insights: Arc<crate::insight::Insights>) -> Self {
        self.insights = Some(insights);
        self
    }

    /// This zone's name (empty when not set, as in some tests).
    pub fn zone(&self) -> &str {
        &self.zone
    }

    /// The zone's place in a multi-zone deployment as of now (inspect builds contexts with it).
    pub fn zone_view(&self) -> crate::ingress::ZoneView {
        let mut view = crate::ingress::ZoneView::of(&self.store, &self.zone, self.multi_zone);
        view.admin = self.admin_lookup();
        view.insights.clone_from(&self.insights);
        view
    }

    /// The admin inputs' source, when this reconciler generates admin listeners.
    fn admin_lookup(&self) -> Option<crate::admin_tls::AdminLookup> {
        Some(crate::admin_tls::AdminLookup {
            insights: self.insights.clone()?,
            tls: self.admin_tls.clone()?,
        })
    }

    /// This reconciler issuing identities from the mesh CAs `cas` (the Global's, received over
    /// KDS; or the standalone zone's own): each pass takes the current ones, and a change wakes
    /// [`Reconciler::run`].
    #[must_use]
    pub fn with_cas(mut self, cas: watch::Receiver<Arc<umbra_pki::mesh_ca::MeshCas>>) -> Self {
        self.cas = cas;
        self
    }

    /// This reconciler in zone `zone`; `multi_zone` when the zone is part of a multi-zone
    /// deployment (federated): endpoints then carry their zone and other zones' ingresses
    /// become endpoints.
    #[must_use]
    pub fn with_zone(mut self, zone: &str, multi_zone: bool) -> Self {
        zone.clone_into(&mut self.zone);
        self.multi_zone = multi_zone;
        self
    }

    /// The trace context pushes should join: the latest pass's, when that pass continued a
    /// traced change; `None` otherwise.
    pub fn push_trace(&self) -> Option<umbra_runtime::process::TraceContext> {
        self.push_trace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The store revision the latest completed pass started from: every DPP's snapshot
    /// reflects at least this revision (0 before the first pass).
    pub fn reconciled_revision(&self) -> u64 {
        self.reconciled.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Subscribe to "some snapshot changed" wake-ups.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// The current snapshot of a DPP.
    pub fn get(&self, mesh: &str, name: &str) -> Option<Arc<DpSnapshot>> {
        self.state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&DpKey::new(mesh, name))
            .cloned()
    }

    /// The Live snapshots of `mesh`'s DPPs (those whose latest generation succeeded), if they
    /// were computed from store revision `revision` exactly; `None` when the reconciler is
    /// behind or ahead. Lets inspect reuse what proxies are served instead of generating it
    /// again (the fleet-wide shadow diff, issue 6). The snapshots hold SDS secrets.
    pub fn live_at(&self, revision: u64, mesh: &str) -> Option<HashMap<String, Arc<Snapshot>>> {
        let state = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if self
            .state_revision
            .load(std::sync::atomic::Ordering::Acquire)
            != revision
        {
            return None;
        }
        Some(
            state
                .iter()
                .filter(|(k, e)| k.mesh == mesh && e.error.is_none())
                .map(|(k, e)| (k.name.clone(), e.snapshot.clone()))
                .collect(),
        )
    }

    /// Bring every DPP up to date with the store once (regenerating only those whose inputs
    /// changed) and wake subscribers if anything they serve changed.
    pub fn reconcile_once(&self) -> Outcome {
        let start = std::time::Instant::now();
        // A traced change (a policy PUT on the Global, through KDS) makes this pass, and the
        // pushes it causes, part of that trace.
        let traced = self.store.take_trace();
        let span = match &traced {
            Some(parent) => {
                let span = tracing::info_span!("reconcile", regenerated = tracing::field::Empty);
                umbra_runtime::process::set_parent(&span, parent);
                span
            }
            None => tracing::Span::none(),
        };
        let _entered = span.enter();
        // Only a traced pass hands a context to its pushes: an untraced one runs inside the
        // task's long-lived `reconciler` span, which is no trace of a change.
        *self
            .push_trace
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = traced
            .and(Some(umbra_runtime::process::current_context()))
            .filter(|c| !c.is_empty());
        let outcome = self.reconcile_pass();
        span.record("regenerated", outcome.regenerated);
        metrics::histogram!(umbra_runtime::metrics::RECONCILE_SECONDS)
            .record(start.elapsed().as_secs_f64());
        metrics::counter!(umbra_runtime::metrics::RECONCILE_REGENERATED)
            .increment(outcome.regenerated as u64);
        outcome
    }

    fn reconcile_pass(&self) -> Outcome {
        // Read first: the state computed below reflects at least this revision, and exactly
        // it when nothing was written meanwhile.
        let revision = self.store.revision();
        let meshes = self.store.list(ResourceType::Mesh, "");
        let cas = self.cas.borrow().clone();
        for (name, reason) in self.ca.set_cas(&cas) {
            tracing::warn!(ca = %name, %reason, "mesh CA unusable: it issues no identity");
        }
        let previous = self
            .state
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        let mut next: HashMap<DpKey, Arc<DpSnapshot>> = HashMap::with_capacity(previous.len());
        let mut outcome = Outcome::default();
        // DPPs that hold a current identity after this pass; every other identity is dropped
        // (so a stale one never schedules rotations).
        let mut with_identity: std::collections::HashSet<DpKey> = std::collections::HashSet::new();
        let earlier_load_assignments = std::mem::take(
            &mut *self
                .load_assignments
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut load_assignments = HashMap::new();
        let ingresses = self.store.list_all(ResourceType::ZoneIngress);
        let ingress_specs: Vec<&umbra_core::zone_ingress::ZoneIngressSpec> = ingresses
            .iter()
            .filter_map(|s| s.resource.as_zone_ingress())
            .collect();
        let zones = self.multi_zone.then_some(Zones {
            local: &self.zone,
            ingresses: &ingress_specs,
        });
        let egresses = crate::egress::local(&self.store, &self.zone);
        let egress_addresses = crate::egress::addresses(&egresses);
        let mut egress_identities = egress::EgressIdentities::new();
        let now = std::time::SystemTime::now();
        // What this zone's ingresses are generated from, per mesh.
        let mut ingress_meshes: Vec<(MeshContext, PolicySet)> = Vec::new();
        for mesh in meshes {
            let Spec::Mesh(spec) = &mesh.resource.spec else {
                continue;
            };
            let mesh_name = mesh.resource.meta.name.as_str();
            let stored = self.store.mesh_stored(mesh_name);
            let revisions: inputs::Revisions<'_> = stored
                .iter()
                .map(|s| ((s.resource.ty(), s.resource.meta.name.as_str()), s.revision))
                .collect();
            let dataplanes: Vec<&Stored> = stored
                .iter()
                .filter(|s| s.resource.ty() == ResourceType::Dataplane)
                .collect();
            let mut ctx = MeshContext::build_in_zone(
                mesh_name,
                spec,
                dataplanes.iter().filter_map(|s| s.resource.as_dataplane()),
                zones,
            );
            let policies =
                PolicySet::build(mesh_name, stored.iter().map(|s| &s.resource), View::Live);
            let through_egress = spec.zone_egress_enabled() && spec.mtls_enabled();
            if through_egress {
                ctx.route_through_egress(&egress_addresses);
            }
            if let Some(earlier) = earlier_load_assignments.get(mesh_name) {
                ctx.share_load_assignments(earlier);
            }
            load_assignments.insert(mesh_name.to_owned(), ctx.load_assignments.clone());
            let mesh_vips = vips::refresh(
                &self.vips,
                &self.store,
                &self.zone,
                mesh_name,
                stored.iter().map(|s| &s.resource),
                &ingress_specs,
            );
            let services = service_digests(&ctx);
            // mTLS: the enabled backend, whose CA issues every DPP's identity (SDS).
            let backend = spec.mtls.as_ref().filter(|_| spec.mtls_enabled()).map(|m| {
                m.backends
                    .iter()
                    .find(|b| b.name == m.enabled_backend)
                    .ok_or_else(|| {
                        format!(
                            "mesh {mesh_name}: mtls.enabledBackend {:?} is not one of mtls.backends",
                            m.enabled_backend
                        )
                    })
            });
            let trusted = umbra_pki::mesh_ca::builtin_backends(spec);
            if let (true, Some(b)) = (through_egress, &backend) {
                for (name, id) in egress::identities(
                    &self.ca,
                    mesh_name,
                    b.as_ref().copied(),
                    &trusted,
                    &egresses,
                    now,
                ) {
                    egress_identities
                        .entry(name)
                        .or_default()
                        .insert(mesh_name.to_owned(), id);
                }
            }
            let results: Vec<Regenerated> = dataplanes
                .par_iter()
                .filter_map(|s| {
                    let name = s.resource.meta.name.as_str();
                    let raw = s.resource.as_dataplane()?;
                    let resolved = mesh_vips.resolved(name, s.revision, raw);
                    let dp = resolved.as_deref().unwrap_or(raw);
                    let key = DpKey::new(mesh_name, name);
                    let old = previous.get(&key);
                    let deps = inputs::dependencies_digest(dp, &policies, &revisions, &services);
                    let identity: Option<Result<Arc<Identity>, String>> =
                        backend.as_ref().map(|b| {
                            let b = b.as_ref().map_err(Clone::clone)?;
                            self.ca
                                .identity(mesh_name, name, b, &trusted, dp, now)
                                .map_err(|e| e.to_string())
                        });
                    // The admin port is an input; its certificate is looked up (or issued)
                    // only when the DPP is regenerated.
                    let admin_port = self
                        .insights
                        .as_ref()
                        .and_then(|i| i.admin_port(mesh_name, name));
                    // A transparent proxy's VIP outbounds and kuma:dns table.
                    let dns_port = self
                        .insights
                        .as_ref()
                        .and_then(|i| i.dns_port(mesh_name, name));
                    let inputs = inputs::Outer {
                        revisions: (mesh.revision, s.revision),
                        admin_port,
                        egresses: through_egress.then_some(&egress_addresses[..]),
                        transparent: (dp.networking.transparent_proxying.is_some())
                            .then_some((&mesh_vips.digest, dns_port)),
                        identity: identity.as_ref(),
                    }
                    .fingerprint(&deps);
                    let has_identity = matches!(identity, Some(Ok(_)));
                    if let Some(old) = old.filter(|o| o.inputs == inputs) {
                        return Some(Regenerated {
                            key,
                            snapshot: old.clone(),
                            regenerated: false,
                            changed: false,
                            has_identity,
                        });
                    }
                    let admin = admin_port.and_then(|port| {
                        self.admin_tls.as_ref()?.input(&dp.networking.address, port)
                    });
                    let dns = dns_port
                        .filter(|_| dp.networking.transparent_proxying.is_some())
                        .map(|port| mesh_vips.dns_input(port));
                    let (snapshot, changed) = self.regenerate(
                        &key,
                        (dp, dns.as_ref()),
                        &ctx,
                        &policies,
                        identity,
                        (admin, admin_port),
                        old,
                        inputs,
                    );
                    Some(Regenerated {
                        key,
                        snapshot,
                        regenerated: true,
                        changed,
                        has_identity,
                    })
                })
                .collect();
            for r in results {
                outcome.regenerated += usize::from(r.regenerated);
                outcome.changed += usize::from(r.changed);
                if r.has_identity {
                    with_identity.insert(r.key.clone());
                }
                next.insert(r.key, r.snapshot);
            }
            ingress_meshes.push((ctx, policies));
        }
        // This zone's ingresses, over every mesh.
        let views: Vec<IngressMesh<'_>> = ingress_meshes
            .iter()
            .map(|(ctx, policies)| IngressMesh { ctx, policies })
            .collect();
        for s in &ingresses {
            let Some(zi) = s.resource.as_zone_ingress() else {
                continue;
            };
            if zi.is_remote(&self.zone) {
                continue;
            }
            let key = DpKey::new("", s.resource.meta.name.as_str());
            let snapshot = generate_ingress(&key.name, zi, &views);
            self.publish_zone_proxy(
                key,
                Ok(snapshot),
                &zi.networking.address,
                (&previous, &mut next),
                &mut outcome,
            );
        }
        // This zone's egresses, over every mesh that routes through them.
        let egress_views: Vec<umbra_xds::egress::EgressMesh<'_>> = ingress_meshes
            .iter()
            .map(|(ctx, policies)| umbra_xds::egress::EgressMesh { ctx, policies })
            .collect();
        for (name, ze) in &egresses {
            let generated = egress::generate(
                (name, ze),
                &self.zone,
                &egress_views,
                egress_identities.get(name),
                &mut with_identity,
            );
            self.publish_zone_proxy(
                DpKey::zone_egress(name.as_str()),
                generated,
                &ze.networking.address,
                (&previous, &mut next),
                &mut outcome,
            );
        }
        *self
            .load_assignments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = load_assignments;
        // Identities of DPPs that are gone, no longer in an mTLS mesh or whose identity failed
        // are dropped.
        self.ca.retain(|k| with_identity.contains(k));
        if let Some(insights) = &self.insights {
            // Only when an identity was issued, restored or dropped since the last report.
            let changes = self.ca.changes();
            let reported = self
                .mtls_reported
                .swap(changes, std::sync::atomic::Ordering::AcqRel);
            if reported != changes {
                let mut statuses = self.ca.statuses();
                // A ZoneEgress's identities are no DPP's insight.
                statuses.retain(|k, _| !egress::is_identity_name(&k.name));
                insights.set_mtls(&statuses);
            }
        }
        // Kept before any proxy is pushed what was issued, so a restart serves the same ones.
        if let Some(bytes) = self.ca.export() {
            // Replicas of the zone: a DPP keeps the identity the first replica issued it.
            let known = |mesh: &str, name: &str| {
                if egress::is_identity_name(name) {
                    return egresses
                        .iter()
                        .any(|(ze, _)| egress::identity_name(ze) == name);
                }
                self.store
                    .get(&ResourceKey::dataplane(mesh, name))
                    .is_some()
            };
            match self.store.record_identities(bytes, &known) {
                Ok(Some(merged)) => self.adopt_identities(&merged),
                Ok(None) => {}
                Err(e) => {
                    tracing::warn!(error = %e, "cannot keep the issued identities; a restart will reissue them");
                }
            }
        }
        // Dataplanes that disappeared count as changes too (their streams must notice).
        let gone: Vec<&DpKey> = previous.keys().filter(|k| !next.contains_key(*k)).collect();
        outcome.changed += gone.len();
        if let (Some(insights), false) = (&self.insights, gone.is_empty()) {
            insights.forget_disconnected(&gone);
        }
        let mut state = self
            .state
            .write()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *state = next;
        // A write that landed during this pass makes the state newer than `revision`: then no
        // revision is exact.
        let exact = if self.store.revision() == revision {
            revision
        } else {
            u64::MAX
        };
        self.state_revision
            .store(exact, std::sync::atomic::Ordering::Release);
        self.reconciled
            .fetch_max(revision, std::sync::atomic::Ordering::AcqRel);
        drop(state);
        if outcome.regenerated > 0 {
            self.interned.sweep();
        }
        if outcome.changed > 0 {
            self.changed.send_modify(|v| *v += 1);
        }
        outcome
    }

    /// Generate one DPP whose inputs changed; returns its entry and whether what it serves
    /// (content or error) changed.
    #[allow(clippy::too_many_arguments)]
    fn regenerate(
        &self,
        key: &DpKey,
        (dp, dns): (
            &umbra_core::dataplane::DataplaneSpec,
            Option<&umbra_xds::generate::DnsInput>,
        ),
        ctx: &MeshContext,
        policies: &PolicySet,
        identity: Option<Result<Arc<Identity>, String>>,
        (admin, admin_port): AdminInput,
        old: Option<&Arc<DpSnapshot>>,
        inputs: Fingerprint,
    ) -> (Arc<DpSnapshot>, bool) {
        let start = std::time::Instant::now();
        let generated = generate(
            Proxy {
                name: &key.name,
                dataplane: dp,
                admin: admin.as_deref(),
                dns,
            },
            ctx,
            policies,
        );
        metrics::histogram!(umbra_runtime::metrics::XDS_GENERATION, "view" => "live")
            .record(start.elapsed().as_secs_f64());
        let generated = generated
            .map_err(|e| e.to_string())
            .and_then(|mut snapshot| {
                if let Some(identity) = identity {
                    let id = identity?;
                    for secret in mesh_secrets(
                        &key.mesh,
                        id.cert_pem.as_bytes(),
                        id.key_pem.as_bytes(),
                        id.ca_pem.as_bytes(),
                    ) {
                        snapshot.secrets.insert(secret.name.clone(), secret.into());
                    }
                }
                Ok(snapshot)
            });
        publish(
            &self.interned,
            key,
            generated,
            old,
            inputs,
            (admin, admin_port),
        )
    }

    /// Publish a zone proxy's (ingress or egress) generation result into `next`, with its admin
    /// listener when its Envoy reported an admin port. Zone proxies are generated on every pass
    /// (a handful per zone): counted in `outcome` when what one serves changed.
    fn publish_zone_proxy(
        &self,
        key: DpKey,
        generated: Result<Snapshot, String>,
        address: &str,
        (previous, next): (&Published, &mut Published),
        outcome: &mut Outcome,
    ) {
        let admin_port = self
            .insights
            .as_ref()
            .and_then(|i| i.admin_port(&key.mesh, &key.name));
        let admin = self
            .admin_lookup()
            .and_then(|l| l.input(&key.mesh, &key.name, address));
        let generated = generated.map(|mut snapshot| {
            if let Some(a) = &admin {
                umbra_xds::base::admin::generate(&mut snapshot, address, a);
            }
            snapshot
        });
        let old = previous.get(&key);
        let (entry, changed) = publish(
            &self.interned,
            &key,
            generated,
            old,
            [0; 32],
            (admin, admin_port),
        );
        outcome.regenerated += usize::from(changed);
        outcome.changed += usize::from(changed);
        next.insert(key, entry);
    }

    /// Serve the identities another replica of the zone issued (an
    /// [`umbra_pki::identity::Authority::export`], as the shared store keeps it): taken as they
    /// are where still good, and the next pass regenerates the DPPs whose certificate changed.
    pub fn adopt_identities(&self, exported: &[u8]) {
        self.ca.restore(exported);
        self.kick.notify_one();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use umbra_core::resource::Resource;

    fn put(store: &Store, y: &str) {
        store
            .put(Resource::from_bytes(y.as_bytes()).unwrap(), None)
            .unwrap();
    }

    #[test]
    fn bad_policy_keeps_last_good_snapshot_and_spares_others() {
        let store = Store::new();
        put(&store, "type: Mesh\nname: m\n");
        put(&store, "type: Dataplane\nmesh: m\nname: a\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: a, kuma.io/protocol: http}\n");
        put(&store, "type: Dataplane\nmesh: m\nname: b\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: b, kuma.io/protocol: http}\n");
        let rec = Reconciler::new(store.clone());
        assert_eq!(
            rec.reconcile_once(),
            Outcome {
                regenerated: 2,
                changed: 2
            }
        );
        assert_eq!(
            rec.reconcile_once(),
            Outcome::default(),
            "nothing changed, nothing regenerated or published"
        );
        let a_before = rec.get("m", "a").unwrap();
        // A patch on a missing path, selecting only `a`.
        put(&store, "type: MeshProxyPatch\nmesh: m\nname: broken\nspec:\n  targetRef: {kind: MeshService, name: a}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {name: 'localhost:80'}\n        jsonPatches:\n        - {op: replace, path: /no/such/path, value: 1}\n");
        rec.reconcile_once();
        let a = rec.get("m", "a").unwrap();
        assert!(
            a.error
                .as_deref()
                .is_some_and(|e| e.contains("MeshProxyPatch/broken")),
            "{:?}",
            a.error
        );
        assert_eq!(
            a.versions, a_before.versions,
            "a keeps its last good snapshot"
        );
        assert!(rec.get("m", "b").unwrap().error.is_none());
    }

    #[test]
    fn sidecars_follow_their_zone_egress() {
        let store = Store::new();
        put(&store, SLOTS[0][2]);
        put(&store, SLOTS[1][0]);
        // The ExternalService and ZoneEgress slots, before the observe-mode one.
        let ext = SLOTS.len() - 3;
        put(&store, SLOTS[ext][0]);
        put(&store, SLOTS[ext + 1][0]);
        let cas = mesh_cas();
        let rec = zone_reconciler(&store, true, &cas);
        let at = |rec: &Reconciler| -> String {
            let web = rec.get("m", "web").unwrap();
            let doc = web.snapshot.to_document().unwrap();
            doc["type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment"]["ext"]
                .to_string()
        };
        rec.reconcile_once();
        assert!(at(&rec).contains("10.1.0.9"), "{}", at(&rec));
        let egress = rec
            .get(umbra_core::dataplane::ZONE_EGRESS_KEY_MESH, "ze")
            .unwrap();
        assert!(egress.error.is_none(), "{:?}", egress.error);
        assert!(
            egress
                .snapshot
                .secrets
                .contains_key("identity_cert:secret:m"),
            "the egress's identity in mesh m"
        );
        // The egress moves: web's endpoint for ext follows.
        put(&store, SLOTS[ext + 1][1]);
        rec.reconcile_once();
        assert!(at(&rec).contains("10.1.0.10"), "{}", at(&rec));
    }

    /// Slots of a small mesh; each op puts one variant of a slot or deletes it. Variants cover
    /// every input kind of [`umbra_core::dependencies`]: the Mesh (mTLS on/off), Dataplanes (tags,
    /// readiness, outbounds), new policies by each top-level targetRef kind (Mesh, MeshService,
    /// MeshSubset, MeshHTTPRoute, shadow), old policies (superseded or not), MeshHTTPRoutes.
    const SLOTS: &[&[&str]] = &[
        &[
            "type: Mesh\nname: m\n",
            "type: Mesh\nname: m\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - {name: ca-1, type: builtin}\n",
            "type: Mesh\nname: m\nrouting: {zoneEgress: true}\nmtls:\n  enabledBackend: ca-1\n  backends:\n  - {name: ca-1, type: builtin}\n",
        ],
        &[
            "type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web, kuma.io/protocol: http}\n  outbound:\n  - {port: 9001, tags: {kuma.io/service: backend}}\n  - {port: 9002, tags: {kuma.io/service: db}}\n  - {port: 9003, tags: {kuma.io/service: ext}}\n",
            "type: Dataplane\nmesh: m\nname: web\nnetworking:\n  address: 10.0.0.1\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: web, kuma.io/protocol: http, version: v2}\n  outbound:\n  - {port: 9001, tags: {kuma.io/service: backend}}\n",
        ],
        &[
            "type: Dataplane\nmesh: m\nname: backend-1\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: backend, kuma.io/protocol: http}\n",
            "type: Dataplane\nmesh: m\nname: backend-1\nnetworking:\n  address: 10.0.0.2\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: backend, kuma.io/protocol: tcp}\n",
        ],
        &[
            "type: Dataplane\nmesh: m\nname: backend-2\nnetworking:\n  address: 10.0.0.3\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: backend, kuma.io/protocol: http, version: v2}\n",
            "type: Dataplane\nmesh: m\nname: backend-2\nnetworking:\n  address: 10.0.0.3\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: backend, kuma.io/protocol: http, version: v2}\n    health: {ready: false}\n",
        ],
        &[
            "type: Dataplane\nmesh: m\nname: db\nnetworking:\n  address: 10.0.0.4\n  inbound:\n  - port: 5432\n    tags: {kuma.io/service: db, kuma.io/protocol: tcp}\n  outbound:\n  - {port: 9001, tags: {kuma.io/service: backend}}\n",
            "type: Dataplane\nmesh: m\nname: db\nnetworking:\n  address: 10.0.0.4\n  inbound:\n  - port: 5432\n    tags: {kuma.io/service: db, kuma.io/protocol: tcp}\n  - port: 9902\n    tags: {kuma.io/service: db-admin, kuma.io/protocol: http}\n  outbound:\n  - {port: 9001, tags: {kuma.io/service: backend}}\n",
        ],
        &[
            "type: MeshTimeout\nmesh: m\nname: mesh-wide\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 11s}}]\n",
            "type: MeshTimeout\nmesh: m\nname: mesh-wide\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 12s, http: {requestTimeout: 3s}}}]\n",
            "type: MeshTimeout\nmesh: m\nname: mesh-wide\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 13s}}]\n",
        ],
        &[
            "type: MeshTimeout\nmesh: m\nname: backend-in\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from: [{targetRef: {kind: Mesh}, default: {idleTimeout: 21s}}]\n",
            "type: MeshTimeout\nmesh: m\nname: backend-in\nspec:\n  targetRef: {kind: MeshSubset, tags: {version: v2}}\n  from: [{targetRef: {kind: MeshService, name: web}, default: {idleTimeout: 22s}}]\n",
        ],
        &[
            "type: Timeout\nmesh: m\nname: web-to-backend\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: backend}}]\nconf: {connectTimeout: 4s}\n",
            "type: Timeout\nmesh: m\nname: web-to-backend\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: '*'}}]\nconf: {connectTimeout: 5s}\n",
        ],
        &[
            "type: CircuitBreaker\nmesh: m\nname: cb\nsources: [{match: {kuma.io/service: '*'}}]\ndestinations: [{match: {kuma.io/service: backend}}]\nconf: {thresholds: {maxConnections: 7}}\n",
        ],
        &[
            "type: MeshCircuitBreaker\nmesh: m\nname: mcb\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to: [{targetRef: {kind: MeshService, name: backend}, default: {connectionLimits: {maxConnections: 8}}}]\n",
        ],
        &[
            "type: TrafficPermission\nmesh: m\nname: tp\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: backend}}]\n",
        ],
        &[
            "type: MeshTrafficPermission\nmesh: m\nname: mtp\nspec:\n  targetRef: {kind: MeshService, name: db}\n  from: [{targetRef: {kind: MeshService, name: backend}, default: {action: Deny}}]\n",
        ],
        &[
            "type: FaultInjection\nmesh: m\nname: fi\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: backend, kuma.io/protocol: http}}]\nconf: {abort: {httpStatus: 500, percentage: 50}}\n",
        ],
        &[
            "type: MeshFaultInjection\nmesh: m\nname: mfi\nspec:\n  targetRef: {kind: MeshService, name: db}\n  from: [{targetRef: {kind: Mesh}, default: {http: [{delay: {value: 1s, percentage: 10}}]}}]\n",
            "type: MeshFaultInjection\nmesh: m\nname: mfi\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: db}\n  from: [{targetRef: {kind: Mesh}, default: {http: [{delay: {value: 1s, percentage: 10}}]}}]\n",
        ],
        &[
            "type: MeshHTTPRoute\nmesh: m\nname: route\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /api}}]\n      default: {}\n",
        ],
        &[
            "type: MeshTimeout\nmesh: m\nname: on-route\nspec:\n  targetRef: {kind: MeshHTTPRoute, name: route}\n  to: [{targetRef: {kind: Mesh}, default: {http: {requestTimeout: 9s}}}]\n",
        ],
        &[
            "type: ProxyTemplate\nmesh: m\nname: pt\nselectors: [{match: {kuma.io/service: db}}]\nconf:\n  imports: [default-proxy]\n  modifications:\n  - cluster: {operation: add, value: \"name: extra\\nconnectTimeout: 1s\\ntype: STATIC\"}\n",
            "type: ProxyTemplate\nmesh: m\nname: pt\nselectors: []\nconf:\n  imports: [default-proxy]\n  modifications:\n  - cluster: {operation: add, value: \"name: everyone\\nconnectTimeout: 2s\\ntype: STATIC\"}\n",
            "type: MeshProxyPatch\nmesh: m\nname: pt\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  default:\n    appendModifications:\n    - cluster:\n        operation: Patch\n        match: {name: 'localhost:80'}\n        jsonPatches: [{op: replace, path: /no/such/path, value: 1}]\n",
        ],
        // A service no sidecar has an outbound to, reached only through a route's backends
        // (issue 39: route backends are dependencies), ready or not.
        &[
            "type: Dataplane\nmesh: m\nname: canary-1\nnetworking:\n  address: 10.0.0.5\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: canary, kuma.io/protocol: http}\n",
            "type: Dataplane\nmesh: m\nname: canary-1\nnetworking:\n  address: 10.0.0.5\n  inbound:\n  - port: 80\n    tags: {kuma.io/service: canary, kuma.io/protocol: http}\n    health: {ready: false}\n",
        ],
        &[
            "type: MeshHTTPRoute\nmesh: m\nname: split\nspec:\n  targetRef: {kind: Mesh}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /v2}}]\n      default:\n        backendRefs: [{kind: MeshService, name: backend, weight: 1}, {kind: MeshService, name: canary, weight: 1}]\n",
            "type: MeshHTTPRoute\nmesh: m\nname: split\nspec:\n  targetRef: {kind: MeshService, name: web}\n  to:\n  - targetRef: {kind: MeshService, name: backend}\n    rules:\n    - matches: [{path: {type: PathPrefix, value: /v2}}]\n      default:\n        filters: [{type: RequestMirror, requestMirror: {backendRef: {kind: MeshService, name: canary}}}]\n",
            "type: TrafficRoute\nmesh: m\nname: split\nsources: [{match: {kuma.io/service: web}}]\ndestinations: [{match: {kuma.io/service: backend}}]\nconf:\n  split:\n  - {weight: 1, destination: {kuma.io/service: backend}}\n  - {weight: 1, destination: {kuma.io/service: canary}}\n",
        ],
        // Mesh-wide policies whose `to` names one service: a dependency of its callers only.
        &[
            "type: MeshRetry\nmesh: m\nname: to-one\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: canary}, default: {http: {numRetries: 3}}}]\n",
            "type: MeshRetry\nmesh: m\nname: to-one\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {tcp: {maxConnectAttempt: 2}}}]\n",
            "type: MeshRetry\nmesh: m\nname: to-one\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshServiceSubset, name: backend, tags: {version: v2}}, default: {http: {numRetries: 4}}}]\n",
        ],
        &[
            "type: MeshTimeout\nmesh: m\nname: to-db\nspec:\n  targetRef: {kind: Mesh}\n  to: [{targetRef: {kind: MeshService, name: db}, default: {idleTimeout: 31s}}]\n",
            "type: MeshTimeout\nmesh: m\nname: to-db\nspec:\n  targetRef: {kind: MeshSubset, tags: {kuma.io/service: web}}\n  to: [{targetRef: {kind: MeshService, name: canary}, default: {idleTimeout: 32s}}, {targetRef: {kind: MeshService, name: db}, default: {connectionTimeout: 2s}}]\n",
        ],
        // A MeshTimeout selecting one of db's inbounds only: a Mesh-wide one to a service db
        // does not call still decides whether MeshTimeouts apply to its other inbound.
        &[
            "type: MeshTimeout\nmesh: m\nname: db-in\nspec:\n  targetRef: {kind: MeshService, name: db}\n  to: [{targetRef: {kind: Mesh}, default: {idleTimeout: 41s}}]\n  from: [{targetRef: {kind: Mesh}, default: {idleTimeout: 42s}}]\n",
        ],
        // Two ingresses of zone-2 behind one advertised address (one endpoint for both), then
        // at their own; and this zone's own ingress.
        &[
            "type: ZoneIngress\nname: zi-a\nzone: zone-2\nnetworking: {address: 10.2.0.1, port: 10001, advertisedAddress: 192.168.2.1, advertisedPort: 10001}\navailableServices:\n- {mesh: m, instances: 2, tags: {kuma.io/service: backend, kuma.io/protocol: http}}\n",
            "type: ZoneIngress\nname: zi-a\nzone: zone-2\nnetworking: {address: 10.2.0.1, port: 10001, advertisedAddress: 192.168.2.1, advertisedPort: 10001}\navailableServices:\n- {mesh: m, instances: 3, tags: {kuma.io/service: backend, kuma.io/protocol: http}}\n- {mesh: m, instances: 1, tags: {kuma.io/service: db, kuma.io/protocol: tcp}}\n",
        ],
        &[
            "type: ZoneIngress\nname: zi-b\nzone: zone-2\nnetworking: {address: 10.2.0.2, port: 10001, advertisedAddress: 192.168.2.1, advertisedPort: 10001}\navailableServices:\n- {mesh: m, instances: 1, tags: {kuma.io/service: db, kuma.io/protocol: tcp}}\n",
            "type: ZoneIngress\nname: zi-b\nzone: zone-2\nnetworking: {address: 10.2.0.2, port: 10001, advertisedAddress: 192.168.2.2, advertisedPort: 10001}\navailableServices:\n- {mesh: m, instances: 1, tags: {kuma.io/service: db, kuma.io/protocol: tcp}}\n",
        ],
        &[
            "type: ZoneIngress\nname: local-zi\nnetworking: {address: 10.1.0.1, port: 10001}\n",
        ],
        // An ExternalService, and this zone's egress at one address or another: with the
        // Mesh's `routing.zoneEgress`, sidecars reach `ext` (and zone-2) through it.
        &[
            "type: ExternalService\nmesh: m\nname: ext\ntags: {kuma.io/service: ext, kuma.io/protocol: http}\nnetworking: {address: 'ext.example.com:443'}\n",
        ],
        &[
            "type: ZoneEgress\nname: ze\nnetworking: {address: 10.1.0.9, port: 10002}\n",
            "type: ZoneEgress\nname: ze\nnetworking: {address: 10.1.0.10, port: 10002}\n",
        ],
        // Observe mode (issue 40): the same permission observed, shadow only, and live.
        &[
            "type: MeshTrafficPermission\nmesh: m\nname: mtp-observed\nlabels: {kuma.io/effect: shadow, umbra.io/observe: 'true'}\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from: [{targetRef: {kind: MeshService, name: web}, default: {action: Deny}}]\n",
            "type: MeshTrafficPermission\nmesh: m\nname: mtp-observed\nlabels: {kuma.io/effect: shadow}\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from: [{targetRef: {kind: MeshService, name: web}, default: {action: Deny}}]\n",
            "type: MeshTrafficPermission\nmesh: m\nname: mtp-observed\nspec:\n  targetRef: {kind: MeshService, name: backend}\n  from: [{targetRef: {kind: MeshService, name: web}, default: {action: Deny}}]\n",
        ],
    ];

    /// A reconciler of zone-1 (multi-zone when `multi`), issuing from one CA for mesh `m`.
    fn zone_reconciler(
        store: &Store,
        multi: bool,
        cas: &watch::Sender<Arc<umbra_pki::mesh_ca::MeshCas>>,
    ) -> Reconciler {
        Reconciler::new(store.clone())
            .with_zone("zone-1", multi)
            .with_cas(cas.subscribe())
    }

    fn mesh_cas() -> watch::Sender<Arc<umbra_pki::mesh_ca::MeshCas>> {
        let ca =
            umbra_pki::mesh_ca::generate_root("m", "ca-1", std::time::SystemTime::now()).unwrap();
        watch::channel(Arc::new(
            [(umbra_pki::mesh_ca::ca_name("m", "ca-1"), ca)].into(),
        ))
        .0
    }

    #[derive(Debug, Clone)]
    enum Op {
        Put(usize, usize),
        Delete(usize),
    }

    fn op() -> impl Strategy<Value = Op> {
        let any = (0..SLOTS.len(), 0..3usize, 0..5u8).prop_map(|(slot, variant, kind)| {
            if kind == 0 && slot > 0 {
                Op::Delete(slot)
            } else {
                Op::Put(slot, variant % SLOTS[slot].len())
            }
        });
        // Often a slot with several variants: a resource updated in place (a policy whose
        // revision changes while it stays a dependency, the case a pass that keeps the
        // dependencies of unreached DPPs must not miss).
        let several: Vec<usize> = (0..SLOTS.len()).filter(|i| SLOTS[*i].len() > 1).collect();
        let update = (proptest::sample::select(several), 0..3usize)
            .prop_map(|(slot, variant)| Op::Put(slot, variant % SLOTS[slot].len()));
        prop_oneof![3 => any, 2 => update]
    }

    fn apply(store: &Store, op: &Op) {
        match op {
            Op::Put(slot, variant) => {
                let r = Resource::from_bytes(SLOTS[*slot][*variant].as_bytes()).unwrap();
                let _ = store.put(r, None); // NoMesh after the Mesh... never deleted (slot 0).
            }
            Op::Delete(slot) => {
                let r = Resource::from_bytes(SLOTS[*slot][0].as_bytes()).unwrap();
                let _ = store.delete(&r.key());
            }
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 128, ..ProptestConfig::default() })]

        /// Regenerating only the DPPs whose fingerprint changed gives exactly what a full
        /// regeneration from scratch gives, after every change, in a single-zone and in a
        /// multi-zone deployment (other zones' ingresses as endpoints). Each case starts from
        /// a random mesh (the first variant of some slots).
        #[test]
        fn incremental_reconciliation_equals_full(
            initial in proptest::collection::vec(proptest::bool::ANY, SLOTS.len()),
            ops in proptest::collection::vec(op(), 1..14),
            multi in proptest::bool::ANY,
        ) {
            let store = Store::new();
            put(&store, SLOTS[0][0]);
            for (slot, _) in initial.iter().enumerate().skip(1).filter(|(_, on)| **on) {
                put(&store, SLOTS[slot][0]);
            }
            let cas = mesh_cas();
            let incremental = zone_reconciler(&store, multi, &cas);
            incremental.reconcile_once();
            for op in &ops {
                apply(&store, op);
                incremental.reconcile_once();
                let full = zone_reconciler(&store, multi, &cas);
                full.reconcile_once();
                let a = incremental.state.read().unwrap().clone();
                let b = full.state.read().unwrap().clone();
                let keys = |m: &HashMap<DpKey, Arc<DpSnapshot>>| {
                    let mut k: Vec<DpKey> = m.keys().cloned().collect();
                    k.sort();
                    k
                };
                prop_assert_eq!(keys(&a), keys(&b));
                for (key, full_entry) in &b {
                    let inc = &a[key];
                    prop_assert_eq!(&inc.error, &full_entry.error, "{:?} after {:?}", key, op);
                    if full_entry.error.is_some() {
                        // The incremental side keeps its last good snapshot, which a reconciler
                        // started from scratch never had.
                        continue;
                    }
                    // Identities are issued per reconciler (fresh keys): compare which secrets
                    // exist, and everything else in full.
                    let without_secrets = |s: &Snapshot| {
                        let mut s = s.clone();
                        let names: Vec<String> = s.secrets.keys().cloned().collect();
                        s.secrets.clear();
                        (s.to_document().unwrap(), names)
                    };
                    prop_assert_eq!(
                        without_secrets(&inc.snapshot),
                        without_secrets(&full_entry.snapshot),
                        "{:?} after {:?}", key, op
                    );
                }
            }
        }
    }

    #[test]
    fn dataplanes_share_one_load_assignment_per_service_across_passes() {
        use umbra_xds::interner::Shared;
        let store = Store::new();
        for slot in &SLOTS[..5] {
            put(&store, slot[0]);
        }
        let rec = Reconciler::new(store.clone());
        rec.reconcile_once();
        let backend =
            |name: &str| rec.get("m", name).unwrap().snapshot.endpoints["backend"].clone();
        let first = backend("web");
        assert!(Shared::ptr_eq(&first, &backend("db")));
        // Their equal outbound clusters are one allocation too (issue 21), and stay so exactly
        // while they are equal.
        let cluster = |name: &str| rec.get("m", name).unwrap().snapshot.clusters["backend"].clone();
        let shared = |a: &str, b: &str| Shared::ptr_eq(&cluster(a), &cluster(b));
        assert!(shared("web", "db"));
        // Only web regenerates (an old Timeout from web): its new context adopts the earlier
        // allocation, which db (not regenerated) still holds.
        put(&store, SLOTS[7][0]);
        assert_eq!(rec.reconcile_once().regenerated, 1);
        assert!(Shared::ptr_eq(&backend("web"), &backend("db")));
        assert!(Shared::ptr_eq(&backend("web"), &first));
        // backend-2 goes not ready: a new assignment, shared by both consumers again.
        put(&store, SLOTS[3][1]);
        rec.reconcile_once();
        assert!(!Shared::ptr_eq(&backend("web"), &first));
        assert!(Shared::ptr_eq(&backend("web"), &backend("db")));
        assert_eq!(backend("web").endpoints[0].lb_endpoints.len(), 1);
        assert_eq!(shared("web", "db"), *cluster("web") == *cluster("db"));
    }

    /// Issue 39: a Mesh-wide policy whose `to` names one service regenerates that service's
    /// callers only; a route's backends are reached services, whose endpoint changes reach the
    /// route's callers.
    #[test]
    fn a_policy_to_one_service_regenerates_its_callers_only() {
        let store = Store::new();
        for slot in &SLOTS[..5] {
            put(&store, slot[0]);
        }
        let rec = Reconciler::new(store.clone());
        assert_eq!(rec.reconcile_once().regenerated, 4);
        // A Mesh-wide MeshTimeout: every DPP reads it.
        put(&store, SLOTS[5][0]);
        assert_eq!(rec.reconcile_once().regenerated, 4);
        // A Mesh-wide MeshTimeout to db: only web calls db; for the others the Mesh-wide one
        // already decides that MeshTimeouts apply.
        assert!(SLOTS[20][0].contains("name: to-db"));
        put(&store, SLOTS[20][0]);
        assert_eq!(rec.reconcile_once().regenerated, 1);
        // canary: its own DPP only.
        put(&store, SLOTS[17][0]);
        assert_eq!(rec.reconcile_once().regenerated, 1);
        // The only MeshRetry, to canary, which nobody reaches: not narrowed (whether a type
        // applies to a DPP at all is decided by the policies it reads), so everyone reads it.
        assert!(SLOTS[19][0].contains("name: canary"));
        put(&store, SLOTS[19][0]);
        assert_eq!(rec.reconcile_once().regenerated, 5);
        assert!(SLOTS[19][1].contains("name: db"));
        put(&store, SLOTS[19][1]);
        assert_eq!(rec.reconcile_once().regenerated, 5);
        // A Mesh-wide route splitting backend to canary: every DPP reads MeshHTTPRoutes.
        put(&store, SLOTS[18][0]);
        assert_eq!(rec.reconcile_once().regenerated, 5);
        let canary_endpoints = |name: &str| {
            let dp = rec.get("m", name).unwrap();
            let cla = dp.snapshot.endpoints.get("canary").cloned();
            cla.map(|c| {
                c.endpoints
                    .iter()
                    .map(|l| l.lb_endpoints.len())
                    .sum::<usize>()
            })
        };
        assert_eq!(canary_endpoints("web"), Some(1));
        assert_eq!(canary_endpoints("db"), Some(1));
        // canary goes not ready: web and db send to it through the route.
        put(&store, SLOTS[17][1]);
        assert_eq!(rec.reconcile_once().regenerated, 3);
        // Its only endpoint is gone from both (the property test below checks the whole
        // config against a full regeneration).
        assert_ne!(canary_endpoints("web"), Some(1));
        assert_ne!(canary_endpoints("db"), Some(1));
    }

    #[test]
    fn a_change_regenerates_only_affected_dataplanes() {
        let store = Store::new();
        for slot in &SLOTS[..5] {
            put(&store, slot[0]);
        }
        let rec = Reconciler::new(store.clone());
        assert_eq!(rec.reconcile_once().regenerated, 4);
        // A policy selecting only backend inbounds: backend-1 and backend-2 regenerate.
        put(&store, SLOTS[6][0]);
        assert_eq!(
            rec.reconcile_once(),
            Outcome {
                regenerated: 2,
                changed: 2
            }
        );
        // backend-2 goes not ready: backend-2 itself and the consumers of backend (web, db).
        put(&store, SLOTS[3][1]);
        assert_eq!(rec.reconcile_once().regenerated, 3);
        // An old Timeout from web to backend: only web (superseded by backend-in, but baked in
        // as Kuma 2.7 does).
        put(&store, SLOTS[7][0]);
        assert_eq!(rec.reconcile_once().regenerated, 1);
        // A mesh-wide MeshTimeout: everyone (and it supersedes the Timeout).
        put(&store, SLOTS[5][0]);
        assert_eq!(rec.reconcile_once().regenerated, 4);
        // The same policy as shadow: Live configs go back, everyone regenerates.
        put(&store, SLOTS[5][2]);
        assert_eq!(rec.reconcile_once().regenerated, 4);
        // A shadow policy edit: nobody's Live inputs change.
        put(
            &store,
            &SLOTS[5][2].replace("idleTimeout: 13s", "idleTimeout: 14s"),
        );
        assert_eq!(rec.reconcile_once(), Outcome::default());
    }
}
