//! Requests for a house another node of the cluster hosts (docs/cluster.md).
//!
//! A house lives on one node. A request to this node under
//! `/api/houses/HOUSE/…` for a house a peer hosts (and this node does not)
//! is not answered here: [`forward`] sends it over the cluster to that
//! node, which runs it through its own router ([`Answer`]) and sends back
//! the status, headers and body. The token is checked there, where its
//! house and its tokens are: a token is valid on every node, for its own
//! house. When that node is down, the answer is 503 naming it.
//!
//! A WebSocket stream under `/api/houses/HOUSE/…` (a thread's events) goes
//! there too, and stays relayed over the cluster until either side closes
//! ([`streams`]): the house's node runs the upgrade through its own router,
//! and the client is upgraded here only if that router upgraded it.
//!
//! A body, either way, goes in one frame when it fits one (4 MiB) and in
//! pieces over the same connection when not, read and written as it flows
//! (`troupe_actors::cluster::bodies`): any request the house's node takes,
//! up to the API's body limit, is taken through any node.

mod streams;
mod tokens;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderName, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use bytes::Bytes;
use futures::StreamExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tower::ServiceExt;
use troupe_actors::cluster::{
    BodyStream, ForwardError, HouseOnPeer, HttpAnswer, HttpHandler, PlaceError,
};
use troupe_runtime::protocol::wire::{self, HttpRequest, HttpResponse};

use super::connections::OwnerSocket;
use super::error::ApiError;
use super::AppState;

pub(crate) use streams::Accept;
pub(crate) use tokens::TokenNodes;

/// Marks a request another node forwarded: it is answered here, never
/// forwarded again.
#[derive(Debug, Clone, Copy)]
pub struct Forwarded;

/// Headers not carried between nodes: the connection's own, and those this
/// node checked already (`Host`, `Origin`).
fn carried(name: &HeaderName) -> bool {
    !matches!(
        name.as_str(),
        "host"
            | "origin"
            | "connection"
            | "keep-alive"
            | "content-length"
            | "transfer-encoding"
            | "upgrade"
            | "te"
            | "trailer"
            | "proxy-connection"
    )
}

/// The headers of `headers` that `keep` carries to another node, as text.
fn header_pairs(
    headers: &axum::http::HeaderMap,
    keep: fn(&HeaderName) -> bool,
) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(k, _)| keep(k))
        .filter_map(|(k, v)| Some((k.as_str().to_string(), v.to_str().ok()?.to_string())))
        .collect()
}

/// The head of a request for another node (its body goes apart).
fn asked(
    parts: &axum::http::request::Parts,
    keep: fn(&HeaderName) -> bool,
    owner: bool,
    pieces: bool,
) -> HttpRequest {
    HttpRequest {
        method: parts.method.as_str().to_string(),
        uri: parts
            .uri
            .path_and_query()
            .map_or_else(|| parts.uri.path().to_string(), |p| p.as_str().to_string()),
        headers: header_pairs(&parts.headers, keep),
        body: wire::Bytes::default(),
        owner,
        pieces,
    }
}

/// The house a path names: `/api/houses/HOUSE` or `/api/houses/HOUSE/…`.
fn house_in_path(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/api/houses/")?;
    let name = rest.split('/').next()?;
    (!name.is_empty()).then_some(name)
}

