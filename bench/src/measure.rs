//! What the harness reads off processes and how it reports: RSS and CPU time from `/proc`
//! (Linux), waiting for processes to go idle, percentiles, and the result table (one row per
//! target: measured figure, target, verdict, the published figure it compares with, and the
//! command that reproduces it).

use std::time::{Duration, Instant};

/// VmRSS of process `pid`, in KiB (0 when unreadable).
pub fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// User + system CPU time of process `pid`, in clock ticks (1/100 s on Linux; 0 when
/// unreadable).
pub fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    // Fields after the command name (in parentheses): utime is field 14, stime 15.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let get = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    get(11) + get(12)
}

/// Total CPU ticks of `pids`.
pub fn cpu_ticks_of(pids: &[u32]) -> u64 {
    pids.iter().map(|p| cpu_ticks(*p)).sum()
}

/// Wait until `pids` together use at most `ticks_per_s` ticks (1/100 s) in one second, or
/// `limit` passes; how long it took.
///
/// # Errors
/// When they are still busy after `limit`.
pub async fn settle(pids: &[u32], ticks_per_s: u64, limit: Duration) -> anyhow::Result<Duration> {
    let start = Instant::now();
    loop {
        let before = cpu_ticks_of(pids);
        tokio::time::sleep(Duration::from_secs(1)).await;
        if cpu_ticks_of(pids) - before <= ticks_per_s {
            return Ok(start.elapsed());
        }
        anyhow::ensure!(
            start.elapsed() < limit,
            "processes {pids:?} still busy after {limit:?}"
        );
    }
}

/// The `p`th percentile (nearest rank) of `sorted`; zero when empty.
pub fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Milliseconds of `d`, for tables.
pub fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A target: the figure must be at most (`AtMost`) or at least (`AtLeast`) the limit.
#[derive(Debug, Clone, Copy)]
pub enum Target {
    /// Lower is better; met when `value <= limit`.
    AtMost(f64),
    /// Higher is better; met when `value >= limit`.
    AtLeast(f64),
    /// No target: reported for context.
    None,
}

/// One row of the result table.
#[derive(Debug, Clone)]
pub struct Row {
    /// What was measured, with its size (e.g. "fleet shadow diff, 5 zones x 2,000 DPPs").
    pub what: String,
    /// The figure, in `unit`.
    pub value: f64,
    /// Unit of `value` and of the target (`s`, `ms`, `KB`, `writes/s`, `%`, `x`).
    pub unit: &'static str,
    /// The target.
    pub target: Target,
    /// The published figure it compares with, and its source.
    pub anchor: &'static str,
    /// The command that reproduces the row.
    pub command: String,
}

impl Row {
    /// "met", "missed (2.7x)" or "-" (no target).
    pub fn verdict(&self) -> String {
        match self.target {
            Target::AtMost(l) if self.value <= l => "met".into(),
            Target::AtMost(l) => format!("missed ({:.1}x)", self.value / l),
            Target::AtLeast(l) if self.value >= l => "met".into(),
            Target::AtLeast(l) => format!("missed ({:.1}x)", l / self.value.max(f64::MIN_POSITIVE)),
            Target::None => "-".into(),
        }
    }

    /// The target as text: "<= 5 s", ">= 2000 writes/s", "-".
    pub fn target_text(&self) -> String {
        match self.target {
            Target::AtMost(l) => format!("<= {} {}", fmt(l), self.unit),
            Target::AtLeast(l) => format!(">= {} {}", fmt(l), self.unit),
            Target::None => "-".into(),
        }
    }
}

fn fmt(v: f64) -> String {
    if v >= 100.0 || v.fract() == 0.0 {
        format!("{v:.0}")
    } else if v >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// `rows` as a Markdown table (measurement, measured, target, verdict, anchor, command).
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| measurement | measured | target | verdict | published anchor | command |\n|---|---:|---|---|---|---|\n",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} {} | {} | {} | {} | `{}` |\n",
            r.what,
            fmt(r.value),
            r.unit,
            r.target_text(),
            r.verdict(),
            r.anchor,
            r.command
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(value: f64, target: Target) -> Row {
        Row {
            what: "x".into(),
            value,
            unit: "s",
            target,
            anchor: "-",
            command: "c".into(),
        }
    }

    #[test]
    fn verdicts_say_by_how_much() {
        assert_eq!(row(4.0, Target::AtMost(5.0)).verdict(), "met");
        assert_eq!(row(13.5, Target::AtMost(5.0)).verdict(), "missed (2.7x)");
        assert_eq!(row(2500.0, Target::AtLeast(2000.0)).verdict(), "met");
        assert_eq!(
            row(1000.0, Target::AtLeast(2000.0)).verdict(),
            "missed (2.0x)"
        );
        assert_eq!(row(1.0, Target::None).verdict(), "-");
        assert_eq!(row(1.0, Target::AtMost(0.5)).target_text(), "<= 0.500 s");
    }

    #[test]
    fn percentiles_use_nearest_rank() {
        let v: Vec<Duration> = (1..=100).map(Duration::from_millis).collect();
        assert_eq!(percentile(&v, 99.0), Duration::from_millis(99));
        assert_eq!(percentile(&v, 100.0), Duration::from_millis(100));
        assert_eq!(percentile(&v, 50.0), Duration::from_millis(50));
        assert_eq!(percentile(&[], 99.0), Duration::ZERO);
    }
}
