//! Query parameters: Kuma's list paging (`size`, default 100, at most [`MAX_PAGE_SIZE`], and
//! `offset` in; `{total, items, next}` out, `next` being the URL of the next page or null) and
//! enumerated parameters ([`one_of`]).

use serde_json::{json, Value};

use crate::error::ApiError;

/// The value of query parameter `name` as one of `choices` (`(spelling, meaning)`), e.g.
/// `shadow=true|false` or `format=summary|full`.
///
/// # Errors
/// A 400 naming the parameter and the spellings allowed.
pub fn one_of<T: Copy>(name: &str, value: &str, choices: &[(&str, T)]) -> Result<T, ApiError> {
    choices
        .iter()
        .find(|(spelling, _)| *spelling == value)
        .map(|(_, meaning)| *meaning)
        .ok_or_else(|| {
            let names: Vec<&str> = choices.iter().map(|(s, _)| *s).collect();
            let allowed = match names.split_last() {
                Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
                _ => names.join(""),
            };
            ApiError::bad_parameter(name, format!("must be {allowed}, got {value:?}"))
        })
}

/// Largest page a list returns.
pub const MAX_PAGE_SIZE: usize = 1000;

/// Page size when the request gives none.
pub const DEFAULT_PAGE_SIZE: usize = 100;

/// A page request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PageParams {
    /// Items per page.
    pub size: usize,
    /// Items skipped.
    pub offset: usize,
}

impl PageParams {
    /// Read `size` and `offset` from query pairs.
    ///
    /// # Errors
    /// A 400 naming the parameter when it is not an integer in range.
    pub fn parse(query: &[(String, String)]) -> Result<PageParams, ApiError> {
        let param = |name: &str| {
            query
                .iter()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.as_str())
        };
        let size = match param("size") {
            None => DEFAULT_PAGE_SIZE,
            Some(v) => v
                .parse::<usize>()
                .ok()
                .filter(|n| (1..=MAX_PAGE_SIZE).contains(n))
                .ok_or_else(|| {
                    ApiError::bad_parameter(
                        "size",
                        format!("must be an integer in [1, {MAX_PAGE_SIZE}]"),
                    )
                })?,
        };
        let offset = match param("offset") {
            None => 0,
            Some(v) => v
                .parse::<usize>()
                .map_err(|_| ApiError::bad_parameter("offset", "must be a non-negative integer"))?,
        };
        Ok(PageParams { size, offset })
    }

    /// The `{total, items, next}` body for `items` of this page out of `total`, listed at
    /// `path` (`next` keeps the page size).
    pub fn body(&self, items: Vec<Value>, total: usize, path: &str) -> Value {
        let end = self.offset.saturating_add(self.size);
        let next = (end < total).then(|| format!("{path}?offset={end}&size={}", self.size));
        json!({"total": total, "items": items, "next": next})
    }
}
