//! Fault injection on inbound HTTP listeners: the old FaultInjection baked in first, then the
//! MeshFaultInjection plugin, as Kuma 2.7 generates them (`docs/research/kuma-2.7-policy-plugins.md`
//! §4; design in the MeshFaultInjection MADR, seed 004).
//!
//! # Old FaultInjection
//!
//! Kuma's inbound generator (`pkg/xds/generator/inbound_proxy_generator.go`) configures, on
//! inbounds whose `kuma.io/protocol` is `http`, `http2` or `grpc`, every FaultInjection whose
//! `destinations` match the inbound (Kuma's `SelectInboundConnectionMatchingPolicies`: most
//! specific first `source` first, newer first on ties, a policy listed once per matching
//! destination). Each becomes one `envoy.filters.http.fault` filter
//! (`pkg/xds/envoy/listeners/v3/fault_injection_configurer.go`), in that order, before the router
//! (Kuma appends them and the filter-chain builder adds the router last):
//! - `delay` → `fixedDelay` (an absent value is encoded as `0s`, as Go's marshalling of a nil
//!   oneof message is) and the percentage;
//! - `abort` → `httpStatus` (absent: `0`) and the percentage;
//! - `responseBandwidth` → `responseRateLimit.fixedLimit.limitKbps` (Kuma's
//!   `ConvertBandwidthToKbps`; a limit it cannot convert is a [`GenerateError`]);
//! - a section is converted whenever it is present, even empty (`delay: {}`), as Kuma does;
//! - `headers`: always exactly one `x-kuma-tags` matcher with the deprecated `safeRegexMatch`,
//!   the [`regex_or`] of the [`matching_regex`] of every source.
//!
//! Percentages go through [`convert_percentage`] (Kuma's `ConvertPercentage`); an absent one is
//! `0`.
//!
//! # MeshFaultInjection
//!
//! Kuma's plugin (`pkg/plugins/policies/meshfaultinjection/plugin/{v1alpha1/plugin.go,xds/configurer.go}`),
//! for every inbound of the DPP:
//! - skipped when an old FaultInjection matched it (`proxy.Policies.FaultInjections[iface]`);
//! - only `http` and `http2` inbounds: **gRPC is not configured** (nor TCP);
//! - the `from` rules of the inbound's listener, in rules order; for each rule and each entry
//!   of its merged `http[]`, one fault filter, each rule's batch inserted immediately before
//!   `envoy.filters.http.router` (no router is a [`GenerateError`], as in Kuma);
//! - `headers` from the rule's subset: none for the empty subset (`kind: Mesh`), else one
//!   `x-kuma-tags` `stringMatch.safeRegex` matcher for the positive tags and a second one with
//!   `invertMatch: true` for the negated tags (each a [`matching_regex`]; a key repeated within a
//!   group keeps its last value, Kuma's `SingleValueTagSet` map). The inverted matcher negates
//!   the *conjunction* of the negated tags, so a rule for "neither a nor b" matches every client
//!   that is not "a and b", and fault filters do not stop at the first match: a client can get
//!   the faults of several rules. Reproduced as Kuma generates it;
//! - percentages (`int` or decimal string, see [`IntOrString`]) are parsed as a decimal, turned
//!   into the nearest `f64` and converted with [`convert_percentage`]: `"50.5"` →
//!   `5050/TEN_THOUSAND` (the MADR's `505000` is a typo), `"33.3"` → `333000/MILLION`;
//! - absent fields take Go's zero values (delay `0s`, status `0`, percentage `0`); an absent or
//!   unconvertible bandwidth limit is a [`GenerateError`] (Kuma panics or errors there).
//!
//! The configurer's own guard ("do not add new faults if old ones were applied") looks for a
//! *network* filter named `envoy.filters.http.fault`, so it never fires; it is not reproduced.
//! `to` rules only apply to builtin gateways and the egress uses ExternalService rules; Umbra
//! runs neither.
//!
//! The MADR's drafts (`appendAbort`, `disabled`, `http` as an object) did not ship: Kuma 2.7's
//! `http` is a plain list, and merging replaces lists, so the faults of several policies for the
//! same clients do not add up; the highest-precedence list wins (see the MADR test in
//! `tests/fault_injection.rs`).
//!
//! # Old vs new in Umbra's views (seed 000, "FaultInjection -> MeshFaultInjection")
//!
//! Kuma bakes every FaultInjection and the MeshFaultInjection plugin then skips the inbounds they
//! matched, so on those inbounds the old policy wins. Umbra's design rule (umbra-core `view`) is
//! that in a view holding a MeshFaultInjection the FaultInjections are superseded. Umbra
//! therefore bakes old FaultInjections **only from [`PolicySet::old_policies`]**, never from the
//! superseded ones: in the Shadow view of a mesh with live FaultInjections and a shadow
//! MeshFaultInjection, the FaultInjections are gone and the MeshFaultInjection applies, so the
//! shadow diff shows exactly what promoting it does. With both kinds live, Umbra likewise applies
//! only the MeshFaultInjection where Kuma would keep the FaultInjection on the inbounds it
//! matched: a deliberate deviation. The Kuma skip rule is kept but can only see FaultInjections
//! in views without a MeshFaultInjection, where it has nothing to skip. (Unlike Timeout, whose
//! superseded values Kuma leaks into MeshTimeout's output, an old fault left in place would keep
//! injecting faults after the switch, and MeshFaultInjection could never take those inbounds
//! over.) One consequence the diff makes visible: on gRPC inbounds the FaultInjection disappears
//! and MeshFaultInjection puts nothing in its place, so the seed's "it should be always safe to
//! remove FaultInjection and create new MeshFaultInjection" does not hold for gRPC services.
//!
//! Kuma runs the MeshFaultInjection plugin before MeshTimeout, and so does Umbra
//! ([`crate::plugins::ORDERED`]). They edit disjoint fields (HTTP filters versus timeouts), so the
//! order would not show either way.
//!
//! [`PolicySet::old_policies`]: umbra_core::view::PolicySet::old_policies

