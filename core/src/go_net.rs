//! Address, host and URL checks as Kuma 2.7.29 runs them, so that Umbra accepts the same
//! addresses Kuma accepts (issue 41).
//!
//! Kuma 2.7.29 is built with Go 1.26.5 (its `go.mod`) and govalidator
//! `v0.0.0-20230301143203-a9d515a09cc2`; its validators call:
//! - [`parse_ip`]: Go's `net.ParseIP` (Go 1.26: `netip.ParseAddr`, no zone), also
//!   govalidator's `IsIP`;
//! - [`is_dns_name`]: govalidator's `IsDNSName` (labels of letters, digits, `_` and `-`, not
//!   starting with `-`, up to 63 characters, an optional final `.` or `_`; not an IP);
//! - [`is_host`]: `IsIP || IsDNSName` (govalidator's `IsHost`);
//! - [`split_host_port`]: Go's `net.SplitHostPort`;
//! - [`parse_url`] and [`parse_request_uri`]: Go's `url.Parse` and `url.ParseRequestURI`
//!   (Go 1.26: a bracketed host must be an IPv6 address; an `http`/`https` host may hold one
//!   colon only, `urlstrictcolons=1`, the default of a `go 1.26` module);
//! - [`is_url`]: govalidator's `IsURL` (`url.Parse` of the text, with `http://` put in front
//!   when it has a `:` and no `://`, then govalidator's `URL` regex on the text as given);
//! - [`dns1123_subdomain_violations`]: Kubernetes' `IsDNS1123Subdomain` (apimachinery v0.35).
//!
//! Everything here is pure and bounded by the input's length.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::LazyLock;

use regex::Regex;

/// govalidator's `DNSName` pattern, verbatim.
const DNS_NAME: &str =
    r"^([a-zA-Z0-9_]{1}[a-zA-Z0-9_-]{0,62}){1}(\.[a-zA-Z0-9_]{1}[a-zA-Z0-9_-]{0,62})*[\._]?$";

/// govalidator's `IP` pattern (used inside `URL`), verbatim.
const GV_IP: &str = r"(([0-9a-fA-F]{1,4}:){7,7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|:((:[0-9a-fA-F]{1,4}){1,7}|:)|fe80:(:[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]{1,}|::(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])|([0-9a-fA-F]{1,4}:){1,4}:((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9]))";

/// govalidator's `URL` pattern parts, verbatim but for Go's ASCII-only classes, spelled out
/// for Rust's Unicode-aware `regex`: `\d` is `[0-9]`, `\s` is `[\t\n\f\r ]` (so `\S` and
/// `[^\s]` are `[^\t\n\f\r ]`).
const URL_SCHEMA: &str = r"((ftp|tcp|udp|wss?|https?):\/\/)";
const URL_USERNAME: &str = r"([^\t\n\f\r ]+(:[^\t\n\f\r ]*)?@)";
const URL_PATH: &str = r"((\/|\?|#)[^\t\n\f\r ]*)";
const URL_PORT: &str = r"(:([0-9]{1,5}))";
const URL_IP: &str = r"([1-9][0-9]?|1[0-9][0-9]|2[01][0-9]|22[0-3]|24[0-9]|25[0-5])(\.([0-9]{1,2}|1[0-9][0-9]|2[0-4][0-9]|25[0-5])){2}(?:\.([0-9][0-9]?|1[0-9][0-9]|2[0-4][0-9]|25[0-5]))";
const URL_SUBDOMAIN: &str =
    r"((www\.)|([a-zA-Z0-9]+([-_\.]?[a-zA-Z0-9])*[a-zA-Z0-9]\.[a-zA-Z0-9]+))";

static DNS_NAME_RX: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(DNS_NAME).expect("govalidator's DNSName pattern compiles"));

