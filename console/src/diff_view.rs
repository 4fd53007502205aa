//! An RFC 6902 diff of a DPP's xDS config laid out per xDS resource, old and new side by side
//! (pure: no IO, only the clock for its time budget; used by [`crate::pages::dataplane`]).
//! Also [`short_type`], the short name of an xDS type URL the pages show.
//!
//! The inspect API (`GET /meshes/{mesh}/dataplanes/{name}/_config?shadow=true&include=diff`)
//! answers the Shadow config document (`{typeUrl: {resourceName: resource}}`) and the RFC 6902
//! patch from the Live document to it. Each operation's path names its resource in its first
//! two segments (`/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend/...`, JSON
//! pointer escaped: `~1` is `/`, `~0` is `~`); a path of two segments adds or removes a whole
//! resource. [`per_resource`] groups the operations by resource and, for each, diffs the
//! pretty-printed JSON of the Live and Shadow resource line by line ([`similar`]), pairing a
//! deleted line with an inserted line of the same hunk, and collapsing long unchanged runs.
//!
//! The work is bounded ([`Budget::DEFAULT`]): at most [`MAX_RESOURCES`] resources,
//! [`MAX_ROWS`] rows and [`MAX_OPERATIONS`] operations per resource, [`MAX_TOTAL_ROWS`] rows
//! and [`TIME_BUDGET`] of line diffing across all resources; what is left out is counted
//! ([`ConfigDiff::resources_omitted`], [`ResourceDiff::rows_omitted`]) and the budget that
//! stopped the layout named ([`ConfigDiff::exhausted`]).

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use similar::{DiffOp, TextDiff};

/// Most resources laid out; the rest are counted in [`ConfigDiff::resources_omitted`].
pub const MAX_RESOURCES: usize = 200;
/// Most rows laid out per resource; the rest are counted in [`ResourceDiff::rows_omitted`].
pub const MAX_ROWS: usize = 5_000;
/// Most rows laid out across all resources: the resource that reaches it is cut (its rest
/// counted in [`ResourceDiff::rows_omitted`]), the resources after it are counted in
/// [`ConfigDiff::resources_omitted`].
pub const MAX_TOTAL_ROWS: usize = 20_000;
/// Time the line diffs of all resources may take together; the resources not started by then
/// are counted in [`ConfigDiff::resources_omitted`].
pub const TIME_BUDGET: Duration = Duration::from_secs(2);
/// Most operations listed per resource; the rest are counted in
/// [`ResourceDiff::operations_omitted`].
pub const MAX_OPERATIONS: usize = 1_000;
/// Unchanged lines kept on each side of a change; longer unchanged runs become a gap row.
pub const CONTEXT: usize = 3;
/// Longest operation value shown (characters of compact JSON), then `…`.
pub const MAX_VALUE_CHARS: usize = 300;
/// Most time one resource's line diff may take before it settles for a coarser (still
/// correct) answer; less when less of the [`Budget::time`] is left.
pub const LINE_DIFF_TIMEOUT: Duration = Duration::from_millis(500);
/// Least time a resource's line diff is given, however little of the [`Budget::time`] is left
/// when it starts.
pub const MIN_LINE_DIFF_TIMEOUT: Duration = Duration::from_millis(20);

/// The bounds of one layout ([`per_resource_within`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    /// Most resources laid out.
    pub resources: usize,
    /// Most rows laid out per resource.
    pub rows: usize,
    /// Most rows laid out across all resources.
    pub total_rows: usize,
    /// Time the line diffs of all resources may take together.
    pub time: Duration,
}

impl Budget {
    /// The bounds of [`per_resource`]: [`MAX_RESOURCES`], [`MAX_ROWS`], [`MAX_TOTAL_ROWS`],
    /// [`TIME_BUDGET`].
    pub const DEFAULT: Budget = Budget {
        resources: MAX_RESOURCES,
        rows: MAX_ROWS,
        total_rows: MAX_TOTAL_ROWS,
        time: TIME_BUDGET,
    };
}

impl Default for Budget {
    fn default() -> Self {
        Budget::DEFAULT
    }
}

/// Which bound of the [`Budget`] left resources out of a layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Exhausted {
    /// [`Budget::resources`]: too many resources.
    Resources,
    /// [`Budget::total_rows`]: too many rows across the resources.
    Rows,
    /// [`Budget::time`]: the line diffs took too long.
    Time,
}

