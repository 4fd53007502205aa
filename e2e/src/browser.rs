//! A real browser for the console's end-to-end tests (issue 22): Debian's Chromium, headless,
//! driven over WebDriver by Debian's chromedriver (packages `chromium` and `chromium-driver`),
//! with the maintained client crate `fantoccini` speaking plain HTTP to chromedriver on
//! loopback.
//!
//! - [`chromium_tools`] finds the two binaries; without them a test skips locally and fails
//!   under `CI`, as [`crate::envoy_binary`] does for Envoy.
//! - [`Browser::start`] starts chromedriver on a free port and one headless Chromium session
//!   with a fresh profile; both go away on drop: the session is deleted (chromedriver then
//!   quits Chromium, which outlives a killed chromedriver) before chromedriver is killed. The
//!   [`Browser`] exists as soon as the session does, so a step failing after that cannot
//!   leave a Chromium behind.
//! - [`Browser::console_log`] reads the page's console through chromedriver's log endpoint
//!   (`POST /session/{id}/se/log` with `{"type": "browser"}`, enabled by the
//!   `goog:loggingPrefs` capability): each call returns what was logged since the previous
//!   one. A page "loads without console errors" when no entry has level `SEVERE`
//!   ([`Browser::expect_clean_console`]): an uncaught exception, a resource that failed to
//!   load (a 404 favicon, a stylesheet refused by the Content-Security-Policy), a CSP
//!   violation.
//! - [`Browser::screenshot`] writes the viewport as a PNG under [`screenshot_dir`].
//!
//! Every wait has a deadline and fails with what it waited for, the page's URL and the start
//! of its text.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use fantoccini::actions::{InputSource as _, KeyAction, KeyActions};
use fantoccini::elements::Element;
use fantoccini::wd::{Capabilities, TimeoutConfiguration, WebDriverCompatibleCommand};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};

use crate::{free_port, wait_until};

/// Longest a navigation may take before the browser gives up on it (the streamed fleet diff
/// page finishes loading only when its run does).
pub const PAGE_LOAD_TIMEOUT: Duration = Duration::from_secs(45);

/// Longest a script run in the page may take.
const SCRIPT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a wait looks again.
const POLL: Duration = Duration::from_millis(100);

/// Where Chromium and chromedriver are.
#[derive(Debug, Clone)]
pub struct Tools {
    /// The browser (`/usr/bin/chromium`).
    pub chromium: PathBuf,
    /// Its WebDriver server (`/usr/bin/chromedriver`).
    pub chromedriver: PathBuf,
}

/// Chromium and chromedriver: `UMBRA_CHROMIUM` / `UMBRA_CHROMEDRIVER`, else Debian's
/// `/usr/bin/chromium` and `/usr/bin/chromedriver`, else `chromium` / `chromedriver` on
/// `PATH`. `None` when either is missing: tests then skip locally.
///
/// # Panics
/// When either is missing and `CI` is set (`scripts/test` installs both).
pub fn chromium_tools() -> Option<Tools> {
    let chromium = find_binary("UMBRA_CHROMIUM", "/usr/bin/chromium", "chromium");
    let chromedriver = find_binary(
        "UMBRA_CHROMEDRIVER",
        "/usr/bin/chromedriver",
        "chromedriver",
    );
    match (chromium, chromedriver) {
        (Some(chromium), Some(chromedriver)) => Some(Tools {
            chromium,
            chromedriver,
        }),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "chromium or chromedriver not found (install Debian's chromium and chromium-driver)"
            );
            None
        }
    }
}

