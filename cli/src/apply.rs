//! `umbractl apply`: `PUT` the documents of a file in order, all or nothing.
//!
//! A file is applied whole or not at all. Documents that fail Umbra's own rules are refused
//! locally before anything is sent ([`crate::resources::check_documents`]). A document the
//! control plane refuses (a cross-resource rule, a read-only type, a conflict) stops the run
//! and the documents this run applied before it are put back as they were, last first: a
//! created one is deleted, an updated one is written back from the copy read just before it
//! was replaced (`If-Match` on the version this run wrote, so a concurrent change is never
//! overwritten; the answer says which could not be put back). With `--continue-on-error` the
//! refused documents, locally or by the control plane, are skipped, the others applied, and
//! the run ends with the list of skipped ones (exit 1).

use std::time::Duration;

use serde_json::Value;

use crate::error::CliError;
use crate::http::{client, send_request, send_request_tagged};
use crate::resources::{skip_reason, Applied, Document};

/// What to do with a refused document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Stop and put back what this run applied.
    RollBack,
    /// Skip it, apply the others, and list the skipped ones at the end.
    Continue,
}

/// How a document stood before this run replaced it.
enum Before {
    /// It did not exist.
    Absent,
    /// The stored copy (the API's JSON) and the version this run's write gave it.
    Stored { body: Value, written: String },
}

/// `PUT` each document in order, calling `progress` after each; `refused_locally` is the text
/// of the documents [`crate::resources::check_documents`] refused (empty when none).
///
/// # Errors
/// [`OnError::RollBack`]: the first refusal, with what was put back. [`OnError::Continue`]:
/// a [`CliError::Refused`] listing every skipped document once the others are applied.
pub async fn apply(
    api_url: &str,
    docs: &[Document],
    refused_locally: &str,
    on_error: OnError,
    mut progress: impl FnMut(&Document, Applied),
) -> Result<Vec<Applied>, CliError> {
    if !refused_locally.is_empty() && on_error == OnError::RollBack {
        return Err(CliError::Input(format!(
            "nothing applied (--continue-on-error applies the valid documents):\n{}",
            refused_locally.trim_end()
        )));
    }
    let http = client(Duration::from_secs(30))?;
    let base = api_url.trim_end_matches('/');
    let mut out = Vec::with_capacity(docs.len());
    let mut done: Vec<(&Document, Before)> = Vec::new();
    let mut skipped = refused_locally.trim_end().to_owned();
    for doc in docs {
        if let Some(reason) = skip_reason(doc) {
            progress(doc, Applied::Skipped(reason));
            out.push(Applied::Skipped(reason));
            continue;
        }
        let url = format!("{base}{}", doc.path());
        let before = match on_error {
            OnError::RollBack => Some(stored(&http, &url).await?),
            OnError::Continue => None,
        };
        let request = http
            .put(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json")
            .body(doc.body.to_string());
        match send_request_tagged(&url, request).await {
            Ok((status, _, etag)) => {
                let a = if status == reqwest::StatusCode::CREATED {
                    Applied::Created
                } else {
                    Applied::Updated
                };
                progress(doc, a);
                out.push(a);
                if let Some(before) = before {
                    done.push((doc, written(before, etag)));
                }
            }
            Err(e) if on_error == OnError::Continue && matches!(e, CliError::Refused(_)) => {
                let reason = format!("{} ({}) refused: {e}", doc.describe(), doc.origin);
                progress(doc, Applied::Skipped("refused by the control plane"));
                out.push(Applied::Skipped("refused by the control plane"));
                skipped.push_str(&format!("\n{reason}"));
            }
            Err(e) => {
                let undo = roll_back(&http, base, &done).await;
                return Err(e.context(format!(
                    "{} ({}) was not applied, nor any document after it; {undo}",
                    doc.describe(),
                    doc.origin,
                )));
            }
        }
    }
    let skipped = skipped.trim_start();
    if !skipped.is_empty() {
        return Err(CliError::Refused(format!(
            "applied the other documents; skipped:\n{skipped}"
        )));
    }
    Ok(out)
}

/// The stored copy at `url` (`Before::Absent` on a 404).
async fn stored(http: &reqwest::Client, url: &str) -> Result<Before, CliError> {
    let request = http.get(url).header("accept", "application/json");
    match send_request(url, request).await {
        Ok((_, text)) => serde_json::from_str(&text)
            .map(|body| Before::Stored {
                body,
                written: String::new(),
            })
            .map_err(|e| CliError::Unavailable(format!("{url}: the answer is not JSON: {e}"))),
        Err(CliError::NotFound(_)) => Ok(Before::Absent),
        Err(e) => Err(e),
    }
}

/// `before`, with the version this run's write produced (the PUT's `ETag`).
fn written(before: Before, etag: Option<String>) -> Before {
    match before {
        Before::Absent => Before::Absent,
        Before::Stored { body, .. } => Before::Stored {
            body,
            written: etag.unwrap_or_default(),
        },
    }
}

/// Put back what `done` applied, last first; what was done, for the error message.
async fn roll_back(http: &reqwest::Client, base: &str, done: &[(&Document, Before)]) -> String {
    if done.is_empty() {
        return "nothing was applied before it".to_owned();
    }
    let mut failed = Vec::new();
    for (doc, before) in done.iter().rev() {
        let url = format!("{base}{}", doc.path());
        let request = match before {
            Before::Absent => http.delete(&url),
            Before::Stored { body, written } => {
                let mut r = http
                    .put(&url)
                    .header("content-type", "application/json")
                    .body(body.to_string());
                if !written.is_empty() {
                    r = r.header("if-match", written.as_str());
                }
                r
            }
        };
        if let Err(e) = send_request(&url, request.header("accept", "application/json")).await {
            failed.push(format!("{} ({e})", doc.describe()));
        }
    }
    if failed.is_empty() {
        format!(
            "the {} document(s) applied before it were put back as they were",
            done.len()
        )
    } else {
        format!(
            "of the {} document(s) applied before it, these could not be put back: {}",
            done.len(),
            failed.join("; ")
        )
    }
}
