//! The `global-cp` binary refuses a malformed flag at startup (issue 33): it exits quickly with
//! status 2 and a message naming the flag, before it opens its store or binds anything.

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const GLOBAL_CP: &str = env!("CARGO_BIN_EXE_global-cp");

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// Run `global-cp args` (on free ports unless `args` name them) with no `UMBRA_*` variable from
/// this environment; it must exit within 10 s with status 2 and a stderr naming `flag`.
fn refused(args: &[&str], flag: &str) {
    let given = |f: &str| args.iter().position(|a| *a == f).map(|i| args[i + 1]);
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    for f in ["--api-addr", "--kds-addr"] {
        if given(f).is_none() {
            all.extend([f.to_owned(), free_addr().to_string()]);
        }
    }
    let mut cmd = Command::new(GLOBAL_CP);
    cmd.args(&all)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("UMBRA_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("global-cp starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("global-cp {all:?} still runs after 10 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert_eq!(
        status.code(),
        Some(2),
        "global-cp {all:?}: {status}\n{stderr}"
    );
    assert!(
        stderr.contains(flag),
        "global-cp {all:?}: the error does not name {flag}:\n{stderr}"
    );
    assert!(
        !stderr.contains("listening"),
        "global-cp {all:?} got as far as listening:\n{stderr}"
    );
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
