//! Which shadow policies a Shadow view takes in ([`Promotion`]): all of them, one, or a
//! migration step; how one parses from the inspect and migration APIs' `policy=` and whether
//! it can be evaluated on a mesh. A leaf of [`crate::view`]: it imports nothing from it.

use std::collections::BTreeSet;

use crate::resource::{Resource, ResourceType};

/// A policy by type and name (within the mesh being considered).
pub type PolicyRef = (ResourceType, String);

/// Which shadow policies the `View::Shadow` view takes in: all of them (the question "what
/// if every shadow policy went live?"), one (the effect of promoting just that policy, the
/// fleet-wide diff's `policy=<Type>/<name>`, issue 6), or a migration step (issue 19): some
/// shadow policies go live and some live policies (the old ones they replace) are deleted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub enum Promotion {
    /// Every shadow policy of the mesh.
    #[default]
    All,
    /// Only this shadow policy; the other shadow policies stay out of both views.
    Only {
        /// Its type.
        ty: ResourceType,
        /// Its name.
        name: String,
    },
    /// A migration step: these shadow policies go live (the other shadow policies stay out of
    /// both views) and these live policies are deleted (left out of the Shadow view).
    Set {
        /// Shadow policies promoted.
        promote: BTreeSet<PolicyRef>,
        /// Live policies retired (deleted).
        retire: BTreeSet<PolicyRef>,
    },
}

/// Why a [`Promotion`] does not parse ([`Promotion::parse`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromotionParseError {
    /// An item has no `/`.
    #[error("{item:?} is not <Type>/<name> (e.g. MeshTimeout/timeout-global)")]
    NotARef {
        /// The item.
        item: String,
    },
    /// An item's type is unknown or not a policy type.
    #[error("{ty:?} is not a policy type")]
    NotAPolicyType {
        /// The type as written.
        ty: String,
    },
    /// An item's name is empty.
    #[error("{item:?} has an empty policy name")]
    EmptyName {
        /// The item.
        item: String,
    },
    /// A list promotes nothing and retires nothing.
    #[error("{text:?} names no policy")]
    NamesNothing {
        /// The whole text.
        text: String,
    },
}

/// The text of a [`PromotionParseError`], for the API edges that report it (`impl Into<String>`
/// bodies).
impl From<PromotionParseError> for String {
    fn from(e: PromotionParseError) -> String {
        e.to_string()
    }
}

/// Parse one `<Type>/<name>` of a policy type.
fn parse_ref(s: &str) -> Result<PolicyRef, PromotionParseError> {
    let (ty, name) = s
        .split_once('/')
        .ok_or_else(|| PromotionParseError::NotARef { item: s.to_owned() })?;
    let ty = ResourceType::from_name(ty)
        .filter(|t| t.kind().is_policy())
        .ok_or_else(|| PromotionParseError::NotAPolicyType { ty: ty.to_owned() })?;
    if name.is_empty() {
        return Err(PromotionParseError::EmptyName { item: s.to_owned() });
    }
    Ok((ty, name.to_owned()))
}

impl Promotion {
    /// Parse `""` (all), `"<Type>/<name>"` (`MeshTimeout/timeout-global`: only that one), or a
    /// comma-separated list of them where an item starting with `-` is a live policy deleted
    /// in the same step (`MeshTimeout/a,MeshTimeout/b,-Timeout/old`): a [`Promotion::Set`].
    ///
    /// # Errors
    /// [`PromotionParseError`] when an item has no `/`, the type is unknown or not a policy
    /// type, a name is empty, or a list promotes nothing and retires nothing.
    pub fn parse(s: &str) -> Result<Self, PromotionParseError> {
        if s.is_empty() {
            return Ok(Self::All);
        }
        if !s.contains(',') && !s.starts_with('-') {
            let (ty, name) = parse_ref(s)?;
            return Ok(Self::Only { ty, name });
        }
        let (mut promote, mut retire) = (BTreeSet::new(), BTreeSet::new());
        for item in s.split(',').map(str::trim).filter(|i| !i.is_empty()) {
            match item.strip_prefix('-') {
                Some(r) => retire.insert(parse_ref(r)?),
                None => promote.insert(parse_ref(item)?),
            };
        }
        if promote.is_empty() && retire.is_empty() {
            return Err(PromotionParseError::NamesNothing { text: s.to_owned() });
        }
        Ok(Self::Set { promote, retire })
    }

