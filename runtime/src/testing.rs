//! Test support (feature `testing`). A CP binary refusing a malformed flag (issue 33), for both CPs' process-level tests: run it
//! with the flags given, on free loopback ports for the address flags not given, with no
//! `UMBRA_*` variable from the test's environment, and check that it exits quickly with status
//! 2 and a message naming the flag, never having bound its API.

use std::net::{SocketAddr, TcpListener};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A loopback address nothing listens on (yet).
///
/// # Panics
/// When no port can be had.
pub fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
}

/// Run `binary args`, adding `--<flag> <free address>` for each of `address_flags` that `args`
/// does not give (the first is the API's); it must exit within 10 s with status 2 and a stderr
/// naming `flag`, and must not have bound the API address.
///
/// # Panics
/// When any of that does not hold (a test failure).
pub fn assert_refused(binary: &str, address_flags: &[&str], args: &[&str], flag: &str) {
    let name = std::path::Path::new(binary)
        .file_name()
        .map_or_else(|| binary.to_owned(), |n| n.to_string_lossy().into_owned());
    let given = |f: &str| args.iter().position(|a| *a == f).map(|i| args[i + 1]);
    let mut all: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    let mut api = None;
    for f in address_flags {
        let addr = given(f)
            .and_then(|a| a.parse().ok())
            .unwrap_or_else(free_addr);
        api.get_or_insert(addr);
        if given(f).is_none() {
            all.extend([(*f).to_owned(), addr.to_string()]);
        }
    }
    let mut cmd = Command::new(binary);
    cmd.args(&all)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("UMBRA_") {
            cmd.env_remove(k);
        }
    }
    let mut child = cmd.spawn().expect("the binary starts");
    let started = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().expect("the child's status") {
            break status;
        }
        if started.elapsed() > Duration::from_secs(10) {
            let bound = api.is_some_and(|a| std::net::TcpStream::connect(a).is_ok());
            let _ = child.kill();
            let _ = child.wait();
            panic!("{name} {all:?} still runs after 10 s (API bound: {bound})");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = std::io::Read::read_to_string(&mut e, &mut stderr);
    }
    assert_eq!(status.code(), Some(2), "{name} {all:?}: {status}\n{stderr}");
    assert!(
        stderr.contains(flag),
        "{name} {all:?}: the error does not name {flag}:\n{stderr}"
    );
    assert!(
        !stderr.contains("listening"),
        "{name} {all:?} got as far as listening:\n{stderr}"
    );
}