static URL_RX: LazyLock<Regex> = LazyLock::new(|| {
    let pattern = format!(
        r"^{URL_SCHEMA}?{URL_USERNAME}?(({URL_IP}|(\[{GV_IP}\])|(([a-zA-Z0-9]([a-zA-Z0-9-_]+)?[a-zA-Z0-9]([-\.][a-zA-Z0-9]+)*)|({URL_SUBDOMAIN}?))?(([a-zA-Z\x{{00a1}}-\x{{ffff}}0-9]+-?-?)*[a-zA-Z\x{{00a1}}-\x{{ffff}}0-9]+)(?:\.([a-zA-Z\x{{00a1}}-\x{{ffff}}]{{1,}}))?))\.?{URL_PORT}?{URL_PATH}?$"
    );
    Regex::new(&pattern).expect("govalidator's URL pattern compiles")
});

static DNS1123_SUBDOMAIN_RX: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(&format!("^{DNS1123_SUBDOMAIN_FMT}$")).expect("the RFC 1123 pattern compiles")
});

/// Kubernetes' `dns1123SubdomainFmt`.
const DNS1123_SUBDOMAIN_FMT: &str =
    r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*";

/// Go's `net.ParseIP`: an IPv4 address in dotted decimal (no leading zeros) or an IPv6
/// address (an IPv4 tail allowed), no zone.
pub fn parse_ip(s: &str) -> Option<IpAddr> {
    s.parse().ok()
}

/// govalidator's `IsIP` (`net.ParseIP(s) != nil`).
pub fn is_ip(s: &str) -> bool {
    parse_ip(s).is_some()
}

/// govalidator's `IsDNSName`: not empty, at most 255 characters without the dots, not an IP,
/// and dot-separated labels of ASCII letters, digits, `_` and `-` (not starting with `-`,
/// 1 to 63 characters), with an optional final `.` or `_`. Underscores are fine
/// (`kuma-3_meshaccesslog_tcp-sink`), as Docker and compose name containers.
pub fn is_dns_name(s: &str) -> bool {
    if s.is_empty() || s.bytes().filter(|&b| b != b'.').count() > 255 {
        return false;
    }
    !is_ip(s) && DNS_NAME_RX.is_match(s)
}

/// govalidator's `IsHost`: [`is_ip`] or [`is_dns_name`], the check Kuma runs on a Dataplane's,
/// a ZoneIngress's and an ExternalService's address.
pub fn is_host(s: &str) -> bool {
    is_ip(s) || is_dns_name(s)
}

/// Go's `net.AddrError` from [`split_host_port`]: `address <hostport>: <why>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("address {address}: {why}")]
pub struct AddrError {
    /// The text that was split.
    pub address: String,
    /// What is wrong with it.
    pub why: AddrProblem,
}

/// What [`split_host_port`] found wrong with an address (Go's texts).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum AddrProblem {
    /// No `:port` (or nothing after the closing bracket).
    #[error("missing port in address")]
    MissingPort,
    /// `[` without `]`.
    #[error("missing ']' in address")]
    MissingBracket,
    /// A colon in an unbracketed host, or after the port.
    #[error("too many colons in address")]
    TooManyColons,
    /// A `[` where none may be.
    #[error("unexpected '[' in address")]
    UnexpectedOpenBracket,
    /// A `]` where none may be.
    #[error("unexpected ']' in address")]
    UnexpectedCloseBracket,
}

