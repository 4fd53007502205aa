//! What Kuma's `GET /_resources` tells about each [`ResourceType`] besides its names: the
//! display names a GUI shows (`singularDisplayName`, `pluralDisplayName`) and, for a
//! `targetRef` policy, whether its spec has `to` and `from` lists (`hasToTargetRef`,
//! `hasFromTargetRef` of Kuma's `PolicyDescription`).
//!
//! Sources: Kuma 2.7's resource descriptors (`SingularDisplayName`, `PluralDisplayName`: the
//! type name split into words, acronyms kept whole) and, for `to`/`from`, the `spec`
//! properties of Kuma 2.7.29's published `policies/<type>/schema.yaml` (checked by
//! `core/tests/type_info.rs`).

use crate::resource::{ResourceType, TypeKind};

impl ResourceType {
    /// Kuma's singular display name (`Mesh HTTP Route`, `Zone Ingress`).
    pub fn singular_display_name(self) -> &'static str {
        self.display_names().0
    }

    /// Kuma's plural display name (`Mesh Retries`, `Mesh Proxy Patches`).
    pub fn plural_display_name(self) -> &'static str {
        self.display_names().1
    }

    fn display_names(self) -> (&'static str, &'static str) {
        use ResourceType::*;
        match self {
            Mesh => ("Mesh", "Meshes"),
            Dataplane => ("Dataplane", "Dataplanes"),
            MeshTimeout => ("Mesh Timeout", "Mesh Timeouts"),
            MeshCircuitBreaker => ("Mesh Circuit Breaker", "Mesh Circuit Breakers"),
            MeshFaultInjection => ("Mesh Fault Injection", "Mesh Fault Injections"),
            MeshTrafficPermission => ("Mesh Traffic Permission", "Mesh Traffic Permissions"),
            MeshProxyPatch => ("Mesh Proxy Patch", "Mesh Proxy Patches"),
            MeshHTTPRoute => ("Mesh HTTP Route", "Mesh HTTP Routes"),
            MeshTCPRoute => ("Mesh TCP Route", "Mesh TCP Routes"),
            Timeout => ("Timeout", "Timeouts"),
            CircuitBreaker => ("Circuit Breaker", "Circuit Breakers"),
            FaultInjection => ("Fault Injection", "Fault Injections"),
            TrafficPermission => ("Traffic Permission", "Traffic Permissions"),
            ProxyTemplate => ("Proxy Template", "Proxy Templates"),
            TrafficRoute => ("Traffic Route", "Traffic Routes"),
            MeshRetry => ("Mesh Retry", "Mesh Retries"),
            MeshHealthCheck => ("Mesh Health Check", "Mesh Health Checks"),
            MeshLoadBalancingStrategy => (
                "Mesh Load Balancing Strategy",
                "Mesh Load Balancing Strategies",
            ),
            MeshAccessLog => ("Mesh Access Log", "Mesh Access Logs"),
            MeshRateLimit => ("Mesh Rate Limit", "Mesh Rate Limits"),
            MeshTrace => ("Mesh Trace", "Mesh Traces"),
            MeshMetric => ("Mesh Metric", "Mesh Metrics"),
            Retry => ("Retry", "Retries"),
            HealthCheck => ("Health Check", "Health Checks"),
            TrafficLog => ("Traffic Log", "Traffic Logs"),
            RateLimit => ("Rate Limit", "Rate Limits"),
            TrafficTrace => ("Traffic Trace", "Traffic Traces"),
            VirtualOutbound => ("Virtual Outbound", "Virtual Outbounds"),
            MeshGatewayRoute => ("Mesh Gateway Route", "Mesh Gateway Routes"),
            MeshGateway => ("Mesh Gateway", "Mesh Gateways"),
            ExternalService => ("External Service", "External Services"),
            Secret => ("Secret", "Secrets"),
            GlobalSecret => ("Global Secret", "Global Secrets"),
            ZoneIngress => ("Zone Ingress", "Zone Ingresses"),
        }
    }

    /// `true` for a `targetRef` policy whose spec has a `to` list (an outbound policy).
    pub fn has_to_target_ref(self) -> bool {
        use ResourceType::*;
        matches!(
            self,
            MeshAccessLog
                | MeshCircuitBreaker
                | MeshFaultInjection
                | MeshRateLimit
                | MeshTimeout
                | MeshHealthCheck
                | MeshHTTPRoute
                | MeshLoadBalancingStrategy
                | MeshRetry
                | MeshTCPRoute
        )
    }

    /// `true` for a `targetRef` policy whose spec has a `from` list (an inbound policy).
    pub fn has_from_target_ref(self) -> bool {
        use ResourceType::*;
        matches!(
            self,
            MeshAccessLog
                | MeshCircuitBreaker
                | MeshFaultInjection
                | MeshRateLimit
                | MeshTimeout
                | MeshTrafficPermission
        )
    }

    /// `true` for a `targetRef` policy (Kuma's `isTargetRef`).
    pub fn is_target_ref(self) -> bool {
        self.kind() == TypeKind::NewPolicy
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The type name split into words, runs of capitals (`HTTP`) kept whole.
    fn words(name: &str) -> String {
        let chars: Vec<char> = name.chars().collect();
        let mut out = String::new();
        for (i, c) in chars.iter().enumerate() {
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            let prev_lower = i > 0 && chars[i - 1].is_lowercase();
            let prev_upper = i > 0 && chars[i - 1].is_uppercase();
            if i > 0 && c.is_uppercase() && (prev_lower || (prev_upper && next_lower)) {
                out.push(' ');
            }
            out.push(*c);
        }
        out
    }

    fn plural(s: &str) -> String {
        let consonant_y =
            s.ends_with('y') && !s[..s.len() - 1].ends_with(['a', 'e', 'i', 'o', 'u']);
        if let Some(stem) = s.strip_suffix('y').filter(|_| consonant_y) {
            format!("{stem}ies")
        } else if s.ends_with("ss") || s.ends_with("sh") || s.ends_with("ch") {
            format!("{s}es")
        } else {
            format!("{s}s")
        }
    }

    #[test]
    fn display_names_are_the_type_name_in_words() {
        for ty in ResourceType::ALL {
            let singular = words(ty.name());
            assert_eq!(ty.singular_display_name(), singular, "{ty:?}");
            assert_eq!(ty.plural_display_name(), plural(&singular), "{ty:?}");
        }
        assert_eq!(
            ResourceType::MeshHTTPRoute.singular_display_name(),
            "Mesh HTTP Route"
        );
        assert_eq!(ResourceType::Mesh.plural_display_name(), "Meshes");
    }

    #[test]
    fn only_target_ref_policies_have_to_or_from() {
        for ty in ResourceType::ALL {
            if ty.has_to_target_ref() || ty.has_from_target_ref() {
                assert!(ty.is_target_ref(), "{ty:?}");
            }
        }
        assert!(!ResourceType::MeshTrace.has_to_target_ref());
        assert!(!ResourceType::MeshTrace.has_from_target_ref());
        assert!(ResourceType::MeshTrafficPermission.has_from_target_ref());
        assert!(!ResourceType::MeshTrafficPermission.has_to_target_ref());
        assert!(!ResourceType::Timeout.is_target_ref());
    }
}
