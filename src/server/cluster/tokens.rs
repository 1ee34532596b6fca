//! The routes outside a house, with a person's token of another node.
//!
//! A person's token lives in the store of the node that hosts their house,
//! and is valid on every node. Under `/api/houses/HOUSE/…` the house names
//! the node; `/api/me`, `/api/requests`, `POST /api/requests/{id}` and
//! `DELETE /api/tokens/{id}` name none, so a token this node does not know
//! is taken to the peers: each runs the request as it came (the forwarded
//! request carries the `Authorization` header, over the cluster's
//! authenticated connection; no token nor hash is sent otherwise) and
//! checks the token against its own store. The first answer that is not
//! 401 is the client's. A peer that is down is skipped; when no node asked
//! knows the token, the 401 names the nodes not asked.
//!
//! Which node a token belongs to is kept briefly ([`TokenNodes`]: at most
//! [`CAPACITY`] tokens, each for [`KEPT`]), by the token's SHA-256, in this
//! node's memory only: a page polling `/api/me` asks that node straight
//! away, not every peer each time. A kept node that answers 401 (the token
//! revoked, or its house moved) is forgotten and every node asked again.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::extract::Request;
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use troupe_actors::cluster::{Cluster, HttpAnswer};
use troupe_runtime::protocol::wire::HttpRequest;

use super::{answered, carried};
use crate::server::connections::OwnerSocket;
use crate::server::error::ApiError;
use crate::server::AppState;

/// Tokens whose node is kept at most.
pub const CAPACITY: usize = 1024;
/// How long a token's node is kept.
pub const KEPT: Duration = Duration::from_secs(60);
/// The largest body of these routes carried to the peers (an answer to a
/// request is a few words).
const SMALL_BODY: usize = 64 * 1024;

/// Which node a token belongs to, for a while, by the token's hash.
#[derive(Default)]
pub struct TokenNodes {
    kept: parking_lot::Mutex<HashMap<[u8; 32], (String, Instant)>>,
}

impl TokenNodes {
    /// The node `token` was last answered by, if not long ago.
    fn get(&self, token: &[u8; 32]) -> Option<String> {
        let kept = self.kept.lock();
        let (node, at) = kept.get(token)?;
        (at.elapsed() < KEPT).then(|| node.clone())
    }

    /// Keeps `node` for `token`, making room by dropping the stale, then
    /// the oldest.
    fn keep(&self, token: [u8; 32], node: String) {
        let mut kept = self.kept.lock();
        if kept.len() >= CAPACITY && !kept.contains_key(&token) {
            kept.retain(|_, (_, at)| at.elapsed() < KEPT);
            if kept.len() >= CAPACITY {
                let oldest = kept.iter().min_by_key(|(_, (_, at))| *at).map(|(k, _)| *k);
                if let Some(oldest) = oldest {
                    kept.remove(&oldest);
                }
            }
        }
        kept.insert(token, (node, Instant::now()));
    }

    fn forget(&self, token: &[u8; 32]) {
        self.kept.lock().remove(token);
    }
}

/// Whether `request` is for a route outside any house that a token of
/// another node may be asked on, with a bearer token.
pub(super) fn outside_house(request: &Request) -> bool {
    let path = request.uri().path();
    let method = request.method();
    let route = match path.strip_prefix("/api/") {
        Some("me" | "requests") => method == Method::GET,
        Some(rest) => match rest.split_once('/') {
            Some(("requests", id)) => method == Method::POST && !id.contains('/'),
            Some(("tokens", id)) => method == Method::DELETE && !id.contains('/'),
            _ => false,
        },
        None => false,
    };
    route && request.extensions().get::<OwnerSocket>().is_none() && bearer(request).is_some()
}