use std::collections::{BTreeMap, BTreeSet};

use envoy_types::pb::envoy::config::route::v3::{
    header_matcher::HeaderMatchSpecifier, HeaderMatcher,
};
use envoy_types::pb::envoy::extensions::filters::common::fault::v3::{
    fault_delay, fault_rate_limit, FaultDelay, FaultRateLimit,
};
use envoy_types::pb::envoy::extensions::filters::http::fault::v3::{
    fault_abort, FaultAbort, HttpFault,
};
use envoy_types::pb::envoy::extensions::filters::network::http_connection_manager::v3::{
    http_filter, HttpFilter,
};
use envoy_types::pb::envoy::r#type::matcher::v3::{string_matcher, RegexMatcher, StringMatcher};
use envoy_types::pb::envoy::r#type::v3::{fractional_percent::DenominatorType, FractionalPercent};
use envoy_types::pb::google::protobuf::Duration as PbDuration;
use umbra_core::dataplane::InboundKey;
use umbra_core::old::fault_injection::{FaultInjection, ResponseBandwidth};
use umbra_core::old_matching::{select_inbound_matching_policies, OldPolicyRef};
use umbra_core::policies::mesh_fault_injection::{Conf, FaultInjectionConf, IntOrString};
use umbra_core::resource::{ResourceType, Spec};
use umbra_core::rules::{Rule, Subset};
use umbra_core::target_ref::PROTOCOL_TAG;

use super::edit::{insert_before_router, matching_regex, regex_or};
use super::input::{Origins, PluginInput};
use crate::context::Protocol;
use crate::error::GenerateError;
use crate::names::KUMA_TAGS_HEADER;
use crate::protobuf::{any, duration};
use crate::snapshot::Snapshot;
use umbra_xds_protocol::type_url::LISTENER_TYPE;

