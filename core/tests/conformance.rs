//! Runs the conformance runner (`examples/conformance.rs`) over the shared Kuma v2.7.29 fixtures
//! (`../shared/conformance/kuma-v2.7.29`, or `UMBRA_CONFORMANCE_DIR`): every matcher, rules and
//! validation case must pass. A missing fixture directory is a failure, not a skip.

#[allow(dead_code, missing_docs)]
#[path = "../examples/conformance.rs"]
mod runner;

#[test]
fn shared_kuma_fixtures_all_pass() {
    let dir = std::env::var_os("UMBRA_CONFORMANCE_DIR").map_or_else(
        || {
            std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../../shared/conformance/kuma-v2.7.29")
        },
        std::path::PathBuf::from,
    );
    assert!(
        dir.is_dir(),
        "fixtures not found at {} (set UMBRA_CONFORMANCE_DIR)",
        dir.display()
    );
    let results = runner::run_dir(&dir);
    let failed: Vec<String> = results
        .iter()
        .filter_map(|r| r.failure.as_ref().map(|f| format!("{}\n{f}", r.name)))
        .collect();
    // 7 + 3 + 6 matcher cases, 12 + 3 + 2 rules cases, 56 validation cases (fixtures README).
    assert_eq!(results.len(), 89, "unexpected number of cases");
    assert!(
        failed.is_empty(),
        "{} of {} cases failed:\n{}",
        failed.len(),
        results.len(),
        failed.join("\n")
    );
}
