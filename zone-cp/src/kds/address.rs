//! Where the Global is: one KDS address ([`KdsAddress`], the one parser of a
//! `--global-kds-address` value) and the list the zone may reach it at ([`KdsAddresses`]:
//! several Global replicas on one database, or one load balancer in front of them).

use super::error::AddressError;

/// The Global's KDS address (one `--global-kds-address` value): one URI `scheme://host:port`,
/// the scheme `http` or `grpc` (plaintext) or `https` or `grpcs` (TLS; Kuma writes
/// `grpcs://global:5685`), a DNS name or IP address as host, an explicit port and nothing
/// after it (no path, query, fragment or user info). The one parser of the address: the flag
/// is checked with it at startup and the KDS client dials the URI it yields, so an address
/// the client could not dial never gets past the command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KdsAddress {
    /// As given (for logs and `/config`).
    text: String,
    /// What the client dials: scheme `http` or `https`, host and port.
    uri: tonic::transport::Uri,
}

impl KdsAddress {
    /// The URI the client dials (`grpc`/`grpcs` given as `http`/`https`).
    pub fn uri(&self) -> &tonic::transport::Uri {
        &self.uri
    }

    /// `true` for `https://` and `grpcs://`: the Global is verified with `--kds-ca-file`.
    pub fn is_tls(&self) -> bool {
        self.uri.scheme_str() == Some("https")
    }

    /// The address as given.
    pub fn as_str(&self) -> &str {
        &self.text
    }
}

impl std::fmt::Display for KdsAddress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

impl std::str::FromStr for KdsAddress {
    type Err = AddressError;

    fn from_str(text: &str) -> Result<Self, AddressError> {
        let uri = text
            .parse::<tonic::transport::Uri>()
            .map_err(|e| AddressError::NotUri(e.to_string()))?;
        let scheme = match uri.scheme_str() {
            Some("http" | "grpc") => "http",
            Some("https" | "grpcs") => "https",
            Some(other) => return Err(AddressError::Scheme(other.to_owned())),
            None => return Err(AddressError::NoScheme),
        };
        let authority = uri.authority().ok_or(AddressError::NoHost)?;
        if authority.as_str().contains('@') {
            return Err(AddressError::UserInfo);
        }
        let host = authority.host();
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        if rustls_pki_types::ServerName::try_from(bare).is_err() {
            return Err(AddressError::Host(host.to_owned()));
        }
        let port = authority.port_u16().ok_or(AddressError::NoPort)?;
        if port == 0 {
            return Err(AddressError::PortZero);
        }
        if uri.path_and_query().is_some_and(|p| p.as_str() != "/") {
            return Err(AddressError::Path);
        }
        let uri = tonic::transport::Uri::builder()
            .scheme(scheme)
            .authority(authority.as_str())
            .path_and_query("/")
            .build()
            .map_err(|e| AddressError::NotUri(e.to_string()))?;
        Ok(KdsAddress {
            text: text.to_owned(),
            uri,
        })
    }
}

/// The addresses the zone reaches its Global at (every `--global-kds-address` value, in the
/// order given): at least one, all TLS or all plaintext (one `--kds-ca-file` verifies every
/// one), none twice (compared as dialed: `grpc://g:5685` is `http://g:5685`, host names
/// without regard to case). The KDS client tries them in turn ([`super::run`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KdsAddresses(Vec<KdsAddress>);

impl KdsAddresses {
    /// The list `addresses`, checked.
    ///
    /// # Errors
    /// [`AddressError::NoAddress`] for an empty list, [`AddressError::MixedTls`] when TLS and
    /// plaintext addresses are mixed, [`AddressError::Duplicate`] for an address given twice.
    pub fn new(addresses: Vec<KdsAddress>) -> Result<Self, AddressError> {
        let first = addresses.first().ok_or(AddressError::NoAddress)?;
        if let Some(odd) = addresses.iter().find(|a| a.is_tls() != first.is_tls()) {
            let (tls, plaintext) = if first.is_tls() {
                (first, odd)
            } else {
                (odd, first)
            };
            return Err(AddressError::MixedTls {
                tls: tls.to_string(),
                plaintext: plaintext.to_string(),
            });
        }
        for (i, a) in addresses.iter().enumerate() {
            if let Some(again) = addresses[i + 1..].iter().find(|b| b.uri() == a.uri()) {
                return Err(AddressError::Duplicate {
                    first: a.to_string(),
                    again: again.to_string(),
                });
            }
        }
        Ok(KdsAddresses(addresses))
    }

    /// The addresses, in the order given.
    pub fn as_slice(&self) -> &[KdsAddress] {
        &self.0
    }

    /// The address at `index`, counted round the list (index `len()` is the first again).
    pub fn at(&self, index: usize) -> &KdsAddress {
        // Never empty (checked by `new`, kept by `From<KdsAddress>`).
        &self.0[index % self.0.len()]
    }

    /// How many there are (at least one).
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Always `false` (there is at least one address); for API symmetry with `len`.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every address is TLS (`https://`, `grpcs://`); otherwise every one is plaintext.
    pub fn is_tls(&self) -> bool {
        self.0.iter().all(KdsAddress::is_tls)
    }
}