    /// `true` when `r` takes part in the Shadow view under this promotion (every resource that
    /// is not shadow does, unless a [`Promotion::Set`] retires it).
    pub fn admits(&self, r: &Resource) -> bool {
        let named = |set: &BTreeSet<PolicyRef>| {
            set.iter()
                .any(|(ty, name)| r.ty() == *ty && r.meta.name == *name)
        };
        if !r.meta.is_shadow() {
            return match self {
                Self::Set { retire, .. } => !named(retire),
                _ => true,
            };
        }
        match self {
            Self::All => true,
            Self::Only { ty, name } => r.ty() == *ty && r.meta.name == *name,
            Self::Set { promote, .. } => named(promote),
        }
    }
}

/// Why a [`Promotion::Only`] cannot be evaluated.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PromotionError {
    /// No such policy in the mesh.
    #[error("{0} not found in mesh {1:?}")]
    NotFound(String, String),
    /// The policy is not labelled `kuma.io/effect: shadow`: it is already live.
    #[error("{0} is not a shadow policy (label kuma.io/effect: shadow); it is already live")]
    NotShadow(String),
    /// A policy to delete is itself shadow: only live policies are retired.
    #[error("{0} is a shadow policy; only live policies can be retired")]
    RetireShadow(String),
}

impl Promotion {
    /// Check that the promoted policy exists in `mesh` among `resources` and is shadow
    /// ([`Promotion::All`] always passes).
    ///
    /// # Errors
    /// [`PromotionError`].
    pub fn check(&self, mesh: &str, resources: &[Resource]) -> Result<(), PromotionError> {
        let find = |ty: ResourceType, name: &str| {
            let shown = format!("{}/{name}", ty.name());
            resources
                .iter()
                .find(|r| r.ty() == ty && r.meta.name == name && r.meta.mesh == mesh)
                .map(|r| (r.meta.is_shadow(), shown.clone()))
                .ok_or_else(|| PromotionError::NotFound(shown, mesh.to_owned()))
        };
        let (promote, retire): (Vec<&PolicyRef>, Vec<&PolicyRef>) = match self {
            Self::All => return Ok(()),
            Self::Only { ty, name } => {
                let (shadow, shown) = find(*ty, name)?;
                return if shadow {
                    Ok(())
                } else {
                    Err(PromotionError::NotShadow(shown))
                };
            }
            Self::Set { promote, retire } => (promote.iter().collect(), retire.iter().collect()),
        };
        for (ty, name) in promote {
            let (shadow, shown) = find(*ty, name)?;
            if !shadow {
                return Err(PromotionError::NotShadow(shown));
            }
        }
        for (ty, name) in retire {
            let (shadow, shown) = find(*ty, name)?;
            if shadow {
                return Err(PromotionError::RetireShadow(shown));
            }
        }
        Ok(())
    }

    /// `"<Type>/<name>"` of each live policy of `mesh` this promotion deletes, sorted.
    pub fn retired(&self) -> Vec<String> {
        match self {
            Self::Set { retire, .. } => retire
                .iter()
                .map(|(ty, name)| format!("{}/{name}", ty.name()))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// `"<Type>/<name>"` of each shadow policy of `mesh` this promotion takes in, sorted.
    pub fn promoted(&self, mesh: &str, resources: &[Resource]) -> Vec<String> {
        let mut out: Vec<String> = resources
            .iter()
            .filter(|r| r.meta.mesh == mesh && r.meta.is_shadow() && self.admits(r))
            .filter(|r| r.ty().kind().is_policy())
            .map(|r| format!("{}/{}", r.ty().name(), r.meta.name))
            .collect();
        out.sort();
        out
    }
}

impl std::fmt::Display for Promotion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::All => f.write_str("every shadow policy"),
            Self::Only { ty, name } => write!(f, "{}/{name}", ty.name()),
            Self::Set { promote, retire } => {
                let items: Vec<String> = promote
                    .iter()
                    .map(|(ty, name)| format!("{}/{name}", ty.name()))
                    .chain(
                        retire
                            .iter()
                            .map(|(ty, name)| format!("-{}/{name}", ty.name())),
                    )
                    .collect();
                f.write_str(&items.join(","))
            }
        }
    }
}
