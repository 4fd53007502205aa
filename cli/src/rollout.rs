//! `umbractl migrate apply --plan <fp> --stages <list>` and `umbractl migrate status` (issue
//! 40): a staged rollout started on the Global (`POST /meshes/{mesh}/_migration/rollout`),
//! followed until it ends (`GET .../rollout?plan=`, once a second) with each decision printed
//! as it is taken, and its status. A rollout that ends rolled back exits 1 with the reason
//! (the failing counter and where). The gate's thresholds are flags ([`GateFlags`]), each
//! defaulting to the Global's default.

use std::time::Duration;

use serde_json::{json, Value};

use crate::error::CliError;
use crate::http::{client, post_json, send};
use crate::output::Output;

/// The gate's thresholds (`umbra_core::rollout::Thresholds`): unset flags keep the Global's
/// defaults.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GateFlags {
    /// How long each stage soaks before its gate (`60s`; 1s to 1h).
    #[arg(long, requires = "stages")]
    pub soak: Option<String>,
    /// Extra 5xx rate the staged DPPs may show (0.01 = 1 in 100).
    #[arg(long = "max-5xx-rate", requires = "stages")]
    pub max_5xx_rate: Option<f64>,
    /// Extra timeout rate.
    #[arg(long, requires = "stages")]
    pub max_timeout_rate: Option<f64>,
    /// Extra reset rate.
    #[arg(long, requires = "stages")]
    pub max_reset_rate: Option<f64>,
    /// Extra retry rate.
    #[arg(long, requires = "stages")]
    pub max_retry_rate: Option<f64>,
    /// Extra RBAC denial rate.
    #[arg(long, requires = "stages")]
    pub max_denied_rate: Option<f64>,
    /// Extra rate-limited rate.
    #[arg(long, requires = "stages")]
    pub max_limited_rate: Option<f64>,
    /// Highest ratio of the staged P99 latency over the others'.
    #[arg(long, requires = "stages")]
    pub max_p99_ratio: Option<f64>,
    /// Requests the staged DPPs must send during a soak for a verdict.
    #[arg(long, requires = "stages")]
    pub min_requests: Option<u64>,
    /// Only show the stages and the DPPs each would select; start nothing.
    #[arg(long, requires = "stages")]
    pub dry_run: bool,
}

impl GateFlags {
    /// The `thresholds` of the request: the flags given.
    pub fn thresholds(&self) -> Value {
        let mut t = serde_json::Map::new();
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                t.insert(k.to_owned(), v);
            }
        };
        put("errors5xx", self.max_5xx_rate.map(Value::from));
        put("timeouts", self.max_timeout_rate.map(Value::from));
        put("resets", self.max_reset_rate.map(Value::from));
        put("retries", self.max_retry_rate.map(Value::from));
        put("rbacDenied", self.max_denied_rate.map(Value::from));
        put("rateLimited", self.max_limited_rate.map(Value::from));
        put("p99Ratio", self.max_p99_ratio.map(Value::from));
        put("minRequests", self.min_requests.map(Value::from));
        Value::Object(t)
    }
}

async fn get_rollout(api_url: &str, mesh: &str, plan: Option<&str>) -> Result<Value, CliError> {
    let url = format!(
        "{}/meshes/{mesh}/_migration/rollout",
        api_url.trim_end_matches('/')
    );
    let mut request = client(Duration::from_secs(30))?
        .get(&url)
        .header("accept", "application/json");
    if let Some(p) = plan {
        request = request.query(&[("plan", p)]);
    }
    let text = send(&url, request).await?;
    serde_json::from_str(&text)
        .map_err(|e| CliError::Unavailable(format!("{url}: the answer is not JSON: {e}")))
}

/// One decision as a line: `<at> stage <n> <action>: <detail>`.
pub fn decision_line(d: &Value) -> String {
    let stage = d["stage"]
        .as_u64()
        .map_or_else(String::new, |s| format!(" stage {s}"));
    format!(
        "{}{stage} {}: {}",
        d["at"].as_str().unwrap_or("?"),
        d["action"].as_str().unwrap_or("?"),
        d["detail"].as_str().unwrap_or("")
    )
}

