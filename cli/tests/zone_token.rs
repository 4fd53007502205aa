//! `umbractl generate zone-token` against a real in-process Global: the token verifies with the
//! Global's key; an invalid zone name comes back as the API's error.

mod common;

use umbra_global_cp::tokens::ZoneTokens;

#[tokio::test]
async fn generates_a_token_the_global_accepts() {
    let global = common::Global::start().await;
    let url = global.url.clone();
    let token = umbractl::zone_token(&url, "zone-1", Some("2h"))
        .await
        .unwrap();
    let tokens = ZoneTokens::load(&*global.store).await.unwrap();
    assert_eq!(tokens.verify(&token).unwrap(), "zone-1");
    let err = umbractl::zone_token(&url, "Bad.Zone", None)
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("400") && err.contains("zone name"), "{err}");
    global.stop().await;
}