/// `$env`, else `default` when it exists, else `name` found on `PATH`.
fn find_binary(env: &str, default: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(env) {
        return Some(PathBuf::from(p));
    }
    let default = Path::new(default);
    if default.is_file() {
        return Some(default.to_owned());
    }
    std::env::split_paths(&std::env::var_os("PATH")?)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// The directory the console's screenshots go to: `<target>/console-screenshots`, where
/// `<target>` is `CARGO_TARGET_DIR` (relative to the workspace root when relative) or the
/// workspace's `target/`. Created when missing.
///
/// # Errors
/// When it cannot be created.
pub fn screenshot_dir() -> anyhow::Result<PathBuf> {
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let target = match std::env::var_os("CARGO_TARGET_DIR") {
        Some(t) => workspace.join(t),
        None => workspace.join("target"),
    };
    let dir = target.join("console-screenshots");
    std::fs::create_dir_all(&dir)?;
    Ok(dir)
}

/// One entry of the browser's console log, as chromedriver reports it.
#[derive(Debug, Clone, serde::Deserialize)]
pub struct LogEntry {
    /// `SEVERE`, `WARNING`, `INFO`, `DEBUG`.
    pub level: String,
    /// What was logged; for a resource that failed to load, its URL first.
    pub message: String,
    /// Where it came from: `javascript`, `console-api`, `network`, `security`, ...
    #[serde(default)]
    pub source: String,
}

impl LogEntry {
    /// Whether this is an error (`SEVERE`).
    pub fn is_severe(&self) -> bool {
        self.level == "SEVERE"
    }
}

impl std::fmt::Display for LogEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "[{} {}] {}", self.level, self.source, self.message)
    }
}

/// chromedriver's own command reading the browser's console log since the last read
/// (`POST /session/{id}/se/log`, body `{"type": "browser"}`); not part of W3C WebDriver, so
/// sent as a custom command.
#[derive(Debug)]
struct GetBrowserLog;

impl WebDriverCompatibleCommand for GetBrowserLog {
    fn endpoint(
        &self,
        base_url: &url::Url,
        session_id: Option<&str>,
    ) -> Result<url::Url, url::ParseError> {
        base_url.join(&format!(
            "session/{}/se/log",
            session_id.unwrap_or_default()
        ))
    }

    fn method_and_body(&self, _request_url: &url::Url) -> (::http::Method, Option<String>) {
        (
            ::http::Method::POST,
            Some(json!({"type": "browser"}).to_string()),
        )
    }
}

/// A chromedriver process on a loopback port; killed on drop (by its own pid: a Chromium it
/// started is quit by deleting the session first, see [`Browser`]'s drop).
struct Driver {
    child: Child,
    addr: SocketAddr,
    log: PathBuf,
}

impl Driver {
    /// Start `binary` on a free port, logging to `<dir>/chromedriver.log` (what it prints to
    /// `<dir>/chromedriver.out`), and wait (at most 15 s) until `GET /status` says it is ready.
    async fn start(binary: &Path, dir: &Path) -> anyhow::Result<Driver> {
        let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse()?;
        let log = dir.join("chromedriver.log");
        let out = std::fs::File::create(dir.join("chromedriver.out"))?;
        let child = Command::new(binary)
            .arg(format!("--port={}", addr.port()))
            .arg(format!("--log-path={}", log.display()))
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .map_err(|e| anyhow::anyhow!("starting {}: {e}", binary.display()))?;
        let driver = Driver { child, addr, log };
        let ready = wait_until(Duration::from_secs(15), || async move {
            driver_ready(addr).await
        })
        .await;
        if ready.is_err() {
            anyhow::bail!(
                "chromedriver was not ready within 15 s:\n{}",
                driver.log_tail()
            );
        }
        Ok(driver)
    }

    /// The last lines of chromedriver's log and of what it printed.
    fn log_tail(&self) -> String {
        let tail = |path: &Path| {
            let text = std::fs::read_to_string(path).unwrap_or_default();
            let lines: Vec<&str> = text.lines().collect();
            lines[lines.len().saturating_sub(30)..].join("\n")
        };
        format!(
            "{}\n{}",
            tail(&self.log.with_extension("out")),
            tail(&self.log)
        )
    }

