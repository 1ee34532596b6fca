//! The web page: one HTML file, one script, one style sheet, compiled into
//! the binary and served by `troupe serve` itself — no build step, no
//! framework, nothing fetched from elsewhere. It signs in with a member's
//! token (kept in the browser's `localStorage`) and uses the same API as
//! everyone else.

use axum::http::header;
use axum::response::IntoResponse;
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = include_str!("page/app.js");
const STYLE: &str = include_str!("page/app.css");

/// `/`, `/app.js`, `/app.css`.
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

/// The page's size as first loaded (HTML, script, style), in bytes.
pub fn first_load_bytes() -> usize {
    INDEX.len() + SCRIPT.len() + STYLE.len()
}