/// The middleware: a request for a house a peer hosts goes to that peer.
pub async fn forward(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let Some(cluster) = state.inner.options.cluster.as_ref() else {
        return next.run(request).await;
    };
    let house = house_in_path(request.uri().path()).map(str::to_string);
    // Counted while it runs (a move of the house waits for it), or held
    // while the house is being moved from here.
    let mut _serving = None;
    // A move itself is not one of the requests it waits for.
    let moving_it = house
        .as_deref()
        .is_some_and(|h| request.uri().path() == format!("/api/houses/{h}/move"));
    if let Some(h) = house.as_deref().filter(|_| !moving_it) {
        loop {
            match cluster.serving(h) {
                Ok(guard) => {
                    _serving = Some(guard);
                    break;
                }
                Err(held) => {
                    if let Err(busy) = wait_for_move(h, held).await {
                        return busy.into_response();
                    }
                }
            }
        }
    }
    let Some(there) = house.as_deref().and_then(|h| cluster.house_on_peer(h)) else {
        if request.extensions().get::<Forwarded>().is_none() && tokens::outside_house(&request) {
            return tokens::answer(&state, cluster, request, next).await;
        }
        return next.run(request).await;
    };
    // Two nodes that made one name while apart: this node's is served here.
    if state.node().house(&there.house.name).await.is_ok() {
        return next.run(request).await;
    }
    // Forwarded here, it is answered here — unless the house moved from
    // here since the asking node looked: then on to where it went.
    if request.extensions().get::<Forwarded>().is_some()
        && cluster.moved_to(&there.house.name).as_deref() != Some(there.node.as_str())
    {
        return next.run(request).await;
    }
    let stopping = state.stopping().clone();
    let limit = state.inner.options.body_limit;
    match to_peer(cluster, &there, request, limit, stopping).await {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

/// How long a request for a house being moved from this node waits for
/// the move to end.
const MOVE_HOLD: std::time::Duration = std::time::Duration::from_secs(30);

/// Waits while `house` is being moved from this node (its requests queue
/// here, then go where it is): an error if the move outlasts [`MOVE_HOLD`].
async fn wait_for_move(
    house: &str,
    (to, mut ended): (String, tokio::sync::watch::Receiver<bool>),
) -> Result<(), ApiError> {
    match tokio::time::timeout(MOVE_HOLD, ended.wait_for(|e| *e)).await {
        Ok(_) => Ok(()),
        Err(_) => Err(ApiError::NodeDown {
            node: to.clone(),
            message: format!(
                "house `{house}` is being moved to node `{to}` and is not served until the move ends; try again shortly"
            ),
        }),
    }
}

async fn to_peer(
    cluster: &troupe_actors::cluster::Cluster,
    there: &HouseOnPeer,
    request: Request,
    limit: usize,
    stopping: tokio_util::sync::CancellationToken,
) -> Result<Response, ApiError> {
    let (name, node) = (&there.house.name, &there.node);
    let at = there
        .http
        .as_ref()
        .map(|u| format!(" ({u})"))
        .unwrap_or_default();
    if !there.connected {
        return Err(ApiError::NodeDown {
            node: node.clone(),
            message: format!(
                "house `{name}` is on node `{node}`{at}, which is down; it is served again when \
                 that node returns (there is no fail-over)"
            ),
        });
    }
    if request.headers().contains_key(header::UPGRADE) {
        return streams::open(cluster, there, request, stopping).await;
    }
    let owner = request.extensions().get::<OwnerSocket>().is_some();
    let (parts, body) = request.into_parts();
    let over = Arc::new(AtomicBool::new(false));
    let body = limited(body, limit, Arc::clone(&over));
    let asked = asked(&parts, carried, owner, true);
    match cluster.send_http(node, asked, body).await {
        Ok(answer) => Ok(answered(answer)),
        Err(ForwardError::Unreachable(e)) => Err(unreachable(there, e)),
        Err(e @ ForwardError::Older { .. }) => Err(ApiError::TooLarge(format!("{e}{at}"))),
        Err(ForwardError::Body(_)) if over.load(Ordering::Relaxed) => {
            Err(ApiError::TooLarge(format!(
                "the request's body is over this server's limit of {limit} bytes \
                 (`server.max_body_bytes`)"
            )))
        }
        Err(ForwardError::Body(e)) => Err(ApiError::BadRequest(format!(
            "the request's body could not be read: {e}"
        ))),
    }
}

/// A client's body as a stream, cut with an error past `limit` bytes
/// (`over` then says so).
fn limited(body: Body, limit: usize, over: Arc<AtomicBool>) -> BodyStream {
    let mut seen = 0usize;
    body.into_data_stream()
        .map(move |chunk| {
            let chunk = chunk.map_err(|e| e.to_string())?;
            seen += chunk.len();
            if seen > limit {
                over.store(true, Ordering::Relaxed);
                return Err(format!("the body is over {limit} bytes"));
            }
            Ok(chunk)
        })
        .boxed()
}

/// The answer when `there`'s node could not be asked.
fn unreachable(there: &HouseOnPeer, e: PlaceError) -> ApiError {
    let (name, node) = (&there.house.name, &there.node);
    let at = there
        .http
        .as_ref()
        .map(|u| format!(" ({u})"))
        .unwrap_or_default();
    match e {
        PlaceError::Down { .. } => ApiError::NodeDown {
            node: node.clone(),
            message: format!(
                "house `{name}` is on node `{node}`{at}, which is down; it is served again \
                 when that node returns (there is no fail-over)"
            ),
        },
        other => ApiError::NodeDown {
            node: node.clone(),
            message: format!("house `{name}` is on node `{node}`{at}: {other}"),
        },
    }
}

fn response(answer: HttpResponse) -> Response {
    answered(HttpAnswer {
        head: answer,
        rest: None,
    })
}

/// The client's answer: the head, then the body's pieces as they come.
fn answered(answer: HttpAnswer) -> Response {
    let HttpAnswer { head, rest } = answer;
    let body = match rest {
        None => Body::from(head.body.0),
        Some(rest) => {
            let first = futures::stream::once(async move { Ok(Bytes::from(head.body.0)) });
            Body::from_stream(first.chain(rest).map(|r| r.map_err(std::io::Error::other)))
        }
    };
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(head.status).unwrap_or(StatusCode::BAD_GATEWAY);
    for (k, v) in head.headers {
        if let (Ok(k), Ok(v)) = (HeaderName::try_from(k), HeaderValue::try_from(v)) {
            if carried(&k) {
                response.headers_mut().append(k, v);
            }
        }
    }
    response
}

/// Runs the requests other nodes forward here through this node's router.
pub(crate) struct Answer {
    /// The whole application, as the server runs it.
    pub(crate) app: Router,
}

#[async_trait::async_trait]
impl HttpHandler for Answer {
    async fn handle(&self, asked: HttpRequest, body: BodyStream) -> (HttpResponse, BodyStream) {
        let mut builder = Request::builder()
            .method(asked.method.as_str())
            .uri(asked.uri.as_str())
            .header(header::HOST, "localhost");
        for (k, v) in &asked.headers {
            builder = builder.header(k.as_str(), v.as_str());
        }
        let body = Body::from_stream(body.map(|r| r.map_err(std::io::Error::other)));
        let mut request = match builder.body(body) {
            Ok(r) => r,
            Err(e) => {
                return streamed(error(
                    StatusCode::BAD_REQUEST,
                    format!("the forwarded request is not one: {e}"),
                ))
            }
        };
        request.extensions_mut().insert(Forwarded);
        if asked.owner {
            request.extensions_mut().insert(OwnerSocket);
        }
        let response = match self.app.clone().oneshot(request).await {
            Ok(r) => r,
            Err(never) => match never {},
        };
        let (parts, body) = response.into_parts();
        let head = HttpResponse {
            status: parts.status.as_u16(),
            headers: header_pairs(&parts.headers, carried),
            body: wire::Bytes::default(),
            more: false,
        };
        let body = body
            .into_data_stream()
            .map(|r| r.map_err(|e| e.to_string()))
            .boxed();
        (head, body)
    }
}

fn error(status: StatusCode, message: String) -> HttpResponse {
    HttpResponse {
        status: status.as_u16(),
        headers: vec![("content-type".into(), "application/json".into())],
        body: wire::Bytes(
            serde_json::json!({"error": {"code": "forwarding", "message": message}})
                .to_string()
                .into_bytes(),
        ),
        more: false,
    }
}

/// An answer made here, its body as a stream.
fn streamed(mut head: HttpResponse) -> (HttpResponse, BodyStream) {
    let body = Bytes::from(std::mem::take(&mut head.body.0));
    (head, futures::stream::once(async move { Ok(body) }).boxed())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_house_of_a_path_is_its_segment_after_houses() {
        assert_eq!(house_in_path("/api/houses/acme"), Some("acme"));
        assert_eq!(house_in_path("/api/houses/acme/threads/1"), Some("acme"));
        assert_eq!(house_in_path("/api/houses"), None);
        assert_eq!(house_in_path("/api/houses/"), None);
        assert_eq!(house_in_path("/api/bots/x"), None);
    }
}
