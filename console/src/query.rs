//! [`PageQuery`]: a page's query string, parsed, or the console's 400 page naming what is
//! wrong with it (not axum's plain-text rejection, which would carry none of the console's
//! headers).

use axum::extract::{FromRequestParts, Query};
use axum::http::request::Parts;
use axum::response::Response;
use serde::de::DeserializeOwned;

use crate::client::Caller;
use crate::error::PageError;
use crate::state::Console;

/// The query of a page, deserialized into `T`.
#[derive(Debug, Clone, Copy, Default)]
pub struct PageQuery<T>(pub T);

impl<T: DeserializeOwned + Send> FromRequestParts<Console> for PageQuery<T> {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, console: &Console) -> Result<Self, Response> {
        match Query::<T>::from_request_parts(parts, console).await {
            Ok(Query(q)) => Ok(PageQuery(q)),
            Err(e) => {
                let caller = match Caller::from_request_parts(parts, console).await {
                    Ok(c) => c,
                    Err(never) => match never {},
                };
                Err(PageError::bad_request(e.body_text()).respond(
                    console,
                    &caller,
                    &parts.uri.to_string(),
                ))
            }
        }
    }
}