/// Why Go's `url.Parse` or `url.ParseRequestURI` refuses a URL ([`parse_url`],
/// [`parse_request_uri`]); the texts are Go's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UrlError {
    /// An ASCII control character.
    #[error("net/url: invalid control character in URL")]
    ControlCharacter,
    /// An empty request URI.
    #[error("empty url")]
    Empty,
    /// A request URI that is neither absolute nor an absolute path.
    #[error("invalid URI for request")]
    NotARequestUri,
    /// A relative reference whose first segment holds a colon.
    #[error("first path segment in URL cannot contain colon")]
    ColonInFirstSegment,
    /// Text starting with `:`.
    #[error("missing protocol scheme")]
    MissingScheme,
    /// Userinfo with a character it may not hold.
    #[error("net/url: invalid userinfo")]
    InvalidUserinfo,
    /// A bracket not at the start of the host, or a bracketed IPv4 address.
    #[error("invalid IP-literal")]
    InvalidIpLiteral,
    /// `[` without `]` in the host.
    #[error("missing ']' in host")]
    MissingHostBracket,
    /// The text after the host is not `:` and digits.
    #[error("invalid port {port:?} after host")]
    InvalidPort {
        /// The text after the host.
        port: String,
    },
    /// A bracketed host that is not an IPv6 address.
    #[error("invalid host: {host:?}")]
    InvalidHost {
        /// The host, unescaped.
        host: String,
    },
    /// A `%` not followed by two hex digits, or an escape a host may not hold.
    #[error("invalid URL escape {escape:?}")]
    InvalidEscape {
        /// The escape as written.
        escape: String,
    },
    /// A character a host may not hold.
    #[error("invalid character {character:?} in host name")]
    InvalidHostCharacter {
        /// The character.
        character: char,
    },
}

/// Go's `net.SplitHostPort`: `host:port`, `[host]:port` (the host may hold colons only in
/// brackets). The error is Go's text (`address x: missing port in address`).
///
/// # Errors
/// [`AddrError`]: missing port, too many colons, a missing or unexpected bracket.
pub fn split_host_port(hostport: &str) -> Result<(&str, &str), AddrError> {
    let err = |why: AddrProblem| {
        Err(AddrError {
            address: hostport.to_owned(),
            why,
        })
    };
    let Some(i) = hostport.rfind(':') else {
        return err(AddrProblem::MissingPort);
    };
    let (host, j, k);
    if hostport.starts_with('[') {
        let Some(end) = hostport.find(']') else {
            return err(AddrProblem::MissingBracket);
        };
        if end + 1 == hostport.len() {
            return err(AddrProblem::MissingPort);
        }
        if end + 1 != i {
            if hostport.as_bytes()[end + 1] == b':' {
                return err(AddrProblem::TooManyColons);
            }
            return err(AddrProblem::MissingPort);
        }
        host = &hostport[1..end];
        (j, k) = (1, end + 1);
    } else {
        host = &hostport[..i];
        if host.contains(':') {
            return err(AddrProblem::TooManyColons);
        }
        (j, k) = (0, 0);
    }
    if hostport[j..].contains('[') {
        return err(AddrProblem::UnexpectedOpenBracket);
    }
    if hostport[k..].contains(']') {
        return err(AddrProblem::UnexpectedCloseBracket);
    }
    Ok((host, &hostport[i + 1..]))
}

/// A URL as Go's `net/url` splits it (the fields Kuma's validators read).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GoUrl {
    /// Scheme, lower-cased.
    pub scheme: String,
    /// Text after `scheme:` when it does not start with `/`.
    pub opaque: String,
    /// Userinfo before `@` (unescaped), when there is one.
    pub user: Option<String>,
    /// `host` or `host:port` (unescaped; IPv6 in brackets).
    pub host: String,
    /// Path (unescaped).
    pub path: String,
    /// Query without `?`.
    pub raw_query: String,
    /// Fragment (unescaped; never set by [`parse_request_uri`]).
    pub fragment: String,
}

impl GoUrl {
    /// Go's `URL.Port()`: the digits after the host's last `:`, empty when there are none.
    pub fn port(&self) -> &str {
        split_url_host_port(&self.host).1
    }

    /// Go's `URL.Hostname()`: the host without the port and brackets.
    pub fn hostname(&self) -> &str {
        split_url_host_port(&self.host).0
    }
}

/// Go's `url.splitHostPort` (used by `Port` and `Hostname`).
fn split_url_host_port(host_port: &str) -> (&str, &str) {
    let (mut host, mut port) = (host_port, "");
    if let Some(colon) = host_port.rfind(':') {
        if valid_optional_port(&host_port[colon..]) {
            (host, port) = (&host_port[..colon], &host_port[colon + 1..]);
        }
    }
    if host.len() >= 2 && host.starts_with('[') && host.ends_with(']') {
        host = &host[1..host.len() - 1];
    }
    (host, port)
}

