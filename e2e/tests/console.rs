//! The web console in a real browser (issue 22): Debian's Chromium, headless, driven over
//! WebDriver by chromedriver ([`umbra_e2e::browser`]), against a running Global with two
//! zones.
//!
//! - The browser's error check itself: a page that throws, or logs an error, fails it; a
//!   quiet page passes (so the checks below cannot pass by reading nothing).
//! - The seed's fleet (transition seed 000, "Timeout -> MeshTimeout", split across zone-1 and
//!   zone-2 as in `fanout.rs`): every page loads with its frame (`main#main` with an `h1`,
//!   `nav#nav`), shows its data, and logs no console error; a DPP's config diff highlights
//!   its changed lines; the bare fleet diff page is the form alone, and its `#run-diff` runs
//!   the diff of one zone (picked with its radio) or of every zone, which shows the API's
//!   groups, largest first; a group's DPP link leads to that DPP's config diff; the keyboard
//!   reaches and opens a group (Tab, Enter) and walks the rows (`j`/`k`).
//!   Screenshots of the main views go to `target/console-screenshots/<view>.png`.
//! - Sign-in, on a Global with `--localhost-is-admin=false` and two zones: the console sends
//!   a browser without a session to the sign-in page, refuses a bad token with a reason,
//!   accepts the admin token (then shows both zones), never puts the token in a URL, a page
//!   or a script-readable cookie, and signs out.
//!
//! The Globals run on the memory store: the console reads only the API, whatever stores it,
//! so these tests need no PostgreSQL. Without Chromium and chromedriver they skip, except
//! under `CI`.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use fantoccini::key::Key;
use serde_json::{json, Value};
use umbra_e2e::browser::Browser;
use umbra_e2e::fleet::{start_zone, temp_dir};
use umbra_e2e::seed::{plural, register_split_dataplanes, seed_docs};
use umbra_e2e::{http, http_with, start_federated_zone, wait_until, CpProcess};

const GLOBAL: &str = env!("CARGO_BIN_EXE_e2e-global-cp");
const ZONE: &str = env!("CARGO_BIN_EXE_e2e-zone-cp");

/// How long an element of a loaded page may take to show up.
const ELEMENT_WAIT: Duration = Duration::from_secs(10);

/// How long the streamed fleet diff may take to show its result.
const RESULT_WAIT: Duration = Duration::from_secs(30);

/// Time for what a page logs right after its load event (its favicon request, a deferred
/// script) to reach the console log before it is read.
const SETTLE: Duration = Duration::from_millis(300);

/// Longest one test may take, whatever hangs (a WebDriver command has no deadline of its
/// own; navigations and scripts do, see [`umbra_e2e::browser`]).
const TEST_DEADLINE: Duration = Duration::from_secs(180);

/// Run a test's body, failing it when it takes longer than [`TEST_DEADLINE`] (the browser and
/// the fleet are then dropped, which stops them).
async fn within_deadline(
    body: impl std::future::Future<Output = anyhow::Result<()>>,
) -> anyhow::Result<()> {
    tokio::time::timeout(TEST_DEADLINE, body)
        .await
        .map_err(|_| anyhow::anyhow!("the test did not finish within {TEST_DEADLINE:?}"))?
}

/// Start a Global on the memory store with `args`, logging to `<dir>/global.log`.
async fn start_global(dir: &Path, args: &[String]) -> anyhow::Result<CpProcess> {
    CpProcess::start(GLOBAL, "--kds-addr", args, &[], dir.join("global.log")).await
}

/// A Global (memory store, loopback is admin) with the seed's Mesh and policies, zone-1 and
/// zone-2 federated to it with the seed's Dataplanes split between them; all killed on drop.
struct SeedFleet {
    global: CpProcess,
    _zones: [CpProcess; 2],
}

