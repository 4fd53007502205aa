//! Every resource type Umbra knows ([`ResourceType`]) and what is known of each: Kuma's type
//! name and REST path, its family ([`TypeKind`]), whether it lives inside a mesh, the display
//! names a GUI shows (`singularDisplayName`, `pluralDisplayName` of Kuma's `GET /_resources`),
//! the item lists of a `targetRef` policy ([`Capabilities`]: `hasToTargetRef`,
//! `hasFromTargetRef` of Kuma's `PolicyDescription`, and the single `default`), the old/new
//! pairing of the migration, and whether Umbra generates Envoy config from it.
//!
//! None of it is written here: [`ResourceType`] and its [`TypeDescriptor`]s are generated from
//! the one type list, `for_each_type` in [`crate::policies`], where a type is described once.
//! This module only reads it, and depends on no typed spec, so every module (the policies
//! included) can name a type.
//!
//! Sources: Kuma 2.7's resource descriptors (`SingularDisplayName`, `PluralDisplayName`: the
//! type name split into words, acronyms kept whole) and, for `to`/`from`, the `spec`
//! properties of Kuma 2.7.29's published `policies/<type>/schema.yaml` (checked by
//! `core/tests/type_info.rs`); the pairing is transition seed 000's and Kuma's migration
//! guide's.

use std::fmt;

/// Which item lists a policy type has (Kuma's `PolicyWithFromList`/`ToList`/`SingleItem`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Has `from` items.
    pub from: bool,
    /// Has `to` items.
    pub to: bool,
    /// Has a single top-level `default`.
    pub single: bool,
}

/// One level a `targetRef` policy's spec may have, as the type list names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    /// A `to` list.
    To,
    /// A `from` list.
    From,
    /// A single top-level `default`.
    Single,
}

impl Capabilities {
    /// The capabilities of a type whose spec has `levels`.
    pub const fn of(levels: &[Level]) -> Capabilities {
        let mut caps = Capabilities {
            from: false,
            to: false,
            single: false,
        };
        let mut i = 0;
        while i < levels.len() {
            match levels[i] {
                Level::To => caps.to = true,
                Level::From => caps.from = true,
                Level::Single => caps.single = true,
            }
            i += 1;
        }
        caps
    }
}

/// Family of a [`ResourceType`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeKind {
    /// Mesh and Dataplane.
    Infra,
    /// A `targetRef` policy.
    NewPolicy,
    /// A source/destination (or selector) policy.
    OldPolicy,
    /// Any other Kuma resource (ExternalService, MeshGateway, Secret, GlobalSecret): stored,
    /// synced and listed, written through the Global like policies, never shadow, and not
    /// generated ([`crate::ungenerated`]).
    StoredOnly,
}

impl TypeKind {
    /// `true` for `targetRef` and old policies.
    pub fn is_policy(self) -> bool {
        matches!(self, TypeKind::NewPolicy | TypeKind::OldPolicy)
    }
}

/// Where resources of a type live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Outside any mesh (Mesh, GlobalSecret, ZoneIngress, ZoneEgress).
    Global,
    /// Inside a mesh.
    Mesh,
}

/// Everything the type list says of one resource type, but its typed spec (which
/// [`crate::resource::Spec`] holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TypeDescriptor {
    /// The type.
    pub ty: ResourceType,
    /// Kuma's type name (`MeshTimeout`).
    pub name: &'static str,
    /// Kuma's REST path segment (`meshtimeouts`).
    pub plural: &'static str,
    /// Kuma's singular display name (`Mesh Timeout`).
    pub singular_display_name: &'static str,
    /// Kuma's plural display name (`Mesh Timeouts`).
    pub plural_display_name: &'static str,
    /// Family.
    pub kind: TypeKind,
    /// Where its resources live.
    pub scope: Scope,
    /// Item lists of a `targetRef` policy (none for the other types).
    pub levels: Capabilities,
    /// The old type a new policy replaces (given on the new type only).
    pub replaces: Option<ResourceType>,
    /// Umbra generates Envoy config from resources of this type.
    pub generated: bool,
}

/// `None`, or `Some` of the type named (the `replaces` of a type-list entry).
macro_rules! replaced {
    () => {
        None
    };
    ($ty:ident) => {
        Some(ResourceType::$ty)
    };
}

/// Generates [`ResourceType`] and its descriptors from the type list (the callback of
/// `crate::policies::for_each_type`; the specs are [`crate::resource`]'s business).
macro_rules! define_resource_types {
    ($(
        $variant:ident {
            name: $name:literal,
            path: $plural:literal,
            display: $singular_display:literal / $plural_display:literal,
            kind: $kind:ident,
            scope: $scope:ident,
            levels: [$($level:ident),*],
            replaces: [$($replaces:ident)?],
            generated: $generated:literal,
            spec: $(own($own:ty))? $(shared($shared:ident))?,
        }
    )*) => {
        /// Every resource type Umbra knows, with Kuma's names.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum ResourceType { $( #[doc = concat!("`", $name, "`")] $variant, )* }

        /// The descriptors, in [`ResourceType`]'s declaration order.
        const DESCRIPTORS: &[TypeDescriptor] = &[ $(
            TypeDescriptor {
                ty: ResourceType::$variant,
                name: $name,
                plural: $plural,
                singular_display_name: $singular_display,
                plural_display_name: $plural_display,
                kind: TypeKind::$kind,
                scope: Scope::$scope,
                levels: Capabilities::of(&[$(Level::$level),*]),
                replaces: replaced!($($replaces)?),
                generated: $generated,
            },
        )* ];

        impl ResourceType {
            /// All types, in declaration order.
            pub const ALL: &'static [ResourceType] = &[ $( ResourceType::$variant, )* ];

            /// Parse a type name (`MeshTimeout`).
            pub fn from_name(s: &str) -> Option<Self> {
                match s { $( $name => Some(Self::$variant), )* _ => None }
            }

            /// Parse a REST path segment (`meshtimeouts`).
            pub fn from_plural(s: &str) -> Option<Self> {
                match s { $( $plural => Some(Self::$variant), )* _ => None }
            }
        }
    };
}