/// Go's `url.Parse`: a URL or a relative reference, with an optional `#fragment`.
///
/// # Errors
/// [`UrlError`], Go's reason (`invalid port ":x" after host`, `invalid URL escape "%zz"`, ...).
pub fn parse_url(raw: &str) -> Result<GoUrl, UrlError> {
    let (u, frag) = raw.split_once('#').unwrap_or((raw, ""));
    let mut url = parse(u, false)?;
    if !frag.is_empty() {
        url.fragment = unescape(frag, Encoding::Fragment)?;
    }
    Ok(url)
}

/// Go's `url.ParseRequestURI`: an absolute URL or an absolute path, no fragment split.
///
/// # Errors
/// [`UrlError`], Go's reason (`invalid URI for request`, `empty url`, ...).
pub fn parse_request_uri(raw: &str) -> Result<GoUrl, UrlError> {
    parse(raw, true)
}

/// Go's `url.parse`.
fn parse(raw: &str, via_request: bool) -> Result<GoUrl, UrlError> {
    if raw.bytes().any(|b| b < b' ' || b == 0x7f) {
        return Err(UrlError::ControlCharacter);
    }
    if raw.is_empty() && via_request {
        return Err(UrlError::Empty);
    }
    let mut url = GoUrl::default();
    if raw == "*" {
        url.path = "*".to_owned();
        return Ok(url);
    }
    let (scheme, mut rest) = get_scheme(raw)?;
    url.scheme = scheme.to_ascii_lowercase();
    if rest.ends_with('?') && rest.matches('?').count() == 1 {
        rest = &rest[..rest.len() - 1];
    } else if let Some((r, q)) = rest.split_once('?') {
        rest = r;
        url.raw_query = q.to_owned();
    }
    if !rest.starts_with('/') {
        if !url.scheme.is_empty() {
            url.opaque = rest.to_owned();
            return Ok(url);
        }
        if via_request {
            return Err(UrlError::NotARequestUri);
        }
        if rest.split('/').next().unwrap_or_default().contains(':') {
            return Err(UrlError::ColonInFirstSegment);
        }
    }
    if (!url.scheme.is_empty() || !via_request && !rest.starts_with("///"))
        && rest.starts_with("//")
    {
        let mut authority = &rest[2..];
        rest = "";
        if let Some(i) = authority.find('/') {
            (authority, rest) = (&authority[..i], &authority[i..]);
        }
        let (user, host) = parse_authority(&url.scheme, authority)?;
        url.user = user;
        url.host = host;
    }
    url.path = unescape(rest, Encoding::Path)?;
    Ok(url)
}

/// Go's `url.getScheme`: `(scheme, rest)`; no scheme when the text does not start with one.
fn get_scheme(raw: &str) -> Result<(&str, &str), UrlError> {
    for (i, c) in raw.bytes().enumerate() {
        match c {
            b'a'..=b'z' | b'A'..=b'Z' => {}
            b'0'..=b'9' | b'+' | b'-' | b'.' if i == 0 => return Ok(("", raw)),
            b'0'..=b'9' | b'+' | b'-' | b'.' => {}
            b':' if i == 0 => return Err(UrlError::MissingScheme),
            b':' => return Ok((&raw[..i], &raw[i + 1..])),
            _ => return Ok(("", raw)),
        }
    }
    Ok(("", raw))
}