/// How a resource differs between Live and Shadow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// In both, with different content.
    Changed,
    /// In Shadow only.
    Added,
    /// In Live only.
    Removed,
}

/// One RFC 6902 operation, as shown under its resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Operation {
    /// `add`, `remove`, `replace` (or `move`, `copy`, `test`).
    pub op: String,
    /// JSON pointer inside the resource (still escaped); `""` is the whole resource.
    pub path: String,
    /// The operation's value as compact JSON, cut at [`MAX_VALUE_CHARS`] characters; absent
    /// when the operation has none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub value: Option<String>,
    /// `from` of a `move` or `copy` (the whole document's pointer, as given).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub from: Option<String>,
}

/// One row of the side-by-side table (line numbers are 1-based).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Row {
    /// `skipped` unchanged lines, collapsed.
    Gap {
        /// How many.
        skipped: usize,
    },
    /// A line in both.
    Same {
        /// Line number in the old (Live) text.
        old_no: usize,
        /// The old line.
        old: String,
        /// Line number in the new (Shadow) text.
        new_no: usize,
        /// The new line.
        new: String,
    },
    /// A deleted line paired with an inserted line of the same hunk.
    Changed {
        /// Line number in the old (Live) text.
        old_no: usize,
        /// The old line.
        old: String,
        /// Line number in the new (Shadow) text.
        new_no: usize,
        /// The new line.
        new: String,
    },
    /// An inserted line with no deleted line to pair (old side empty).
    Added {
        /// Line number in the new (Shadow) text.
        new_no: usize,
        /// The new line.
        new: String,
    },
    /// A deleted line with no inserted line to pair (new side empty).
    Removed {
        /// Line number in the old (Live) text.
        old_no: usize,
        /// The old line.
        old: String,
    },
}

/// One xDS resource touched by the diff.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ResourceDiff {
    /// Its type URL (`type.googleapis.com/envoy.config.cluster.v3.Cluster`).
    pub type_url: String,
    /// The type's last segment (`Cluster`).
    pub short_type: String,
    /// The resource's name (unescaped).
    pub name: String,
    /// Changed, added or removed.
    pub kind: Kind,
    /// The diff's operations on this resource, in the diff's order.
    pub operations: Vec<Operation>,
    /// Operations beyond [`MAX_OPERATIONS`], not listed.
    pub operations_omitted: usize,
    /// The side-by-side line diff of the Live and Shadow resource's pretty JSON.
    pub rows: Vec<Row>,
    /// Rows beyond [`MAX_ROWS`] (or beyond what was left of [`MAX_TOTAL_ROWS`]), not laid
    /// out.
    pub rows_omitted: usize,
}

/// The diff laid out per resource.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ConfigDiff {
    /// The touched resources, ordered by type URL then name, as many as the [`Budget`] allows
    /// (at most [`MAX_RESOURCES`]).
    pub resources: Vec<ResourceDiff>,
    /// Touched resources beyond the [`Budget`], not laid out.
    pub resources_omitted: usize,
    /// The bound that first left a resource out (`None` when every one is laid out).
    pub exhausted: Option<Exhausted>,
    /// Every touched resource (laid out or not).
    pub total: usize,
    /// Touched resources by kind (laid out or not).
    pub changed: usize,
    /// See [`ConfigDiff::changed`].
    pub added: usize,
    /// See [`ConfigDiff::changed`].
    pub removed: usize,
    /// Operations in the diff.
    pub operations: usize,
    /// Operations whose path is not a JSON pointer or names no resource that differs.
    pub unplaced: usize,
}

/// The short name of an xDS type URL: its last segment after `/` and `.` (`Cluster` for
/// `type.googleapis.com/envoy.config.cluster.v3.Cluster`).
pub fn short_type(type_url: &str) -> &str {
    type_url.rsplit(['.', '/']).next().unwrap_or(type_url)
}

/// A JSON pointer segment unescaped (RFC 6901: `~1` is `/`, then `~0` is `~`).
pub fn unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// The segments of JSON pointer `path` (still escaped), or `None` when it is not a pointer.
fn segments(path: &str) -> Option<Vec<&str>> {
    match path.strip_prefix('/') {
        Some(rest) => Some(rest.split('/').collect()),
        None if path.is_empty() => Some(Vec::new()),
        None => None,
    }
}

