//! The web console, `/gui/` (issue 22): server-rendered pages over the CP's own API, served by
//! the Global and by a standalone zone on their API port. No build toolchain: the templates
//! (minijinja), the stylesheet and the one small script are embedded in the binary, and the
//! pages work without the script and without any network beyond the CP.
//!
//! - [`state`]: what handlers share; [`error`]: a page's error;
//! - [`client`]: the in-process API calls made on a browser's behalf, with its credentials;
//! - [`session`]: signing in and out (the API's own authentication, via a session cookie);
//! - [`render`]: templates, the page frame, error pages, security headers; [`query`]: a page's
//!   query string, or a 400 page;
//! - [`pages`]: one module per view: zones and meshes ([`pages::fleet`]), Dataplanes with
//!   their ADS state ([`pages::dataplanes`]), policies by type ([`pages::policies`]), one DPP
//!   with its rules and config diff ([`pages::dataplane`]), the fleet-wide shadow diff,
//!   streamed as zones answer ([`pages::shadow_diff`]), and an observed policy's evidence
//!   from the Envoys' counters ([`pages::observed`]), and a mesh's staged rollout with each
//!   gate's numbers ([`pages::rollout`]);
//! - [`diff_view`]: an RFC 6902 diff laid out per xDS resource, old and new side by side (pure);
//! - [`assets`]: the stylesheet and the script; [`pages::raw`]: an API answer as JSON, for
//!   "raw JSON" links (the session cookie is not an API credential).
//!
//! Every view has a deep link: its URL carries its query (`/gui/meshes/{mesh}/shadow-diff?
//! policy=...&zone=...`, `/gui/meshes/{mesh}/dataplanes/{name}`).

pub mod assets;
pub mod client;
pub mod diff_view;
pub mod error;
pub mod pages;
pub mod query;
pub mod render;
pub mod session;
pub mod state;

pub use state::{Console, Mode};

use std::sync::Arc;

use axum::routing::{get, post};
use axum::Router;

/// `api` with the console beside it under `/gui/`. The console asks `api` itself (in-process,
/// with each browser's credentials), so it sees exactly what the caller may see.
pub fn mount(api: Router, mode: Mode) -> Router {
    let console = Console {
        api: api.clone(),
        mode,
        templates: Arc::new(render::environment()),
    };
    let gui = Router::new()
        .route("/gui", get(pages::index))
        .route("/gui/", get(pages::index))
        .route("/gui/login", get(session::login_form).post(session::login))
        .route("/gui/logout", post(session::logout))
        .route("/gui/assets/{file}", get(assets::serve))
        .route("/gui/zones", get(pages::fleet::zones))
        .route("/gui/replicas", get(pages::fleet::replicas))
        .route("/gui/meshes", get(pages::fleet::meshes))
        .route("/gui/meshes/{mesh}", get(pages::fleet::mesh))
        .route(
            "/gui/meshes/{mesh}/dataplanes",
            get(pages::dataplanes::list),
        )
        .route(
            "/gui/meshes/{mesh}/dataplanes/{name}",
            get(pages::dataplane::show),
        )
        .route("/gui/meshes/{mesh}/policies", get(pages::policies::list))
        .route("/gui/meshes/{mesh}/rollout", get(pages::rollout::show))
        .route(
            "/gui/meshes/{mesh}/policies/{plural}/{name}/observed",
            get(pages::observed::show),
        )
        .route("/gui/api/{*path}", get(pages::raw::show))
        .route(
            "/gui/meshes/{mesh}/shadow-diff",
            get(pages::shadow_diff::show),
        )
        // Any other `/gui/...` path is the console's 404 page, not the API's.
        .route("/gui/{*rest}", axum::routing::any(pages::not_found))
        .with_state(console);
    gui.merge(api)
}