    /// `method path` to chromedriver with a blocking request (at most 10 s for its answer);
    /// the answer's body, read as far as its `content-length` says (chromedriver may keep the
    /// connection open), or `None` without an answer. For drop, where no runtime may be left
    /// to ask it.
    fn request_blocking(&self, method: &str, path: &str) -> Option<Vec<u8>> {
        use std::io::{Read as _, Write as _};
        let mut sock =
            std::net::TcpStream::connect_timeout(&self.addr, Duration::from_secs(1)).ok()?;
        sock.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
        sock.set_write_timeout(Some(Duration::from_secs(1))).ok()?;
        let req = format!(
            "{method} {path} HTTP/1.1\r\nhost: {}\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            self.addr
        );
        sock.write_all(req.as_bytes()).ok()?;
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            let body = seen.windows(4).position(|w| w == b"\r\n\r\n").map(|end| {
                let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                let len = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse::<usize>().ok())
                    .unwrap_or(0);
                (end + 4, len)
            });
            if let Some((start, len)) = body {
                if seen.len() >= start + len {
                    return Some(seen[start..start + len].to_vec());
                }
            }
            match sock.read(&mut buf) {
                Ok(0) | Err(_) => return body.map(|(start, _)| seen[start..].to_vec()),
                Ok(n) => seen.extend_from_slice(&buf[..n]),
            }
        }
    }

    /// Delete WebDriver session `id` (blocking, at most 10 s): chromedriver then quits its
    /// Chromium.
    fn delete_session_blocking(&self, id: &str) {
        let _ = self.request_blocking("DELETE", &format!("/session/{id}"));
    }

    /// The ids of every session this chromedriver holds (`GET /sessions`, blocking), for a
    /// drop that does not know its own: each chromedriver here serves one [`Browser`] only.
    fn session_ids_blocking(&self) -> Vec<String> {
        let body = self
            .request_blocking("GET", "/sessions")
            .unwrap_or_default();
        let answer: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
        answer["value"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
            .iter()
            .filter_map(|s| s["id"].as_str())
            .filter(|id| !id.is_empty() && id.bytes().all(|b| b.is_ascii_alphanumeric()))
            .map(str::to_owned)
            .collect()
    }
}