/// Name of Envoy's HTTP fault filter.
pub const FAULT_FILTER: &str = "envoy.filters.http.fault";

/// Apply the old FaultInjection, then MeshFaultInjection, to the inbound listeners of `snap`.
///
/// # Errors
/// [`GenerateError::Policy`] when a fault cannot be converted (a bandwidth limit without a
/// usable `kbps`/`Mbps`/`Gbps` value, a percentage that is not a number, a merged conf that does
/// not fit the MeshFaultInjection model) or an HTTP connection manager has no router.
pub fn apply(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    _origins: &mut Origins,
) -> Result<(), GenerateError> {
    let with_old = apply_old(snap, input)?;
    apply_mesh_fault_injection(snap, input, &with_old)
}

/// Kuma's `ConvertPercentage`: an integer `v` gives `v/HUNDRED`; else if `100·v` is an integer,
/// `100·v/TEN_THOUSAND`; else `round(10000·v)/MILLION`. Computed in `f64` as Go does (so
/// `33.3` gives `333000/MILLION`); values are truncated to `u32` like Go's conversion.
pub fn convert_percentage(value: f64) -> FractionalPercent {
    let is_integer = |f: f64| f.floor() == f;
    let (numerator, denominator) = if is_integer(value) {
        (value, DenominatorType::Hundred)
    } else if is_integer(100.0 * value) {
        (100.0 * value, DenominatorType::TenThousand)
    } else {
        ((10_000.0 * value).round(), DenominatorType::Million)
    };
    FractionalPercent {
        // Saturating float-to-int conversion; validation keeps percentages within [0, 100].
        numerator: numerator as u32,
        denominator: denominator as i32,
    }
}

/// Why a FaultInjection or MeshFaultInjection cannot become an HTTP fault filter (reported as the
/// reason of a [`GenerateError::Policy`] on the inbound listener).
#[derive(Debug, thiserror::Error)]
pub enum FaultError {
    /// A string percentage is not a decimal number.
    #[error("percentage {percentage:?} is not a decimal number")]
    Percentage {
        /// The percentage as written.
        percentage: IntOrString,
    },
    /// A bandwidth limit is not `<n>kbps`, `<n>Mbps` or `<n>Gbps`.
    #[error("bandwidth limit {limit:?} cannot be converted to kbps")]
    Bandwidth {
        /// The limit as written (empty when absent).
        limit: String,
    },
    /// A merged MeshFaultInjection conf does not fit the model.
    #[error("merged conf does not fit MeshFaultInjection: {0}")]
    Conf(serde_json::Error),
}

/// The percentage of a MeshFaultInjection fault as Kuma's `fractionalPercent` computes it: the
/// decimal value (absent: `0`) as the nearest `f64`, then [`convert_percentage`].
///
/// # Errors
/// [`FaultError::Percentage`] when a string percentage is not a decimal number.
pub fn mesh_percentage(percentage: Option<&IntOrString>) -> Result<FractionalPercent, FaultError> {
    let value = match percentage {
        None => 0.0,
        Some(p) => p.to_f64().ok_or_else(|| FaultError::Percentage {
            percentage: p.clone(),
        })?,
    };
    Ok(convert_percentage(value))
}

/// Kuma's `ConvertBandwidthToKbps`: the kbps of a `kbps`/`Mbps`/`Gbps` limit.
fn limit_kbps(limit: Option<&str>) -> Result<u64, FaultError> {
    let limit = limit.unwrap_or_default();
    ResponseBandwidth {
        percentage: None,
        limit: Some(limit.to_owned()),
    }
    .limit_kbps()
    .ok_or_else(|| FaultError::Bandwidth {
        limit: limit.to_owned(),
    })
}

