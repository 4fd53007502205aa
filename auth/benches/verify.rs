//! What authentication costs per call: issuing and verifying a user token (every API call with
//! `Authorization: Bearer`) and a dataplane token (every ADS request re-checks its stream's
//! token), with a bundle of 100 meshes and 10,000 revoked IDs. Prints a table; run with
//! `cargo bench -p umbra-auth --bench verify` (`UMBRA_BENCH_ITERATIONS`, default 20,000).

use std::hint::black_box;
use std::time::Instant;

use umbra_auth::bundle::Revoked;
use umbra_auth::issuer::{DataplaneTokenRequest, Issuer, UserTokenRequest};
use umbra_auth::keys::SigningKey;

/// A named operation to time.
type Row<'a> = (&'static str, Box<dyn Fn() + 'a>);

fn main() {
    let n: u32 = std::env::var("UMBRA_BENCH_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    let mut revoked = Revoked::default();
    for i in 0..10_000 {
        revoked.user.insert(format!("{i:024x}"));
        revoked.dataplane.insert(format!("{i:024x}"));
    }
    let issuer = Issuer {
        user: SigningKey::generate(),
        dataplane: (0..100)
            .map(|m| (format!("mesh-{m}"), SigningKey::generate()))
            .collect(),
        revoked,
    };
    let bundle = issuer.bundle();
    let now = umbra_auth::unix_now();
    let user_req = UserTokenRequest {
        name: "alice".into(),
        groups: vec!["team-a".into()],
        valid_for: None,
    };
    let dp_req = DataplaneTokenRequest {
        mesh: "mesh-42".into(),
        name: "web-1".into(),
        ..Default::default()
    };
    let user = issuer.issue_user(&user_req, 3600, now).unwrap();
    let dp = issuer.issue_dataplane(&dp_req, 3600, now).unwrap();
    let rows: Vec<Row> = vec![
        (
            "issue a user token",
            Box::new(|| {
                black_box(issuer.issue_user(&user_req, 3600, now).unwrap());
            }),
        ),
        (
            "verify a user token",
            Box::new(|| {
                black_box(bundle.verify_user(&user, now).unwrap());
            }),
        ),
        (
            "verify a dataplane token",
            Box::new(|| {
                black_box(bundle.verify_dataplane(&dp, now).unwrap());
            }),
        ),
        (
            "refuse a forged token",
            Box::new(|| {
                black_box(
                    bundle
                        .verify_user("eyJhbGciOiJFZERTQSJ9.e30.AAAA", now)
                        .unwrap_err(),
                );
            }),
        ),
    ];
    println!(
        "{:<28} {:>12} {:>14}",
        "operation", "µs/op", "ops/s (1 core)"
    );
    for (name, f) in rows {
        for _ in 0..(n / 10) {
            f();
        }
        let start = Instant::now();
        for _ in 0..n {
            f();
        }
        let per = start.elapsed().as_secs_f64() / f64::from(n);
        println!("{name:<28} {:>12.1} {:>14.0}", per * 1e6, 1.0 / per);
    }
}