impl SeedFleet {
    /// Start it and wait until the policies reached both zones and the Global lists the four
    /// Dataplanes (each wait at most 20 s).
    async fn start() -> anyhow::Result<SeedFleet> {
        let dir = temp_dir("console");
        let global = start_global(&dir, &[]).await?;
        let docs = seed_docs();
        for (kind, name, yaml) in &docs {
            match kind.as_str() {
                "Mesh" => global.apply(&format!("/meshes/{name}"), yaml).await?,
                "Dataplane" => {}
                k => {
                    global
                        .apply(&format!("/meshes/default/{}/{name}", plural(k)), yaml)
                        .await?;
                }
            }
        }
        let z1 = start_zone(ZONE, &global, "zone-1", &dir).await?;
        let z2 = start_zone(ZONE, &global, "zone-2", &dir).await?;
        for z in [&z1, &z2] {
            wait_until(Duration::from_secs(20), || async {
                matches!(z.call("GET", "/meshes/default/meshtimeouts", None).await,
                    Ok((200, v)) if v["total"] == 4)
            })
            .await
            .map_err(|_| anyhow::anyhow!("policies did not reach the zone:\n{}", z.log_tail()))?;
        }
        register_split_dataplanes(&docs, &z1, &z2, &global).await?;
        Ok(SeedFleet {
            global,
            _zones: [z1, z2],
        })
    }

    /// `http://<global API>`.
    fn base(&self) -> String {
        format!("http://{}", self.global.api)
    }
}

/// Load `base` + `path` and check the console's frame: an `h1` in `main#main`, `nav#nav`, no
/// error page (`#error`), every selector of `expect` present (waiting at most
/// [`ELEMENT_WAIT`] for each), and no console error since the previous check.
async fn open_page(b: &Browser, base: &str, path: &str, expect: &[&str]) -> anyhow::Result<()> {
    b.goto(&format!("{base}{path}")).await?;
    let content = async {
        b.wait_for("main#main h1", ELEMENT_WAIT).await?;
        b.find("nav#nav").await?;
        if b.exists("#error").await? {
            let status = b.attr("#error", "data-status").await?.unwrap_or_default();
            anyhow::bail!("an error page ({status}): {}", b.text("#error").await?);
        }
        for css in expect {
            b.wait_for(css, ELEMENT_WAIT).await?;
        }
        anyhow::Ok(())
    }
    .await;
    // The console is read either way, so that what this page logged is not blamed on the next.
    tokio::time::sleep(SETTLE).await;
    let console = b.expect_clean_console(path, &[]).await;
    match (content, console) {
        (Ok(()), console) => console,
        (Err(e), Ok(())) => Err(e.context(path.to_owned())),
        (Err(e), Err(c)) => Err(anyhow::anyhow!("{path}: {e:#}\n{c:#}")),
    }
}

/// The console entry a page whose document answers `status` logs for itself (expected on an
/// error page or a refused sign-in).
fn own_status_entry(url: &str, status: u16) -> String {
    format!("{url} - Failed to load resource: the server responded with a status of {status}")
}

/// Record `result` of `phase`: printed, and kept in `failures` when it failed.
fn note(failures: &mut Vec<String>, phase: &str, result: anyhow::Result<()>) {
    match result {
        Ok(()) => eprintln!("console e2e: {phase}: ok"),
        Err(e) => {
            eprintln!("console e2e: {phase}: FAILED: {e:#}");
            failures.push(format!("{phase}: {e:#}"));
        }
    }
}

/// The checks must see errors: a page that throws or calls `console.error` fails them, a
/// quiet page passes, and the log holds only what came after the previous read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_browser_reports_console_errors() -> anyhow::Result<()> {
    within_deadline(the_browser_reports_console_errors_body()).await
}

/// The body of [`the_browser_reports_console_errors`].
async fn the_browser_reports_console_errors_body() -> anyhow::Result<()> {
    let Some(b) = Browser::start().await? else {
        eprintln!("skipping: chromium or chromedriver not installed");
        return Ok(());
    };
    b.goto("data:text/html,<h1>thrower</h1><script>throw new Error(%22boom-uncaught%22)</script>")
        .await?;
    let err = b
        .expect_clean_console("thrower", &[])
        .await
        .expect_err("an uncaught exception is a console error");
    assert!(err.to_string().contains("boom-uncaught"), "{err}");
    // Read once: the next check starts afresh.
    b.expect_clean_console("after the read", &[]).await?;

    b.goto("data:text/html,<script>console.error(%22logged-error%22)</script>")
        .await?;
    let log = b.console_log().await?;
    assert!(
        log.iter()
            .any(|e| e.is_severe() && e.message.contains("logged-error")),
        "{log:?}"
    );

    b.goto("data:text/html,<h1>quiet</h1><script>console.log(%22fine%22)</script>")
        .await?;
    let log = b.console_log().await?;
    assert!(
        log.iter()
            .any(|e| !e.is_severe() && e.message.contains("fine")),
        "an info entry is read but is no error: {log:?}"
    );
    // A reported error can be allowed by what it says, and only that one.
    b.goto("data:text/html,<script>console.error(%22expected-one%22);console.error(%22other%22)</script>")
        .await?;
    let err = b
        .expect_clean_console("two errors", &["expected-one"])
        .await
        .expect_err("the other error stays");
    assert!(
        err.to_string().contains("other") && !err.to_string().contains("expected-one"),
        "{err}"
    );
    let shot = b.screenshot("browser-self-check").await?;
    assert!(std::fs::metadata(&shot)?.len() > 100);
    std::fs::remove_file(shot)?;
    b.close().await
}

