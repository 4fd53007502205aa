//! The parameters of `GET /meshes/{mesh}/_shadow-diff` ([`ShadowDiffQuery`]) and its
//! deadlines.

use std::time::Duration;

use umbra_api::error::ApiError;
use umbra_api::paging::one_of;
use umbra_core::view::Promotion;

/// Zone deadline of a fleet-wide diff without `timeout=`.
pub const DEFAULT_FLEET_TIMEOUT: Duration = Duration::from_secs(30);
/// Largest `timeout=` of a fleet-wide diff.
pub const MAX_FLEET_TIMEOUT: Duration = Duration::from_secs(120);
/// The HTTP timeout of the fleet-wide route: longer than any zone deadline.
pub const FLEET_HTTP_TIMEOUT: Duration = Duration::from_secs(130);

/// A zone deadline of a fleet-wide request (`timeout=`): a duration like `10s`, above 0 and at
/// most [`MAX_FLEET_TIMEOUT`].
///
/// # Errors
/// A 400 naming the parameter `timeout`.
pub fn fleet_timeout(v: &str) -> Result<Duration, ApiError> {
    umbra_core::duration::Duration::parse(v)
        .ok()
        .filter(|d| !d.is_negative())
        .and_then(|d| u64::try_from(d.as_nanos()).ok())
        .map(Duration::from_nanos)
        .filter(|d| !d.is_zero() && *d <= MAX_FLEET_TIMEOUT)
        .ok_or_else(|| {
            ApiError::bad_parameter(
                "timeout",
                format!(
                    "must be a duration like 10s, above 0 and at most {} s, got {v:?}",
                    MAX_FLEET_TIMEOUT.as_secs()
                ),
            )
        })
}

/// The query of `GET /meshes/{mesh}/_shadow-diff`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShadowDiffQuery {
    /// `policy=<Type>/<name>`: only that shadow policy goes live (default: all of them).
    pub promotion: Promotion,
    /// `zone=`: only this zone's DPPs.
    pub zone: Option<String>,
    /// `format=full` (default `summary`): each DPP's patch and every DPP of each operation.
    pub full: bool,
    /// `timeout=` (a duration like `10s`, at most [`MAX_FLEET_TIMEOUT`]): each zone's deadline.
    pub timeout: Duration,
}

impl ShadowDiffQuery {
    /// The question in canonical form: what decides the answer (policy, zone, format), not
    /// how long the zones may take. Kept answers are looked up by it.
    pub fn question(&self) -> String {
        format!(
            "policy={}\nzone={}\nfull={}",
            match &self.promotion {
                Promotion::All => String::new(),
                p => p.to_string(),
            },
            self.zone.as_deref().unwrap_or_default(),
            self.full
        )
    }

    /// Parse the query pairs.
    ///
    /// # Errors
    /// A 400 naming the parameter.
    pub fn parse(pairs: &[(String, String)]) -> Result<Self, ApiError> {
        let mut q = Self {
            promotion: Promotion::All,
            zone: None,
            full: false,
            timeout: DEFAULT_FLEET_TIMEOUT,
        };
        for (k, v) in pairs {
            match k.as_str() {
                "policy" => {
                    q.promotion =
                        Promotion::parse(v).map_err(|e| ApiError::bad_parameter("policy", e))?;
                }
                "zone" => q.zone = Some(v.clone()).filter(|z| !z.is_empty()),
                "format" => q.full = one_of("format", v, &[("summary", false), ("full", true)])?,
                "timeout" => q.timeout = fleet_timeout(v)?,
                _ => {}
            }
        }
        Ok(q)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_parsing() {
        let pairs = |v: &[(&str, &str)]| -> Vec<(String, String)> {
            v.iter().map(|(a, b)| ((*a).into(), (*b).into())).collect()
        };
        let q = ShadowDiffQuery::parse(&pairs(&[
            ("policy", "MeshTimeout/x"),
            ("format", "full"),
            ("zone", "z1"),
            ("timeout", "5s"),
        ]))
        .unwrap();
        assert!(q.full);
        assert_eq!(q.zone.as_deref(), Some("z1"));
        assert_eq!(q.timeout, Duration::from_secs(5));
        assert_eq!(q.promotion.to_string(), "MeshTimeout/x");
        assert_eq!(q.question(), "policy=MeshTimeout/x\nzone=z1\nfull=true");
        let shorter = ShadowDiffQuery {
            timeout: Duration::from_secs(1),
            ..q.clone()
        };
        assert_eq!(shorter.question(), q.question());
        for bad in [
            ("format", "json"),
            ("timeout", "0s"),
            ("timeout", "1h"),
            ("policy", "x"),
        ] {
            let e = ShadowDiffQuery::parse(&pairs(&[bad])).unwrap_err();
            assert_eq!(e.invalid_parameters[0].field, bad.0);
        }
    }
}
