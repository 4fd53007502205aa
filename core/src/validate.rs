//! Validation primitives shared by every resource: [`Violation`], [`ValidationError`] and the
//! [`PathBuilder`] that renders Kuma's field paths (`spec.to[0].default.http`, `tags["version"]`).
//!
//! Semantics follow Kuma 2.7's `pkg/core/validators`: a validator never stops at the first
//! problem, it returns *every* violation, each with a JSON-path-like field and a message. Message
//! texts reuse Kuma's wording where Kuma has one (see the constants below) so that operators moving
//! from Kuma recognise them.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Kuma's `validators.MustBeDefined`.
pub const MUST_BE_DEFINED: &str = "must be defined";
/// Kuma's `validators.MustNotBeDefined`.
pub const MUST_NOT_BE_DEFINED: &str = "must not be defined";
/// Kuma's `validators.MustBeSet`.
pub const MUST_BE_SET: &str = "must be set";
/// Kuma's `validators.MustNotBeSet`.
pub const MUST_NOT_BE_SET: &str = "must not be set";
/// Kuma's `validators.MustNotBeEmpty`.
pub const MUST_NOT_BE_EMPTY: &str = "must not be empty";
/// Kuma's `validators.WhenDefinedHasToBeNonNegative`.
pub const NON_NEGATIVE_WHEN_DEFINED: &str = "must not be negative when defined";
/// Kuma's `validators.WhenDefinedHasToBeGreaterThanZero`.
pub const GREATER_THAN_ZERO_WHEN_DEFINED: &str = "must be greater than zero when defined";
/// Kuma's `validators.MustBeDefinedAndGreaterThanZero`.
pub const MUST_BE_DEFINED_AND_GREATER_THAN_ZERO: &str = "must be defined and greater than zero";
/// Kuma's `validators.WhenDefinedHasToBeValidPath`.
pub const VALID_PATH_WHEN_DEFINED: &str = "must be a valid path when defined";
/// Kuma's `validators.HasToBeGreaterThanZero`.
pub const GREATER_THAN_ZERO: &str = "must be greater than 0";
/// Kuma's `validators.HasToBeInPercentageRange`.
pub const PERCENTAGE_RANGE: &str = "must be in inclusive range [0.0, 100.0]";
/// Kuma's `validators.HasToBeInUintPercentageRange`.
pub const UINT_PERCENTAGE_RANGE: &str = "must be in inclusive range [0, 100]";
/// Kuma's `validators.MustHaveBPSUnit`.
pub const MUST_HAVE_BPS_UNIT: &str = "must be in kbps/Mbps/Gbps units";
/// Kuma's `validators.StringHasToBeValidNumber`.
pub const STRING_MUST_BE_NUMBER: &str = "string must be a valid number";

/// Kuma's `validators.HasToBeInRangeFormat`: `must be in inclusive range [lo, hi]`.
pub fn in_range(lo: impl fmt::Display, hi: impl fmt::Display) -> String {
    format!("must be in inclusive range [{lo}, {hi}]")
}

/// Kuma's `validators.MustHaveOnlyOne`: `<entity> must have only one type defined: a, b`.
pub fn must_have_only_one(entity: &str, allowed: &[&str]) -> String {
    format!(
        "{entity} must have only one type defined: {}",
        allowed.join(", ")
    )
}

/// Kuma's `validators.MustHaveExactlyOneOf`: `<entity> must have exactly one defined: a, b`.
pub fn must_have_exactly_one_of(entity: &str, allowed: &[&str]) -> String {
    format!(
        "{entity} must have exactly one defined: {}",
        allowed.join(", ")
    )
}

/// Kuma's `validators.MustHaveAtLeastOne`: `must have at least one defined: a, b`.
pub fn must_have_at_least_one(allowed: &[&str]) -> String {
    format!("must have at least one defined: {}", allowed.join(", "))
}

/// One problem in a resource: the field path (`spec.to[0].default.idleTimeout`) and a message.
///
/// This is the `{field, message}` pair every API returns in a 400 (`invalidParameters`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// Path of the offending field, rooted at the resource (`spec...`, `networking...`, `name`).
    pub field: String,
    /// Human readable reason.
    pub message: String,
}

/// Every violation found in one resource, in the order the validator found them.
///
/// An empty list means valid. `Display` renders `field: message; field: message` like Kuma.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ValidationError {
    /// The violations, in discovery order.
    pub violations: Vec<Violation>,
}

