//! The name solver: new names for a group's outputs such that every output sorts before those
//! it must win over ([`solve`]), from the [`PREFIXES`] (or repeated `0-`), shortened with a
//! hash where a name would exceed Kuma's limit ([`prefixed`]).

use std::collections::BTreeSet;

/// Prefixes tried, in order, to make an output sort before those it must win over: seed 000's
/// `aaa-`, then ones that sort before it (`-` sorts before digits and letters, `0` is the
/// smallest character a name may start with), then `0-` repeated up to
/// [`MAX_ZERO_PREFIXES`] times (to sort before names that start with `0-` themselves).
pub const PREFIXES: &[&str] = &["aaa-", "aa-", "a-", "0-"];

/// How many times `0-` may be repeated as a last resort.
const MAX_ZERO_PREFIXES: usize = 8;

/// Kuma's maximum name length (Umbra's validator).
const MAX_NAME: usize = 253;

/// The result of [`solve`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Solved {
    /// New `(name, display name)` per node, `None` when it keeps its own.
    pub(super) renamed: Vec<Option<(String, String)>>,
    /// Requirements on a cycle (each node must win over the other, directly or not).
    pub(super) conflicts: BTreeSet<(usize, usize)>,
}

/// Names for `nodes` (`(name, display name)`) such that for every edge `(w, o)` the display
/// name of `w` sorts before that of `o`: a node is handled once every node it must beat (off
/// its cycle) is; it keeps its name when that already sorts first, else takes the first
/// [`PREFIXES`] entry (or repeated `0-`) that does and whose name is not in `taken` (then
/// added to it).
pub(super) fn solve(
    nodes: &[(String, String)],
    edges: &BTreeSet<(usize, usize)>,
    taken: &mut BTreeSet<String>,
) -> Solved {
    let n = nodes.len();
    let mut succ: Vec<Vec<usize>> = vec![Vec::new(); n];
    for &(w, o) in edges {
        if w < n && o < n && w != o {
            succ[w].push(o);
        }
    }
    // reach[i]: nodes reachable from i.
    let reach: Vec<BTreeSet<usize>> = (0..n)
        .map(|start| {
            let mut seen = BTreeSet::new();
            let mut stack = succ[start].clone();
            while let Some(x) = stack.pop() {
                if seen.insert(x) {
                    stack.extend(succ[x].iter().copied());
                }
            }
            seen
        })
        .collect();
    let conflicts: BTreeSet<(usize, usize)> = edges
        .iter()
        .copied()
        .filter(|&(w, o)| w < n && o < n && reach[o].contains(&w))
        .collect();
    let mut display: Vec<String> = nodes.iter().map(|(_, d)| d.clone()).collect();
    let mut renamed = vec![None; n];
    let mut done = vec![false; n];
    loop {
        let mut progress = false;
        for u in 0..n {
            if done[u] {
                continue;
            }
            let targets: Vec<usize> = succ[u]
                .iter()
                .copied()
                .filter(|o| !conflicts.contains(&(u, *o)))
                .collect();
            if targets.iter().any(|&o| !done[o]) {
                continue;
            }
            done[u] = true;
            progress = true;
            let Some(first) = targets.iter().map(|&o| display[o].as_str()).min() else {
                continue;
            };
            if display[u].as_str() < first {
                continue;
            }
            let first = first.to_owned();
            let candidates = PREFIXES
                .iter()
                .map(|p| (*p).to_owned())
                .chain((2..=MAX_ZERO_PREFIXES).map(|k| "0-".repeat(k)));
            for prefix in candidates {
                let prefix = prefix.as_str();
                let name = prefixed(prefix, &nodes[u].0);
                let disp = prefixed(prefix, &display[u]);
                if disp < first && !taken.contains(&name) {
                    taken.insert(name.clone());
                    display[u] = disp.clone();
                    renamed[u] = Some((name, disp));
                    break;
                }
            }
        }
        if !progress {
            break;
        }
    }
    Solved { renamed, conflicts }
}

/// `prefix` + `name`, the end replaced by `-<hash>` when longer than Kuma allows.
fn prefixed(prefix: &str, name: &str) -> String {
    let full = format!("{prefix}{name}");
    if full.len() <= MAX_NAME {
        return full;
    }
    // FNV-1a, so the shortened name is deterministic and tells long names apart.
    let hash = name.bytes().fold(0x811c_9dc5_u32, |h, b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    });
    let keep = MAX_NAME - prefix.len() - 9;
    let mut cut = keep;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{prefix}{}-{hash:08x}", &name[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nodes(names: &[&str]) -> Vec<(String, String)> {
        names
            .iter()
            .map(|n| ((*n).to_owned(), (*n).to_owned()))
            .collect()
    }

    #[test]
    fn solve_orders_a_chain_of_three() {
        // c must beat b and a, b must beat a.
        let ns = nodes(&["a-all", "b-all", "c-backend"]);
        let edges = BTreeSet::from([(1, 0), (2, 1), (2, 0)]);
        let mut taken: BTreeSet<String> = ns.iter().map(|n| n.0.clone()).collect();
        let s = solve(&ns, &edges, &mut taken);
        let finals: Vec<String> = (0..3)
            .map(|i| s.renamed[i].clone().map_or(ns[i].0.clone(), |r| r.0))
            .collect();
        // "a-all" sorts before anything starting with "a" and a longer run of "a"s.
        assert_eq!(finals, ["a-all", "0-b-all", "0-0-c-backend"]);
        for (w, o) in &edges {
            assert!(finals[*w] < finals[*o]);
        }
        assert!(s.conflicts.is_empty());
        assert!(taken.contains("0-0-c-backend"));
        // The seed's prefix where it sorts first.
        let ns = nodes(&["timeout-global", "timeout-to-backend"]);
        let s = solve(&ns, &BTreeSet::from([(1, 0)]), &mut BTreeSet::new());
        assert_eq!(
            s.renamed[1],
            Some((
                "aaa-timeout-to-backend".to_owned(),
                "aaa-timeout-to-backend".to_owned()
            ))
        );
    }

    #[test]
    fn solve_reports_cycles_and_keeps_their_names() {
        let ns = nodes(&["p1", "p2", "p0"]);
        // p1 and p2 must beat each other; p2 must beat p0 (already true? no: "p0" < "p2").
        let edges = BTreeSet::from([(0, 1), (1, 0), (1, 2)]);
        let mut taken = BTreeSet::new();
        let s = solve(&ns, &edges, &mut taken);
        assert_eq!(s.conflicts, BTreeSet::from([(0, 1), (1, 0)]));
        assert_eq!(s.renamed[0], None);
        assert_eq!(
            s.renamed[1],
            Some(("aaa-p2".to_owned(), "aaa-p2".to_owned()))
        );
    }

    #[test]
    fn long_names_stay_within_kumas_limit_and_apart() {
        let a = "x".repeat(252) + "a";
        let b = "x".repeat(252) + "b";
        let (pa, pb) = (prefixed("aaa-", &a), prefixed("aaa-", &b));
        assert_eq!(pa.len(), MAX_NAME);
        assert_ne!(pa, pb);
        assert!(pa.starts_with("aaa-xxx"));
        assert!(pa.chars().last().unwrap().is_ascii_alphanumeric());
        assert_eq!(prefixed("aaa-", "web"), "aaa-web");
    }
}