/// Go's `url.parseAuthority`.
fn parse_authority(scheme: &str, authority: &str) -> Result<(Option<String>, String), UrlError> {
    let at = authority.rfind('@');
    let host = parse_host(scheme, at.map_or(authority, |i| &authority[i + 1..]))?;
    let Some(i) = at else {
        return Ok((None, host));
    };
    let userinfo = &authority[..i];
    let valid = userinfo.chars().all(|c| {
        c.is_ascii_alphanumeric()
            || matches!(
                c,
                '-' | '.'
                    | '_'
                    | ':'
                    | '~'
                    | '!'
                    | '$'
                    | '&'
                    | '\''
                    | '('
                    | ')'
                    | '*'
                    | '+'
                    | ','
                    | ';'
                    | '='
                    | '%'
                    | '@'
            )
    });
    if !valid {
        return Err(UrlError::InvalidUserinfo);
    }
    let (name, password) = userinfo.split_once(':').unwrap_or((userinfo, ""));
    let mut user = unescape(name, Encoding::UserPassword)?;
    if userinfo.contains(':') {
        user.push(':');
        user.push_str(&unescape(password, Encoding::UserPassword)?);
    }
    Ok((Some(user), host))
}

/// Go 1.26's `url.parseHost`.
fn parse_host(scheme: &str, host: &str) -> Result<String, UrlError> {
    match host.rfind('[') {
        Some(i) if i > 0 => return Err(UrlError::InvalidIpLiteral),
        Some(_) => {
            let close = host.rfind(']').ok_or(UrlError::MissingHostBracket)?;
            let colon_port = &host[close + 1..];
            if !valid_optional_port(colon_port) {
                return Err(UrlError::InvalidPort {
                    port: colon_port.to_owned(),
                });
            }
            let colon_port = unescape(colon_port, Encoding::Host)?;
            let hostname = &host[1..close];
            let unescaped = match hostname.find("%25") {
                Some(z) => {
                    unescape(&hostname[..z], Encoding::Host)?
                        + &unescape(&hostname[z..], Encoding::Zone)?
                }
                None => unescape(hostname, Encoding::Host)?,
            };
            // Only an IPv6 address (with an optional zone) may be bracketed.
            let (addr, zone) = match unescaped.split_once('%') {
                Some((a, z)) => (a, Some(z)),
                None => (unescaped.as_str(), None),
            };
            let ok = match zone {
                Some(z) => !z.is_empty() && addr.parse::<Ipv6Addr>().is_ok(),
                None => addr.parse::<IpAddr>().is_ok(),
            };
            if !ok {
                return Err(UrlError::InvalidHost { host: unescaped });
            }
            if addr.parse::<std::net::Ipv4Addr>().is_ok() {
                return Err(UrlError::InvalidIpLiteral);
            }
            return Ok(format!("[{unescaped}]{colon_port}"));
        }
        None => {
            if let Some(first) = host.find(':') {
                let last = host.rfind(':').unwrap_or(first);
                // Strict colons for http and https only (Go 1.26, urlstrictcolons=1).
                let i = if last != first && !matches!(scheme, "http" | "https") {
                    last
                } else {
                    first
                };
                let colon_port = &host[i..];
                if !valid_optional_port(colon_port) {
                    return Err(UrlError::InvalidPort {
                        port: colon_port.to_owned(),
                    });
                }
            }
        }
    }
    unescape(host, Encoding::Host)
}

/// Go's `url.validOptionalPort`: empty, or `:` and digits.
fn valid_optional_port(port: &str) -> bool {
    port.is_empty()
        || port
            .strip_prefix(':')
            .is_some_and(|p| p.bytes().all(|b| b.is_ascii_digit()))
}

/// The parts of a URL Go's `unescape` is told about.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Path,
    Host,
    Zone,
    UserPassword,
    Fragment,
}

/// Go's `url.shouldEscape` for the modes `unescape` checks characters in (host and zone).
fn host_should_escape(c: u8) -> bool {
    !(c.is_ascii_alphanumeric()
        || matches!(
            c,
            b'!' | b'$'
                | b'&'
                | b'\''
                | b'('
                | b')'
                | b'*'
                | b'+'
                | b','
                | b';'
                | b'='
                | b':'
                | b'['
                | b']'
                | b'<'
                | b'>'
                | b'"'
                | b'-'
                | b'_'
                | b'.'
                | b'~'
        ))
}

