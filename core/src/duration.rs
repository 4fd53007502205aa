//! Kuma durations: the Go `time.ParseDuration` grammar Kuma's API accepts (`21s`, `2h`,
//! `500ms`, `1h30m`, `-1s`, `0s`, `0`), kept losslessly.
//!
//! A [`Duration`] remembers the text it was parsed from, so a resource written as `2h` reads back
//! as `2h` (Kuma itself would print `2h0m0s`; [`Duration::to_go_string`] gives that form when
//! needed). Equality and ordering compare the value, not the text.

use std::cmp::Ordering;
use std::fmt;
use std::hash::{Hash, Hasher};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A signed duration with nanosecond precision, parsed from Go's duration syntax.
///
/// Range: what fits an `i64` of nanoseconds (about ±292 years), as in Go.
#[derive(Debug, Clone)]
pub struct Duration {
    nanos: i64,
    text: String,
}

/// Why a duration string was rejected; the message mirrors Go's `time: invalid duration "x"`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// The text is not in Go's duration grammar.
    #[error("time: invalid duration {0:?}")]
    Invalid(String),
    /// A number is followed by no unit (`"5"`) or an unknown one (`"5d"`).
    #[error("time: missing or unknown unit in duration {0:?}")]
    Unit(String),
    /// The value does not fit 64-bit nanoseconds.
    #[error("time: invalid duration {0:?} (overflow)")]
    Overflow(String),
}

impl Duration {
    /// A duration of `nanos` nanoseconds, rendered in Go's canonical form.
    pub fn from_nanos(nanos: i64) -> Self {
        Self {
            nanos,
            text: go_format(nanos),
        }
    }

    /// A whole number of seconds.
    pub fn from_secs(secs: i64) -> Self {
        Self::from_nanos(secs.saturating_mul(1_000_000_000))
    }

    /// Parse Go duration syntax. Bounded: the input is scanned once.
    ///
    /// # Errors
    /// [`DurationError`] for anything `time.ParseDuration` would reject.
    pub fn parse(s: &str) -> Result<Self, DurationError> {
        let nanos = parse_nanos(s)?;
        Ok(Self {
            nanos,
            text: s.to_owned(),
        })
    }

    /// Signed nanoseconds.
    pub fn as_nanos(&self) -> i64 {
        self.nanos
    }

    /// `true` for durations below zero.
    pub fn is_negative(&self) -> bool {
        self.nanos < 0
    }

    /// `true` for a zero duration.
    pub fn is_zero(&self) -> bool {
        self.nanos == 0
    }

    /// Whole seconds and the remaining nanoseconds (same sign), as `google.protobuf.Duration` wants.
    pub fn to_secs_nanos(&self) -> (i64, i32) {
        let secs = self.nanos / 1_000_000_000;
        let rem = (self.nanos % 1_000_000_000) as i32;
        (secs, rem)
    }

    /// The text as written by the user (or canonical Go form when built from a number).
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// Go's `time.Duration.String()` form (`1h0m0s`, `500ms`, `0s`), as Kuma prints durations.
    pub fn to_go_string(&self) -> String {
        go_format(self.nanos)
    }
}