/// Resource `name` of type `type_url` in xDS document `doc`.
fn resource<'a>(doc: &'a Value, type_url: &str, name: &str) -> Option<&'a Value> {
    doc.get(type_url)?.get(name)
}

/// `v` as compact JSON, cut at [`MAX_VALUE_CHARS`] characters.
fn show(v: &Value) -> String {
    let s = serde_json::to_string(v).unwrap_or_default();
    match s.char_indices().nth(MAX_VALUE_CHARS) {
        Some((cut, _)) => format!("{}…", &s[..cut]),
        None => s,
    }
}

/// The keys of the objects `a` and `b`, sorted, without repeats.
fn keys(a: Option<&Value>, b: Option<&Value>) -> BTreeSet<String> {
    [a, b]
        .into_iter()
        .flatten()
        .filter_map(Value::as_object)
        .flat_map(|m| m.keys().cloned())
        .collect()
}

/// The resources under `prefix` (no segment: the whole document; one: a type) that differ
/// between `live` and `shadow`, with the part of `value` (an operation's) that names each.
fn differing_under(
    live: &Value,
    shadow: &Value,
    prefix: &[&str],
    value: Option<&Value>,
) -> Vec<(String, String, Option<Value>)> {
    let types: Vec<String> = match prefix.first() {
        Some(t) => vec![unescape(t)],
        None => keys(Some(live), Some(shadow)).into_iter().collect(),
    };
    let mut out = Vec::new();
    for t in types {
        let (l, s) = (live.get(&t), shadow.get(&t));
        for n in keys(l, s) {
            if resource(live, &t, &n) == resource(shadow, &t, &n) {
                continue;
            }
            let v = match prefix.first() {
                Some(_) => value.and_then(|v| v.get(&n)),
                None => value.and_then(|v| v.get(&t)).and_then(|v| v.get(&n)),
            };
            out.push((t.clone(), n, v.cloned()));
        }
    }
    out
}

/// Lay out `diff` (an RFC 6902 patch from `live` to `shadow`, both xDS documents
/// `{typeUrl: {name: resource}}`) per resource, within [`Budget::DEFAULT`]. Only the resources
/// the operations' paths name are shown; an operation on a whole type (or the whole document)
/// stands for each resource under it that differs.
pub fn per_resource(live: &Value, shadow: &Value, diff: &Value) -> ConfigDiff {
    per_resource_within(live, shadow, diff, Budget::DEFAULT)
}

