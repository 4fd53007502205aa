//! What both CPs check of their command line before they start (issue 33): value parsers for
//! clap's `value_parser` (each flag's value is checked on its own and reaches the code typed),
//! and [`parse_checked`] for what one value cannot tell (flags that need or contradict each
//! other, a file's content). A malformed flag stops the process with clap's usage error
//! (status 2) naming the flag, before anything is opened or bound.

use std::net::SocketAddr;
use std::path::PathBuf;

use rustls_pki_types::pem::PemObject as _;

/// Parse `A` from the command line and the environment, then `check` it; on any error print it
/// the way clap prints a usage error (naming the flag) and exit with status 2.
pub fn parse_checked<A: clap::Parser>(check: impl FnOnce(&A) -> Result<(), String>) -> A {
    let args = A::parse();
    if let Err(message) = check(&args) {
        A::command()
            .error(clap::error::ErrorKind::ValueValidation, message)
            .exit();
    }
    args
}

/// A path to a file this process reads at startup: it must be a regular file it can read.
///
/// # Errors
/// An empty path, a missing or unreadable file, a directory.
pub fn readable_file(text: &str) -> Result<PathBuf, String> {
    read(text).map(|(path, _)| path)
}

fn read(text: &str) -> Result<(PathBuf, Vec<u8>), String> {
    if text.trim().is_empty() {
        return Err("the path is empty".into());
    }
    let path = PathBuf::from(text);
    if path.is_dir() {
        return Err(format!("{text} is a directory, not a file"));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {text}: {e}"))?;
    Ok((path, bytes))
}

/// A readable file of PEM certificates (one or more `CERTIFICATE` blocks): a certificate chain
/// or the CA certificates to verify a peer with.
///
/// # Errors
/// What [`readable_file`] refuses, undecodable PEM, or no certificate in the file.
pub fn pem_certificates(text: &str) -> Result<PathBuf, String> {
    let (path, bytes) = read(text)?;
    certificates_in(&bytes).map_err(|e| format!("{text}: {e}"))?;
    Ok(path)
}

/// How many PEM certificates `pem` holds (at least one).
///
/// # Errors
/// Undecodable PEM, or no certificate.
pub fn certificates_in(pem: &[u8]) -> Result<usize, String> {
    let certs = rustls_pki_types::CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates ({e})"))?;
    if certs.is_empty() {
        return Err("holds no PEM certificate (-----BEGIN CERTIFICATE-----)".into());
    }
    Ok(certs.len())
}

/// A readable file holding a PEM private key (PKCS#8, PKCS#1 or SEC1).
///
/// # Errors
/// What [`readable_file`] refuses, or no private key in the file.
pub fn pem_private_key(text: &str) -> Result<PathBuf, String> {
    let (path, bytes) = read(text)?;
    rustls_pki_types::PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|e| format!("{text}: no PEM private key ({e})"))?;
    Ok(path)
}

/// A directory this process keeps its data in: created when missing, so it need not exist,
/// but an existing path must be a directory.
///
/// # Errors
/// An empty path, or a path to something that is not a directory.
pub fn directory(text: &str) -> Result<PathBuf, String> {
    if text.trim().is_empty() {
        return Err("the path is empty".into());
    }
    let path = PathBuf::from(text);
    if path.exists() && !path.is_dir() {
        return Err(format!("{text} exists and is not a directory"));
    }
    Ok(path)
}

/// A name peers reach this process by, as TLS checks it: a DNS name (`zone-1-cp`,
/// `cp.example.com`) or an IP address.
///
/// # Errors
/// Anything else (empty, spaces, a URL, a port).
pub fn host_name(text: &str) -> Result<String, String> {
    rustls_pki_types::ServerName::try_from(text)
        .map(|_| text.to_owned())
        .map_err(|_| "not a DNS name or an IP address".to_owned())
}

/// Two listen addresses, named by their flags, that one process binds: they must not be the
/// same port on overlapping addresses (port 0, any free port, never collides).
///
/// # Errors
/// The message naming both flags.
pub fn distinct_listeners(a: (&str, SocketAddr), b: (&str, SocketAddr)) -> Result<(), String> {
    let ((fa, a), (fb, b)) = (a, b);
    let overlap = a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified();
    if a.port() != 0 && a.port() == b.port() && overlap {
        return Err(format!("{fa} {a} and {fb} {b} are the same port"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str, content: &[u8]) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("umbra-flags-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(name);
        std::fs::write(&p, content).unwrap();
        p
    }

    #[test]
    fn files_must_be_readable_and_hold_what_they_are_for() {
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["x".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        let cert = temp("cert.pem", cert.pem().as_bytes());
        let key = temp("key.pem", key.serialize_pem().as_bytes());
        let s = |p: &PathBuf| p.display().to_string();
        assert_eq!(pem_certificates(&s(&cert)).unwrap(), cert);
        assert_eq!(pem_private_key(&s(&key)).unwrap(), key);
        assert!(pem_certificates(&s(&key))
            .unwrap_err()
            .contains("no PEM certificate"));
        assert!(pem_private_key(&s(&cert))
            .unwrap_err()
            .contains("no PEM private key"));
        assert!(readable_file("/nonexistent/x")
            .unwrap_err()
            .contains("cannot read"));
        assert!(readable_file("").is_err());
        let dir = cert.parent().unwrap().display().to_string();
        assert!(readable_file(&dir).unwrap_err().contains("directory"));
        assert!(directory(&dir).is_ok());
        assert!(directory(&s(&cert))
            .unwrap_err()
            .contains("not a directory"));
        assert!(directory("/nonexistent/created-later").is_ok());
    }

    #[test]
    fn host_names_and_listeners() {
        assert!(host_name("zone-1-cp").is_ok());
        assert!(host_name("10.0.0.1").is_ok());
        assert!(host_name("::1").is_ok());
        for bad in ["", "a b", "http://x", "x:5678"] {
            assert!(host_name(bad).is_err(), "{bad:?}");
        }
        let addr = |s: &str| s.parse::<SocketAddr>().unwrap();
        assert!(
            distinct_listeners(("--a", addr("127.0.0.1:1")), ("--b", addr("127.0.0.1:2"))).is_ok()
        );
        assert!(
            distinct_listeners(("--a", addr("127.0.0.1:0")), ("--b", addr("127.0.0.1:0"))).is_ok()
        );
        assert!(
            distinct_listeners(("--a", addr("10.0.0.1:1")), ("--b", addr("10.0.0.2:1"))).is_ok()
        );
        let e = distinct_listeners(("--a", addr("0.0.0.0:1")), ("--b", addr("127.0.0.1:1")));
        assert!(e.unwrap_err().contains("--a 0.0.0.0:1 and --b 127.0.0.1:1"));
    }
}
