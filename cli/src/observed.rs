//! `umbractl inspect observed <Type>/<name>` (issue 40): what an observed shadow policy would
//! have done to its DPPs' traffic, from `GET /meshes/{mesh}/{plural}/{name}/_observed` (on a
//! Global fleet-wide, on a zone for its DPPs): a summary line, the would-be denials per calling
//! service (a rate limit has none: its bucket is the inbound's), then one row per zone and per
//! DPP. `-o json` prints the API's report.

use serde_json::Value;
use umbra_core::resource::ResourceType;

use crate::error::CliError;
use crate::http::{get_json, pretty};
use crate::output::Output;
use crate::overview::columns;

/// The report of policy `policy` (`<Type>/<name>`) in `mesh`, as text or JSON.
///
/// # Errors
/// A malformed `policy` or an unknown type (before any request); the API's error (400 for a
/// type observe mode does not render, 404, 409 for a policy that is not observed).
pub async fn inspect_observed(
    api_url: &str,
    mesh: &str,
    policy: &str,
    output: Output,
) -> anyhow::Result<String> {
    let (ty, name) = policy
        .split_once('/')
        .filter(|(t, n)| !t.is_empty() && !n.is_empty())
        .ok_or_else(|| CliError::Input(format!("{policy:?} is not <Type>/<name>")))?;
    let ty = ResourceType::from_name(ty)
        .ok_or_else(|| CliError::Input(format!("unknown policy type {ty:?}")))?;
    let path = format!("/meshes/{mesh}/{}/{name}/_observed", ty.plural());
    let report = get_json(api_url, &path, &[]).await?;
    Ok(match output {
        Output::Json => pretty(&report),
        Output::Text => render(&report),
    })
}

fn num(v: &Value) -> u64 {
    v.as_u64().unwrap_or(0)
}

fn percent(v: &Value) -> String {
    format!("{:.1}%", v.as_f64().unwrap_or(0.0) * 100.0)
}

/// The text form of a report (see the module docs).
pub fn render(report: &Value) -> String {
    let totals = &report["totals"];
    // `effect`: what the policy would do to a request it refuses.
    let (verb, header) = if report["effect"] == "limit" {
        ("would limit", "WOULD LIMIT")
    } else {
        ("would deny", "WOULD DENY")
    };
    let mut out = format!(
        "{} in mesh {}: {verb} {} of {} requests ({}) seen by {} of {} DPPs observing{}\n",
        report["policy"].as_str().unwrap_or("?"),
        report["mesh"].as_str().unwrap_or("?"),
        num(&totals["wouldRefuse"]),
        num(&totals["requests"]),
        percent(&totals["wouldRefuseRate"]),
        num(&totals["observing"]),
        num(&totals["dataplanes"]),
        if report["partial"] == true {
            " (partial: see the errors below)"
        } else {
            ""
        },
    );
    let mut callers: Vec<Vec<String>> = report["callers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| {
            vec![
                c["service"].as_str().unwrap_or("?").to_owned(),
                num(&c["wouldRefuse"]).to_string(),
            ]
        })
        .collect();
    callers.push(vec![
        "(callers no rule names)".to_owned(),
        num(&report["otherCallersWouldRefuse"]).to_string(),
    ]);
    if report["effect"] != "limit" {
        out.push('\n');
        out.push_str(&columns(&["CALLER", header], &callers));
    }
    let zones: Vec<Vec<String>> = report["zones"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|z| {
            let t = &z["totals"];
            vec![
                z["zone"].as_str().unwrap_or("?").to_owned(),
                num(&t["dataplanes"]).to_string(),
                num(&t["observing"]).to_string(),
                num(&t["unread"]).to_string(),
                num(&t["requests"]).to_string(),
                num(&t["wouldRefuse"]).to_string(),
                percent(&t["wouldRefuseRate"]),
                z["error"].as_str().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&columns(
        &[
            "ZONE",
            "DPPS",
            "OBSERVING",
            "UNREAD",
            "REQUESTS",
            header,
            "RATE",
            "ERROR",
        ],
        &zones,
    ));
    let dataplanes: Vec<Vec<String>> = report["dataplanes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|d| {
            let callers: Vec<String> = d["callers"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|c| num(&c["wouldRefuse"]) > 0)
                .map(|c| {
                    format!(
                        "{}={}",
                        c["service"].as_str().unwrap_or("?"),
                        num(&c["wouldRefuse"])
                    )
                })
                .collect();
            vec![
                d["name"].as_str().unwrap_or("?").to_owned(),
                d["zone"].as_str().unwrap_or("-").to_owned(),
                if d["observing"] == true { "yes" } else { "no" }.to_owned(),
                num(&d["requests"]).to_string(),
                num(&d["wouldRefuse"]).to_string(),
                percent(&d["wouldRefuseRate"]),
                if callers.is_empty() {
                    "-".to_owned()
                } else {
                    callers.join(" ")
                },
                d["error"].as_str().unwrap_or("").to_owned(),
            ]
        })
        .collect();
    out.push('\n');
    out.push_str(&columns(
        &[
            "DATAPLANE",
            "ZONE",
            "OBSERVING",
            "REQUESTS",
            header,
            "RATE",
            "CALLERS",
            "ERROR",
        ],
        &dataplanes,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_text_names_the_totals_the_callers_and_each_zone_and_dpp() {
        let report = json!({
            "mesh": "default", "policy": "MeshTrafficPermission/deny-frontend", "effect": "deny",
            "partial": true,
            "totals": {"dataplanes": 2, "observing": 1, "unread": 1, "requests": 8, "wouldRefuse": 5, "wouldRefuseRate": 0.625},
            "callers": [{"service": "frontend", "wouldRefuse": 5}],
            "otherCallersWouldRefuse": 0,
            "zones": [{"zone": "zone-1", "totals": {"dataplanes": 2, "observing": 1, "unread": 1, "requests": 8, "wouldRefuse": 5, "wouldRefuseRate": 0.625}}],
            "dataplanes": [
                {"name": "backend", "zone": "zone-1", "observing": true, "requests": 8, "wouldRefuse": 5, "wouldRefuseRate": 0.625,
                 "callers": [{"service": "frontend", "wouldRefuse": 5}], "otherCallersWouldRefuse": 0},
                {"name": "backend-2", "zone": "zone-1", "observing": false, "requests": 0, "wouldRefuse": 0, "wouldRefuseRate": 0.0,
                 "callers": [], "otherCallersWouldRefuse": 0, "error": "its admin did not answer within 5s"}
            ]
        });
        let text = render(&report);
        assert!(text.starts_with("MeshTrafficPermission/deny-frontend in mesh default: would deny 5 of 8 requests (62.5%) seen by 1 of 2 DPPs observing (partial"), "{text}");
        assert!(text.contains("frontend                  5"), "{text}");
        assert!(
            text.contains(
                "backend     zone-1   yes         8          5            62.5%   frontend=5"
            ),
            "{text}"
        );
        assert!(
            text.contains("its admin did not answer within 5s"),
            "{text}"
        );
    }
}
