//! The web page: one HTML file, one script (four sources joined: the
//! Markdown's finishing touches, the app, the owner's views and @-completion), one style sheet and an icon, compiled
//! into the binary and served by `troupe serve` itself — no build step, no
//! framework, nothing fetched from elsewhere. It signs in with a member's
//! token (kept in the browser's `localStorage`) and uses the same API as
//! everyone else. Messages come rendered as Markdown and sanitised by the
//! server (`html`, see [`super::markdown`]); the CSP forbids inline script
//! and style.

use std::hash::{Hash, Hasher};
use std::io::Write;
use std::sync::OnceLock;

use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use super::AppState;

const INDEX: &str = include_str!("page/index.html");
const SCRIPT: &str = concat!(
    include_str!("page/markdown.js"),
    include_str!("page/app.js"),
    include_str!("page/owner.js"),
    include_str!("page/mention.js")
);
const STYLE: &str = include_str!("page/app.css");
const ICON: &str = include_str!("page/favicon.svg");

/// Images may come from any https address: a bot's GIF is shown from its
/// service (`send_gif`); scripts, styles and connections stay the page's own.
const CSP: &str =
    "default-src 'self'; connect-src 'self' ws: wss:; img-src 'self' data: https:; frame-ancestors 'none'";

/// One file of the page, ready to send: plain, gzipped, and its tag.
struct Asset {
    kind: &'static str,
    body: &'static str,
    gzip: Vec<u8>,
    etag: String,
}

impl Asset {
    fn new(kind: &'static str, body: &'static str) -> Asset {
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        // Writing to memory does not fail; if it did, the plain body is sent.
        let gzip = gz
            .write_all(body.as_bytes())
            .and_then(|()| gz.finish())
            .unwrap_or_default();
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        body.hash(&mut hasher);
        let etag = format!("\"{:016x}\"", hasher.finish());
        Asset {
            kind,
            body,
            gzip,
            etag,
        }
    }

    /// The answer to a request with `headers`: 304 when the browser holds
    /// this version, gzipped when it takes gzip.
    fn answer(&self, headers: &HeaderMap) -> Response {
        let fresh = headers
            .get(header::IF_NONE_MATCH)
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.split(',').any(|t| t.trim() == self.etag));
        let gzip = !self.gzip.is_empty()
            && headers
                .get(header::ACCEPT_ENCODING)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.split(',').any(|e| e.trim().starts_with("gzip")));
        let mut response = if fresh {
            StatusCode::NOT_MODIFIED.into_response()
        } else if gzip {
            self.gzip.clone().into_response()
        } else {
            self.body.into_response()
        };
        let h = response.headers_mut();
        let set = |h: &mut HeaderMap, name, value: &str| {
            if let Ok(v) = HeaderValue::from_str(value) {
                h.insert(name, v);
            }
        };
        set(h, header::CONTENT_TYPE, self.kind);
        // Compiled into the binary: the tag changes with the build, so
        // the browser asks again each time and mostly hears 304.
        set(h, header::CACHE_CONTROL, "no-cache");
        set(h, header::ETAG, &self.etag);
        set(h, header::VARY, "Accept-Encoding");
        set(h, header::X_CONTENT_TYPE_OPTIONS, "nosniff");
        set(h, header::CONTENT_SECURITY_POLICY, CSP);
        if gzip && !fresh {
            set(h, header::CONTENT_ENCODING, "gzip");
        }
        response
    }
}

fn assets() -> &'static [Asset; 4] {
    static ASSETS: OnceLock<[Asset; 4]> = OnceLock::new();
    ASSETS.get_or_init(|| {
        [
            Asset::new("text/html; charset=utf-8", INDEX),
            Asset::new("text/javascript; charset=utf-8", SCRIPT),
            Asset::new("text/css; charset=utf-8", STYLE),
            Asset::new("image/svg+xml", ICON),
        ]
    })
}

/// `/`, `/app.js`, `/app.css`, `/favicon.svg`: gzipped for browsers that
/// take it, with an `ETag` so a reload costs a 304.
pub fn routes() -> Router<AppState> {
    let serve = |i: usize| move |headers: HeaderMap| async move { assets()[i].answer(&headers) };
    Router::new()
        .route("/", get(serve(0)))
        .route("/app.js", get(serve(1)))
        .route("/app.css", get(serve(2)))
        .route("/favicon.svg", get(serve(3)))
}

/// The page's size as first loaded (HTML, script, style, icon), in bytes.
pub fn first_load_bytes() -> usize {
    INDEX.len() + SCRIPT.len() + STYLE.len() + ICON.len()
}

/// The same, gzipped as served to a browser that takes gzip, in bytes.
pub fn first_load_gzip_bytes() -> usize {
    assets().iter().map(|a| a.gzip.len()).sum()
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn request(pairs: &[(header::HeaderName, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.insert(name.clone(), HeaderValue::from_str(value).unwrap());
        }
        h
    }

    #[tokio::test]
    async fn the_script_is_sent_gzipped_and_a_reload_hears_not_modified() {
        let script = &assets()[1];
        let r = script.answer(&request(&[(header::ACCEPT_ENCODING, "br, gzip")]));
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()[header::CONTENT_ENCODING], "gzip");
        let tag = r.headers()[header::ETAG].to_str().unwrap().to_string();
        let bytes = axum::body::to_bytes(r.into_body(), usize::MAX)
            .await
            .unwrap();
        let mut plain = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut plain)
            .unwrap();
        assert_eq!(plain, SCRIPT);
        assert!(bytes.len() < SCRIPT.len() / 2, "gzip saves little");

        let r = script.answer(&request(&[(header::IF_NONE_MATCH, &tag)]));
        assert_eq!(r.status(), StatusCode::NOT_MODIFIED);
        let r = script.answer(&request(&[]));
        assert!(r.headers().get(header::CONTENT_ENCODING).is_none());
        assert!(r.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .starts_with("default-src 'self'"));
    }
}
