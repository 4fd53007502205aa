//! [`Shared`]: a resource held behind an `Arc` with copy-on-write mutable access, so equal
//! resources of many DPPs can be one allocation (issue 21: a zone's RSS per DPP), together
//! with its protobuf encoding, computed at most once per allocation (issue 39: encode once,
//! share everywhere). Generation builds every resource fresh (one owner, so mutable access
//! never copies); a zone then replaces each resource of a generated snapshot with an equal one
//! already held ([`Interner`]): an outbound cluster is usually the same for every DPP calling
//! that service, an outbound listener for every DPP of the calling service. The encoding the
//! resource version hashes is the one every ADS stream of every DPP holding it sends.

use std::cell::Cell;
use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, OnceLock, PoisonError, Weak};

use prost::Message;

/// A resource and, once asked for, its protobuf encoding.
#[derive(Debug, Default)]
struct Held<T> {
    value: T,
    wire: OnceLock<Box<[u8]>>,
}

impl<T: Clone> Clone for Held<T> {
    /// A copy about to be edited ([`Shared`]'s `DerefMut`): the encoding is not copied.
    fn clone(&self) -> Self {
        Self {
            value: self.value.clone(),
            wire: OnceLock::new(),
        }
    }
}

/// A resource behind an `Arc`; `Deref` reads it, `DerefMut` clones it first when it is shared
/// (`Arc::make_mut`) and forgets its encoding.
#[derive(Debug, Default)]
pub struct Shared<T>(Arc<Held<T>>);

impl<T> Shared<T> {
    /// Whether `a` and `b` are the same allocation.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

thread_local! {
    /// Encodings [`Shared::wire`] computed on this thread (tests count them per generation).
    static ENCODED: Cell<u64> = const { Cell::new(0) };
}

/// How many resource encodings [`Shared::wire`] has computed on the calling thread: a test
/// asserts with it that a generation encodes each resource once and that serving it encodes
/// nothing (issue 39).
pub fn encodings_on_this_thread() -> u64 {
    ENCODED.with(Cell::get)
}

impl<T: Message> Shared<T> {
    /// The resource's protobuf encoding (what an `Any` of it carries): computed on the first
    /// call for this allocation, then shared by every holder (every snapshot, every stream).
    pub fn wire(&self) -> &[u8] {
        self.0.wire.get_or_init(|| {
            ENCODED.with(|c| c.set(c.get() + 1));
            self.0.value.encode_to_vec().into_boxed_slice()
        })
    }

    /// Whether [`Shared::wire`] has been computed for this allocation.
    pub fn is_encoded(&self) -> bool {
        self.0.wire.get().is_some()
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> From<T> for Shared<T> {
    fn from(value: T) -> Self {
        Self(Arc::new(Held {
            value,
            wire: OnceLock::new(),
        }))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0.value
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        let held = Arc::make_mut(&mut self.0);
        held.wire.take();
        &mut held.value
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0.value == other.0.value
    }
}

/// Equal resources of one type, keyed by resource version (the content hash of
/// [`umbra_xds_protocol::version::encoding_version`], or one kept for equal content), held weakly: an
/// entry lives as long as some snapshot holds it. Equality is checked on every hit, so a
/// version collision can only cost sharing, never hand a DPP another's resource.
#[derive(Debug)]
pub struct Interner<T> {
    held: Mutex<HashMap<String, Weak<Held<T>>>>,
}

impl<T> Default for Interner<T> {
    fn default() -> Self {
        Self {
            held: Mutex::default(),
        }
    }
}

impl<T: PartialEq> Interner<T> {
    /// Replace `r` (of resource version `version`) with the equal resource already held, or
    /// hold `r` as the one for that version.
    pub fn intern(&self, version: &str, r: &mut Shared<T>) {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(existing) = held.get(version).and_then(Weak::upgrade) {
            if Arc::ptr_eq(&existing, &r.0) {
                return;
            }
            if existing.value == r.0.value {
                r.0 = existing;
                return;
            }
        }
        held.insert(version.to_owned(), Arc::downgrade(&r.0));
    }

    /// Forget the resources no snapshot holds any more; how many are still held.
    pub fn sweep(&self) -> usize {
        let mut held = self.held.lock().unwrap_or_else(PoisonError::into_inner);
        held.retain(|_, w| w.strong_count() > 0);
        held.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_on_write_and_equality() {
        let a: Shared<Vec<u8>> = vec![1, 2].into();
        let mut b = a.clone();
        assert!(Shared::ptr_eq(&a, &b));
        b.push(3);
        assert!(!Shared::ptr_eq(&a, &b), "writing a shared value copies it");
        assert_eq!(*a, vec![1, 2]);
        let c: Shared<Vec<u8>> = vec![1, 2].into();
        assert_eq!(a, c, "equal content, different allocations");
    }

    #[test]
    fn the_encoding_is_computed_once_per_allocation_and_forgotten_on_write() {
        use envoy_types::pb::envoy::config::cluster::v3::Cluster;
        let before = encodings_on_this_thread();
        let a: Shared<Cluster> = Cluster {
            name: "backend".into(),
            ..Default::default()
        }
        .into();
        assert!(!a.is_encoded());
        let b = a.clone();
        assert_eq!(a.wire(), prost::Message::encode_to_vec(&*a).as_slice());
        assert_eq!(
            a.wire().as_ptr(),
            b.wire().as_ptr(),
            "one allocation, one encoding"
        );
        assert_eq!(encodings_on_this_thread() - before, 1);
        let mut c = b.clone();
        c.name = "other".into();
        assert!(!c.is_encoded(), "an edited copy forgets the encoding");
        assert!(a.is_encoded() && b.is_encoded());
        assert_eq!(c.wire(), prost::Message::encode_to_vec(&*c).as_slice());
        let mut d: Shared<Cluster> = Cluster::default().into();
        d.wire();
        d.name = "sole owner".into();
        assert!(!d.is_encoded(), "an edit in place forgets the encoding");
        assert_eq!(d.wire(), prost::Message::encode_to_vec(&*d).as_slice());
        assert_eq!(encodings_on_this_thread() - before, 4);
    }

    #[test]
    fn interning_shares_equal_content_only() {
        let i = Interner::default();
        let mut a: Shared<Vec<u8>> = vec![1].into();
        let mut b: Shared<Vec<u8>> = vec![1].into();
        let mut collision: Shared<Vec<u8>> = vec![9].into();
        i.intern("v1", &mut a);
        i.intern("v1", &mut b);
        assert!(Shared::ptr_eq(&a, &b));
        i.intern("v1", &mut collision);
        assert_eq!(
            *collision,
            vec![9],
            "a different resource under the same version is kept"
        );
        drop((a, b, collision));
        assert_eq!(i.sweep(), 0);
    }
}