fn fixed_delay(value: PbDuration, percentage: FractionalPercent) -> FaultDelay {
    FaultDelay {
        percentage: Some(percentage),
        fault_delay_secifier: Some(fault_delay::FaultDelaySecifier::FixedDelay(value)),
    }
}

fn abort(status: u32, percentage: FractionalPercent) -> FaultAbort {
    FaultAbort {
        percentage: Some(percentage),
        error_type: Some(fault_abort::ErrorType::HttpStatus(status)),
        ..Default::default()
    }
}

fn rate_limit(limit_kbps: u64, percentage: FractionalPercent) -> FaultRateLimit {
    FaultRateLimit {
        percentage: Some(percentage),
        limit_type: Some(fault_rate_limit::LimitType::FixedLimit(
            fault_rate_limit::FixedLimit { limit_kbps },
        )),
    }
}

/// The `x-kuma-tags` matcher of an old FaultInjection: the deprecated `safeRegexMatch` field, as
/// Kuma 2.7 still writes it.
#[allow(deprecated)]
fn old_header_matcher(regex: String) -> HeaderMatcher {
    HeaderMatcher {
        name: KUMA_TAGS_HEADER.to_owned(),
        header_match_specifier: Some(HeaderMatchSpecifier::SafeRegexMatch(RegexMatcher {
            regex,
            engine_type: None,
        })),
        ..Default::default()
    }
}

/// One `x-kuma-tags` matcher of MeshFaultInjection: `stringMatch.safeRegex`.
fn string_regex_matcher(tags: &BTreeMap<String, String>, invert: bool) -> HeaderMatcher {
    HeaderMatcher {
        name: KUMA_TAGS_HEADER.to_owned(),
        header_match_specifier: Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
            match_pattern: Some(string_matcher::MatchPattern::SafeRegex(RegexMatcher {
                regex: matching_regex(tags),
                engine_type: None,
            })),
            ..Default::default()
        })),
        invert_match: invert,
        ..Default::default()
    }
}

/// Kuma's MeshFaultInjection `createHeaders`: positive tags, then negated tags (inverted).
/// Empty for the subset of everything.
pub fn subset_headers(subset: &Subset) -> Vec<HeaderMatcher> {
    let mut positive = BTreeMap::new();
    let mut negated = BTreeMap::new();
    for tag in &subset.0 {
        let group = if tag.not { &mut negated } else { &mut positive };
        group.insert(tag.key.clone(), tag.value.clone());
    }
    let mut out = Vec::new();
    if !positive.is_empty() {
        out.push(string_regex_matcher(&positive, false));
    }
    if !negated.is_empty() {
        out.push(string_regex_matcher(&negated, true));
    }
    out
}

/// The HTTPFault of an old FaultInjection (Kuma's `FaultInjectionConfigurer`).
///
/// # Errors
/// [`FaultError::Bandwidth`] when the bandwidth limit cannot be converted.
pub fn old_fault(fi: &FaultInjection) -> Result<HttpFault, FaultError> {
    let pct = |p: Option<f64>| convert_percentage(p.unwrap_or(0.0));
    let conf = fi.conf.as_ref();
    let delay = conf.and_then(|c| c.delay.as_ref()).map(|d| {
        fixed_delay(
            d.value.as_ref().map_or_else(PbDuration::default, duration),
            pct(d.percentage),
        )
    });
    let abort = conf
        .and_then(|c| c.abort.as_ref())
        .map(|a| abort(a.http_status.unwrap_or(0), pct(a.percentage)));
    let response_rate_limit = conf
        .and_then(|c| c.response_bandwidth.as_ref())
        .map(|r| limit_kbps(r.limit.as_deref()).map(|kbps| rate_limit(kbps, pct(r.percentage))))
        .transpose()?;
    let regexes: Vec<String> = fi
        .sources
        .iter()
        .map(|s| matching_regex(&s.match_tags))
        .collect();
    Ok(HttpFault {
        delay,
        abort,
        headers: vec![old_header_matcher(regex_or(&regexes))],
        response_rate_limit,
        ..Default::default()
    })
}

