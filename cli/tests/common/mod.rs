//! A real Global CP (memory store) in the test process, for umbractl's integration tests.

use std::sync::Arc;
use std::time::Duration;

use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;

/// A running Global: its API URL and store.
pub struct Global {
    /// `http://127.0.0.1:<port>`.
    pub url: String,
    /// Its store (not every test reads it).
    #[allow(dead_code)]
    pub store: Arc<dyn Store>,
    stop: tokio::sync::oneshot::Sender<()>,
    server: tokio::task::JoinHandle<anyhow::Result<()>>,
}

impl Global {
    /// Start one on ephemeral loopback ports (loopback callers are the admin).
    #[allow(dead_code)] // not every test file uses it
    pub async fn start() -> Global {
        Self::start_with(Default::default()).await
    }

    /// Start one whose API follows `policy`.
    #[allow(dead_code)] // not every test file uses it
    pub async fn start_with(policy: umbra_api::trust::AccessPolicy) -> Global {
        let store: Arc<dyn Store> = Arc::new(MemoryStore::new());
        let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let kds = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", api.local_addr().unwrap());
        let (stop, rx) = tokio::sync::oneshot::channel::<()>();
        let server = tokio::spawn(umbra_global_cp::serve(
            store.clone(),
            api,
            kds,
            None,
            policy,
            async {
                let _ = rx.await;
            },
        ));
        Global {
            url,
            store,
            stop,
            server,
        }
    }

    /// Shut it down and wait (at most 10 s) for it to finish cleanly.
    pub async fn stop(self) {
        let _ = self.stop.send(());
        tokio::time::timeout(Duration::from_secs(10), self.server)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}
