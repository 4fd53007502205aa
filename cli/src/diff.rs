//! Human-readable RFC 6902 patches, in the spirit of `jd`: operations grouped by xDS resource
//! (`/<type URL>/<resource name>` becomes one `@ Cluster backend` header), each path relative to
//! its resource, `-` the value before (when the live document is known) and `+` the value after,
//! coloured red and green on a terminal.

use std::fmt::Write as _;

use serde_json::Value;

/// Colours on or off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    /// Emit ANSI colours.
    pub color: bool,
}

impl Style {
    /// Colours when stdout is a terminal and `NO_COLOR` is unset.
    pub fn detect() -> Self {
        use std::io::IsTerminal as _;
        Self {
            color: std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none(),
        }
    }

    pub(crate) fn paint(self, code: &str, text: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_owned()
        }
    }
}

/// Undo RFC 6901 escaping of one reference token.
fn unescape(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

/// `(resource header, path inside the resource)` of an operation's path in a config document:
/// the first two tokens name the resource (`type.googleapis.com/envoy.config.cluster.v3.Cluster`,
/// `backend`). Other paths (a `_rules` diff) have no resource header.
pub fn split_path(path: &str) -> (String, String) {
    if !path.starts_with("/type.googleapis.com") {
        return (String::new(), path.to_owned());
    }
    let mut tokens = path.strip_prefix('/').unwrap_or(path).splitn(3, '/');
    let ty = unescape(tokens.next().unwrap_or_default());
    let short = ty.rsplit('.').next().unwrap_or(&ty).to_owned();
    match tokens.next() {
        None => (short, "/".to_owned()),
        Some(name) => {
            let rest = tokens
                .next()
                .map_or_else(|| "/".to_owned(), |r| format!("/{r}"));
            (format!("{short} {}", unescape(name)), rest)
        }
    }
}

fn value_lines(v: &Value) -> Vec<String> {
    match v {
        Value::Object(_) | Value::Array(_) => serde_json::to_string_pretty(v)
            .unwrap_or_default()
            .lines()
            .map(str::to_owned)
            .collect(),
        other => vec![other.to_string()],
    }
}

/// Render `patch` (a JSON array of RFC 6902 operations). With `before`, the document the patch
/// applies to, replaced and removed values are shown too.
pub fn render_patch(patch: &Value, before: Option<&Value>, style: Style) -> String {
    let mut out = String::new();
    let Some(ops) = patch.as_array() else {
        return "(not a JSON Patch)\n".to_owned();
    };
    if ops.is_empty() {
        return "no changes\n".to_owned();
    }
    let mut current = String::new();
    for op in ops {
        let path = op["path"].as_str().unwrap_or_default();
        let (resource, inner) = split_path(path);
        if resource != current {
            if !resource.is_empty() {
                let _ = writeln!(out, "{}", style.paint("1;36", &format!("@ {resource}")));
            }
            current = resource;
        }
        let kind = op["op"].as_str().unwrap_or_default();
        let _ = writeln!(out, "  {kind} {inner}");
        let old = before.and_then(|b| b.pointer(path));
        if matches!(kind, "replace" | "remove") {
            if let Some(old) = old {
                for l in value_lines(old) {
                    let _ = writeln!(out, "{}", style.paint("31", &format!("  - {l}")));
                }
            }
        }
        if let Some(new) = op.get("value") {
            for l in value_lines(new) {
                let _ = writeln!(out, "{}", style.paint("32", &format!("  + {l}")));
            }
        }
        if let Some(from) = op.get("from").and_then(Value::as_str) {
            let _ = writeln!(out, "    from {from}");
        }
    }
    out
}

/// Render a fleet-wide `_shadow-diff` result: totals, zones, then each operation group with the
/// DPPs sharing it.
pub fn render_fleet(result: &Value, style: Style) -> String {
    render_fleet_top(result, style, None)
}

/// As [`render_fleet`], showing only the `top` largest operation groups (all with `None`) and
/// saying how many were left out.
pub fn render_fleet_top(result: &Value, style: Style, top: Option<usize>) -> String {
    let mut out = String::new();
    let t = &result["totals"];
    let policies = result["shadowPolicies"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "mesh {}: promoting {}",
        result["mesh"].as_str().unwrap_or_default(),
        if policies.is_empty() {
            "no shadow policy".to_owned()
        } else {
            policies
        }
    );
    let _ = writeln!(
        out,
        "dataplanes: {} considered, {} changed, {} unchanged, {} failed{}",
        t["considered"],
        t["changed"],
        t["unchanged"],
        t["failed"],
        if result["partial"] == true {
            style.paint("33", " (PARTIAL: some zones did not answer)")
        } else {
            String::new()
        }
    );
    for n in result["notGenerated"].as_array().into_iter().flatten() {
        let verb = if n["field"].is_string() {
            "is set on"
        } else {
            "selects"
        };
        let _ = writeln!(
            out,
            "{} {} {verb} {} DPPs but is not in the diff: {}",
            style.paint("33", "not generated:"),
            not_generated_subject(n),
            n["dataplanes"],
            n["reason"].as_str().unwrap_or_default()
        );
    }
    for z in result["zones"].as_array().into_iter().flatten() {
        let status = z["status"].as_str().unwrap_or_default();
        let painted = if status == "ok" {
            style.paint("32", status)
        } else {
            style.paint("31", status)
        };
        let _ = write!(
            out,
            "  zone {}: {painted}, {} changed, {} unchanged, {} failed",
            z["zone"].as_str().unwrap_or_default(),
            z["changed"],
            z["unchanged"],
            z["failed"]
        );
        if let Some(e) = z["error"].as_str() {
            let _ = write!(out, " ({e})");
        }
        out.push('\n');
    }
    let groups = result["changes"].as_array().map_or(&[][..], Vec::as_slice);
    if !groups.is_empty() {
        let _ = writeln!(
            out,
            "\nchanges ({} distinct operations, largest group first):",
            groups.len()
        );
    }
    let shown = top.unwrap_or(usize::MAX).min(groups.len());
    for g in &groups[..shown] {
        let op = &g["operation"];
        let count = g["count"].as_u64().unwrap_or(0);
        let members: Vec<String> = g["dataplanes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|d| {
                format!(
                    "{}/{}",
                    d["zone"].as_str().unwrap_or_default(),
                    d["name"].as_str().unwrap_or_default()
                )
            })
            .collect();
        let more = usize::try_from(count)
            .unwrap_or(0)
            .saturating_sub(members.len());
        let _ = writeln!(
            out,
            "\n{} DPP{}: {}{}",
            count,
            if count == 1 { "" } else { "s" },
            members.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            }
        );
        out.push_str(&render_patch(&Value::Array(vec![op.clone()]), None, style));
    }
    if shown < groups.len() {
        let _ = writeln!(
            out,
            "\n... {} more operations (smaller groups); all of them: --full or -o json",
            groups.len() - shown
        );
    }
    for f in result["failures"].as_array().into_iter().flatten() {
        let _ = writeln!(
            out,
            "{}",
            style.paint(
                "31",
                &format!(
                    "failed: {}/{}: {}",
                    f["zone"].as_str().unwrap_or_default(),
                    f["name"].as_str().unwrap_or_default(),
                    f["error"].as_str().unwrap_or_default()
                )
            )
        );
    }
    out
}

