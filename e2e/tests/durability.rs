//! A zone's acknowledged writes survive SIGKILL: a standalone zone-cp process with
//! `--data-dir` is killed the instant it answers a Dataplane registration, restarted, and
//! must still hold every Dataplane it acknowledged (DESIGN.md: a write is durable before the
//! API answers).

use umbra_e2e::{dataplane_yaml, CpProcess};

const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_dataplane_survives_sigkill_right_after_the_answer() {
    let dir = std::env::temp_dir().join(format!("umbra-durability-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = vec![
        "--zone".to_owned(),
        "zone-1".to_owned(),
        "--data-dir".to_owned(),
        dir.join("data").display().to_string(),
    ];
    let mut zone = CpProcess::start(ZONE, "--ads-addr", &args, &[], dir.join("zone.log"))
        .await
        .unwrap();
    zone.apply(
        "/meshes/default",
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
    )
    .await
    .unwrap();
    const ROUNDS: u16 = 20;
    for round in 0..ROUNDS {
        let name = format!("dp-{round}");
        let yaml = dataplane_yaml(&name, "backend", 20_000 + round, 30_000 + round, None);
        // `apply` returns as soon as the 2xx answer is read; the kill follows at once.
        zone.apply(&format!("/meshes/default/dataplanes/{name}"), &yaml)
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}\n{}", zone.log_tail()));
        zone.kill();
        zone.restart()
            .await
            .unwrap_or_else(|e| panic!("round {round}: {e}"));
        for earlier in 0..=round {
            let (status, body) = zone
                .call(
                    "GET",
                    &format!("/meshes/default/dataplanes/dp-{earlier}"),
                    None,
                )
                .await
                .unwrap();
            assert_eq!(
                status, 200,
                "round {round}: dp-{earlier} was acknowledged, then lost across SIGKILL: {body}\n{}",
                zone.log_tail()
            );
        }
    }
    let (_, list) = zone
        .call("GET", "/meshes/default/dataplanes", None)
        .await
        .unwrap();
    assert_eq!(list["total"], u64::from(ROUNDS));
    drop(zone);
    let _ = std::fs::remove_dir_all(&dir);
}