/// Every page of the seed's fleet, the fleet diff's groups, the drill-down to one DPP's
/// config diff, and the keyboard; the phases run one after the other and the test fails with
/// every phase that did.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_shows_the_seeds_fleet_diff_in_a_browser() -> anyhow::Result<()> {
    within_deadline(the_console_shows_the_seeds_fleet_diff_in_a_browser_body()).await
}

/// The body of [`the_console_shows_the_seeds_fleet_diff_in_a_browser`].
async fn the_console_shows_the_seeds_fleet_diff_in_a_browser_body() -> anyhow::Result<()> {
    let Some(b) = Browser::start().await? else {
        eprintln!("skipping: chromium or chromedriver not installed");
        return Ok(());
    };
    let fleet = SeedFleet::start().await?;
    let (status, api) = fleet
        .global
        .call("GET", "/meshes/default/_shadow-diff?format=full", None)
        .await?;
    anyhow::ensure!(status == 200, "the API's fleet diff: {status} {api}");
    anyhow::ensure!(
        api["partial"] == false && !api["changes"].as_array().is_none_or(Vec::is_empty),
        "the seed's fleet diff has changes and no missing zone: {api:#}"
    );

    let mut failures = Vec::new();
    note(&mut failures, "pages", every_page(&b, &fleet, &api).await);
    note(
        &mut failures,
        "fleet diff",
        fleet_diff(&b, &fleet, &api).await,
    );
    note(&mut failures, "drill-down", drill_down(&b).await);
    note(
        &mut failures,
        "keyboard: Tab and Enter",
        tab_and_enter(&b, &fleet).await,
    );
    note(
        &mut failures,
        "keyboard: j and k",
        j_and_k(&b, &fleet).await,
    );
    // What the last page logged late.
    tokio::time::sleep(SETTLE).await;
    note(
        &mut failures,
        "late console entries",
        b.expect_clean_console("the last page", &[]).await,
    );
    b.close().await?;
    anyhow::ensure!(
        failures.is_empty(),
        "{} phase(s) failed:\n\n{}\n\nGlobal's log:\n{}",
        failures.len(),
        failures.join("\n\n"),
        fleet.global.log_tail()
    );
    Ok(())
}