/// The HTTPFault of one `http[]` entry of a MeshFaultInjection rule for clients in `from`
/// (Kuma's MeshFaultInjection `Configurer`).
///
/// # Errors
/// [`FaultError`] when a percentage is not a number or the bandwidth limit cannot be converted.
pub fn mesh_fault(fault: &FaultInjectionConf, from: &Subset) -> Result<HttpFault, FaultError> {
    let delay = fault
        .delay
        .as_ref()
        .map(|d| {
            let value = d.value.as_ref().map_or_else(PbDuration::default, duration);
            mesh_percentage(d.percentage.as_ref()).map(|p| fixed_delay(value, p))
        })
        .transpose()?;
    let abort = fault
        .abort
        .as_ref()
        .map(|a| {
            // Go's uint32(int32): a two's complement reinterpretation (validation keeps 100..=599).
            let status = a.http_status.unwrap_or(0) as u32;
            mesh_percentage(a.percentage.as_ref()).map(|p| abort(status, p))
        })
        .transpose()?;
    let response_rate_limit = fault
        .response_bandwidth
        .as_ref()
        .map(|r| {
            let kbps = limit_kbps(r.limit.as_deref())?;
            mesh_percentage(r.percentage.as_ref()).map(|p| rate_limit(kbps, p))
        })
        .transpose()?;
    Ok(HttpFault {
        delay,
        abort,
        headers: subset_headers(from),
        response_rate_limit,
        ..Default::default()
    })
}

fn fault_filter(fault: &HttpFault) -> HttpFilter {
    HttpFilter {
        name: FAULT_FILTER.to_owned(),
        config_type: Some(http_filter::ConfigType::TypedConfig(any(fault))),
        ..Default::default()
    }
}

fn inbound_listener_name(key: &InboundKey) -> String {
    crate::names::inbound_listener_name(&key.address, key.port)
}

fn policy_error(policy: String, listener: &str, reason: impl std::fmt::Display) -> GenerateError {
    GenerateError::Policy {
        policy,
        resource: format!("{LISTENER_TYPE}/{listener}"),
        reason: reason.to_string(),
    }
}

/// Bake the FaultInjections in effect; returns the inbounds at least one of them matched
/// (whatever their protocol, like Kuma's `FaultInjectionMap`).
fn apply_old(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
) -> Result<BTreeSet<InboundKey>, GenerateError> {
    let dp = input.dataplane;
    // Superseded FaultInjections are deliberately left out: see the module documentation.
    let policies = input.old_policies(ResourceType::FaultInjection);
    let refs: Vec<OldPolicyRef<'_>> = policies
        .iter()
        .enumerate()
        .filter_map(|(i, r)| OldPolicyRef::from_resource(i, r))
        .collect();
    let mut matched_inbounds = BTreeSet::new();
    for (key, indexes) in select_inbound_matching_policies(dp, &refs) {
        if indexes.is_empty() {
            continue;
        }
        matched_inbounds.insert(key.clone());
        if !Protocol::of_inbound(dp, &key).is_http() {
            continue;
        }
        let listener_name = inbound_listener_name(&key);
        let Some(listener) = snap.listeners.get_mut(&listener_name) else {
            continue;
        };
        let mut filters = Vec::with_capacity(indexes.len());
        for i in indexes {
            let Some(resource) = policies.get(i) else {
                continue;
            };
            let Spec::FaultInjection(fi) = &resource.spec else {
                continue;
            };
            let policy = format!("FaultInjection/{}", resource.meta.name);
            let fault =
                old_fault(fi).map_err(|reason| policy_error(policy, &listener_name, reason))?;
            filters.push(fault_filter(&fault));
        }
        if !filters.is_empty() {
            insert_before_router(listener, &filters, false).map_err(|reason| {
                policy_error("FaultInjection".to_owned(), &listener_name, reason)
            })?;
        }
    }
    Ok(matched_inbounds)
}

