//! Typed until sealed (issue 39, item 1): while a sidecar's snapshot is generated, the typed
//! configs the plugins edit one after another (HTTP connection managers, TCP proxies and other
//! network filters, a cluster's upstream HTTP protocol options) stay decoded, and each is
//! protobuf-encoded once, when the snapshot is sealed.
//!
//! Envoy's resources hold these configs packed in `google.protobuf.Any`. Without drafts, every
//! plugin decoded each connection manager, edited it and encoded it again: ten plugins, ten
//! decode/encode round trips per listener, which were most of a generation's cost. During a
//! [`Session`], [`pack`] and the first [`edit`] of a packed config leave in the `Any` a *draft
//! token* (its type URL, and as value a 0 byte, which starts no protobuf encoding since field
//! number 0 is invalid, then the draft's index) and keep the typed message in this thread's
//! draft table; later edits reach the message directly. [`Session::seal`] encodes every draft
//! the snapshot's listeners and clusters refer to, in the places the plugins edit: network
//! filters of every filter chain and cluster `typed_extension_protocol_options`.
//!
//! Outside a session (egress and ingress generation, plugin unit tests) [`pack`] and [`edit`]
//! encode at once, as before. A draft token must never be read as a packed config:
//! [`crate::protobuf::unpack`] asserts it in debug builds; read through [`read`].
//!
//! The table is thread-local because generation is synchronous and pure: a session begins and
//! ends within one call of [`crate::generate::generate`] on one thread, and the plugins keep their
//! signatures (`&mut Listener`, `&mut Cluster`). Sessions nest (the inner one's table replaces
//! the outer one's until it ends). A leaf above [`crate::protobuf`], [`crate::error`] and
//! [`crate::snapshot`].

use std::any::Any as StdAny;
use std::cell::RefCell;

use envoy_types::pb::envoy::config::cluster::v3::Cluster;
use envoy_types::pb::envoy::config::listener::v3::{filter, Filter, Listener};
use envoy_types::pb::google::protobuf::Any;
use prost::{Message, Name};

use crate::error::GenerateError;
use crate::protobuf::{any, is_draft_token, is_type, DRAFT_TOKEN_MARK};
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::{CLUSTER_TYPE, LISTENER_TYPE};

/// A typed config kept in the draft table.
trait Draft: StdAny {
    fn encode(&self) -> Vec<u8>;
    fn clone_box(&self) -> Box<dyn Draft>;
    fn as_any_mut(&mut self) -> &mut dyn StdAny;
    fn as_any(&self) -> &dyn StdAny;
}

impl<M: Message + Clone + 'static> Draft for M {
    fn encode(&self) -> Vec<u8> {
        self.encode_to_vec()
    }
    fn clone_box(&self) -> Box<dyn Draft> {
        Box::new(self.clone())
    }
    fn as_any_mut(&mut self) -> &mut dyn StdAny {
        self
    }
    fn as_any(&self) -> &dyn StdAny {
        self
    }
}

/// The drafts of the current session, by token index. A slot is `None` while its draft is lent
/// to an edit (so an edit may edit other drafts).
type Table = Vec<Option<Box<dyn Draft>>>;

thread_local! {
    static DRAFTS: RefCell<Option<Table>> = const { RefCell::new(None) };
    static ROUND_TRIPS: std::cell::Cell<RoundTrips> = const {
        std::cell::Cell::new(RoundTrips { decodes: 0, encodes: 0 })
    };
}

/// How many packed configs [`edit`] and [`read`] decoded, and how many configs they and
/// [`Session::seal`] encoded, on this thread since it started (tests count a generation's
/// round trips with it; two thread-local additions per config).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RoundTrips {
    /// Packed configs decoded.
    pub decodes: u64,
    /// Configs encoded.
    pub encodes: u64,
}

/// [`RoundTrips`] on this thread so far.
pub fn round_trips_on_this_thread() -> RoundTrips {
    ROUND_TRIPS.with(std::cell::Cell::get)
}

fn count(decodes: u64, encodes: u64) {
    ROUND_TRIPS.with(|c| {
        let t = c.get();
        c.set(RoundTrips {
            decodes: t.decodes + decodes,
            encodes: t.encodes + encodes,
        });
    });
}

/// One generation's draft table on this thread: begun by [`Session::begin`], ended by
/// [`Session::seal`] (or dropped with the snapshot when generation fails).
#[derive(Debug)]
#[must_use = "a session's drafts reach the snapshot only when it is sealed"]
pub struct Session {
    outer: Option<Option<TableBox>>,
}