/// Every page loads with its frame and data and logs no console error; the main views are
/// photographed.
async fn every_page(b: &Browser, fleet: &SeedFleet, api: &Value) -> anyhow::Result<()> {
    let base = fleet.base();
    // A DPP whose config the seed changes, by its zone-local name.
    let dp = &api["dataplanes"][0];
    let (dp_zone, dp_name) = (
        dp["zone"].as_str().unwrap_or_default(),
        dp["name"].as_str().unwrap_or_default(),
    );
    let dp_page = format!("/gui/meshes/default/dataplanes/{dp_name}?zone={dp_zone}");
    let pages: [(&str, &str, Vec<&str>); 7] = [
        (
            "zones",
            "/gui/zones",
            vec![
                r#"table#zones tr[data-zone="zone-1"]"#,
                r#"table#zones tr[data-zone="zone-2"]"#,
            ],
        ),
        (
            "meshes",
            "/gui/meshes",
            vec![r#"table#meshes tr[data-mesh="default"]"#],
        ),
        (
            "dataplanes",
            "/gui/meshes/default/dataplanes",
            vec![
                r#"table#dataplanes tr[data-dataplane="redis"][data-zone="zone-1"] .ads-state"#,
                r#"table#dataplanes tr[data-dataplane="backend"][data-zone="zone-2"] a.dp-link"#,
            ],
        ),
        (
            "policies",
            "/gui/meshes/default/policies",
            vec![
                r#"#policies tr[data-policy="MeshTimeout/timeout-global"] .badge-shadow"#,
                r#"#policies tr[data-policy="MeshTimeout/timeout-global"] .selected-dpps"#,
                r#"#policies tr[data-policy="Timeout/timeout-global"]"#,
            ],
        ),
        (
            "dataplane",
            &dp_page,
            vec![
                "#rules section.rules-type[data-type] .rules-live",
                "#rules section.rules-type[data-type] .rules-shadow",
                "#config-diff section.resource-diff[data-resource] table.diff-table",
            ],
        ),
        (
            "shadow-diff",
            "/gui/meshes/default/shadow-diff?run=1",
            vec![
                "form#shadow-diff-form",
                "#run-diff",
                r#"form#shadow-diff-form input[type=radio][name=zone][value=""]:checked"#,
                r#"form#shadow-diff-form input[type=radio][name=zone][value="zone-2"]"#,
                "#progress p.progress-line",
                r#"#progress p.zone-line[data-zone="zone-2"][data-status="ok"]"#,
                r#"section#result[data-partial="false"] #totals"#,
                "section#result details.group",
            ],
        ),
        (
            "login",
            "/gui/login",
            vec![
                "form#login-form",
                r#"input#token[name="token"]"#,
                "button#login-submit",
            ],
        ),
    ];
    // Every page is checked, whatever an earlier one showed; the errors are reported together.
    let mut errors = Vec::new();
    for (view, path, expect) in &pages {
        if let Err(e) = open_page(b, &base, path, expect).await {
            errors.push(format!("{e:#}"));
        }
        if *view != "login" {
            b.screenshot(view).await?;
        }
    }
    // The diff highlighting is visible: a changed line's old side has a background of its
    // own, unlike an unchanged line's.
    b.goto(&format!("{base}{dp_page}")).await?;
    b.wait_for("#config-diff table.diff-table", ELEMENT_WAIT)
        .await?;
    let colors = b
        .eval(
            "var bg = function (css) { var e = document.querySelector(css); \
               return e ? getComputedStyle(e).backgroundColor : null; };\
             return [bg('#config-diff table.diff-table tr.changed td.old'),\
                     bg('#config-diff table.diff-table tr.same td.old') \
                       || bg('#config-diff table.diff-table tr.same td')];",
            vec![],
        )
        .await?;
    match (colors[0].as_str(), colors[1].as_str()) {
        (Some(changed), Some(same)) if changed != same => {}
        _ => errors.push(format!(
            "{dp_page}: a `tr.changed td.old` cell's background is not distinct from a \
             `tr.same` row's cell's (changed, same): {colors}"
        )),
    }
    // What the pages say, beyond their ids.
    b.goto(&format!("{base}/gui/meshes/default/dataplanes"))
        .await?;
    let rows = b.all("table#dataplanes tbody tr[data-dataplane]").await?;
    anyhow::ensure!(
        rows.len() == 4,
        "4 Dataplanes listed, got {}\n{}",
        rows.len(),
        b.describe().await
    );
    b.goto(&format!("{base}/gui/meshes/default/policies"))
        .await?;
    let selected = b
        .text(r#"#policies tr[data-policy="MeshTimeout/timeout-global"] .selected-dpps"#)
        .await?;
    anyhow::ensure!(
        selected.trim() == "4",
        "MeshTimeout/timeout-global selects the 4 DPPs, the page says {selected:?}"
    );
    anyhow::ensure!(
        !b.exists(r#"#policies tr[data-policy="Timeout/timeout-global"] .badge-shadow"#)
            .await?,
        "the old Timeout is live, not shadow"
    );

    // The error page: its own 404 is the one console entry it may log.
    let missing = format!("{base}/gui/no-such-page");
    b.goto(&missing).await?;
    b.wait_for(r#"main#main p#error[data-status="404"]"#, ELEMENT_WAIT)
        .await?;
    b.find("main#main h1").await?;
    b.find("nav#nav").await?;
    tokio::time::sleep(SETTLE).await;
    if let Err(e) = b
        .expect_clean_console("the 404 page", &[&own_status_entry(&missing, 404)])
        .await
    {
        errors.push(format!("{e:#}"));
    }
    anyhow::ensure!(errors.is_empty(), "{}", errors.join("\n"));
    Ok(())
}

/// Open the bare fleet diff page: the form alone (no diff runs), with "every zone" checked.
async fn open_diff_form(b: &Browser, fleet: &SeedFleet) -> anyhow::Result<()> {
    b.goto(&format!("{}/gui/meshes/default/shadow-diff", fleet.base()))
        .await?;
    b.wait_for("form#shadow-diff-form #run-diff", ELEMENT_WAIT)
        .await?;
    b.find("#form-hint").await?;
    b.find(r#"form#shadow-diff-form input[type=radio][name=zone][value=""]:checked"#)
        .await?;
    anyhow::ensure!(
        !b.exists("section#result, section#progress").await?,
        "the bare page runs no diff\n{}",
        b.describe().await
    );
    Ok(())
}

/// Click `#run-diff` and wait for the diff it runs: the URL carries `run=1` (the form's
/// hidden field) and every pair of `want`, and the result shows.
async fn run_diff(b: &Browser, want: &[(&str, &str)]) -> anyhow::Result<()> {
    b.find("#run-diff").await?.click().await?;
    // The form's page has the same path: wait for the query instead.
    let has =
        |url: &url::Url, (k, v): (&str, &str)| url.query_pairs().any(|(pk, pv)| pk == k && pv == v);
    let submitted = wait_until(ELEMENT_WAIT, || async {
        matches!(b.url().await, Ok(url) if has(&url, ("run", "1")))
    })
    .await;
    let url = b.url().await?;
    anyhow::ensure!(
        submitted.is_ok() && url.path() == "/gui/meshes/default/shadow-diff",
        "#run-diff did not submit the form with run=1: {url}"
    );
    for &(k, v) in want {
        anyhow::ensure!(has(&url, (k, v)), "the form's query has no {k}={v}: {url}");
    }
    b.wait_for("section#result", RESULT_WAIT).await?;
    Ok(())
}

/// The fleet diff page: the bare page is the form; a zone picked with its radio and
/// `#run-diff` diff that zone alone; every zone's diff shows the API's groups, largest first,
/// and the seed's change.
async fn fleet_diff(b: &Browser, fleet: &SeedFleet, api: &Value) -> anyhow::Result<()> {
    open_diff_form(b, fleet).await?;
    tokio::time::sleep(SETTLE).await;
    b.expect_clean_console("the fleet diff's form", &[]).await?;
    b.find(r#"form#shadow-diff-form input[type=radio][name=zone][value="zone-2"]"#)
        .await?
        .click()
        .await?;
    run_diff(b, &[("zone", "zone-2")]).await?;
    b.find(r#"#scope[data-zone-scope="one"]"#).await?;
    b.find(r#"form#shadow-diff-form input[type=radio][name=zone][value="zone-2"]:checked"#)
        .await?;
    anyhow::ensure!(
        b.exists(r#"#zone-tallies tr[data-zone="zone-2"]"#).await?
            && !b.exists(r#"#zone-tallies tr[data-zone="zone-1"]"#).await?,
        "the diff of zone-2 asks zone-2 alone\n{}",
        b.describe().await
    );
    // Every zone, from the bare page's form as it comes.
    open_diff_form(b, fleet).await?;
    run_diff(b, &[]).await?;
    let permalink = b.attr("#permalink", "href").await?.unwrap_or_default();
    anyhow::ensure!(
        permalink == "/gui/meshes/default/shadow-diff?run=1",
        "the link to every zone's diff is {permalink:?}"
    );
    let partial = b.attr("section#result", "data-partial").await?;
    anyhow::ensure!(
        partial.as_deref() == Some("false"),
        "the seed's diff is complete, data-partial is {partial:?}\n{}",
        b.describe().await
    );
    let mut counts = Vec::new();
    for g in b.all("section#result details.group").await? {
        let c = g.attr("data-count").await?.unwrap_or_default();
        counts.push(
            c.parse::<u64>()
                .map_err(|_| anyhow::anyhow!("a group's data-count is {c:?}"))?,
        );
    }
    anyhow::ensure!(!counts.is_empty(), "no group\n{}", b.describe().await);
    anyhow::ensure!(
        counts.windows(2).all(|w| w[0] >= w[1]),
        "groups are not largest first: {counts:?}"
    );
    let changes = api["changes"].as_array().cloned().unwrap_or_default();
    let api_counts: Vec<u64> = changes
        .iter()
        .map(|c| c["count"].as_u64().unwrap_or_default())
        .collect();
    anyhow::ensure!(
        counts == api_counts[..counts.len().min(api_counts.len())],
        "the page's group sizes {counts:?} are not the API's {api_counts:?}"
    );
    // Every operation of the API's answer is on the page (collapsed groups hold their text).
    let text = b
        .eval(
            "return document.querySelector('section#result').textContent;",
            vec![],
        )
        .await?;
    let text = text.as_str().unwrap_or_default();
    for c in changes.iter().take(counts.len()) {
        let raw = format!(
            "{} {}",
            c["operation"]["op"].as_str().unwrap_or_default(),
            c["operation"]["path"].as_str().unwrap_or_default()
        );
        anyhow::ensure!(
            text.contains(&raw),
            "the API's operation `{raw}` is not on the page"
        );
    }
    // The seed's MeshTimeouts set a connection lifetime the old Timeouts did not have.
    anyhow::ensure!(
        text.contains("maxConnectionDuration"),
        "the seed's maxConnectionDuration change is not on the page:\n{text}"
    );
    let totals = b.attr("#totals", "data-changed").await?;
    anyhow::ensure!(
        totals.as_deref()
            == api["totals"]["changed"]
                .as_u64()
                .map(|n| n.to_string())
                .as_deref(),
        "#totals data-changed {totals:?}, the API says {}",
        api["totals"]["changed"]
    );
    tokio::time::sleep(SETTLE).await;
    b.expect_clean_console("the fleet diff", &[]).await
}

/// From the fleet diff (the page [`fleet_diff`] left open), open the first group and follow
/// its first DPP link to that DPP's config diff.
async fn drill_down(b: &Browser) -> anyhow::Result<()> {
    let summary = b.find("section#result details.group > summary").await?;
    summary.click().await?;
    let open = b
        .eval(
            "return document.querySelector('section#result details.group').open;",
            vec![],
        )
        .await?;
    anyhow::ensure!(open == json!(true), "clicking the summary opens the group");
    // The README's picture: the result with its largest group open.
    b.eval(
        "document.querySelector('section#result').scrollIntoView({block: 'start'});",
        vec![],
    )
    .await?;
    b.screenshot("shadow-diff").await?;
    let link = b
        .find("section#result details.group[open] a.dp-link")
        .await?;
    let href = link.attr("href").await?.unwrap_or_default();
    let (path, query) = href.split_once('?').unwrap_or((&href, ""));
    anyhow::ensure!(
        path.starts_with("/gui/meshes/default/dataplanes/") && query.starts_with("zone="),
        "a group's DPP link is /gui/meshes/default/dataplanes/<name>?zone=<zone>, not {href}"
    );
    link.click().await?;
    b.wait_for_path(path, ELEMENT_WAIT).await?;
    b.wait_for("#config-diff section.resource-diff", ELEMENT_WAIT)
        .await?;
    anyhow::ensure!(
        b.exists(
            "#config-diff table.diff-table tr.changed, #config-diff table.diff-table tr.added"
        )
        .await?,
        "the DPP's config diff shows no changed or added line\n{}",
        b.describe().await
    );
    b.find("main#main h1").await?;
    tokio::time::sleep(SETTLE).await;
    b.expect_clean_console(&href, &[]).await
}

/// With no script involved: Tab moves the focus to the first group's summary, Enter opens
/// the group.
async fn tab_and_enter(b: &Browser, fleet: &SeedFleet) -> anyhow::Result<()> {
    b.goto(&format!(
        "{}/gui/meshes/default/shadow-diff?run=1",
        fleet.base()
    ))
    .await?;
    b.wait_for("section#result details.group > summary", RESULT_WAIT)
        .await?;
    b.eval(
        "document.activeElement && document.activeElement.blur();",
        vec![],
    )
    .await?;
    let on_summary =
        "return document.activeElement === document.querySelector('section#result details.group > summary');";
    let mut presses = 0;
    while b.eval(on_summary, vec![]).await? != json!(true) {
        anyhow::ensure!(
            presses < 150,
            "150 Tab presses did not reach the first group's summary"
        );
        b.press(Key::Tab.into()).await?;
        presses += 1;
    }
    let is_open = "return document.querySelector('section#result details.group').open;";
    anyhow::ensure!(
        b.eval(is_open, vec![]).await? == json!(false),
        "the group starts closed"
    );
    b.press(Key::Enter.into()).await?;
    wait_until(Duration::from_secs(5), || async {
        matches!(b.eval(is_open, vec![]).await, Ok(v) if v == json!(true))
    })
    .await
    .map_err(|_| anyhow::anyhow!("Enter on the focused summary did not open its group"))?;
    eprintln!("console e2e: {presses} Tab presses reach the first group");
    b.expect_clean_console("the fleet diff (keyboard)", &[])
        .await
}

/// The console's script: `j`/`k` walk the rows of a list, Enter opens the focused row's
/// link; on the fleet diff `j` walks the groups.
async fn j_and_k(b: &Browser, fleet: &SeedFleet) -> anyhow::Result<()> {
    let base = fleet.base();
    b.goto(&format!("{base}/gui/zones")).await?;
    b.wait_for("[data-nav] tbody tr[data-zone]", ELEMENT_WAIT)
        .await?;
    let row_index =
        "var rows = Array.prototype.slice.call(document.querySelectorAll('[data-nav] tbody tr'));\
                     return rows.indexOf(document.activeElement);";
    for (key, want) in [('j', 0), ('j', 1), ('k', 0)] {
        b.press(key).await?;
        let at = b.eval(row_index, vec![]).await?;
        anyhow::ensure!(
            at == json!(want),
            "after `{key}` the focus is on row {at} of the zones table, not {want}"
        );
    }
    b.press(Key::Enter.into()).await?;
    let url = b.wait_for_path("/gui/meshes", ELEMENT_WAIT).await?;
    anyhow::ensure!(
        url.query() == Some("zone=zone-1"),
        "Enter on zone-1's row opens its Dataplane count link, not {url}"
    );
    b.goto(&format!("{base}/gui/meshes/default/shadow-diff?run=1"))
        .await?;
    b.wait_for("section#result details.group > summary", RESULT_WAIT)
        .await?;
    b.press('j').await?;
    let first = b
        .eval(
            "return document.activeElement === document.querySelector('details.group > summary');",
            vec![],
        )
        .await?;
    anyhow::ensure!(
        first == json!(true),
        "`j` on the fleet diff focuses the first group"
    );
    b.expect_clean_console("j/k", &[]).await
}

/// The admin token a loopback caller gets from `api` (`GET /global-secrets/admin-user-token`).
async fn admin_token(api: SocketAddr) -> anyhow::Result<String> {
    use base64::Engine as _;
    let (status, body) = http(api, "GET", "/global-secrets/admin-user-token", None).await?;
    anyhow::ensure!(status == 200, "admin token: {status} {body}");
    let v: Value = serde_json::from_str(&body)?;
    let bytes =
        base64::engine::general_purpose::STANDARD.decode(v["data"].as_str().unwrap_or_default())?;
    Ok(String::from_utf8(bytes)?)
}

/// `GET path` on `api` with `token`; status and JSON body.
async fn get_as(api: SocketAddr, path: &str, token: &str) -> anyhow::Result<(u16, Value)> {
    let auth = format!("Bearer {token}");
    let (status, body) = http_with(api, "GET", path, None, &[("authorization", &auth)]).await?;
    Ok((status, serde_json::from_str(&body).unwrap_or(Value::Null)))
}

/// Sign-in and sign-out on a Global that trusts no one without a token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_console_signs_in_with_a_token_and_out() -> anyhow::Result<()> {
    within_deadline(the_console_signs_in_with_a_token_and_out_body()).await
}

/// The body of [`the_console_signs_in_with_a_token_and_out`].
async fn the_console_signs_in_with_a_token_and_out_body() -> anyhow::Result<()> {
    let Some(b) = Browser::start().await? else {
        eprintln!("skipping: chromium or chromedriver not installed");
        return Ok(());
    };
    let dir = temp_dir("console-auth");
    let strict = ["--localhost-is-admin".to_owned(), "false".to_owned()];
    let global = start_global(&dir, &strict).await?;
    let admin = admin_token(global.api).await?;
    let mut zones = Vec::new();
    for zone in ["zone-1", "zone-2"] {
        let auth = format!("Bearer {admin}");
        let (status, token) = http_with(
            global.api,
            "POST",
            "/tokens/zone",
            Some(&format!(r#"{{"zone": "{zone}", "validFor": "1h"}}"#)),
            &[
                ("content-type", "application/json"),
                ("authorization", &auth),
            ],
        )
        .await?;
        anyhow::ensure!(status == 200, "zone token for {zone}: {status}");
        zones.push(
            start_federated_zone(
                ZONE,
                &global,
                zone,
                token.trim(),
                &[],
                dir.join(format!("{zone}.log")),
            )
            .await?,
        );
    }
    wait_until(Duration::from_secs(20), || async {
        matches!(get_as(global.api, "/zones", &admin).await,
        Ok((200, v)) if v["items"].as_array().is_some_and(|z| {
            z.iter().filter(|z| z["online"] == true).count() == 2
        }))
    })
    .await
    .map_err(|_| anyhow::anyhow!("the zones did not connect:\n{}", global.log_tail()))?;
    let base = format!("http://{}", global.api);

    // No session: the zones page sends the browser to the sign-in form, coming back after.
    b.goto(&format!("{base}/gui/zones")).await?;
    let url = b.wait_for_path("/gui/login", ELEMENT_WAIT).await?;
    let next: Vec<(String, String)> = url.query_pairs().into_owned().collect();
    assert_eq!(
        next,
        [("next".to_owned(), "/gui/zones".to_owned())],
        "{url}"
    );
    b.wait_for("form#login-form input#token", ELEMENT_WAIT)
        .await?;
    assert!(!b.exists("button#logout").await?, "not signed in yet");
    // Console errors are collected and reported at the end, after the whole flow ran.
    let mut console_errors = Vec::new();
    let mut console_check = |r: anyhow::Result<()>| {
        if let Err(e) = r {
            console_errors.push(format!("{e:#}"));
        }
    };
    tokio::time::sleep(SETTLE).await;
    console_check(b.expect_clean_console("the sign-in form", &[]).await);

    // A bad token is refused with the reason, on the form again.
    b.find("input#token")
        .await?
        .send_keys("not-a-token")
        .await?;
    b.find("button#login-submit").await?.click().await?;
    let reason = b
        .wait_for("#login-error", ELEMENT_WAIT)
        .await?
        .text()
        .await?;
    assert!(!reason.trim().is_empty(), "the refusal says why");
    b.find("form#login-form").await?;
    tokio::time::sleep(SETTLE).await;
    console_check(
        b.expect_clean_console(
            "the refused sign-in",
            &[&own_status_entry(&format!("{base}/gui/login"), 401)],
        )
        .await,
    );
    b.screenshot("login-refused").await?;

    // The admin token signs in and lands on the zones page, which shows both zones.
    b.find("input#token").await?.send_keys(&admin).await?;
    b.find("button#login-submit").await?.click().await?;
    b.wait_for_path("/gui/zones", ELEMENT_WAIT).await?;
    for zone in ["zone-1", "zone-2"] {
        b.wait_for(
            &format!(r#"table#zones tr[data-zone="{zone}"].online"#),
            ELEMENT_WAIT,
        )
        .await?;
    }
    b.find("button#logout").await?;
    tokio::time::sleep(SETTLE).await;
    console_check(
        b.expect_clean_console("the zones page, signed in", &[])
            .await,
    );
    // The token is in no URL, no page, and no cookie a script can read.
    for path in ["/gui/zones", "/gui/meshes"] {
        b.goto(&format!("{base}{path}")).await?;
        b.wait_for("main#main h1", ELEMENT_WAIT).await?;
        assert!(!b.exists("#error").await?, "{}", b.describe().await);
        assert!(!b.url().await?.as_str().contains(&admin), "{path}: URL");
        assert!(!b.source().await?.contains(&admin), "{path}: HTML");
        let cookies = b.eval("return document.cookie;", vec![]).await?;
        assert!(
            !cookies.as_str().unwrap_or_default().contains(&admin),
            "{path}: the session cookie is HttpOnly"
        );
    }

    // Signing out forgets the session.
    b.find("button#logout").await?.click().await?;
    b.wait_for_path("/gui/login", ELEMENT_WAIT).await?;
    b.wait_for("form#login-form", ELEMENT_WAIT).await?;
    b.goto(&format!("{base}/gui/zones")).await?;
    b.wait_for_path("/gui/login", ELEMENT_WAIT).await?;
    assert!(!b.exists("table#zones").await?, "signed out: no zones");
    tokio::time::sleep(SETTLE).await;
    console_check(b.expect_clean_console("after signing out", &[]).await);
    b.close().await?;
    drop(zones);
    anyhow::ensure!(
        console_errors.is_empty(),
        "the sign-in flow works, but pages logged errors:\n{}",
        console_errors.join("\n")
    );
    Ok(())
}
