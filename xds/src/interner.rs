//! [`Shared`]: a resource held behind an `Arc` with copy-on-write mutable access, so equal
//! resources of many DPPs can be one allocation (issue 21: a zone's RSS per DPP). Generation
//! builds every resource fresh (one owner, so mutable access never copies); a zone then
//! replaces each resource of a generated snapshot with an equal one already held
//! ([`Interner`]): an outbound cluster is usually the same for every DPP calling that
//! service, an outbound listener for every DPP of the calling service.

use std::collections::HashMap;
use std::ops::{Deref, DerefMut};
use std::sync::{Arc, Mutex, PoisonError, Weak};

/// A resource behind an `Arc`; `Deref` reads it, `DerefMut` clones it first when it is shared
/// (`Arc::make_mut`).
#[derive(Debug, Default)]
pub struct Shared<T>(Arc<T>);

impl<T> Shared<T> {
    /// Whether `a` and `b` are the same allocation.
    pub fn ptr_eq(a: &Self, b: &Self) -> bool {
        Arc::ptr_eq(&a.0, &b.0)
    }
}

impl<T> Clone for Shared<T> {
    fn clone(&self) -> Self {
        Self(self.0.clone())
    }
}

impl<T> From<T> for Shared<T> {
    fn from(t: T) -> Self {
        Self(Arc::new(t))
    }
}

impl<T> Deref for Shared<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: Clone> DerefMut for Shared<T> {
    fn deref_mut(&mut self) -> &mut T {
        Arc::make_mut(&mut self.0)
    }
}

impl<T: PartialEq> PartialEq for Shared<T> {
    fn eq(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || *self.0 == *other.0
    }
}

/// Equal resources of one type, keyed by resource version (the content hash of
/// [`umbra_xds_protocol::version::encoding_version`], or one kept for equal content), held weakly: an
/// entry lives as long as some snapshot holds it. Equality is checked on every hit, so a
/// version collision can only cost sharing, never hand a DPP another's resource.
#[derive(Debug)]
pub struct Interner<T> {
    held: Mutex<HashMap<String, Weak<T>>>,
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
            if *existing == *r.0 {
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