/// A rollout for a person: its state, stages (tags and DPPs) and decisions.
pub fn render(r: &Value) -> String {
    let mut out = format!(
        "rollout of plan {} in mesh {}: {} (phase {})\n",
        r["plan"].as_str().unwrap_or("?"),
        r["mesh"].as_str().unwrap_or("?"),
        r["state"].as_str().unwrap_or("?"),
        r["phase"]["step"].as_str().unwrap_or("?"),
    );
    for (i, s) in r["stages"].as_array().into_iter().flatten().enumerate() {
        let tags = match (s["share"].as_str(), s["tags"].as_object()) {
            (Some(share), _) => format!("{share} (a sample)"),
            (None, None) => "100% (the plan's apply)".to_owned(),
            (None, Some(t)) => t
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join("&"),
        };
        let dpps: Vec<&str> = s["dataplanes"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        out.push_str(&format!(
            "  stage {}: {tags}: {} DPPs {}\n",
            i + 1,
            dpps.len(),
            dpps.join(", ")
        ));
    }
    for d in r["decisions"].as_array().into_iter().flatten() {
        out.push_str(&decision_line(d));
        out.push('\n');
    }
    out
}

/// Start a staged rollout of `plan` in `mesh` with `stages` and follow it to its end, calling
/// `progress` with each decision's line as it appears; answers the rollout (text or JSON).
///
/// # Errors
/// The Global's refusal; [`CliError::Refused`] when the rollout ends rolled back (its reason);
/// [`CliError::Unavailable`] when the Global cannot be read while following.
pub async fn start_and_follow(
    api_url: &str,
    mesh: &str,
    plan: &str,
    stages: &str,
    gate: &GateFlags,
    output: Output,
    mut progress: impl FnMut(&str),
) -> Result<String, CliError> {
    let mut body = json!({"plan": plan, "stages": stages, "thresholds": gate.thresholds()});
    if let Some(s) = &gate.soak {
        body["soak"] = json!(s);
    }
    if gate.dry_run {
        body["dryRun"] = json!(true);
    }
    let started = post_json(
        api_url,
        &format!("/meshes/{mesh}/_migration/rollout"),
        &body,
    )
    .await
    .map_err(|e| {
        e.context(format!(
            "starting the rollout of plan {plan} in mesh {mesh:?}"
        ))
    })?;
    let mut shown = 0;
    let mut r = started;
    loop {
        let decisions = r["decisions"].as_array().cloned().unwrap_or_default();
        for d in decisions.iter().skip(shown) {
            progress(&decision_line(d));
        }
        shown = decisions.len();
        if r["state"] != "running" {
            break; // ended, or a dry run's `planned`
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        r = get_rollout(api_url, mesh, Some(plan))
            .await
            .map_err(|e| e.context(format!("following the rollout of plan {plan}")))?;
    }
    if r["state"] == "rolledBack" {
        let why = r["decisions"]
            .as_array()
            .and_then(|d| d.last())
            .map_or_else(String::new, |d| {
                d["detail"].as_str().unwrap_or("").to_owned()
            });
        return Err(CliError::Refused(format!(
            "the rollout of plan {plan} was rolled back: {why}"
        )));
    }
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(&r).unwrap_or_default(),
        Output::Text => render(&r),
    })
}

/// `umbractl migrate status`: the mesh's latest rollout (or `plan`'s).
///
/// # Errors
/// The Global's error (404 without one).
pub async fn status(
    api_url: &str,
    mesh: &str,
    plan: Option<&str>,
    output: Output,
) -> Result<String, CliError> {
    let r = get_rollout(api_url, mesh, plan)
        .await
        .map_err(|e| e.context(format!("reading the rollouts of mesh {mesh:?}")))?;
    Ok(match output {
        Output::Json => serde_json::to_string_pretty(&r).unwrap_or_default(),
        Output::Text => render(&r),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_reads_as_its_stages_and_decisions() {
        let r = json!({
            "mesh": "default", "plan": "ab", "state": "rolledBack", "phase": {"step": "done"},
            "stages": [
                {"tags": {"kuma.io/service": "frontend"}, "dataplanes": ["zone-1/frontend"]},
                {"tags": {"umbra.io/rollout-sample": "ab.00000000000000ff"}, "share": "10%", "dataplanes": ["zone-1/backend"]},
                {"dataplanes": ["zone-1/frontend", "zone-1/backend"]}
            ],
            "decisions": [
                {"at": "t1", "action": "started", "detail": "2 stages, 3 s soak"},
                {"at": "t2", "stage": 1, "action": "gate failed", "detail": "upstream_rq_timeout: 1.0000 on the staged DPPs"}
            ]
        });
        let text = render(&r);
        assert!(
            text.starts_with("rollout of plan ab in mesh default: rolledBack (phase done)"),
            "{text}"
        );
        assert!(
            text.contains("  stage 1: kuma.io/service=frontend: 1 DPPs zone-1/frontend"),
            "{text}"
        );
        assert!(
            text.contains("  stage 2: 10% (a sample): 1 DPPs zone-1/backend"),
            "{text}"
        );
        assert!(
            text.contains("  stage 3: 100% (the plan's apply): 2 DPPs"),
            "{text}"
        );
        assert!(
            text.contains("t2 stage 1 gate failed: upstream_rq_timeout"),
            "{text}"
        );
        let flags = GateFlags {
            min_requests: Some(5),
            max_timeout_rate: Some(0.2),
            ..Default::default()
        };
        assert_eq!(
            flags.thresholds(),
            json!({"timeouts": 0.2, "minRequests": 5})
        );
    }

    /// The gate's flags go with `--stages` only: `migrate apply --dry-run` without it would
    /// otherwise apply the plan for real.
    #[test]
    fn gate_flags_need_stages_and_the_timeout_does_not_take_them() {
        use clap::Parser as _;
        let parse = |args: &[&str]| {
            crate::Cli::try_parse_from(
                ["umbractl", "migrate", "apply", "--plan", "ab"]
                    .iter()
                    .chain(args),
            )
        };
        for flag in [
            &["--dry-run"][..],
            &["--soak", "5s"],
            &["--min-requests", "5"],
        ] {
            let e = parse(flag).unwrap_err();
            assert!(e.to_string().contains("--stages"), "{flag:?}: {e}");
        }
        assert!(parse(&["--stages", "a=b,100%", "--timeout", "5s"]).is_err());
        assert!(parse(&["--stages", "a=b,100%", "--dry-run", "--soak", "5s"]).is_ok());
        assert!(parse(&["--timeout", "5s"]).is_ok());
    }
}