/// The outer session's table, kept while an inner one runs.
struct TableBox(Table);

impl std::fmt::Debug for TableBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} drafts", self.0.len())
    }
}

impl Session {
    /// Begin drafting on this thread.
    pub fn begin() -> Self {
        let outer = DRAFTS.with(|d| d.borrow_mut().replace(Table::new()));
        Session {
            outer: Some(outer.map(TableBox)),
        }
    }

    /// Encode every draft `snap` refers to into its `Any` and end the session. Listeners and
    /// clusters without a draft are not touched (no copy-on-write of a shared resource).
    ///
    /// # Errors
    /// [`GenerateError::Seal`] (a bug, never the policies' fault) when two configs of `snap`
    /// hold the same draft (a cluster was copied without [`fork_cluster`], so an edit of one
    /// copy changed both) or a token names no draft of this session.
    pub fn seal(self, snap: &mut Snapshot) -> Result<(), GenerateError> {
        DRAFTS.with(|d| {
            let d = d.borrow();
            let Some(table) = d.as_ref() else {
                return Ok(());
            };
            let mut seen = vec![false; table.len()];
            for (name, l) in snap.listeners.iter_mut() {
                if !listener_filters(l).any(|f| config(f).is_some_and(is_draft_token)) {
                    continue;
                }
                for flt in listener_filters_mut(l) {
                    if let Some(filter::ConfigType::TypedConfig(a)) = &mut flt.config_type {
                        resolve(table, &mut seen, a)
                            .map_err(|reason| seal_error(LISTENER_TYPE, name, reason))?;
                    }
                }
            }
            for (name, c) in snap.clusters.iter_mut() {
                if !c
                    .typed_extension_protocol_options
                    .values()
                    .any(is_draft_token)
                {
                    continue;
                }
                for a in c.typed_extension_protocol_options.values_mut() {
                    resolve(table, &mut seen, a)
                        .map_err(|reason| seal_error(CLUSTER_TYPE, name, reason))?;
                }
            }
            Ok(())
        })
        // Dropping `self` restores the outer table.
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        if let Some(outer) = self.outer.take() {
            DRAFTS.with(|d| *d.borrow_mut() = outer.map(|t| t.0));
        }
    }
}

fn config(f: &Filter) -> Option<&Any> {
    match &f.config_type {
        Some(filter::ConfigType::TypedConfig(a)) => Some(a),
        _ => None,
    }
}

fn listener_filters(l: &Listener) -> impl Iterator<Item = &Filter> {
    l.filter_chains
        .iter()
        .chain(&l.default_filter_chain)
        .flat_map(|c| &c.filters)
}

fn listener_filters_mut(l: &mut Listener) -> impl Iterator<Item = &mut Filter> {
    l.filter_chains
        .iter_mut()
        .chain(&mut l.default_filter_chain)
        .flat_map(|c| &mut c.filters)
}

/// The table index a draft token names.
fn token_index(a: &Any) -> Option<usize> {
    let rest = a.value.strip_prefix(&[DRAFT_TOKEN_MARK])?;
    let bytes: [u8; 8] = rest.try_into().ok()?;
    usize::try_from(u64::from_le_bytes(bytes)).ok()
}

fn token(type_url: String, index: usize) -> Any {
    let mut value = Vec::with_capacity(9);
    value.push(DRAFT_TOKEN_MARK);
    value.extend_from_slice(&(index as u64).to_le_bytes());
    Any { type_url, value }
}

/// Replace the token in `a` (if any) by its draft's encoding, marking the draft `seen`.
fn resolve(table: &Table, seen: &mut [bool], a: &mut Any) -> Result<(), String> {
    let Some(i) = token_index(a) else {
        return Ok(());
    };
    let draft = table
        .get(i)
        .and_then(Option::as_ref)
        .ok_or_else(|| format!("draft {i} of {} is not in this session", a.type_url))?;
    if std::mem::replace(&mut seen[i], true) {
        return Err(format!("draft {i} of {} is held twice", a.type_url));
    }
    count(0, 1);
    a.value = draft.encode();
    Ok(())
}

fn seal_error(type_url: &str, name: &str, reason: String) -> GenerateError {
    GenerateError::Seal {
        resource: format!("{type_url}/{name}"),
        reason,
    }
}

/// Pack `m` into an `Any`: a draft token during a session, its encoding otherwise.
pub fn pack<M: Message + Name + Clone + 'static>(m: M) -> Any {
    DRAFTS.with(|d| match d.borrow_mut().as_mut() {
        Some(table) => {
            table.push(Some(Box::new(m)));
            token(M::type_url(), table.len() - 1)
        }
        None => {
            count(0, 1);
            any(&m)
        }
    })
}