fn bearer(request: &Request) -> Option<&str> {
    let value = request
        .headers()
        .get(header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.split_once(' ')?;
    scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
}

/// Answers a route outside any house: by the node this token was last
/// found on, else this node, else the first peer that knows it.
pub(super) async fn answer(
    state: &AppState,
    cluster: &Cluster,
    request: Request,
    next: Next,
) -> Response {
    let Some(token) = bearer(&request).map(troupe_runtime::store::tokens::hash) else {
        return next.run(request).await;
    };
    let (parts, body) = request.into_parts();
    let Ok(body) = axum::body::to_bytes(body, SMALL_BODY).await else {
        return ApiError::TooLarge(format!(
            "this route takes a body of {SMALL_BODY} bytes at most"
        ))
        .into_response();
    };
    let asked = super::asked(&parts, carried, false, true);
    let nodes = &state.inner.tokens;
    let mut asked_already = None;
    if let Some(node) = nodes.get(&token).filter(|n| cluster.is_connected(n)) {
        match ask(cluster, &node, &asked, &body).await {
            Some(answer) if answer.head.status != 401 => return answered(answer),
            _ => nodes.forget(&token),
        }
        asked_already = Some(node);
    }
    let here = next
        .run(Request::from_parts(parts, Body::from(body.clone())))
        .await;
    if here.status() != StatusCode::UNAUTHORIZED {
        return here;
    }
    let mut not_asked = Vec::new();
    let mut asking = Vec::new();
    for peer in cluster.peers() {
        if asked_already.as_ref() == Some(&peer.node) {
            continue;
        }
        if peer.connected {
            asking.push(peer.node);
        } else {
            not_asked.push(peer.node);
        }
    }
    let answers = futures::future::join_all(asking.iter().map(|node| {
        let (asked, body) = (&asked, &body);
        async move { (node, ask(cluster, node, asked, body).await) }
    }))
    .await;
    for (node, answer) in answers {
        match answer {
            Some(answer) if answer.head.status != 401 => {
                nodes.keep(token, node.clone());
                return answered(answer);
            }
            Some(_) => {}
            None => not_asked.push(node.clone()),
        }
    }
    if not_asked.is_empty() {
        return here;
    }
    not_asked.sort();
    let names = not_asked
        .iter()
        .map(|n| format!("`{n}`"))
        .collect::<Vec<_>>()
        .join(", ");
    ApiError::Unauthorized(format!(
        "this token is unknown or revoked on every node that was asked; node {names} could not \
         be asked (down): if the token is of a house there, try again when it is back"
    ))
    .into_response()
}

/// `asked` with `body` run by `node`; None when it could not be asked.
async fn ask(
    cluster: &Cluster,
    node: &str,
    asked: &HttpRequest,
    body: &bytes::Bytes,
) -> Option<HttpAnswer> {
    let body = body.clone();
    let body = futures::stream::once(async move { Ok(body) }).boxed();
    match cluster.send_http(node, asked.clone(), body).await {
        Ok(answer) => Some(answer),
        Err(e) => {
            tracing::debug!(%node, error = %e, "a peer could not be asked about a token");
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(method: Method, path: &str) -> Request {
        Request::builder()
            .method(method)
            .uri(path)
            .header(header::AUTHORIZATION, "Bearer troupe_x")
            .body(Body::empty())
            .unwrap()
    }

    #[test]
    fn the_routes_outside_a_house_are_me_requests_and_tokens() {
        assert!(outside_house(&request(Method::GET, "/api/me")));
        assert!(outside_house(&request(Method::GET, "/api/requests")));
        assert!(outside_house(&request(Method::POST, "/api/requests/r1")));
        assert!(outside_house(&request(Method::DELETE, "/api/tokens/ab12")));
        assert!(!outside_house(&request(Method::GET, "/api/houses")));
        assert!(!outside_house(&request(Method::GET, "/api/bots")));
        assert!(!outside_house(&request(Method::POST, "/api/me")));
        let mut no_token = request(Method::GET, "/api/me");
        no_token.headers_mut().remove(header::AUTHORIZATION);
        assert!(!outside_house(&no_token));
    }

    #[test]
    fn a_token_s_node_is_kept_a_while_and_the_oldest_makes_room() {
        let nodes = TokenNodes::default();
        nodes.keep([1; 32], "b".into());
        assert_eq!(nodes.get(&[1; 32]).as_deref(), Some("b"));
        for i in 0..CAPACITY {
            let mut key = [0u8; 32];
            key[..8].copy_from_slice(&(i as u64 + 10).to_le_bytes());
            nodes.keep(key, "c".into());
        }
        assert_eq!(nodes.kept.lock().len(), CAPACITY);
        assert_eq!(nodes.get(&[1; 32]), None, "the oldest made room");
        nodes.forget(&[0; 32]);
    }
}