/// Go's `url.unescape`: `%XX` decoded; a bad escape, or in a host an escaped ASCII byte
/// (but `%25`) or a character hosts may not hold, is an error.
fn unescape(s: &str, mode: Encoding) -> Result<String, UrlError> {
    let b = s.as_bytes();
    let mut i = 0;
    let mut escaped = false;
    while i < b.len() {
        if b[i] == b'%' {
            escaped = true;
            if i + 2 >= b.len() || !b[i + 1].is_ascii_hexdigit() || !b[i + 2].is_ascii_hexdigit() {
                let end = (i + 3).min(b.len());
                return Err(UrlError::InvalidEscape {
                    escape: String::from_utf8_lossy(&b[i..end]).into_owned(),
                });
            }
            let v = hex(b[i + 1]) << 4 | hex(b[i + 2]);
            let is25 = &s[i..i + 3] == "%25";
            if mode == Encoding::Host && hex(b[i + 1]) < 8 && !is25
                || mode == Encoding::Zone && !is25 && v != b' ' && host_should_escape(v)
            {
                return Err(UrlError::InvalidEscape {
                    escape: s[i..i + 3].to_owned(),
                });
            }
            i += 3;
        } else {
            if matches!(mode, Encoding::Host | Encoding::Zone)
                && b[i] < 0x80
                && host_should_escape(b[i])
            {
                return Err(UrlError::InvalidHostCharacter {
                    character: char::from(b[i]),
                });
            }
            i += 1;
        }
    }
    if !escaped {
        return Ok(s.to_owned());
    }
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            out.push(hex(b[i + 1]) << 4 | hex(b[i + 2]));
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Ok(String::from_utf8_lossy(&out).into_owned())
}

fn hex(c: u8) -> u8 {
    match c {
        b'0'..=b'9' => c - b'0',
        b'a'..=b'f' => c - b'a' + 10,
        b'A'..=b'F' => c - b'A' + 10,
        _ => 0,
    }
}

/// govalidator's `IsURL`, as Kuma checks a MeshAccessLog TCP `address` and a MeshTrace Zipkin
/// `url`: 4 to 2082 characters, not starting with `.`; Go's `url.Parse` takes it (with
/// `http://` in front when it has a `:` and no `://`), its host does not start with `.`, a
/// host-less URL has a path with a `.`; and govalidator's `URL` regex matches: an optional
/// `ftp|tcp|udp|ws|wss|http|https://`, optional userinfo, an IPv4 address, a bracketed IPv6
/// address or a host name (labels of letters, digits, `-` and `_`), an optional port of up to
/// 5 digits, an optional path, query or fragment.
pub fn is_url(s: &str) -> bool {
    if s.is_empty() || s.chars().count() >= 2083 || s.len() <= 3 || s.starts_with('.') {
        return false;
    }
    let parsed = if s.contains(':') && !s.contains("://") {
        parse_url(&format!("http://{s}"))
    } else {
        parse_url(s)
    };
    let Ok(u) = parsed else {
        return false;
    };
    if u.host.starts_with('.') {
        return false;
    }
    if u.host.is_empty() && !u.path.is_empty() && !u.path.contains('.') {
        return false;
    }
    URL_RX.is_match(s)
}

/// Kubernetes' `IsDNS1123Subdomain` (apimachinery v0.35): its messages, none when `s` is a
/// lowercase RFC 1123 subdomain of at most 253 characters.
pub fn dns1123_subdomain_violations(s: &str) -> Vec<String> {
    let mut out = Vec::new();
    if s.len() > 253 {
        out.push("must be no more than 253 characters".to_owned());
    }
    if !DNS1123_SUBDOMAIN_RX.is_match(s) {
        out.push(format!(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '{DNS1123_SUBDOMAIN_FMT}')"
        ));
    }
    out
}

#[cfg(test)]
#[path = "go_net_tests.rs"]
mod tests;