impl PartialEq for Duration {
    fn eq(&self, other: &Self) -> bool {
        self.nanos == other.nanos
    }
}
impl Eq for Duration {}
impl Hash for Duration {
    fn hash<H2: Hasher>(&self, state: &mut H2) {
        self.nanos.hash(state);
    }
}
impl PartialOrd for Duration {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Duration {
    fn cmp(&self, other: &Self) -> Ordering {
        self.nanos.cmp(&other.nanos)
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl FromStr for Duration {
    type Err = DurationError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl Serialize for Duration {
    fn serialize<Se: Serializer>(&self, s: Se) -> Result<Se::Ok, Se::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for Duration {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        Duration::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Go's `time.ParseDuration`, step for step (uint64 accumulation, float64 fractions), so the
/// same text gives the same nanoseconds as Kuma.
fn parse_nanos(orig: &str) -> Result<i64, DurationError> {
    const LIMIT: u64 = 1 << 63;
    let invalid = || DurationError::Invalid(orig.to_owned());
    let mut s = orig.as_bytes();
    let mut neg = false;
    if let Some((&c, rest)) = s.split_first() {
        if c == b'-' || c == b'+' {
            neg = c == b'-';
            s = rest;
        }
    }
    if s == b"0" {
        return Ok(0);
    }
    if s.is_empty() {
        return Err(invalid());
    }
    let mut total: u64 = 0;
    while !s.is_empty() {
        if !(s[0] == b'.' || s[0].is_ascii_digit()) {
            return Err(invalid());
        }
        // leadingInt
        let int_len = s.iter().take_while(|c| c.is_ascii_digit()).count();
        let mut v: u64 = 0;
        for &b in &s[..int_len] {
            if v > LIMIT / 10 {
                return Err(invalid());
            }
            v = v * 10 + u64::from(b - b'0');
            if v > LIMIT {
                return Err(invalid());
            }
        }
        s = &s[int_len..];
        let pre = int_len > 0;
        // leadingFraction
        let (mut f, mut scale, mut post) = (0u64, 1f64, false);
        if s.first() == Some(&b'.') {
            s = &s[1..];
            let frac_len = s.iter().take_while(|c| c.is_ascii_digit()).count();
            let mut overflow = false;
            for &b in &s[..frac_len] {
                if overflow {
                    continue;
                }
                if f > (LIMIT - 1) / 10 {
                    overflow = true;
                    continue;
                }
                let y = f * 10 + u64::from(b - b'0');
                if y > LIMIT {
                    overflow = true;
                    continue;
                }
                f = y;
                scale *= 10.0;
            }
            post = frac_len > 0;
            s = &s[frac_len..];
        }
        if !pre && !post {
            return Err(invalid());
        }
        let unit_len = s
            .iter()
            .take_while(|c| !(**c == b'.' || c.is_ascii_digit()))
            .count();
        if unit_len == 0 {
            return Err(DurationError::Unit(orig.to_owned()));
        }
        let unit: u64 = match &s[..unit_len] {
            b"ns" => 1,
            b"us" | b"\xc2\xb5s" | b"\xce\xbcs" => 1_000, // us, µs (U+00B5), μs (U+03BC)
            b"ms" => 1_000_000,
            b"s" => 1_000_000_000,
            b"m" => 60_000_000_000,
            b"h" => 3_600_000_000_000,
            _ => return Err(DurationError::Unit(orig.to_owned())),
        };
        s = &s[unit_len..];
        if v > LIMIT / unit {
            return Err(DurationError::Overflow(orig.to_owned()));
        }
        v *= unit;
        if f > 0 {
            // Go: v += uint64(float64(f) * (float64(unit) / scale)); the cast truncates.
            #[allow(
                clippy::cast_precision_loss,
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss
            )]
            let frac = (f as f64 * (unit as f64 / scale)) as u64;
            v = v
                .checked_add(frac)
                .ok_or_else(|| DurationError::Overflow(orig.to_owned()))?;
            if v > LIMIT {
                return Err(DurationError::Overflow(orig.to_owned()));
            }
        }
        total = total
            .checked_add(v)
            .ok_or_else(|| DurationError::Overflow(orig.to_owned()))?;
        if total > LIMIT {
            return Err(DurationError::Overflow(orig.to_owned()));
        }
    }
    if neg {
        // total <= 2^63, so the negation fits (i64::MIN for exactly 2^63).
        return Ok(0i64.wrapping_sub_unsigned(total));
    }
    i64::try_from(total).map_err(|_| DurationError::Overflow(orig.to_owned()))
}

fn go_format(nanos: i64) -> String {
    if nanos == 0 {
        return "0s".to_owned();
    }
    let neg = nanos < 0;
    let u = nanos.unsigned_abs();
    let mut out = String::new();
    if u < 1_000_000_000 {
        // sub-second: ns, µs or ms with fraction
        let (unit, div) = if u < 1_000 {
            ("ns", 1u64)
        } else if u < 1_000_000 {
            ("\u{b5}s", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        out.push_str(&frac(u, div));
        out.push_str(unit);
    } else {
        let h = u / 3_600_000_000_000;
        let rem = u % 3_600_000_000_000;
        let m = rem / 60_000_000_000;
        let s_ns = rem % 60_000_000_000;
        if h > 0 {
            out.push_str(&format!("{h}h"));
        }
        if h > 0 || m > 0 {
            out.push_str(&format!("{m}m"));
        }
        out.push_str(&frac(s_ns, 1_000_000_000));
        out.push('s');
    }
    if neg {
        out.insert(0, '-');
    }
    out
}

fn frac(v: u64, div: u64) -> String {
    let whole = v / div;
    let mut rem = v % div;
    if rem == 0 {
        return whole.to_string();
    }
    let mut digits = String::new();
    let mut d = div;
    while rem > 0 && d > 1 {
        d /= 10;
        digits.push(char::from(b'0' + (rem / d) as u8));
        rem %= d;
    }
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: i128 = 1_000;
    const MS: i128 = 1_000_000;
    const S: i128 = 1_000_000_000;
    const M: i128 = 60 * S;
    const H: i128 = 60 * M;

    #[test]
    fn matches_go_edge_cases() {
        // float64 fraction arithmetic, as Go does
        assert_eq!(
            Duration::parse("0.333333333333333333h").unwrap().as_nanos(),
            1_199_999_999_999
        );
        assert_eq!(
            Duration::parse("-9223372036854775808ns")
                .unwrap()
                .as_nanos(),
            i64::MIN
        );
        assert!(Duration::parse("9223372036854775808ns").is_err());
        assert_eq!(
            Duration::parse("1.0000000000000000001s")
                .unwrap()
                .as_nanos(),
            1_000_000_000
        );
    }

    #[test]
    fn parses_kuma_forms() {
        for (s, n) in [
            ("21s", 21 * S),
            ("2h", 2 * H),
            ("500ms", 500 * MS),
            ("0s", 0),
            ("0", 0),
            ("1h30m", H + 30 * M),
            ("1.5s", 1_500 * MS),
            ("-1s", -S),
            ("+3us", 3 * US),
            ("3µs", 3 * US),
            ("10ns", 10),
            (".5m", 30 * S),
        ] {
            assert_eq!(i128::from(Duration::parse(s).unwrap().as_nanos()), n, "{s}");
        }
    }

    #[test]
    fn rejects_what_go_rejects() {
        for s in [
            "",
            "s",
            "5",
            "5d",
            "1h-1m",
            "abc",
            ".s",
            "-",
            "9999999999999999999h",
            "1e3s",
        ] {
            assert!(Duration::parse(s).is_err(), "{s} should fail");
        }
    }

    #[test]
    fn go_string_form() {
        assert_eq!(Duration::parse("2h").unwrap().to_go_string(), "2h0m0s");
        assert_eq!(Duration::parse("90s").unwrap().to_go_string(), "1m30s");
        assert_eq!(Duration::parse("500ms").unwrap().to_go_string(), "500ms");
        assert_eq!(Duration::parse("1.5s").unwrap().to_go_string(), "1.5s");
        assert_eq!(Duration::parse("-1s").unwrap().to_go_string(), "-1s");
        assert_eq!(Duration::parse("0").unwrap().to_go_string(), "0s");
    }

    #[test]
    fn serde_is_lossless() {
        let d: Duration = serde_json::from_str("\"2h\"").unwrap();
        assert_eq!(serde_json::to_string(&d).unwrap(), "\"2h\"");
        assert_eq!(d, Duration::parse("120m").unwrap());
        assert_eq!(d.to_secs_nanos(), (7200, 0));
    }

    proptest::proptest! {
        #[test]
        fn go_form_reparses_to_same_value(n in proptest::num::i64::ANY) {
            let d = Duration::from_nanos(n);
            proptest::prop_assert_eq!(Duration::parse(&d.to_go_string()).unwrap().as_nanos(), n);
        }

        #[test]
        fn parse_never_panics(s in ".{0,40}") {
            let _ = Duration::parse(&s);
        }
    }
}
