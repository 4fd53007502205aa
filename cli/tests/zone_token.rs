//! `umbractl generate zone-token` against a real in-process Global: the token verifies with the
//! Global's key; an invalid zone name comes back as the API's error.

use std::sync::Arc;
use std::time::Duration;

use umbra_global_cp::store::memory::MemoryStore;
use umbra_global_cp::store::Store;
use umbra_global_cp::tokens::ZoneTokens;

#[tokio::test]
async fn generates_a_token_the_global_accepts() {
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
        async {
            let _ = rx.await;
        },
    ));
    let token = umbractl::zone_token(&url, "zone-1", Some("2h"))
        .await
        .unwrap();
    let tokens = ZoneTokens::load(&*store).await.unwrap();
    assert_eq!(tokens.verify(&token).unwrap(), "zone-1");
    let err = umbractl::zone_token(&url, "Bad.Zone", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("400") && err.contains("zone name"), "{err}");
    let _ = stop.send(());
    tokio::time::timeout(Duration::from_secs(10), server)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}