/// Give every draft `cluster` holds a copy of its own: call it on a copy of a cluster that
/// stays in the snapshot, before editing either (a copy shares its original's drafts).
pub fn fork_cluster(cluster: &mut Cluster) {
    for a in cluster.typed_extension_protocol_options.values_mut() {
        fork(a);
    }
}

fn fork(a: &mut Any) {
    let Some(i) = token_index(a) else { return };
    DRAFTS.with(|d| {
        let mut d = d.borrow_mut();
        let Some(table) = d.as_mut() else { return };
        if let Some(copy) = table.get(i).and_then(Option::as_ref).map(|m| m.clone_box()) {
            table.push(Some(copy));
            *a = token(std::mem::take(&mut a.type_url), table.len() - 1);
        }
    });
}

/// Edit the config packed in `a` as an `M`: `None` (and `a` untouched) when its type URL is not
/// `M`'s or it does not decode. During a session the first edit turns it into a draft and every
/// later one edits the draft; outside one it is decoded, edited and encoded again.
pub fn edit<M: Message + Name + Default + Clone + 'static, R>(
    a: &mut Any,
    f: impl FnOnce(&mut M) -> R,
) -> Option<R> {
    if !is_type::<M>(&a.type_url) {
        return None;
    }
    if let Some(i) = token_index(a) {
        let mut draft = DRAFTS.with(|d| d.borrow_mut().as_mut()?.get_mut(i)?.take())?;
        let out = draft.as_any_mut().downcast_mut::<M>().map(f);
        DRAFTS.with(|d| {
            if let Some(slot) = d.borrow_mut().as_mut().and_then(|t| t.get_mut(i)) {
                *slot = Some(draft);
            }
        });
        return out;
    }
    count(1, 0);
    let mut m = M::decode(a.value.as_slice()).ok()?;
    let out = f(&mut m);
    let drafting = DRAFTS.with(|d| d.borrow().is_some());
    *a = if drafting {
        pack(m)
    } else {
        count(0, 1);
        Any {
            type_url: std::mem::take(&mut a.type_url),
            value: m.encode_to_vec(),
        }
    };
    Some(out)
}