fn rule_policy_name(rule: &Rule) -> String {
    let names: Vec<&str> = rule.origin.iter().map(|o| o.meta.name.as_str()).collect();
    format!("MeshFaultInjection/{}", names.join(","))
}

/// The fault filters of one rule: one per `http[]` entry of its merged conf.
fn rule_filters(rule: &Rule) -> Result<Vec<HttpFilter>, FaultError> {
    let conf: Conf =
        <Conf as serde::Deserialize>::deserialize(&rule.conf).map_err(FaultError::Conf)?;
    conf.http
        .iter()
        .flatten()
        .map(|fault| mesh_fault(fault, &rule.subset).map(|f| fault_filter(&f)))
        .collect()
}

/// MeshFaultInjection on builtin gateway HTTP listener `listener` (Kuma's `applyToGateways`):
/// each of the listener's `to` rules adds its fault filters before the router of every filter
/// chain, matched on `x-kuma-tags` by the rule's subset as Kuma's configurer writes it.
///
/// # Errors
/// [`GenerateError::Policy`] when a rule's faults cannot be written.
pub(crate) fn apply_gateway(
    listener: &mut envoy_types::pb::envoy::config::listener::v3::Listener,
    rules: &umbra_core::rules::Rules,
) -> Result<(), GenerateError> {
    let name = listener.name.clone();
    for rule in &rules.0 {
        let filters = rule_filters(rule)
            .map_err(|reason| policy_error(rule_policy_name(rule), &name, reason))?;
        insert_before_router(listener, &filters, true)
            .map_err(|reason| policy_error(rule_policy_name(rule), &name, reason))?;
    }
    Ok(())
}