/// Whether chromedriver at `addr` answers `GET /status` with `"ready":true` within a second.
/// (A raw request: chromedriver keeps the connection open, so the answer is read only as far
/// as needed.)
async fn driver_ready(addr: SocketAddr) -> bool {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let ask = async {
        let mut sock = tokio::net::TcpStream::connect(addr).await.ok()?;
        let req = format!("GET /status HTTP/1.1\r\nhost: {addr}\r\nconnection: close\r\n\r\n");
        sock.write_all(req.as_bytes()).await.ok()?;
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        loop {
            let n = sock.read(&mut buf).await.ok()?;
            if n == 0 {
                return Some(false);
            }
            seen.extend_from_slice(&buf[..n]);
            let ready: &[u8] = b"\"ready\":true";
            if seen.windows(ready.len()).any(|w| w == ready) {
                return Some(true);
            }
        }
    };
    matches!(
        tokio::time::timeout(Duration::from_secs(1), ask).await,
        Ok(Some(true))
    )
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One headless Chromium session driven through chromedriver. Dropping it deletes the
/// session, kills chromedriver and removes the profile; [`Browser::close`] does the same
/// politely.
pub struct Browser {
    client: Client,
    session: String,
    driver: Option<Driver>,
    dir: PathBuf,
    shots: PathBuf,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("session", &self.session)
            .field("driver", &self.driver.as_ref().map(|d| d.addr))
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// Start chromedriver and a headless Chromium session (window 1400×1000, a fresh profile,
    /// the console log recorded); `Ok(None)` when Chromium or chromedriver is not installed
    /// (the caller skips; under `CI` that panics instead, see [`chromium_tools`]).
    ///
    /// # Errors
    /// chromedriver does not start, or refuses the session (with its log).
    pub async fn start() -> anyhow::Result<Option<Browser>> {
        let Some(tools) = chromium_tools() else {
            return Ok(None);
        };
        Self::start_with(&tools).await.map(Some)
    }

    /// Like [`Browser::start`] with the given binaries.
    ///
    /// # Errors
    /// chromedriver does not start, or refuses the session (with its log).
    pub async fn start_with(tools: &Tools) -> anyhow::Result<Browser> {
        // Every fallible step that needs no chromedriver comes first, and the Browser (whose
        // drop deletes the session and stops chromedriver) exists as soon as the session
        // does: a later failure cannot leave a Chromium behind.
        let shots = screenshot_dir()?;
        let dir = crate::fleet::temp_dir("browser");
        let profile = dir.join("profile");
        std::fs::create_dir_all(&profile)?;
        let driver = Driver::start(&tools.chromedriver, &dir).await?;
        let caps = json!({
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": tools.chromium,
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-dev-shm-usage",
                    "--window-size=1400,1000",
                    format!("--user-data-dir={}", profile.display()),
                ],
            },
            "goog:loggingPrefs": {"browser": "ALL"},
        });
        let Value::Object(caps) = caps else {
            unreachable!("capabilities are an object")
        };
        let caps: Capabilities = caps;
        let mut builder =
            ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new());
        builder.capabilities(caps);
        let url = format!("http://{}/", driver.addr);
        let client =
            match tokio::time::timeout(Duration::from_secs(30), builder.connect(&url)).await {
                Ok(Ok(c)) => c,
                Ok(Err(e)) => anyhow::bail!(
                    "chromedriver refused a Chromium session: {e}\n{}",
                    driver.log_tail()
                ),
                Err(_) => anyhow::bail!("no Chromium session within 30 s:\n{}", driver.log_tail()),
            };
        let mut browser = Browser {
            client,
            session: String::new(),
            driver: Some(driver),
            dir,
            shots,
        };
        // Fails only when the client's session task is gone; the drop then finds the session
        // by asking chromedriver.
        browser.session = browser.client.session_id().await?.unwrap_or_default();
        browser
            .client
            .update_timeouts(TimeoutConfiguration::new(
                Some(SCRIPT_TIMEOUT),
                Some(PAGE_LOAD_TIMEOUT),
                Some(Duration::ZERO),
            ))
            .await?;
        Ok(browser)
    }

    /// The WebDriver client, for what these helpers do not cover.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// Navigate to `url` and wait for its load event (at most [`PAGE_LOAD_TIMEOUT`]).
    ///
    /// # Errors
    /// The navigation fails or times out.
    pub async fn goto(&self, url: &str) -> anyhow::Result<()> {
        self.client
            .goto(url)
            .await
            .map_err(|e| anyhow::anyhow!("loading {url}: {e}"))
    }

    /// The page's URL now.
    ///
    /// # Errors
    /// The session is gone.
    pub async fn url(&self) -> anyhow::Result<url::Url> {
        Ok(self.client.current_url().await?)
    }

    /// The page's HTML as the browser has it now.
    ///
    /// # Errors
    /// The session is gone.
    pub async fn source(&self) -> anyhow::Result<String> {
        Ok(self.client.source().await?)
    }

    /// What the console logged since the previous call (or since the session started).
    ///
    /// # Errors
    /// chromedriver does not answer, or answers something that is not a log.
    pub async fn console_log(&self) -> anyhow::Result<Vec<LogEntry>> {
        let value = self.client.issue_cmd(GetBrowserLog).await?;
        serde_json::from_value(value.clone()).map_err(|e| {
            anyhow::anyhow!("chromedriver's log is not a list of entries ({e}): {value}")
        })
    }

    /// Fail when the console logged an error (`SEVERE`) since the previous read, naming
    /// `page` and every entry; `allow` keeps entries whose message contains one of its
    /// strings (a page that is meant to answer an error status logs that status).
    ///
    /// # Errors
    /// An error entry, or the log cannot be read.
    pub async fn expect_clean_console(&self, page: &str, allow: &[&str]) -> anyhow::Result<()> {
        let errors: Vec<String> = self
            .console_log()
            .await?
            .into_iter()
            .filter(|e| e.is_severe() && !allow.iter().any(|a| e.message.contains(a)))
            .map(|e| e.to_string())
            .collect();
        anyhow::ensure!(
            errors.is_empty(),
            "{page}: console errors:\n  {}",
            errors.join("\n  ")
        );
        Ok(())
    }

    /// Every element matching `css` now (possibly none).
    ///
    /// # Errors
    /// The session is gone.
    pub async fn all(&self, css: &str) -> anyhow::Result<Vec<Element>> {
        Ok(self.client.find_all(Locator::Css(css)).await?)
    }

    /// Whether an element matches `css` now.
    ///
    /// # Errors
    /// The session is gone.
    pub async fn exists(&self, css: &str) -> anyhow::Result<bool> {
        Ok(!self.all(css).await?.is_empty())
    }

    /// The first element matching `css`, waiting at most `timeout` for it to appear.
    ///
    /// # Errors
    /// None appeared in time: the error names `css`, the URL and the start of the page's text.
    pub async fn wait_for(&self, css: &str, timeout: Duration) -> anyhow::Result<Element> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(e) = self.all(css).await?.into_iter().next() {
                return Ok(e);
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "no element `{css}` within {timeout:?}\n{}",
                    self.describe().await
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// Wait at most `timeout` until the page's URL path is `path`.
    ///
    /// # Errors
    /// It is not in time (with the URL it is at).
    pub async fn wait_for_path(&self, path: &str, timeout: Duration) -> anyhow::Result<url::Url> {
        let deadline = Instant::now() + timeout;
        loop {
            let url = self.url().await?;
            if url.path() == path {
                return Ok(url);
            }
            if Instant::now() >= deadline {
                anyhow::bail!(
                    "the page did not reach {path} within {timeout:?}\n{}",
                    self.describe().await
                );
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// The first element matching `css` now.
    ///
    /// # Errors
    /// There is none (with the URL and the start of the page's text).
    pub async fn find(&self, css: &str) -> anyhow::Result<Element> {
        match self.all(css).await?.into_iter().next() {
            Some(e) => Ok(e),
            None => anyhow::bail!("no element `{css}`\n{}", self.describe().await),
        }
    }

    /// Attribute `name` of the first element matching `css`.
    ///
    /// # Errors
    /// No such element.
    pub async fn attr(&self, css: &str, name: &str) -> anyhow::Result<Option<String>> {
        Ok(self.find(css).await?.attr(name).await?)
    }

    /// The rendered text of the first element matching `css`.
    ///
    /// # Errors
    /// No such element.
    pub async fn text(&self, css: &str) -> anyhow::Result<String> {
        Ok(self.find(css).await?.text().await?)
    }

    /// Run `script` (a function body; `arguments` holds `args`) in the page; its return value.
    ///
    /// # Errors
    /// The script throws or takes longer than 10 s.
    pub async fn eval(&self, script: &str, args: Vec<Value>) -> anyhow::Result<Value> {
        Ok(self.client.execute(script, args).await?)
    }

    /// Press and release `key` (a character, or a [`fantoccini::key::Key`] as `char`) on
    /// whatever has the focus, as a keyboard would.
    ///
    /// # Errors
    /// The session is gone.
    pub async fn press(&self, key: char) -> anyhow::Result<()> {
        let keys = KeyActions::new("keyboard".into())
            .then(KeyAction::Down { value: key })
            .then(KeyAction::Up { value: key });
        self.client.perform_actions(keys).await?;
        Ok(())
    }

    /// Write the browser's viewport as `<screenshot_dir>/<name>.png`; its path.
    ///
    /// # Errors
    /// The browser cannot take it or the file cannot be written.
    pub async fn screenshot(&self, name: &str) -> anyhow::Result<PathBuf> {
        let png = self.client.screenshot().await?;
        anyhow::ensure!(
            png.starts_with(b"\x89PNG"),
            "the screenshot of {name} is not a PNG"
        );
        let path = self.shots.join(format!("{name}.png"));
        std::fs::write(&path, png)?;
        Ok(path)
    }

    /// The URL and the first 1,500 characters of the page's text, for failure messages.
    pub async fn describe(&self) -> String {
        let url = self
            .client
            .current_url()
            .await
            .map(|u| u.to_string())
            .unwrap_or_else(|e| format!("(no URL: {e})"));
        let text = self
            .client
            .execute(
                "return document.body ? document.body.innerText : document.documentElement.outerHTML;",
                vec![],
            )
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let text: String = text.chars().take(1500).collect();
        format!("page {url}:\n{text}")
    }

    /// End the session (Chromium quits), stop chromedriver, remove the profile.
    ///
    /// # Errors
    /// The session could not be ended cleanly (everything is stopped anyway).
    pub async fn close(self) -> anyhow::Result<()> {
        let closed = tokio::time::timeout(Duration::from_secs(10), self.client.clone().close())
            .await
            .map_err(|_| anyhow::anyhow!("the session did not end within 10 s"))
            .and_then(|r| r.map_err(anyhow::Error::from));
        drop(self);
        closed
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(driver) = self.driver.take() {
            // After close() chromedriver answers 404 here; otherwise this quits Chromium. A
            // session whose id was never read is found by asking chromedriver.
            let ids = if self.session.is_empty() {
                driver.session_ids_blocking()
            } else {
                vec![self.session.clone()]
            };
            for id in ids {
                driver.delete_session_blocking(&id);
            }
            drop(driver);
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
