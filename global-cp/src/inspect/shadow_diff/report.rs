//! The shapes of a fleet-wide diff's answer: per-zone tallies ([`ZoneTally`]), fleet totals
//! ([`Totals`]), and the serialized forms of the result document and of each streamed line.
//! The result document is `{kind: "result", mesh, policy?, shadowPolicies, notGenerated,
//! format, partial, totals, zones, changes: [{operation, count, dataplanes}], failures,
//! dataplanes?}`; changes are ordered largest group first. `notGenerated` lists the shadow
//! policies that select DPPs but whose effect Umbra does not generate yet (`{type, name,
//! reason, dataplanes}`, `dataplanes` a count), and the Dataplane fields Umbra does not act on
//! (`{type: Dataplane, name: "", field, reason, dataplanes}`): the changes cannot include them.

use serde::Serialize;
use serde_json::value::RawValue;

/// How a zone's part of a fleet-wide diff went.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ZoneTally {
    /// The zone.
    pub zone: String,
    /// `pending` (still running), `ok`, or `failed` (see `error`).
    pub status: &'static str,
    /// DPPs asked about.
    pub considered: usize,
    /// DPPs whose config changes.
    pub changed: usize,
    /// DPPs whose config stays the same.
    pub unchanged: usize,
    /// DPPs without a result (their own error, or the zone's).
    pub failed: usize,
    /// Why the zone did not answer in full.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Fleet-wide totals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Totals {
    /// DPPs the shadow policies can affect (asked about).
    pub considered: usize,
    /// DPPs whose config changes.
    pub changed: usize,
    /// DPPs whose config stays the same.
    pub unchanged: usize,
    /// DPPs without a result.
    pub failed: usize,
}

/// A DPP: its zone and its name there.
#[derive(Serialize)]
pub struct DpName<'a> {
    /// The zone.
    pub zone: &'a str,
    /// The DPP's name in its zone.
    pub name: &'a str,
}

/// One streamed line per DPP result: `{kind: "dataplane", zone, name, status, operations,
/// patch?, error?}`.
#[derive(Serialize)]
pub struct DpLine<'a> {
    /// `dataplane`.
    pub kind: &'static str,
    /// The zone.
    pub zone: &'a str,
    /// The DPP's name in its zone.
    pub name: &'a str,
    /// `changed`, `unchanged` or `failed`.
    pub status: &'static str,
    /// Operations in its patch.
    pub operations: usize,
    /// Its RFC 6902 patch (`format=full`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub patch: Option<Vec<&'a RawValue>>,
    /// Why it has no result.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<&'a str>,
}

/// One operation group of the result: the operation, how many DPPs hold it, and which.
#[derive(Serialize)]
pub struct ChangeOut<'a> {
    /// The RFC 6902 operation.
    pub operation: &'a RawValue,
    /// DPPs whose patch holds it.
    pub count: usize,
    /// Those DPPs (a sample in a `summary`).
    pub dataplanes: Vec<DpName<'a>>,
    /// What explains it (a migration plan's diff only; `None` in `_shadow-diff` answers).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub causes: Option<Vec<Cause>>,
}

/// A conversion note that explains a change (a migration plan's `causes`): `{policy, kind,
/// field, message}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Cause {
    /// `<Type>/<name>` of the old policy whose conversion the note is about.
    pub policy: String,
    /// What kind of difference.
    pub kind: umbra_core::convert::NoteKind,
    /// The old policy's field.
    pub field: String,
    /// What differs and why, for a person.
    pub message: String,
}

/// A DPP without a result, and why.
#[derive(Serialize)]
pub struct FailureOut<'a> {
    /// The zone.
    pub zone: &'a str,
    /// The DPP's name in its zone.
    pub name: &'a str,
    /// Why.
    pub error: &'a str,
}

/// A changed DPP's whole patch (`format=full`).
#[derive(Serialize)]
pub struct PatchOut<'a> {
    /// The zone.
    pub zone: &'a str,
    /// The DPP's name in its zone.
    pub name: &'a str,
    /// Its RFC 6902 patch.
    pub patch: Vec<&'a RawValue>,
}

/// A shadow policy the diff cannot show (Umbra does not generate its effect yet), or a
/// Dataplane field Umbra does not act on.
#[derive(Serialize)]
pub struct NotGeneratedOut<'a> {
    /// Policy type.
    #[serde(rename = "type")]
    pub type_name: &'a str,
    /// Name (empty for a Dataplane field).
    pub name: &'a str,
    /// The Dataplane field not acted on, list indexes as `[*]` (type `Dataplane` only).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<&'a str>,
    /// Why.
    pub reason: &'a str,
    /// DPPs it selects (for a Dataplane field: the DPPs whose Dataplane sets it).
    pub dataplanes: usize,
}

/// The result document.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Report<'a> {
    /// `result`.
    pub kind: &'static str,
    /// The mesh.
    pub mesh: &'a str,
    /// `<Type>/<name>` when one policy was promoted.
    pub policy: Option<String>,
    /// The shadow policies going live.
    pub shadow_policies: &'a [String],
    /// Shadow policies selecting DPPs whose effect is not generated, and Dataplane fields not
    /// acted on (not in `changes`).
    pub not_generated: Vec<NotGeneratedOut<'a>>,
    /// `summary` or `full`.
    pub format: &'static str,
    /// A zone did not answer in full.
    pub partial: bool,
    /// Fleet-wide totals.
    pub totals: Totals,
    /// Per-zone tallies.
    pub zones: &'a [ZoneTally],
    /// Operation groups, largest first.
    pub changes: Vec<ChangeOut<'a>>,
    /// DPPs without a result.
    pub failures: Vec<FailureOut<'a>>,
    /// Each changed DPP's patch (`format=full`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dataplanes: Option<Vec<PatchOut<'a>>>,
}
