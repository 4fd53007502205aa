//! A [`Store`] decorator recording each call's latency (`umbra_store_operation_seconds{op}`)
//! and failures (`umbra_store_errors_total{op}`) for `/metrics`, whatever the backend. A
//! conflict or a missing resource counts as an error too: it is what the caller saw.

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tokio::sync::watch;
use umbra_core::resource::{Resource, ResourceKey};

use crate::{Change, ListQuery, Page, Store, StoreError, Stored, Transacted, Write};

/// `umbra_store_operation_seconds{op}`: latency of each store call (`put`, `delete`, `get`,
/// `list`, `changes_since`, `revision`, `signing_key`, `get_key`, `set_key`,
/// `swap_key`, `transact`), whatever the backend.
pub const STORE_SECONDS: &str = "umbra_store_operation_seconds";
/// `umbra_store_errors_total{op}`: store calls that failed (outage, conflict, ...).
pub const STORE_ERRORS: &str = "umbra_store_errors_total";

/// `inner`, measured.
#[derive(Debug, Clone)]
pub struct Metered {
    inner: Arc<dyn Store>,
}

impl Metered {
    /// Measure every call to `inner`.
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Self { inner }
    }
}

/// Describe the store families to the installed recorder (after the CP installed it).
pub fn describe() {
    metrics::describe_histogram!(STORE_SECONDS, metrics::Unit::Seconds, "Store call latency");
    metrics::describe_counter!(STORE_ERRORS, "Store calls that failed");
}

async fn timed<T>(
    op: &'static str,
    call: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let start = Instant::now();
    let out = call.await;
    metrics::histogram!(STORE_SECONDS, "op" => op).record(start.elapsed().as_secs_f64());
    if out.is_err() {
        metrics::counter!(STORE_ERRORS, "op" => op).increment(1);
    }
    out
}

#[async_trait::async_trait]
impl Store for Metered {
    async fn put(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
    ) -> Result<(Stored, bool), StoreError> {
        timed("put", self.inner.put(resource, expected, zone)).await
    }

    async fn put_creating(
        &self,
        resource: Resource,
        expected: Option<u64>,
        zone: Option<&str>,
        companions: Vec<Resource>,
    ) -> Result<(Stored, bool), StoreError> {
        timed(
            "put",
            self.inner
                .put_creating(resource, expected, zone, companions),
        )
        .await
    }

    async fn delete(&self, key: &ResourceKey, expected: Option<u64>) -> Result<(), StoreError> {
        timed("delete", self.inner.delete(key, expected)).await
    }

    async fn transact(&self, writes: Vec<Write>) -> Result<Transacted, StoreError> {
        timed("transact", self.inner.transact(writes)).await
    }

    async fn get_key(&self, purpose: &str) -> Result<Option<Vec<u8>>, StoreError> {
        timed("get_key", self.inner.get_key(purpose)).await
    }

    async fn get(&self, key: &ResourceKey) -> Result<Option<Stored>, StoreError> {
        timed("get", self.inner.get(key)).await
    }

    async fn list(&self, query: &ListQuery) -> Result<Page, StoreError> {
        timed("list", self.inner.list(query)).await
    }

    async fn changes_since(&self, revision: u64, limit: usize) -> Result<Vec<Change>, StoreError> {
        timed("changes_since", self.inner.changes_since(revision, limit)).await
    }

    async fn revision(&self) -> Result<u64, StoreError> {
        timed("revision", self.inner.revision()).await
    }

    async fn signing_key(&self, purpose: &str, fresh: Vec<u8>) -> Result<Vec<u8>, StoreError> {
        timed("signing_key", self.inner.signing_key(purpose, fresh)).await
    }

    async fn set_key(&self, purpose: &str, value: Vec<u8>) -> Result<(), StoreError> {
        timed("set_key", self.inner.set_key(purpose, value)).await
    }

    async fn swap_key(
        &self,
        purpose: &str,
        expected: Option<Vec<u8>>,
        value: Vec<u8>,
    ) -> Result<bool, StoreError> {
        timed("swap_key", self.inner.swap_key(purpose, expected, value)).await
    }

    fn subscribe(&self) -> watch::Receiver<u64> {
        self.inner.subscribe()
    }
}