/// What a `notGenerated` entry names: `<type>/<name>`, then its `field` when it is a
/// Dataplane field (`Dataplane/web-1 networking.transparentProxying`; in a fleet diff, with no
/// name, `Dataplane networking.transparentProxying`).
pub fn not_generated_subject(n: &Value) -> String {
    let ty = n["type"].as_str().unwrap_or_default();
    let name = n["name"].as_str().unwrap_or_default();
    let mut subject = if name.is_empty() {
        ty.to_owned()
    } else {
        format!("{ty}/{name}")
    };
    if let Some(field) = n["field"].as_str() {
        subject.push(' ');
        subject.push_str(field);
    }
    subject
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PLAIN: Style = Style { color: false };

    #[test]
    fn groups_operations_by_resource_with_old_and_new_values() {
        let before = json!({"type.googleapis.com/envoy.config.cluster.v3.Cluster": {"backend": {"connectTimeout": "5s", "name": "backend"}}});
        let patch = json!([
            {"op": "replace", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend/connectTimeout", "value": "31s"},
            {"op": "add", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/backend/lbPolicy", "value": "RANDOM"},
            {"op": "remove", "path": "/type.googleapis.com~1envoy.config.listener.v3.Listener/outbound:10.0.0.1~180"}
        ]);
        let text = render_patch(&patch, Some(&before), PLAIN);
        assert_eq!(
            text,
            "@ Cluster backend\n  replace /connectTimeout\n  - \"5s\"\n  + \"31s\"\n  add /lbPolicy\n  + \"RANDOM\"\n@ Listener outbound:10.0.0.1/80\n  remove /\n"
        );
        assert_eq!(render_patch(&json!([]), None, PLAIN), "no changes\n");
        assert_eq!(
            render_patch(
                &json!([{"op": "add", "path": "/0/toRules/0", "value": 1}]),
                None,
                PLAIN
            ),
            "  add /0/toRules/0\n  + 1\n"
        );
        let colored = render_patch(&patch, Some(&before), Style { color: true });
        assert!(colored.contains("\x1b[31m  - \"5s\"\x1b[0m"));
        assert!(colored.contains("\x1b[32m  + \"31s\"\x1b[0m"));
    }

    #[test]
    fn policies_that_are_not_generated_are_named_above_the_changes() {
        let result = json!({"mesh": "m", "shadowPolicies": ["MeshHTTPRoute/canary"], "totals": {}, "zones": [],
            "notGenerated": [
                {"type": "MeshHTTPRoute", "name": "canary", "reason": "no routes yet", "dataplanes": 4},
                {"type": "Dataplane", "name": "", "field": "networking.transparentProxying", "reason": "no redirect listeners", "dataplanes": 2}
            ],
            "changes": []});
        let text = render_fleet(&result, PLAIN);
        assert!(
            text.contains("not generated: MeshHTTPRoute/canary selects 4 DPPs but is not in the diff: no routes yet"),
            "{text}"
        );
        assert!(
            text.contains("not generated: Dataplane networking.transparentProxying is set on 2 DPPs but is not in the diff: no redirect listeners"),
            "{text}"
        );
        assert_eq!(
            not_generated_subject(
                &json!({"type": "Dataplane", "name": "web-1", "field": "metrics"})
            ),
            "Dataplane/web-1 metrics"
        );
    }

    #[test]
    fn top_keeps_the_largest_groups_and_counts_the_rest() {
        let op = |v: &str| json!({"op": "add", "path": format!("/listeners/l/a{v}"), "value": v});
        let result = json!({"mesh": "m", "shadowPolicies": [], "totals": {}, "zones": [],
        "changes": [
            {"operation": op("1"), "count": 3, "dataplanes": []},
            {"operation": op("2"), "count": 2, "dataplanes": []},
            {"operation": op("3"), "count": 1, "dataplanes": []}
        ]});
        let text = render_fleet_top(&result, Style { color: false }, Some(2));
        assert!(
            text.contains("a1") && text.contains("a2") && !text.contains("a3"),
            "{text}"
        );
        assert!(text.contains("... 1 more operations"), "{text}");
        assert!(render_fleet(&result, Style { color: false }).contains("a3"));
    }

    #[test]
    fn fleet_results_show_totals_zones_and_groups() {
        let result = json!({
            "mesh": "default", "shadowPolicies": ["MeshTimeout/a"], "partial": true,
            "totals": {"considered": 3, "changed": 2, "unchanged": 0, "failed": 1},
            "zones": [{"zone": "z1", "status": "ok", "changed": 2, "unchanged": 0, "failed": 0},
                      {"zone": "z2", "status": "failed", "changed": 0, "unchanged": 0, "failed": 1, "error": "zone \"z2\" is offline"}],
            "changes": [{"operation": {"op": "replace", "path": "/type.googleapis.com~1envoy.config.cluster.v3.Cluster/c/connectTimeout", "value": "1s"}, "count": 12, "dataplanes": [{"zone": "z1", "name": "a"}]}],
            "failures": [{"zone": "z2", "name": "b", "error": "zone \"z2\" is offline"}]
        });
        let text = render_fleet(&result, PLAIN);
        assert!(text.contains("promoting MeshTimeout/a"), "{text}");
        assert!(
            text.contains("3 considered, 2 changed, 0 unchanged, 1 failed (PARTIAL"),
            "{text}"
        );
        assert!(
            text.contains(
                "zone z2: failed, 0 changed, 0 unchanged, 1 failed (zone \"z2\" is offline)"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "12 DPPs: z1/a and 11 more\n@ Cluster c\n  replace /connectTimeout\n  + \"1s\"\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("failed: z2/b: zone \"z2\" is offline"),
            "{text}"
        );
    }
}
