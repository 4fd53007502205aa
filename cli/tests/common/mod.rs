//! A real Global CP (memory store) in the test process, for umbractl's integration tests, and
//! umbractl itself run as a process against it ([`umbractl`], [`text`]).

use std::io::Write as _;
use std::process::{Command, Output, Stdio};
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
    pub async fn start_with(policy: umbra_pki::trust::AccessPolicy) -> Global {
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

/// Run umbractl against `url` with `args`, feeding `stdin`.
#[allow(dead_code)] // not every test file uses it
pub async fn umbractl(url: &str, args: &[&str], stdin: &str) -> Output {
    let (url, args, stdin) = (
        url.to_owned(),
        args.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        stdin.to_owned(),
    );
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_umbractl"))
            .arg("--api-url")
            .arg(url)
            .args(args)
            .env("NO_COLOR", "1")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(stdin.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    })
    .await
    .unwrap()
}

/// The exit code, stdout and stderr of `o`.
#[allow(dead_code)]
pub fn text(o: &Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
