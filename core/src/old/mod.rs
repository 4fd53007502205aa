//! The old source/destination policies (Timeout, CircuitBreaker, FaultInjection,
//! TrafficPermission, ProxyTemplate, TrafficRoute): typed specs, validators, and what they share: the
//! selectors ([`selectors`]) and the serde helpers reproducing Kuma's JSON loader.
//! Matching them to a DPP lives in [`crate::old_matching`].

use serde::{Deserialize, Deserializer, Serializer};

pub mod circuit_breaker;
pub mod fault_injection;
pub mod health_check;
pub mod proxy_template;
pub mod rate_limit;
pub mod retry;
pub mod selectors;
pub mod timeout;
pub mod traffic_log;
pub mod traffic_permission;
pub mod traffic_route;

pub use selectors::Selector;

/// Deserialize any defaultable field, reading `null` as the default (Kuma's loader skips
/// `null` fields).
pub(crate) fn null_as_default<'de, D, T>(d: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(d)?.unwrap_or_default())
}

/// Serialize a `google.protobuf.DoubleValue` so integral values are written as integers
/// (`percentage: 50` reads back as `50`, not `50.0`).
pub(crate) fn serialize_opt_f64<S: Serializer>(v: &Option<f64>, s: S) -> Result<S::Ok, S::Error> {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53: every integer below is exact
    match *v {
        None => s.serialize_none(),
        Some(f) if f.fract() == 0.0 && f.abs() < EXACT => {
            if f < 0.0 {
                s.serialize_i64(f as i64)
            } else {
                s.serialize_u64(f as u64)
            }
        }
        Some(f) => s.serialize_f64(f),
    }
}

#[cfg(test)]
mod tests {
    use serde::Serialize;

    use super::serialize_opt_f64;

    #[test]
    fn double_values_serialize_integral_as_integers() {
        #[derive(Serialize)]
        struct W(#[serde(serialize_with = "serialize_opt_f64")] Option<f64>);
        let s = |f| serde_json::to_string(&W(f)).unwrap();
        assert_eq!(s(Some(50.0)), "50");
        assert_eq!(s(Some(-2.0)), "-2");
        assert_eq!(s(Some(1.33)), "1.33");
        assert_eq!(s(Some(1e300)), "1e+300");
        assert_eq!(s(None), "null");
    }
}
