//! umbractl against a Global that trusts nobody by default (`--localhost-is-admin=false`), as a
//! process: 401 with a hint without a token, `--auth-token`/`UMBRA_AUTH_TOKEN`, user and
//! dataplane token generation (403 for a non-admin), and contexts from the config file.

mod common;

use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_umbractl");

fn umbractl(args: &[&str], envs: &[(&str, &str)]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_remove("UMBRA_API_URL")
        .env_remove("UMBRA_AUTH_TOKEN")
        .env_remove("UMBRA_CONFIG");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_flags_and_contexts() {
    let global = common::Global::start_with(umbra_pki::trust::AccessPolicy {
        localhost_is_admin: false,
        metrics_need_token: false,
        admin_token_from_loopback: true,
    })
    .await;
    let url = global.url.clone();
    // The admin token, as a loopback caller fetches it (Kuma's admin-user-token).
    let mut admin = String::new();
    for _ in 0..100 {
        if let Ok(r) = reqwest::get(format!("{url}/global-secrets/admin-user-token")).await {
            if r.status().is_success() {
                let v: serde_json::Value = serde_json::from_str(&r.text().await.unwrap()).unwrap();
                use base64::Engine as _;
                let bytes = base64::engine::general_purpose::STANDARD
                    .decode(v["data"].as_str().unwrap())
                    .unwrap();
                admin = String::from_utf8(bytes).unwrap();
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!admin.is_empty());
    let config = std::env::temp_dir().join(format!("umbractl-auth-{}.yaml", std::process::id()));
    let _ = std::fs::remove_file(&config);
    let cfg = config.to_str().unwrap();
    let run = move |args: Vec<&str>, envs: Vec<(&str, &str)>| {
        let mut all = vec!["--config-file", cfg];
        all.extend(args);
        umbractl(&all, &envs)
    };

    // No token: refused, with the way out.
    let (code, _, err) = run(vec!["--api-url", &url, "get", "meshes"], vec![]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("401") && err.contains("--auth-token"), "{err}");
    // The flag and the environment variable.
    let (code, out, err) = run(
        vec!["--api-url", &url, "--auth-token", &admin, "get", "meshes"],
        vec![],
    );
    assert_eq!(code, 0, "{err}");
    assert!(!out.contains("401"), "{out}");
    let (code, _, err) = run(
        vec!["--api-url", &url, "get", "meshes"],
        vec![("UMBRA_AUTH_TOKEN", &admin)],
    );
    assert_eq!(code, 0, "{err}");
    let mesh = std::env::temp_dir().join(format!("umbractl-auth-mesh-{}.yaml", std::process::id()));
    std::fs::write(
        &mesh,
        "type: Mesh\nname: default\nskipCreatingInitialPolicies: ['*']\n",
    )
    .unwrap();
    let (code, _, err) = run(
        vec![
            "--api-url",
            &url,
            "--auth-token",
            &admin,
            "apply",
            "-f",
            mesh.to_str().unwrap(),
        ],
        vec![],
    );
    assert_eq!(code, 0, "{err}");

    // Tokens: the admin issues, a plain user may not.
    let (code, alice, err) = run(
        vec![
            "--api-url",
            &url,
            "--auth-token",
            &admin,
            "generate",
            "user-token",
            "--name",
            "alice",
            "--group",
            "team-a",
            "--valid-for",
            "1h",
        ],
        vec![],
    );
    assert_eq!(code, 0, "{err}");
    let alice = alice.trim().to_owned();
    let trust = umbra_pki::trust::Trust::authority(global.store.clone(), Default::default())
        .await
        .unwrap();
    let p = trust
        .bundle()
        .verify_user(&alice, umbra_auth::unix_now())
        .unwrap();
    assert_eq!(p.name, "alice");
    assert!(p.groups.contains(&"team-a".to_owned()));
    let (code, _, err) = run(
        vec![
            "--api-url",
            &url,
            "--auth-token",
            &alice,
            "generate",
            "user-token",
            "--name",
            "mallory",
            "--group",
            "mesh-system:admin",
        ],
        vec![],
    );
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("403"), "{err}");
    let (code, dp, err) = run(
        vec![
            "--api-url",
            &url,
            "--auth-token",
            &admin,
            "generate",
            "dataplane-token",
            "--mesh",
            "default",
            "--name",
            "web-1",
            "--tag",
            "kuma.io/service=web",
            "--valid-for",
            "1h",
        ],
        vec![],
    );
    assert_eq!(code, 0, "{err}");
    let trust = umbra_pki::trust::Trust::authority(global.store.clone(), Default::default())
        .await
        .unwrap();
    let id = trust
        .bundle()
        .verify_dataplane(dp.trim(), umbra_auth::unix_now())
        .unwrap();
    assert_eq!(id.claims.name, "web-1");
    assert!(id.claims.tags["kuma.io/service"].contains("web"));

    // Contexts: added (and checked), used without flags, listed without the token.
    let (code, _, err) = run(
        vec![
            "config",
            "control-planes",
            "add",
            "--name",
            "local",
            "--address",
            &url,
            "--auth-token",
            &admin,
        ],
        vec![],
    );
    assert_eq!(code, 0, "{err}");
    let (code, _, err) = run(vec!["get", "meshes"], vec![]);
    assert_eq!(code, 0, "the current context's address and token: {err}");
    let (code, out, _) = run(vec!["config", "control-planes", "list"], vec![]);
    assert_eq!(code, 0);
    assert!(
        out.contains("* local") && out.contains("set") && !out.contains(&admin),
        "{out}"
    );
    let text = std::fs::read_to_string(&config).unwrap();
    assert!(text.contains("local"));
    let (code, _, err) = run(
        vec![
            "config",
            "control-planes",
            "add",
            "--name",
            "dead",
            "--address",
            "http://127.0.0.1:1",
        ],
        vec![],
    );
    assert_ne!(code, 0, "an address that does not answer is refused: {err}");
    let (code, _, _) = run(
        vec![
            "config",
            "control-planes",
            "add",
            "--name",
            "local",
            "--address",
            &url,
        ],
        vec![],
    );
    assert_ne!(code, 0, "a duplicate name needs --overwrite");
    // A context with a bad token: the explicit flag still wins.
    let (code, _, _) = run(
        vec![
            "config",
            "control-planes",
            "add",
            "--name",
            "local",
            "--address",
            &url,
            "--auth-token",
            "bad",
            "--overwrite",
        ],
        vec![],
    );
    assert_eq!(code, 0);
    let (code, _, err) = run(vec!["get", "meshes"], vec![]);
    assert_eq!(code, 1, "{err}");
    let (code, _, err) = run(vec!["--auth-token", &admin, "get", "meshes"], vec![]);
    assert_eq!(code, 0, "{err}");
    let (code, _, _) = run(
        vec!["config", "control-planes", "remove", "--name", "local"],
        vec![],
    );
    assert_eq!(code, 0);
    let _ = std::fs::remove_file(&config);
    let _ = std::fs::remove_file(&mesh);
    global.stop().await;
}