crate::policies::for_each_type!(define_resource_types);

impl ResourceType {
    /// What the type list says of this type.
    pub fn descriptor(self) -> &'static TypeDescriptor {
        // The discriminants are the declaration indices, the order of `DESCRIPTORS`.
        &DESCRIPTORS[self as usize]
    }

    /// Kuma's type name (`MeshTimeout`).
    pub fn name(self) -> &'static str {
        self.descriptor().name
    }

    /// Kuma's REST path segment (`meshtimeouts`).
    pub fn plural(self) -> &'static str {
        self.descriptor().plural
    }

    /// What family the type belongs to.
    pub fn kind(self) -> TypeKind {
        self.descriptor().kind
    }

    /// Kuma's singular display name (`Mesh HTTP Route`, `Zone Ingress`).
    pub fn singular_display_name(self) -> &'static str {
        self.descriptor().singular_display_name
    }

    /// Kuma's plural display name (`Mesh Retries`, `Mesh Proxy Patches`).
    pub fn plural_display_name(self) -> &'static str {
        self.descriptor().plural_display_name
    }

    /// The item lists of a `targetRef` policy type (all `false` for the other types).
    pub fn levels(self) -> Capabilities {
        self.descriptor().levels
    }

    /// `true` for a `targetRef` policy whose spec has a `to` list (an outbound policy).
    pub fn has_to_target_ref(self) -> bool {
        self.levels().to
    }

    /// `true` for a `targetRef` policy whose spec has a `from` list (an inbound policy).
    pub fn has_from_target_ref(self) -> bool {
        self.levels().from
    }

    /// `true` for a `targetRef` policy (Kuma's `isTargetRef`).
    pub fn is_target_ref(self) -> bool {
        self.kind() == TypeKind::NewPolicy
    }

    /// The old type a new policy replaces, and vice versa (transition seed 000):
    /// MeshTimeout↔Timeout, MeshCircuitBreaker↔CircuitBreaker, MeshFaultInjection↔FaultInjection,
    /// MeshTrafficPermission↔TrafficPermission, MeshProxyPatch↔ProxyTemplate; and by Kuma's
    /// migration guide MeshRetry↔Retry, MeshHealthCheck↔HealthCheck, MeshAccessLog↔TrafficLog,
    /// MeshRateLimit↔RateLimit, MeshTrace↔TrafficTrace. TrafficRoute has none: it gives way per
    /// DPP, not per mesh (see `PolicySet::traffic_routes`).
    pub fn counterpart(self) -> Option<ResourceType> {
        self.descriptor().replaces.or_else(|| {
            DESCRIPTORS
                .iter()
                .find(|d| d.replaces == Some(self))
                .map(|d| d.ty)
        })
    }

    /// `true` for types that live inside a mesh (everything but Mesh, GlobalSecret,
    /// ZoneIngress and ZoneEgress).
    pub fn is_mesh_scoped(self) -> bool {
        self.descriptor().scope == Scope::Mesh
    }

    /// `true` when Umbra generates Envoy config from resources of this type. The others are
    /// stored, synced and listed, and every inspect answer about a DPP they select names them
    /// as not generated ([`crate::view::PolicySet::not_generated`]).
    pub fn is_generated(self) -> bool {
        self.descriptor().generated
    }
}

impl fmt::Display for ResourceType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
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

    #[test]
    fn descriptors_are_in_declaration_order() {
        for (i, ty) in ResourceType::ALL.iter().enumerate() {
            assert_eq!(DESCRIPTORS[i].ty, *ty);
            assert_eq!(ResourceType::from_name(ty.name()), Some(*ty));
            assert_eq!(ResourceType::from_plural(ty.plural()), Some(*ty));
        }
    }

    #[test]
    fn pairing_scope_and_generation() {
        use ResourceType::*;
        let pairs = [
            (MeshTimeout, Timeout),
            (MeshCircuitBreaker, CircuitBreaker),
            (MeshFaultInjection, FaultInjection),
            (MeshTrafficPermission, TrafficPermission),
            (MeshProxyPatch, ProxyTemplate),
            (MeshRetry, Retry),
            (MeshHealthCheck, HealthCheck),
            (MeshAccessLog, TrafficLog),
            (MeshRateLimit, RateLimit),
            (MeshTrace, TrafficTrace),
        ];
        for ty in ResourceType::ALL {
            let expected = pairs
                .iter()
                .find_map(|(n, o)| (n == ty).then_some(*o).or_else(|| (o == ty).then_some(*n)));
            assert_eq!(ty.counterpart(), expected, "{ty:?}");
        }
        let global: Vec<_> = ResourceType::ALL
            .iter()
            .filter(|t| !t.is_mesh_scoped())
            .collect();
        assert_eq!(global, [&Mesh, &GlobalSecret, &ZoneIngress, &ZoneEgress]);
        let not_generated: Vec<_> = ResourceType::ALL
            .iter()
            .filter(|t| !t.is_generated())
            .collect();
        assert_eq!(not_generated, [&MeshMetric, &GlobalSecret]);
    }
}