/// The MeshFaultInjection plugin on the DPP's inbounds (`from` rules).
fn apply_mesh_fault_injection(
    snap: &mut Snapshot,
    input: &PluginInput<'_>,
    with_old: &BTreeSet<InboundKey>,
) -> Result<(), GenerateError> {
    let dp = input.dataplane;
    let matched = input.policies.matched(ResourceType::MeshFaultInjection, dp);
    if matched.from_rules.is_empty() {
        return Ok(());
    }
    for inbound in &dp.networking.inbound {
        let key = dp.inbound_key(inbound);
        if with_old.contains(&key) {
            continue;
        }
        let protocol = Protocol::parse(inbound.tags.get(PROTOCOL_TAG).map(String::as_str));
        if !matches!(protocol, Protocol::Http | Protocol::Http2) {
            continue;
        }
        let listener_name = inbound_listener_name(&key);
        let Some(listener) = snap.listeners.get_mut(&listener_name) else {
            continue;
        };
        let Some(rules) = matched.from_rules.get(&key) else {
            continue;
        };
        for rule in &rules.0 {
            let filters = rule_filters(rule)
                .map_err(|reason| policy_error(rule_policy_name(rule), &listener_name, reason))?;
            insert_before_router(listener, &filters, true)
                .map_err(|reason| policy_error(rule_policy_name(rule), &listener_name, reason))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use umbra_core::rules::Tag;

    fn tags(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    fn fp(numerator: u32, denominator: DenominatorType) -> FractionalPercent {
        FractionalPercent {
            numerator,
            denominator: denominator as i32,
        }
    }

    #[test]
    fn matching_regex_like_kuma() {
        // The MADR's example (Kuma's fault_injection_configurer_test.go).
        assert_eq!(
            matching_regex(&tags(&[
                ("kuma.io/service", "frontend_default_svc_80"),
                ("kuma.io/protocol", "http"),
            ])),
            ".*&kuma.io/protocol=[^&]*http[,&].*&kuma.io/service=[^&]*frontend_default_svc_80[,&].*"
        );
        // Wildcards have no value part; only dots in values are escaped.
        assert_eq!(
            matching_regex(&tags(&[("tag1", "*"), ("tag2", "*")])),
            ".*&tag1=.*&tag2=.*"
        );
        assert_eq!(
            matching_regex(&tags(&[("kuma.io/zone", "eu-1.a")])),
            ".*&kuma.io/zone=[^&]*eu-1\\.a[,&].*"
        );
        assert_eq!(matching_regex(&BTreeMap::new()), ".*");
    }

    #[test]
    fn regex_or_like_kuma() {
        assert_eq!(regex_or(&[]), "");
        assert_eq!(regex_or(&["a".to_owned()]), "a");
        assert_eq!(
            regex_or(&["a".to_owned(), "b".to_owned(), "c".to_owned()]),
            "(a|b|c)"
        );
    }

    #[test]
    fn percentages_like_kuma() {
        use DenominatorType::{Hundred, Million, TenThousand};
        assert_eq!(convert_percentage(0.0), fp(0, Hundred));
        assert_eq!(convert_percentage(50.0), fp(50, Hundred));
        assert_eq!(convert_percentage(100.0), fp(100, Hundred));
        // The research note and Kuma's tests: 50.5 → 5050/TEN_THOUSAND (not the MADR's 505000).
        assert_eq!(convert_percentage(50.5), fp(5050, TenThousand));
        assert_eq!(convert_percentage(62.9), fp(6290, TenThousand));
        assert_eq!(convert_percentage(0.01), fp(1, TenThousand));
        // f64 arithmetic: 100 × 33.3 is 3329.9999999999995, so MILLION.
        assert_eq!(convert_percentage(33.3), fp(333_000, Million));
        assert_eq!(convert_percentage(0.001), fp(10, Million));
        assert_eq!(convert_percentage(12.3456), fp(123_456, Million));
        // Go's math.Round: half away from zero (10000 × 0.00025 is exactly 2.5).
        assert_eq!(convert_percentage(0.00005), fp(1, Million));
        assert_eq!(convert_percentage(0.00025), fp(3, Million));
    }

    #[test]
    fn mesh_percentages_parse_decimals() {
        use DenominatorType::{Hundred, Million, TenThousand};
        let s = |v: &str| IntOrString::String(v.to_owned());
        assert_eq!(mesh_percentage(None).ok(), Some(fp(0, Hundred)));
        assert_eq!(
            mesh_percentage(Some(&IntOrString::Int(40))).ok(),
            Some(fp(40, Hundred))
        );
        assert_eq!(
            mesh_percentage(Some(&s("50.5"))).ok(),
            Some(fp(5050, TenThousand))
        );
        assert_eq!(
            mesh_percentage(Some(&s("33.3"))).ok(),
            Some(fp(333_000, Million))
        );
        assert_eq!(mesh_percentage(Some(&s("1e1"))).ok(), Some(fp(10, Hundred)));
        assert_eq!(
            mesh_percentage(Some(&s(".5"))).ok(),
            Some(fp(50, TenThousand))
        );
        assert!(mesh_percentage(Some(&s("xyz"))).is_err());
    }

    #[test]
    fn bandwidth_like_kuma() {
        assert_eq!(limit_kbps(Some("50kbps")).ok(), Some(50));
        assert_eq!(limit_kbps(Some("111Mbps")).ok(), Some(111_000));
        assert_eq!(limit_kbps(Some("2Gbps")).ok(), Some(2_000_000));
        // Accepted by validation (contains "bps") but not convertible, as in Kuma.
        assert!(limit_kbps(Some("50 mbps")).is_err());
        assert!(limit_kbps(Some("50mbps")).is_err());
        assert!(limit_kbps(None).is_err());
    }

    #[test]
    fn headers_from_subsets() {
        assert!(subset_headers(&Subset::all()).is_empty());
        let subset = Subset(vec![
            Tag::eq("kuma.io/service", "frontend"),
            Tag::ne("version", "v1"),
            Tag::ne("version", "v2"),
            Tag::eq("kuma.io/zone", "east"),
        ]);
        let headers = subset_headers(&subset);
        let regex = |h: &HeaderMatcher| match &h.header_match_specifier {
            Some(HeaderMatchSpecifier::StringMatch(StringMatcher {
                match_pattern: Some(string_matcher::MatchPattern::SafeRegex(r)),
                ..
            })) => r.regex.clone(),
            other => panic!("unexpected matcher {other:?}"),
        };
        assert_eq!(headers.len(), 2);
        assert_eq!(
            regex(&headers[0]),
            ".*&kuma.io/service=[^&]*frontend[,&].*&kuma.io/zone=[^&]*east[,&].*"
        );
        assert!(!headers[0].invert_match);
        // Kuma keeps one value per key (a Go map): the last one.
        assert_eq!(regex(&headers[1]), ".*&version=[^&]*v2[,&].*");
        assert!(headers[1].invert_match);
        assert!(headers.iter().all(|h| h.name == KUMA_TAGS_HEADER));
        let only_negated = subset_headers(&Subset(vec![Tag::ne("kuma.io/service", "a")]));
        assert_eq!(only_negated.len(), 1);
        assert!(only_negated[0].invert_match);
    }

    #[test]
    fn old_fault_headers_or_sources() {
        let fi: FaultInjection = serde_json::from_value(serde_json::json!({
            "sources": [
                {"match": {"kuma.io/service": "a"}},
                {"match": {"kuma.io/service": "b", "version": "*"}}
            ],
            "destinations": [{"match": {"kuma.io/service": "c", "kuma.io/protocol": "http"}}],
            "conf": {"abort": {"httpStatus": 500, "percentage": 50}, "delay": {}}
        }))
        .unwrap();
        let fault = old_fault(&fi).unwrap();
        #[allow(deprecated)]
        let Some(HeaderMatchSpecifier::SafeRegexMatch(r)) =
            &fault.headers[0].header_match_specifier
        else {
            panic!("expected safeRegexMatch");
        };
        assert_eq!(
            r.regex,
            "(.*&kuma.io/service=[^&]*a[,&].*|.*&kuma.io/service=[^&]*b[,&].*&version=.*)"
        );
        assert_eq!(fault.headers.len(), 1);
        assert_eq!(
            fault.abort.unwrap().error_type,
            Some(fault_abort::ErrorType::HttpStatus(500))
        );
        // An empty section is still converted, with Go's zero values.
        let delay = fault.delay.unwrap();
        assert_eq!(delay.percentage, Some(FractionalPercent::default()));
        assert_eq!(
            delay.fault_delay_secifier,
            Some(fault_delay::FaultDelaySecifier::FixedDelay(
                PbDuration::default()
            ))
        );
        assert!(fault.response_rate_limit.is_none());
    }

    #[test]
    fn mesh_fault_zero_values_and_errors() {
        let conf: FaultInjectionConf = serde_json::from_value(serde_json::json!({
            "abort": {"httpStatus": 503},
            "delay": {"percentage": "62.9"}
        }))
        .unwrap();
        let fault = mesh_fault(&conf, &Subset::all()).unwrap();
        assert!(fault.headers.is_empty());
        assert_eq!(
            fault.abort.unwrap().percentage,
            Some(fp(0, DenominatorType::Hundred))
        );
        assert_eq!(
            fault.delay.unwrap().percentage,
            Some(fp(6290, DenominatorType::TenThousand))
        );
        let bad: FaultInjectionConf = serde_json::from_value(serde_json::json!({
            "responseBandwidth": {"limit": "50 mbps", "percentage": 5}
        }))
        .unwrap();
        assert!(mesh_fault(&bad, &Subset::all()).is_err());
    }
}
