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

/// `--scope egress`: a token for the zone's ZoneEgresses (`POST /tokens/zone-ingress` with
/// Kuma's zone-token scope); an unknown scope is the API's 400 naming the field.
#[tokio::test]
async fn a_scoped_zone_token_is_a_zone_proxy_token() {
    let global = common::Global::start().await;
    let url = global.url.clone();
    let scoped = |scope: &str| umbractl::tokens::Generate::ZoneToken {
        zone: "zone-1".into(),
        scope: vec![scope.into()],
        valid_for: Some("1h".into()),
    };
    let token = umbractl::tokens::generate(&url, scoped("egress"))
        .await
        .unwrap();
    assert_eq!(token.split('.').count(), 3, "{token}");
    let err = umbractl::tokens::generate(&url, scoped("cp"))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("400") && err.contains("scope"), "{err}");
    global.stop().await;
}