/// One address (one Global, or a load balancer in front of several).
impl From<KdsAddress> for KdsAddresses {
    fn from(address: KdsAddress) -> Self {
        KdsAddresses(vec![address])
    }
}

/// The addresses as given, comma-separated (the form `UMBRA_GLOBAL_KDS_ADDRESS` takes).
impl std::fmt::Display for KdsAddresses {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for (i, a) in self.0.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(a.as_str())?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(texts: &[&str]) -> Result<KdsAddresses, AddressError> {
        KdsAddresses::new(texts.iter().map(|t| t.parse().unwrap()).collect())
    }

    #[test]
    fn a_kds_address_is_one_dialable_uri() {
        let a: KdsAddress = "grpcs://global:5685".parse().unwrap();
        assert_eq!(a.uri().to_string(), "https://global:5685/");
        assert!(a.is_tls());
        assert_eq!(a.to_string(), "grpcs://global:5685");
        let a: KdsAddress = "grpc://10.0.0.1:5685".parse().unwrap();
        assert_eq!(a.uri().to_string(), "http://10.0.0.1:5685/");
        assert!(!a.is_tls());
        for ok in ["http://[::1]:5685", "https://global.example.com:443/"] {
            assert!(ok.parse::<KdsAddress>().is_ok(), "{ok}");
        }
        for (bad, why) in [
            ("http://a:1,http://b:2", "not a URI"),
            ("http://a:1 http://b:2", "not a URI"),
            ("global:5685", "scheme"),
            ("127.0.0.1:5685", "no scheme"),
            ("ftp://global:5685", "not one of"),
            ("http://global", "no port"),
            ("http://global:0", "port 0"),
            ("http://global:5685/kds", "path"),
            ("http://global:5685/?x=1", "path or query"),
            ("http://u:p@global:5685", "user info"),
            ("http://bad_host!:5685", "not a DNS name"),
            ("", "not a URI"),
        ] {
            let e = bad.parse::<KdsAddress>().unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn several_addresses_keep_their_order_and_go_round() {
        let l = list(&[
            "grpcs://g-1:5685",
            "https://g-2:5685",
            "grpcs://10.0.0.3:5685",
        ])
        .unwrap();
        assert_eq!(l.len(), 3);
        assert!(l.is_tls() && !l.is_empty());
        let seen: Vec<String> = (0..4).map(|i| l.at(i).to_string()).collect();
        assert_eq!(
            seen,
            [
                "grpcs://g-1:5685",
                "https://g-2:5685",
                "grpcs://10.0.0.3:5685",
                "grpcs://g-1:5685"
            ]
        );
        assert_eq!(
            l.to_string(),
            "grpcs://g-1:5685,https://g-2:5685,grpcs://10.0.0.3:5685"
        );
        let one = KdsAddresses::from("http://lb:5685".parse::<KdsAddress>().unwrap());
        assert_eq!((one.len(), one.is_tls()), (1, false));
        assert_eq!(one.at(7).as_str(), "http://lb:5685");
        assert_eq!(list(&["http://lb:5685"]).unwrap(), one);
    }

    #[test]
    fn tls_and_plaintext_addresses_do_not_mix() {
        for mixed in [
            &["grpcs://g-1:5685", "http://g-2:5685"][..],
            &["http://g-1:5685", "grpc://g-2:5685", "https://g-3:5685"][..],
        ] {
            let e = list(mixed).unwrap_err();
            assert!(matches!(e, AddressError::MixedTls { .. }), "{mixed:?}: {e}");
            let text = e.to_string();
            assert!(
                text.contains("is TLS") && text.contains("is plaintext"),
                "{text}"
            );
        }
        let e = list(&["http://g-1:5685", "https://g-3:5685"]).unwrap_err();
        assert_eq!(
            e,
            AddressError::MixedTls {
                tls: "https://g-3:5685".into(),
                plaintext: "http://g-1:5685".into()
            }
        );
    }

    #[test]
    fn an_address_given_twice_is_refused() {
        for (twice, first, again) in [
            (
                &["http://g:5685", "http://g:5685"][..],
                "http://g:5685",
                "http://g:5685",
            ),
            (
                &["grpc://g:5685", "http://h:1", "http://G:5685"][..],
                "grpc://g:5685",
                "http://G:5685",
            ),
            (
                &["grpcs://g:5685/", "https://g:5685"][..],
                "grpcs://g:5685/",
                "https://g:5685",
            ),
        ] {
            assert_eq!(
                list(twice).unwrap_err(),
                AddressError::Duplicate {
                    first: first.into(),
                    again: again.into()
                },
                "{twice:?}"
            );
        }
        // Another port or host is another Global.
        assert!(list(&["http://g:5685", "http://g:5686", "http://h:5685"]).is_ok());
        assert_eq!(
            KdsAddresses::new(Vec::new()).unwrap_err(),
            AddressError::NoAddress
        );
    }
}
