//! Deserializers reproducing how Kuma's YAML decoding (`sigs.k8s.io/yaml` + `encoding/json`)
//! treats scalars: a number or boolean given for a string field becomes its Go text, an integer
//! field accepts a whole float (`503.0`), and `null` leaves a field unset.
//!
//! Used by MeshFaultInjection, MeshProxyPatch and MeshRetry (`deserialize_with = "lenient::opt_string"`).

use std::collections::BTreeMap;
use std::fmt;

use serde::de::{self, Deserialize, Deserializer, Visitor};

use crate::duration::Duration;

/// A string written as a YAML string, number or boolean.
struct LenientString(String);

impl<'de> Deserialize<'de> for LenientString {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = LenientString;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<LenientString, E> {
                Ok(LenientString(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<LenientString, E> {
                Ok(LenientString(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<LenientString, E> {
                Ok(LenientString(go_format_float32(v)))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<LenientString, E> {
                Ok(LenientString(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// `Option<String>` field: `null` → `None`, numbers and booleans → their text.
pub(crate) fn opt_string<'de, D: Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Ok(Option::<LenientString>::deserialize(d)?.map(|s| s.0))
}

/// `Option<Vec<String>>` field with lenient items (`retryOn: [500]` reads `"500"`).
pub(crate) fn opt_string_vec<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<Vec<String>>, D::Error> {
    Ok(Option::<Vec<LenientString>>::deserialize(d)?.map(|v| v.into_iter().map(|s| s.0).collect()))
}

/// `Option<BTreeMap<String, String>>` field with lenient values.
pub(crate) fn opt_string_map<'de, D: Deserializer<'de>>(
    d: D,
) -> Result<Option<BTreeMap<String, String>>, D::Error> {
    Ok(Option::<BTreeMap<String, LenientString>>::deserialize(d)?
        .map(|m| m.into_iter().map(|(k, v)| (k, v.0)).collect()))
}

/// `Option<i32>` field: integers in range and whole floats (Go re-encodes `503.0` as `503`).
pub(crate) fn opt_i32<'de, D: Deserializer<'de>>(d: D) -> Result<Option<i32>, D::Error> {
    struct Int32(i32);
    impl<'de> Deserialize<'de> for Int32 {
        fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
            struct V;
            impl Visitor<'_> for V {
                type Value = Int32;
                fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    f.write_str("a 32-bit integer")
                }
                fn visit_i64<E: de::Error>(self, v: i64) -> Result<Int32, E> {
                    int32(v).map(Int32)
                }
                fn visit_u64<E: de::Error>(self, v: u64) -> Result<Int32, E> {
                    uint32(v).map(Int32)
                }
                fn visit_f64<E: de::Error>(self, v: f64) -> Result<Int32, E> {
                    float_int32(v).map(Int32)
                }
            }
            d.deserialize_any(V)
        }
    }
    Ok(Option::<Int32>::deserialize(d)?.map(|i| i.0))
}

/// A field that is `Some` whenever present; `null` is an error (Go's `metav1.Duration`
/// rejects it as `time: invalid duration ""`).
pub(crate) fn some_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Duration>, D::Error> {
    Duration::deserialize(d).map(Some)
}

/// An `i64` that must fit an `i32`.
pub(crate) fn int32<E: de::Error>(v: i64) -> Result<i32, E> {
    i32::try_from(v).map_err(|_| E::custom(format!("number {v} does not fit a 32-bit integer")))
}

/// A `u64` that must fit an `i32`.
pub(crate) fn uint32<E: de::Error>(v: u64) -> Result<i32, E> {
    i32::try_from(v).map_err(|_| E::custom(format!("number {v} does not fit a 32-bit integer")))
}

/// A whole `f64` that fits an `i32` (Go re-encodes `503.0` as `503`).
pub(crate) fn float_int32<E: de::Error>(v: f64) -> Result<i32, E> {
    if v.fract() == 0.0 && v >= f64::from(i32::MIN) && v <= f64::from(i32::MAX) {
        // Whole and in range, so the conversion is exact.
        #[allow(clippy::cast_possible_truncation)]
        return Ok(v as i32);
    }
    Err(E::custom(format!("number {v} is not a 32-bit integer")))
}

/// Go's `strconv.FormatFloat(v, 'g', -1, 32)`, which `sigs.k8s.io/yaml` uses to turn a
/// float into a string: shortest float32 digits, exponent form below 1e-4 and from 1e6
/// (`1e+06`), plain form otherwise.
pub(crate) fn go_format_float32(v: f64) -> String {
    #[allow(clippy::cast_possible_truncation)]
    let x = v as f32;
    if x.is_nan() {
        return "NaN".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    let mut out = String::new();
    if x.is_sign_negative() {
        out.push('-');
    }
    if x == 0.0 {
        out.push('0');
        return out;
    }
    let sci = format!("{:e}", x.abs());
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let exp: i64 = exp.parse().unwrap_or(0);
    let nd = digits.len() as i64;
    if !(-4..6).contains(&exp) {
        let (first, rest) = digits.split_at(digits.len().min(1));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        out.push('e');
        out.push(if exp < 0 { '-' } else { '+' });
        out.push_str(&format!("{:02}", exp.abs()));
    } else if exp >= 0 {
        let dp = exp + 1;
        if nd <= dp {
            out.push_str(&digits);
            out.push_str(&"0".repeat((dp - nd) as usize));
        } else {
            let (int, frac) = digits.split_at(dp as usize);
            out.push_str(int);
            out.push('.');
            out.push_str(frac);
        }
    } else {
        out.push_str("0.");
        out.push_str(&"0".repeat((-exp - 1) as usize));
        out.push_str(&digits);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::go_format_float32 as g;

    #[test]
    fn go_float_text() {
        assert_eq!(g(1000.0), "1000");
        assert_eq!(g(1.5), "1.5");
        assert_eq!(g(100000.0), "100000");
        assert_eq!(g(1e6), "1e+06");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001), "1e-05");
        assert_eq!(g(-2.5), "-2.5");
        assert_eq!(g(0.1), "0.1");
        assert_eq!(g(1e21), "1e+21");
    }

    proptest::proptest! {
        #[test]
        fn go_float_text_reparses(f in proptest::num::f32::NORMAL | proptest::num::f32::SUBNORMAL | proptest::num::f32::ZERO) {
            let text = g(f64::from(f));
            proptest::prop_assert_eq!(text.parse::<f32>().ok(), Some(f));
        }
    }
}
