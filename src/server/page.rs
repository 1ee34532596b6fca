//! The web page: one HTML file, one script (two sources joined: the
//! Markdown renderer and the app), one style sheet and an icon, compiled
//! into the binary and served by `troupe serve` itself — no build step, no
//! framework, nothing fetched from elsewhere. It signs in with a member's
//! token (kept in the browser's `localStorage`) and uses the same API as
//! everyone else. Messages are rendered as Markdown into DOM nodes, never
//! as HTML text, and the CSP forbids inline script and style.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = concat!(
    include_str!("page/markdown.js"),
    include_str!("page/app.js")
);
const STYLE: &str = include_str!("page/app.css");
const ICON: &str = include_str!("page/favicon.svg");

/// `/`, `/app.js`, `/app.css`, `/favicon.svg`.
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(
            "/",
            get(|| async { page("text/html; charset=utf-8", INDEX) }),
        )
        .route(
            "/app.js",
            get(|| async { page("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route(
            "/app.css",
            get(|| async { page("text/css; charset=utf-8", STYLE) }),
        )
        .route(
            "/favicon.svg",
            get(|| async { page("image/svg+xml", ICON) }),
        )
}

fn page(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data:; frame-ancestors 'none'",
            ),
        ],
        body,
    )
}

/// The page's size as first loaded (HTML, script, style, icon), in bytes.
pub fn first_load_bytes() -> usize {
    INDEX.len() + SCRIPT.len() + STYLE.len() + ICON.len()
}
