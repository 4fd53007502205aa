//! Query parameters: Kuma's list paging (`size`, default 100, at most [`MAX_PAGE_SIZE`], and
//! `offset` in; `{total, items, next?}` out, `next` being the path of the next page with every
//! other query parameter of the request kept, and absent on the last page: Kuma's `…List.next`
//! is a non-nullable string) and enumerated parameters ([`one_of`]). Bad values are 400s with
//! Kuma's `rule` (`enum` with its `choices`, `range`, `format`).

use serde_json::{json, Value};

use crate::error::ApiError;

/// The value of query parameter `name` as one of `choices` (`(spelling, meaning)`), e.g.
/// `shadow=true|false` or `format=summary|full`.
///
/// # Errors
/// A 400 naming the parameter and the spellings allowed (Kuma's `rule: enum`, `choices`).
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
                .with_rule("enum", &names)
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
                    .with_rule("range", &[])
                })?,
        };
        let offset = match param("offset") {
            None => 0,
            Some(v) => v.parse::<usize>().map_err(|_| {
                ApiError::bad_parameter("offset", "must be a non-negative integer")
                    .with_rule("format", &[])
            })?,
        };
        Ok(PageParams { size, offset })
    }

    /// The `{total, items, next?}` body for `items` of this page out of `total`, listed at
    /// `path` for a request with `query`. `next` is `path?offset=<end>&size=<size>` followed by
    /// every other pair of `query` in order (filters such as `label=` and `name=` carry over to
    /// the next page), and is left out on the last page.
    pub fn body(
        &self,
        items: Vec<Value>,
        total: usize,
        path: &str,
        query: &[(String, String)],
    ) -> Value {
        let mut body = json!({"total": total, "items": items});
        let end = self.offset.saturating_add(self.size);
        if end < total {
            let mut next = format!("{path}?offset={end}&size={}", self.size);
            for (k, v) in query.iter().filter(|(k, _)| k != "offset" && k != "size") {
                next.push('&');
                next.push_str(&encode(k));
                next.push('=');
                next.push_str(&encode(v));
            }
            body["next"] = json!(next);
        }
        body
    }
}

/// `s` percent-encoded for a query string: everything but RFC 3986's unreserved characters.
fn encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn next_keeps_every_filter_and_is_absent_on_the_last_page() {
        let query = q(&[
            ("label", "team:a b"),
            ("size", "2"),
            ("name", "web%_"),
            ("offset", "0"),
        ]);
        let page = PageParams::parse(&query).unwrap();
        let body = page.body(vec![json!(1), json!(2)], 5, "/meshes/m/dataplanes", &query);
        assert_eq!(
            body["next"],
            "/meshes/m/dataplanes?offset=2&size=2&label=team%3Aa%20b&name=web%25_"
        );
        let last = PageParams { size: 2, offset: 4 }.body(vec![json!(5)], 5, "/x", &query);
        assert!(last.get("next").is_none(), "{last}");
        assert_eq!(last["total"], 5);
        let exact = PageParams { size: 5, offset: 0 }.body(vec![], 5, "/x", &[]);
        assert!(exact.get("next").is_none(), "{exact}");
    }

    #[test]
    fn bad_parameters_carry_kumas_rule() {
        let rule = |query: &[(&str, &str)]| {
            PageParams::parse(&q(query)).unwrap_err().body()["invalid_parameters"][0].clone()
        };
        assert_eq!(rule(&[("size", "0")])["rule"], "range");
        assert_eq!(rule(&[("size", "1001")])["field"], "size");
        assert_eq!(rule(&[("offset", "x")])["rule"], "format");
        let e = one_of("format", "x", &[("summary", 1), ("full", 2)]).unwrap_err();
        let p = &e.body()["invalid_parameters"][0];
        assert_eq!(p["rule"], "enum");
        assert_eq!(p["choices"], json!(["summary", "full"]));
    }
}