/// [`per_resource`] within `budget`: resources are laid out in order while the budget lasts
/// (the one reaching [`Budget::total_rows`] is cut); the rest are counted, not laid out. Each
/// resource's line diff is given what is left of [`Budget::time`], at most
/// [`LINE_DIFF_TIMEOUT`] and at least [`MIN_LINE_DIFF_TIMEOUT`].
pub fn per_resource_within(
    live: &Value,
    shadow: &Value,
    diff: &Value,
    budget: Budget,
) -> ConfigDiff {
    let started = Instant::now();
    let ops = diff.as_array().map(Vec::as_slice).unwrap_or(&[]);
    let mut touched: BTreeMap<(String, String), Vec<Operation>> = BTreeMap::new();
    let mut unplaced = 0;
    for op in ops {
        let name = op
            .get("op")
            .and_then(Value::as_str)
            .unwrap_or("?")
            .to_owned();
        let from = op.get("from").and_then(Value::as_str).map(str::to_owned);
        let path = op.get("path").and_then(Value::as_str);
        let Some(segs) = path.and_then(segments) else {
            unplaced += 1;
            continue;
        };
        if let [t, n, rest @ ..] = segs.as_slice() {
            let path = rest.iter().map(|s| format!("/{s}")).collect();
            touched
                .entry((unescape(t), unescape(n)))
                .or_default()
                .push(Operation {
                    op: name,
                    path,
                    value: op.get("value").map(show),
                    from,
                });
            continue;
        }
        let under = differing_under(live, shadow, &segs, op.get("value"));
        if under.is_empty() {
            unplaced += 1;
        }
        for (t, n, v) in under {
            touched.entry((t, n)).or_default().push(Operation {
                op: name.clone(),
                path: String::new(),
                value: v.as_ref().map(show),
                from: from.clone(),
            });
        }
    }
    let mut out = ConfigDiff {
        total: touched.len(),
        operations: ops.len(),
        unplaced,
        ..ConfigDiff::default()
    };
    let mut rows_used = 0;
    for (i, ((type_url, name), mut operations)) in touched.into_iter().enumerate() {
        let old = resource(live, &type_url, &name);
        let new = resource(shadow, &type_url, &name);
        let kind = match (old, new) {
            (None, Some(_)) => Kind::Added,
            (Some(_), None) => Kind::Removed,
            _ => Kind::Changed,
        };
        match kind {
            Kind::Changed => out.changed += 1,
            Kind::Added => out.added += 1,
            Kind::Removed => out.removed += 1,
        }
        let time_left = budget.time.saturating_sub(started.elapsed());
        let rows_left = budget.total_rows.saturating_sub(rows_used);
        let stop = if out.exhausted.is_some() {
            out.exhausted
        } else if i >= budget.resources {
            Some(Exhausted::Resources)
        } else if time_left.is_zero() {
            Some(Exhausted::Time)
        } else if rows_left == 0 {
            Some(Exhausted::Rows)
        } else {
            None
        };
        if stop.is_some() {
            out.exhausted = stop;
            out.resources_omitted += 1;
            continue;
        }
        let pretty = |v: Option<&Value>| {
            v.and_then(|v| serde_json::to_string_pretty(v).ok())
                .unwrap_or_default()
        };
        let timeout = time_left.min(LINE_DIFF_TIMEOUT).max(MIN_LINE_DIFF_TIMEOUT);
        let (rows, rows_omitted) = line_rows_within(
            &pretty(old),
            &pretty(new),
            budget.rows.min(rows_left),
            timeout,
        );
        rows_used += rows.len();
        let operations_omitted = operations.len().saturating_sub(MAX_OPERATIONS);
        operations.truncate(MAX_OPERATIONS);
        out.resources.push(ResourceDiff {
            short_type: short_type(&type_url).to_owned(),
            type_url,
            name,
            kind,
            operations,
            operations_omitted,
            rows,
            rows_omitted,
        });
    }
    out
}

/// A run of the line diff: unchanged lines, or one hunk of deleted and inserted lines.
enum Run {
    Same {
        old: usize,
        new: usize,
        len: usize,
    },
    Change {
        old: Range<usize>,
        new: Range<usize>,
    },
}

/// Rows kept up to a limit, the rest counted.
struct Rows {
    rows: Vec<Row>,
    max: usize,
    omitted: usize,
}

impl Rows {
    fn push(&mut self, row: impl FnOnce() -> Row) {
        if self.rows.len() < self.max {
            self.rows.push(row());
        } else {
            self.omitted += 1;
        }
    }
}

/// The side-by-side rows of the line diff of `old` and `new` (at most `max`; the number left
/// out second): unchanged runs keep [`CONTEXT`] lines next to a change and collapse the rest
/// into a gap row; in a hunk the i-th deleted line pairs with the i-th inserted one. The diff
/// may take [`LINE_DIFF_TIMEOUT`].
pub fn line_rows(old: &str, new: &str, max: usize) -> (Vec<Row>, usize) {
    line_rows_within(old, new, max, LINE_DIFF_TIMEOUT)
}