impl ValidationError {
    /// An empty (successful) result.
    pub fn new() -> Self {
        Self::default()
    }

    /// `true` when at least one violation was recorded.
    pub fn has_violations(&self) -> bool {
        !self.violations.is_empty()
    }

    /// Record a violation at `path`.
    pub fn violation(&mut self, path: &PathBuilder, message: impl Into<String>) {
        self.violations.push(Violation {
            field: path.to_string(),
            message: message.into(),
        });
    }

    /// Record a violation at a raw field string (relative paths used by nested validators).
    pub fn violation_field(&mut self, field: impl Into<String>, message: impl Into<String>) {
        self.violations.push(Violation {
            field: field.into(),
            message: message.into(),
        });
    }

    /// Append `other`'s violations, re-rooted under `path` (Kuma's `AddErrorAt`).
    pub fn add_at(&mut self, path: &PathBuilder, other: ValidationError) {
        for v in other.violations {
            let field = if v.field.is_empty() {
                path.to_string()
            } else if path.is_root() {
                v.field
            } else if v.field.starts_with('[') {
                format!("{path}{}", v.field)
            } else {
                format!("{path}.{}", v.field)
            };
            self.violations.push(Violation {
                field,
                message: v.message,
            });
        }
    }

    /// Append `other`'s violations unchanged (Kuma's `Add`).
    pub fn add(&mut self, other: ValidationError) {
        self.violations.extend(other.violations);
    }

    /// `Ok(())` when empty, else `Err(self)`.
    pub fn into_result(self) -> Result<(), ValidationError> {
        if self.has_violations() {
            Err(self)
        } else {
            Ok(())
        }
    }
}

impl fmt::Display for ValidationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, v) in self.violations.iter().enumerate() {
            if i > 0 {
                f.write_str("; ")?;
            }
            write!(f, "{}: {}", v.field, v.message)?;
        }
        Ok(())
    }
}

impl std::error::Error for ValidationError {}

/// Builds Kuma-style field paths: `spec`, `.field`, `[index]`, `["key"]`.
///
/// Cheap to clone and extend; each call returns a new path so a parent path can be reused for
/// siblings.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PathBuilder(String);

impl PathBuilder {
    /// The empty path (a violation at the root has field `""`).
    pub fn root() -> Self {
        Self(String::new())
    }

    /// A path starting with `name` (`PathBuilder::rooted_at("spec")`).
    pub fn rooted_at(name: &str) -> Self {
        Self(name.to_owned())
    }

    /// `true` for the empty path.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// Append `.name` (or `name` at the root).
    pub fn field(&self, name: &str) -> Self {
        if self.0.is_empty() {
            Self(name.to_owned())
        } else {
            Self(format!("{}.{name}", self.0))
        }
    }

    /// Append `[index]`.
    pub fn index(&self, index: usize) -> Self {
        Self(format!("{}[{index}]", self.0))
    }

    /// Append `["key"]`, quoting the key the way Go's `%q` does.
    pub fn key(&self, key: &str) -> Self {
        Self(format!("{}[{}]", self.0, go_quote(key)))
    }

    /// The rendered path.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for PathBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Quote a string like Go's `%q` (double quotes, backslash escapes for `"`, `\` and controls).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_render_like_kuma() {
        let p = PathBuilder::rooted_at("spec")
            .field("to")
            .index(0)
            .field("default");
        assert_eq!(p.to_string(), "spec.to[0].default");
        assert_eq!(
            p.field("tags").key("ver\"sion").to_string(),
            "spec.to[0].default.tags[\"ver\\\"sion\"]"
        );
        assert_eq!(PathBuilder::root().field("kind").to_string(), "kind");
    }

    #[test]
    fn add_at_reroots_relative_fields() {
        let mut inner = ValidationError::new();
        inner.violation_field("kind", "value is not supported");
        inner.violation_field("", "root problem");
        inner.violation_field("[\"a\"]", "bad tag");
        let mut outer = ValidationError::new();
        outer.add_at(&PathBuilder::rooted_at("spec").field("targetRef"), inner);
        let fields: Vec<_> = outer.violations.iter().map(|v| v.field.as_str()).collect();
        assert_eq!(
            fields,
            [
                "spec.targetRef.kind",
                "spec.targetRef",
                "spec.targetRef[\"a\"]"
            ]
        );
        assert_eq!(outer.to_string(), "spec.targetRef.kind: value is not supported; spec.targetRef: root problem; spec.targetRef[\"a\"]: bad tag");
    }
}