/// Read the config packed in `a` as an `M` (a draft's message without copying it): `None` when
/// its type URL is not `M`'s or it does not decode.
pub fn read<M: Message + Name + Default + 'static, R>(
    a: &Any,
    f: impl FnOnce(&M) -> R,
) -> Option<R> {
    if !is_type::<M>(&a.type_url) {
        return None;
    }
    if let Some(i) = token_index(a) {
        return DRAFTS.with(|d| {
            let d = d.borrow();
            let draft = d.as_ref()?.get(i)?.as_ref()?;
            draft.as_any().downcast_ref::<M>().map(f)
        });
    }
    count(1, 0);
    M::decode(a.value.as_slice()).ok().map(|m| f(&m))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::names::HCM_FILTER;
    use crate::protobuf::unpack;
    use envoy_types::pb::envoy::config::listener::v3::FilterChain;
    use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::HttpConnectionManager;
    use envoy_types::pb::envoy::extensions::filters::network::tcp_proxy::v3::TcpProxy;

    fn listener(config: Any) -> Listener {
        Listener {
            name: "l".into(),
            filter_chains: vec![FilterChain {
                filters: vec![Filter {
                    name: HCM_FILTER.into(),
                    config_type: Some(filter::ConfigType::TypedConfig(config)),
                }],
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    fn hcm_of(l: &Listener) -> &Any {
        config(&l.filter_chains[0].filters[0]).unwrap()
    }

    /// Outside a session a pack is the encoding and an edit round-trips at once.
    #[test]
    fn outside_a_session_configs_are_encoded_at_once() {
        let mut a = pack(HttpConnectionManager {
            stat_prefix: "a".into(),
            ..Default::default()
        });
        assert!(!is_draft_token(&a));
        edit(&mut a, |h: &mut HttpConnectionManager| {
            h.stat_prefix = "b".into()
        })
        .unwrap();
        assert_eq!(
            unpack::<HttpConnectionManager>(&a).unwrap().stat_prefix,
            "b"
        );
        assert_eq!(edit(&mut a, |_: &mut TcpProxy| ()), None, "another type");
    }

    /// In a session, packs and edits keep the typed message; sealing encodes the final one,
    /// equal to what encoding after every edit gives.
    #[test]
    fn a_session_edits_typed_and_seals_once() {
        let base = HttpConnectionManager {
            stat_prefix: "in".into(),
            ..Default::default()
        };
        let mut snap = Snapshot::default();
        let session = Session::begin();
        let mut l = listener(pack(base.clone()));
        assert!(is_draft_token(hcm_of(&l)));
        for i in 0..3 {
            let a = match &mut l.filter_chains[0].filters[0].config_type {
                Some(filter::ConfigType::TypedConfig(a)) => a,
                _ => unreachable!(),
            };
            edit(a, |h: &mut HttpConnectionManager| {
                h.stat_prefix.push_str(&i.to_string())
            })
            .unwrap();
        }
        assert_eq!(
            read(hcm_of(&l), |h: &HttpConnectionManager| h
                .stat_prefix
                .clone()),
            Some("in012".to_owned())
        );
        // A packed (not drafted) config in the same session becomes a draft on its first edit.
        let mut other = listener(any(&base));
        if let Some(filter::ConfigType::TypedConfig(a)) =
            &mut other.filter_chains[0].filters[0].config_type
        {
            edit(a, |h: &mut HttpConnectionManager| {
                h.stat_prefix = "x".into()
            })
            .unwrap();
            assert!(is_draft_token(a));
        }
        snap.listeners.insert("l".into(), l.into());
        snap.listeners.insert("o".into(), other.into());
        session.seal(&mut snap).unwrap();
        let sealed = unpack::<HttpConnectionManager>(hcm_of(&snap.listeners["l"])).unwrap();
        assert_eq!(sealed.stat_prefix, "in012");
        let sealed = unpack::<HttpConnectionManager>(hcm_of(&snap.listeners["o"])).unwrap();
        assert_eq!(sealed.stat_prefix, "x");
        // The session ended: packing encodes again.
        assert!(!is_draft_token(&pack(base)));
    }

    /// A copied cluster shares its original's drafts: sealing refuses that, and a fork gives
    /// the copy its own, so editing one leaves the other.
    #[test]
    fn a_copy_must_fork_its_drafts() {
        use envoy_types::pb::envoy::config::cluster::v3::Cluster;
        use envoy_types::pb::envoy::extensions::upstreams::http::v3::HttpProtocolOptions;
        let key = crate::names::HTTP_PROTOCOL_OPTIONS_KEY;
        let options = |c: &mut Cluster| {
            c.typed_extension_protocol_options
                .get_mut(key)
                .unwrap()
                .clone()
        };
        let edit_copy = |fork: bool| {
            let session = Session::begin();
            let mut a = Cluster::default();
            a.typed_extension_protocol_options
                .insert(key.into(), pack(HttpProtocolOptions::default()));
            let mut b = a.clone();
            if fork {
                fork_cluster(&mut b);
            }
            let opts = b.typed_extension_protocol_options.get_mut(key).unwrap();
            edit(opts, |o: &mut HttpProtocolOptions| {
                o.common_http_protocol_options = Some(Default::default());
            })
            .unwrap();
            let mut snap = Snapshot::default();
            snap.clusters.insert("a".into(), a.into());
            snap.clusters.insert("b".into(), b.into());
            session.seal(&mut snap).map(|()| {
                let mut a = (*snap.clusters["a"]).clone();
                let mut b = (*snap.clusters["b"]).clone();
                (options(&mut a), options(&mut b))
            })
        };
        let err = edit_copy(false).unwrap_err();
        assert!(
            matches!(&err, GenerateError::Seal { reason, .. } if reason.contains("held twice")),
            "{err}"
        );
        let (a, b) = edit_copy(true).unwrap();
        assert_eq!(
            unpack::<HttpProtocolOptions>(&a),
            Some(HttpProtocolOptions::default())
        );
        assert!(unpack::<HttpProtocolOptions>(&b)
            .unwrap()
            .common_http_protocol_options
            .is_some());
    }

    /// Sessions nest: the inner one's drafts do not leak into the outer table.
    #[test]
    fn sessions_nest() {
        let outer = Session::begin();
        let a = pack(TcpProxy::default());
        {
            let inner = Session::begin();
            let b = pack(TcpProxy::default());
            assert_eq!(token_index(&b), Some(0));
            inner.seal(&mut Snapshot::default()).unwrap();
        }
        assert_eq!(token_index(&a), Some(0));
        let c = pack(TcpProxy::default());
        assert_eq!(token_index(&c), Some(1), "the outer table is back");
        outer.seal(&mut Snapshot::default()).unwrap();
    }
}