/// [`line_rows`], the diff taking at most `timeout` before it settles for a coarser (still
/// correct) answer.
pub fn line_rows_within(old: &str, new: &str, max: usize, timeout: Duration) -> (Vec<Row>, usize) {
    let diff = TextDiff::configure().timeout(timeout).diff_lines(old, new);
    let (old_lines, new_lines) = (diff.old_slices(), diff.new_slices());
    let line = |lines: &[&str], i: usize| -> String {
        lines
            .get(i)
            .map(|l| l.trim_end_matches(['\n', '\r']).to_owned())
            .unwrap_or_default()
    };
    let mut runs: Vec<Run> = Vec::new();
    for op in diff.ops() {
        if let DiffOp::Equal {
            old_index,
            new_index,
            len,
        } = *op
        {
            runs.push(Run::Same {
                old: old_index,
                new: new_index,
                len,
            });
            continue;
        }
        let (o, n) = (op.old_range(), op.new_range());
        match runs.last_mut() {
            Some(Run::Change { old, new }) => {
                old.end = old.end.max(o.end);
                new.end = new.end.max(n.end);
            }
            _ => runs.push(Run::Change { old: o, new: n }),
        }
    }
    let mut out = Rows {
        rows: Vec::new(),
        max,
        omitted: 0,
    };
    let last = runs.len().saturating_sub(1);
    for (i, run) in runs.iter().enumerate() {
        match run {
            Run::Same { old, new, len } => {
                let head = if i == 0 { 0 } else { CONTEXT };
                let tail = if i == last { 0 } else { CONTEXT };
                let same = |k: usize| Row::Same {
                    old_no: old + k + 1,
                    old: line(old_lines, old + k),
                    new_no: new + k + 1,
                    new: line(new_lines, new + k),
                };
                if *len <= head + tail {
                    (0..*len).for_each(|k| out.push(|| same(k)));
                } else {
                    (0..head).for_each(|k| out.push(|| same(k)));
                    out.push(|| Row::Gap {
                        skipped: len - head - tail,
                    });
                    (len - tail..*len).for_each(|k| out.push(|| same(k)));
                }
            }
            Run::Change { old, new } => {
                for k in 0..old.len().max(new.len()) {
                    let (o, n) = (old.start + k, new.start + k);
                    out.push(|| match (o < old.end, n < new.end) {
                        (true, true) => Row::Changed {
                            old_no: o + 1,
                            old: line(old_lines, o),
                            new_no: n + 1,
                            new: line(new_lines, n),
                        },
                        (true, false) => Row::Removed {
                            old_no: o + 1,
                            old: line(old_lines, o),
                        },
                        _ => Row::Added {
                            new_no: n + 1,
                            new: line(new_lines, n),
                        },
                    });
                }
            }
        }
    }
    (out.rows, out.omitted)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const CLUSTER: &str = "type.googleapis.com/envoy.config.cluster.v3.Cluster";
    const LISTENER: &str = "type.googleapis.com/envoy.config.listener.v3.Listener";
    const CLUSTER_ESC: &str = "type.googleapis.com~1envoy.config.cluster.v3.Cluster";

    fn kinds(rows: &[Row]) -> Vec<&'static str> {
        rows.iter()
            .map(|r| match r {
                Row::Gap { .. } => "gap",
                Row::Same { .. } => "same",
                Row::Changed { .. } => "changed",
                Row::Added { .. } => "added",
                Row::Removed { .. } => "removed",
            })
            .collect()
    }

    fn numbered(lines: impl IntoIterator<Item = usize>) -> String {
        lines.into_iter().map(|i| format!("line {i}\n")).collect()
    }

    #[test]
    fn a_changed_resource_pairs_old_and_new_lines() {
        let live = json!({CLUSTER: {"backend": {"name": "backend", "connectTimeout": "5s"}}});
        let shadow = json!({CLUSTER: {"backend": {"name": "backend", "connectTimeout": "7s"}}});
        let diff = json!([{"op": "replace", "path": format!("/{CLUSTER_ESC}/backend/connectTimeout"), "value": "7s"}]);
        let d = per_resource(&live, &shadow, &diff);
        assert_eq!((d.total, d.changed, d.added, d.removed), (1, 1, 0, 0));
        let r = &d.resources[0];
        assert_eq!(r.type_url, CLUSTER);
        assert_eq!(r.short_type, "Cluster");
        assert_eq!(r.name, "backend");
        assert_eq!(r.kind, Kind::Changed);
        assert_eq!(
            r.operations,
            vec![Operation {
                op: "replace".into(),
                path: "/connectTimeout".into(),
                value: Some("\"7s\"".into()),
                from: None
            }]
        );
        assert_eq!(kinds(&r.rows), ["same", "same", "changed", "same"]);
        assert_eq!(
            r.rows[2],
            Row::Changed {
                old_no: 3,
                old: "  \"connectTimeout\": \"5s\"".into(),
                new_no: 3,
                new: "  \"connectTimeout\": \"7s\"".into()
            }
        );
        assert_eq!(r.rows_omitted, 0);
        let row = serde_json::to_value(&r.rows[2]).unwrap();
        assert_eq!(row["kind"], "changed");
        assert_eq!(row["old_no"], 3);
    }

    #[test]
    fn an_added_resource_has_only_new_lines() {
        let live = json!({CLUSTER: {}});
        let shadow = json!({CLUSTER: {"new": {"name": "new", "type": "EDS"}}});
        let diff = json!([{"op": "add", "path": format!("/{CLUSTER_ESC}/new"), "value": {"name": "new", "type": "EDS"}}]);
        let d = per_resource(&live, &shadow, &diff);
        let r = &d.resources[0];
        assert_eq!((r.kind, d.added), (Kind::Added, 1));
        assert_eq!(r.operations[0].path, "");
        assert_eq!(kinds(&r.rows), ["added"; 4]);
        assert_eq!(
            r.rows[0],
            Row::Added {
                new_no: 1,
                new: "{".into()
            }
        );
        let row = serde_json::to_value(&r.rows[0]).unwrap();
        assert!(row.get("old").is_none() && row.get("old_no").is_none());
    }

    #[test]
    fn a_removed_resource_has_only_old_lines() {
        let live = json!({LISTENER: {"inbound:1.2.3.4:80": {"name": "inbound:1.2.3.4:80"}}});
        let shadow = json!({});
        let diff = json!([{"op": "remove", "path": "/type.googleapis.com~1envoy.config.listener.v3.Listener/inbound:1.2.3.4:80"}]);
        let d = per_resource(&live, &shadow, &diff);
        let r = &d.resources[0];
        assert_eq!(
            (r.kind, d.removed, r.short_type.as_str()),
            (Kind::Removed, 1, "Listener")
        );
        assert_eq!(r.operations[0].value, None);
        assert_eq!(kinds(&r.rows), ["removed"; 3]);
        assert_eq!(
            r.rows[1],
            Row::Removed {
                old_no: 2,
                old: "  \"name\": \"inbound:1.2.3.4:80\"".into()
            }
        );
    }

    #[test]
    fn long_unchanged_runs_collapse_to_gaps_with_three_lines_of_context() {
        let old = numbered(1..=30);
        let new = numbered(1..=30)
            .replace("line 10\n", "LINE 10\n")
            .replace("line 17\n", "LINE 17\n");
        let (rows, omitted) = line_rows(&old, &new, MAX_ROWS);
        assert_eq!(omitted, 0);
        // 9 before (6 hidden, 3 shown), the change, 6 between (all shown), the change,
        // 13 after (3 shown, 10 hidden).
        let mut want = vec!["gap", "same", "same", "same", "changed"];
        want.extend(["same"; 6]);
        want.extend(["changed", "same", "same", "same", "gap"]);
        assert_eq!(kinds(&rows), want);
        assert_eq!(rows[0], Row::Gap { skipped: 6 });
        assert_eq!(rows[want.len() - 1], Row::Gap { skipped: 10 });
        assert_eq!(
            rows[1],
            Row::Same {
                old_no: 7,
                old: "line 7".into(),
                new_no: 7,
                new: "line 7".into()
            }
        );
        // Seven unchanged lines between two changes: one is hidden.
        let new = numbered(1..=30)
            .replace("line 10\n", "X\n")
            .replace("line 18\n", "Y\n");
        let (rows, _) = line_rows(&old, &new, MAX_ROWS);
        assert!(rows.contains(&Row::Gap { skipped: 1 }), "{rows:?}");
        // No change at all: one gap.
        assert_eq!(
            line_rows(&old, &old, MAX_ROWS).0,
            vec![Row::Gap { skipped: 30 }]
        );
    }

    #[test]
    fn a_hunk_pairs_deletions_with_insertions_and_leaves_the_rest_unpaired() {
        let (rows, _) = line_rows("a\nb\nc\nz\n", "a\nB\nz\n", MAX_ROWS);
        assert_eq!(kinds(&rows), ["same", "changed", "removed", "same"]);
        assert_eq!(
            rows[2],
            Row::Removed {
                old_no: 3,
                old: "c".into()
            }
        );
        let (rows, _) = line_rows("a\nz\n", "a\nX\nY\nz\n", MAX_ROWS);
        assert_eq!(kinds(&rows), ["same", "added", "added", "same"]);
        assert_eq!(
            rows[2],
            Row::Added {
                new_no: 3,
                new: "Y".into()
            }
        );
    }

    #[test]
    fn pointer_segments_are_unescaped_in_order() {
        assert_eq!(unescape("a~1b~0c"), "a/b~c");
        // `~01` is `~1` (a tilde then a one), not `/`.
        assert_eq!(unescape("~01"), "~1");
        assert_eq!(short_type(CLUSTER), "Cluster");
        let name = "outbound/x~y";
        let live = json!({CLUSTER: {name: {"a": 1}}});
        let shadow = json!({CLUSTER: {name: {"a": 2}}});
        let diff = json!([{"op": "replace", "path": format!("/{CLUSTER_ESC}/outbound~1x~0y/a"), "value": 2}]);
        let d = per_resource(&live, &shadow, &diff);
        assert_eq!(d.resources[0].name, name);
        assert_eq!(d.resources[0].kind, Kind::Changed);
        assert_eq!(kinds(&d.resources[0].rows), ["same", "changed", "same"]);
    }

    #[test]
    fn resources_are_ordered_by_type_then_name() {
        let live = json!({LISTENER: {"l": {"x": 1}}, CLUSTER: {"b": {"x": 1}, "a": {"x": 1}}});
        let shadow = json!({LISTENER: {"l": {"x": 2}}, CLUSTER: {"b": {"x": 2}, "a": {"x": 2}}});
        let diff = json!([
            {"op": "replace", "path": "/type.googleapis.com~1envoy.config.listener.v3.Listener/l/x", "value": 2},
            {"op": "replace", "path": format!("/{CLUSTER_ESC}/b/x"), "value": 2},
            {"op": "replace", "path": format!("/{CLUSTER_ESC}/a/x"), "value": 2},
        ]);
        let d = per_resource(&live, &shadow, &diff);
        let order: Vec<_> = d
            .resources
            .iter()
            .map(|r| format!("{}/{}", r.short_type, r.name))
            .collect();
        assert_eq!(order, ["Cluster/a", "Cluster/b", "Listener/l"]);
    }

    #[test]
    fn an_operation_on_a_whole_type_stands_for_each_differing_resource() {
        let live = json!({CLUSTER: {"same": {"x": 1}}});
        let shadow =
            json!({CLUSTER: {"same": {"x": 1}}, LISTENER: {"l1": {"p": 1}, "l2": {"p": 2}}});
        let diff = json!([{"op": "add", "path": "/type.googleapis.com~1envoy.config.listener.v3.Listener", "value": {"l1": {"p": 1}, "l2": {"p": 2}}}]);
        let d = per_resource(&live, &shadow, &diff);
        let names: Vec<_> = d
            .resources
            .iter()
            .map(|r| (r.name.as_str(), r.kind))
            .collect();
        assert_eq!(names, [("l1", Kind::Added), ("l2", Kind::Added)]);
        assert_eq!(
            d.resources[1].operations[0].value.as_deref(),
            Some("{\"p\":2}")
        );
        assert_eq!(d.unplaced, 0);
        let bad = per_resource(&live, &shadow, &json!([{"op": "add", "path": "nope"}]));
        assert_eq!((bad.unplaced, bad.total), (1, 0));
    }

    #[test]
    fn an_empty_diff_touches_nothing() {
        let doc = json!({CLUSTER: {"a": {"x": 1}}});
        let d = per_resource(&doc, &doc, &json!([]));
        assert_eq!(d, ConfigDiff::default());
    }

    #[test]
    fn the_work_is_bounded_and_what_is_left_out_is_counted() {
        let mut live = serde_json::Map::new();
        let mut shadow = serde_json::Map::new();
        let mut ops = Vec::new();
        for i in 0..MAX_RESOURCES + 5 {
            let n = format!("c{i:04}");
            live.insert(n.clone(), json!({"x": 1}));
            shadow.insert(n.clone(), json!({"x": 2}));
            ops.push(json!({"op": "replace", "path": format!("/{CLUSTER_ESC}/{n}/x"), "value": 2}));
        }
        let d = per_resource(
            &json!({CLUSTER: live}),
            &json!({CLUSTER: shadow}),
            &Value::Array(ops),
        );
        assert_eq!(d.resources.len(), MAX_RESOURCES);
        assert_eq!(
            (d.total, d.resources_omitted, d.changed),
            (MAX_RESOURCES + 5, 5, MAX_RESOURCES + 5)
        );
        assert_eq!(d.exhausted, Some(Exhausted::Resources));
        assert_eq!(
            d.resources[MAX_RESOURCES - 1].name,
            format!("c{:04}", MAX_RESOURCES - 1)
        );

        let (rows, omitted) = line_rows("", &numbered(1..=MAX_ROWS + 7), MAX_ROWS);
        assert_eq!((rows.len(), omitted), (MAX_ROWS, 7));

        let long = json!({"s": "x".repeat(1000)});
        let shown = show(&long);
        assert_eq!(shown.chars().count(), MAX_VALUE_CHARS + 1);
        assert!(shown.ends_with('…'));
    }

    /// `n` changed resources `c0000`, `c0001`, ... of `lines` changed lines each (their pretty
    /// JSON: `{`, `"x": [`, the `lines` values, `]`, `}`), and the diff naming them.
    fn changed_resources(n: usize, lines: usize) -> (Value, Value, Value) {
        let (mut live, mut shadow, mut ops) =
            (serde_json::Map::new(), serde_json::Map::new(), Vec::new());
        for i in 0..n {
            let name = format!("c{i:04}");
            live.insert(name.clone(), json!({"x": (0..lines).collect::<Vec<_>>()}));
            shadow.insert(
                name.clone(),
                json!({"x": (0..lines).map(|k| k + 1_000).collect::<Vec<_>>()}),
            );
            ops.push(
                json!({"op": "replace", "path": format!("/{CLUSTER_ESC}/{name}/x"), "value": []}),
            );
        }
        (
            json!({CLUSTER: live}),
            json!({CLUSTER: shadow}),
            Value::Array(ops),
        )
    }

    #[test]
    fn the_total_row_budget_cuts_one_resource_and_omits_the_rest() {
        // 4 unchanged rows (`{`, `"x": [`, `]`, `}`) and 6 changed ones per resource: 10.
        let (live, shadow, diff) = changed_resources(5, 6);
        let budget = Budget {
            total_rows: 25,
            ..Budget::DEFAULT
        };
        let d = per_resource_within(&live, &shadow, &diff, budget);
        let laid: Vec<_> = d
            .resources
            .iter()
            .map(|r| (r.rows.len(), r.rows_omitted))
            .collect();
        assert_eq!(laid, [(10, 0), (10, 0), (5, 5)]);
        assert_eq!(
            (d.total, d.changed, d.resources_omitted, d.exhausted),
            (5, 5, 2, Some(Exhausted::Rows))
        );
        // Exactly at the budget: nothing is cut, the rest is omitted.
        let d = per_resource_within(
            &live,
            &shadow,
            &diff,
            Budget {
                total_rows: 20,
                ..budget
            },
        );
        assert_eq!((d.resources.len(), d.resources_omitted), (2, 3));
        assert_eq!(d.resources[1].rows_omitted, 0);
        // Within every budget: nothing is left out.
        let d = per_resource(&live, &shadow, &diff);
        assert_eq!(
            (d.resources.len(), d.resources_omitted, d.exhausted),
            (5, 0, None)
        );
        assert_eq!(serde_json::to_value(&d).unwrap()["exhausted"], Value::Null);
    }

    #[test]
    fn the_time_budget_omits_the_resources_not_started_in_time() {
        let (live, shadow, diff) = changed_resources(3, 2);
        let d = per_resource_within(
            &live,
            &shadow,
            &diff,
            Budget {
                time: Duration::ZERO,
                ..Budget::DEFAULT
            },
        );
        assert!(d.resources.is_empty());
        assert_eq!(
            (d.total, d.changed, d.resources_omitted, d.exhausted),
            (3, 3, 3, Some(Exhausted::Time))
        );
        assert_eq!(serde_json::to_value(&d).unwrap()["exhausted"], "time");
        // The first bound reached is the one named.
        let d = per_resource_within(
            &live,
            &shadow,
            &diff,
            Budget {
                resources: 1,
                ..Budget::DEFAULT
            },
        );
        assert_eq!(
            (d.resources.len(), d.resources_omitted, d.exhausted),
            (1, 2, Some(Exhausted::Resources))
        );
    }
}
