//! The `global-cp` binary refuses a malformed flag at startup (issue 33): it exits quickly with
//! status 2 and a message naming the flag, before it opens its store or binds anything.

use umbra_runtime::testing::{assert_refused, free_addr};

const GLOBAL_CP: &str = env!("CARGO_BIN_EXE_global-cp");

/// [`assert_refused`] for `global-cp` (free `--api-addr` and `--kds-addr` unless given).
fn refused(args: &[&str], flag: &str) {
    assert_refused(GLOBAL_CP, &["--api-addr", "--kds-addr"], args, flag);
}

#[test]
fn malformed_global_flags_are_refused() {
    let dir = std::env::temp_dir().join(format!("umbra-global-flags-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let not_pem = dir.join("not.pem");
    std::fs::write(&not_pem, "hello\n").unwrap();
    let not_pem = not_pem.display().to_string();
    let same = free_addr().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["--store", "sqlite"], "--store"),
        (vec!["--store", "postgres"], "--postgres-url"),
        (
            vec!["--store", "postgres", "--postgres-url", "db.example:5432"],
            "--postgres-url",
        ),
        (
            vec![
                "--store",
                "postgres",
                "--postgres-url",
                "postgres://u@db:port/umbra",
            ],
            "--postgres-url",
        ),
        (
            vec!["--postgres-max-connections", "0"],
            "--postgres-max-connections",
        ),
        (
            vec!["--postgres-max-connections", "many"],
            "--postgres-max-connections",
        ),
        (vec!["--api-addr", "localhost:5681"], "--api-addr"),
        (vec!["--kds-addr", "5685"], "--kds-addr"),
        (vec!["--api-addr", &same, "--kds-addr", &same], "--kds-addr"),
        (vec!["--data-dir", &not_pem], "--data-dir"),
        (
            vec!["--zone-cleanup-after", "3days"],
            "--zone-cleanup-after",
        ),
        (vec!["--zone-cleanup-after=-1h"], "--zone-cleanup-after"),
        (vec!["--metrics-auth", "sometimes"], "--metrics-auth"),
        (
            vec![
                "--kds-tls-cert-file",
                "/nonexistent/kds.crt",
                "--kds-tls-key-file",
                &not_pem,
            ],
            "--kds-tls-cert-file",
        ),
        (
            vec![
                "--kds-tls-cert-file",
                &not_pem,
                "--kds-tls-key-file",
                &not_pem,
            ],
            "--kds-tls-cert-file",
        ),
    ];
    for (args, flag) in cases {
        refused(&args, flag);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn inter_cp_addresses_must_be_reachable_by_the_other_replicas() {
    const PG: [&str; 4] = [
        "--store",
        "postgres",
        "--postgres-url",
        "postgres://umbra@127.0.0.1:1/umbra",
    ];
    let with_pg = |more: &[&'static str]| -> Vec<&'static str> {
        PG.iter().chain(more.iter()).copied().collect()
    };
    let same = free_addr().to_string();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec!["--inter-cp-advertise-address", "0.0.0.0"],
            "--inter-cp-advertise-address",
        ),
        (
            vec!["--inter-cp-advertise-address", "[::]:5682"],
            "--inter-cp-advertise-address",
        ),
        (
            vec!["--inter-cp-advertise-address", "https://global-2:5682"],
            "--inter-cp-advertise-address",
        ),
        (vec!["--inter-cp-addr", "global-2:5682"], "--inter-cp-addr"),
        // Listening on every address, with nothing to advertise.
        (
            with_pg(&["--inter-cp-addr", "0.0.0.0:5682"]),
            "--inter-cp-advertise-address",
        ),
        (
            PG.iter()
                .copied()
                .chain(["--api-addr", &same, "--inter-cp-addr", &same])
                .collect(),
            "--inter-cp-addr",
        ),
    ];
    for (args, flag) in cases {
        refused(&args, flag);
    }
}

#[test]
fn a_kds_key_that_is_not_the_certificates_is_refused() {
    let dir = std::env::temp_dir().join(format!("umbra-global-flags-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let pem = |name: &str, body: &str| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    // Well-formed PEM blocks whose content is no certificate and no key.
    let cert = pem(
        "kds.crt",
        "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n",
    );
    let key = pem(
        "kds.key",
        "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
    );
    refused(
        &["--kds-tls-cert-file", &cert, "--kds-tls-key-file", &key],
        "--kds-tls-key-file",
    );
    let _ = std::fs::remove_dir_all(&dir);
}
