//! A house's WebSocket streams through any node (docs/cluster.md): the
//! server's two sides of `troupe_actors::cluster::streams`.
//!
//! - On the node the client connected to, [`open`] asks the house's node
//!   over the cluster before upgrading: the client gets the upgrade only if
//!   that node's router gave it, else that router's answer (401, 404, …).
//! - On the house's node, [`Accept`] runs the upgrade through its own router,
//!   marked [`Forwarded`], as an HTTP connection in memory (a duplex pipe:
//!   hyper serves the router on one end, a client upgrades on the other).
//!   The route's own stream code answers, exactly as for a client of its
//!   own; its socket is this node's end of the relay.
//!
//! On both, [`relay`] moves messages between the socket and the link until
//! either side closes, and passes the close on: a task owned by neither
//! node's actors, ending when either side does.

use std::future::ready;

use axum::body::Body;
use axum::extract::ws::{self, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Request};
use axum::http::{header, HeaderName, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Router;
use futures::{FutureExt, Sink, SinkExt, Stream, StreamExt};
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use tokio_tungstenite::tungstenite::{self as tg, protocol::Role};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;
use troupe_actors::cluster::streams::{BATCH_BYTES, CODE_AWAY};
use troupe_actors::cluster::{Cluster, HouseOnPeer, OpenError, Relayed, StreamHandler, StreamLink};
use troupe_runtime::protocol::wire::{self, HttpRequest, HttpResponse, StreamClose, StreamMessage};

use super::{carried, error, response, unreachable, Forwarded};
use crate::server::connections::OwnerSocket;
use crate::server::error::ApiError;
use troupe_actors::cluster::bodies::ONE_FRAME as MAX_BODY;

/// The in-memory pipe between the house's router and its relay, each way.
const PIPE_BYTES: usize = 64 * 1024;
/// How long a socket has to take a close frame.
const CLOSE_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Headers carried with an upgrade: the API's, not the WebSocket
/// handshake's (each hop makes its own).
fn carried_upgrade(name: &HeaderName) -> bool {
    carried(name) && !name.as_str().starts_with("sec-websocket-")
}

/// The client's side: opens the stream on `there`'s node, then upgrades.
pub(super) async fn open(
    cluster: &Cluster,
    there: &HouseOnPeer,
    request: Request,
    stopping: CancellationToken,
) -> Result<Response, ApiError> {
    let owner = request.extensions().get::<OwnerSocket>().is_some();
    let (mut parts, _) = request.into_parts();
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &()).await {
        Ok(u) => u,
        Err(rejection) => return Ok(rejection.into_response()),
    };
    let asked = super::asked(&parts, carried_upgrade, owner, false);
    match cluster.open_stream(&there.node, asked).await {
        Ok(link) => Ok(crate::server::events::small(upgrade).on_upgrade(
            move |socket| async move {
                let (writes, reads) = socket.split();
                let reads = reads.map(from_axum);
                let writes = writes.with(|out| ready(Ok::<_, axum::Error>(to_axum(out))));
                relay(reads, writes, link, stopping).await;
            },
        )),
        Err(OpenError::Refused(answer)) => Ok(response(answer)),
        Err(OpenError::Unreachable(e)) => Err(unreachable(there, e)),
    }
}

/// The house's side: upgrades through this node's own router.
pub(crate) struct Accept {
    /// The whole application, as the server runs it.
    pub(crate) app: Router,
    /// The server's stop.
    pub(crate) stopping: CancellationToken,
}

#[async_trait::async_trait]
impl StreamHandler for Accept {
    async fn open(&self, asked: HttpRequest, link: StreamLink) -> Result<(), HttpResponse> {
        let failed = |e: &dyn std::fmt::Display| {
            error(
                StatusCode::BAD_GATEWAY,
                format!("the forwarded stream could not be opened: {e}"),
            )
        };
        let (near, far) = tokio::io::duplex(PIPE_BYTES);
        let owner = asked.owner;
        let service = self.app.clone().map_request(
            move |mut request: axum::http::Request<hyper::body::Incoming>| {
                request.extensions_mut().insert(Forwarded);
                if owner {
                    request.extensions_mut().insert(OwnerSocket);
                }
                request.map(Body::new)
            },
        );
        let serving = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(far), TowerToHyperService::new(service))
            .with_upgrades();
        tokio::spawn(async move {
            if let Err(e) = serving.await {
                tracing::debug!(error = %e, "a forwarded stream's connection ended");
            }
        });
        let (mut client, connection) =
            hyper::client::conn::http1::handshake::<_, Body>(TokioIo::new(near))
                .await
                .map_err(|e| failed(&e))?;
        tokio::spawn(async move {
            if let Err(e) = connection.with_upgrades().await {
                tracing::debug!(error = %e, "a forwarded stream's client ended");
            }
        });
        let mut builder = axum::http::Request::builder()
            .method(asked.method.as_str())
            .uri(asked.uri.as_str())
            .header(header::HOST, "localhost")
            .header(header::CONNECTION, "upgrade")
            .header(header::UPGRADE, "websocket")
            .header(header::SEC_WEBSOCKET_VERSION, "13")
            .header(
                header::SEC_WEBSOCKET_KEY,
                tg::handshake::client::generate_key(),
            );
        for (k, v) in &asked.headers {
            if HeaderName::try_from(k.as_str()).is_ok_and(|k| carried_upgrade(&k)) {
                builder = builder.header(k.as_str(), v.as_str());
            }
        }
        let request = builder.body(Body::empty()).map_err(|e| failed(&e))?;
        let answer = client.send_request(request).await.map_err(|e| failed(&e))?;
        if answer.status() != StatusCode::SWITCHING_PROTOCOLS {
            let (parts, body) = answer.into_parts();
            let body = axum::body::to_bytes(Body::new(body), MAX_BODY)
                .await
                .unwrap_or_default();
            return Err(HttpResponse {
                status: parts.status.as_u16(),
                headers: super::header_pairs(&parts.headers, carried),
                body: wire::Bytes(body.to_vec()),
                more: false,
            });
        }
        let upgraded = hyper::upgrade::on(answer).await.map_err(|e| failed(&e))?;
        let socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
            TokioIo::new(upgraded),
            Role::Client,
            None,
        )
        .await;
        let stopping = self.stopping.clone();
        tokio::spawn(async move {
            let (writes, reads) = socket.split();
            let reads = reads.map(from_tungstenite);
            let writes = writes.with(|out| ready(Ok::<_, tg::Error>(to_tungstenite(out))));
            relay(reads, writes, link, stopping).await;
        });
        Ok(())
    }
}

/// What a socket said.
enum Said {
    Message(StreamMessage),
    Close(StreamClose),
    /// A ping or a pong: answered on its own hop.
    Nothing,
    /// It failed.
    Gone,
}

/// What a socket is told.
enum Out {
    Message(StreamMessage),
    Close(StreamClose),
}

/// How a relay ended.
enum Ended {
    /// This side's socket closed (or failed): the other side is told.
    Here(StreamClose),
    /// The other side closed, or the stream was cut: this socket is told.
    There(StreamClose),
    /// The server stops: both are told.
    Stopping,
}

fn gone() -> StreamClose {
    StreamClose {
        code: CODE_AWAY,
        reason: "the other end of the stream went away".into(),
    }
}

/// Relays between a socket (`reads`, `writes`) and `link` until either side
/// closes, then passes the close on.
async fn relay<R, W>(mut reads: R, mut writes: W, link: StreamLink, stopping: CancellationToken)
where
    R: Stream<Item = Said> + Unpin,
    W: Sink<Out> + Unpin,
{
    let StreamLink {
        sender,
        mut receiver,
        mut end,
    } = link;
    let up = async {
        loop {
            let mut batch = Vec::new();
            let mut size = 0;
            let mut then = None;
            let mut said = reads.next().await;
            loop {
                match said {
                    Some(Said::Message(m)) => {
                        size += m.data.0.len();
                        batch.push(m);
                    }
                    Some(Said::Nothing) => {}
                    Some(Said::Close(close)) => {
                        then = Some(Ended::Here(close));
                        break;
                    }
                    Some(Said::Gone) | None => {
                        then = Some(Ended::Here(gone()));
                        break;
                    }
                }
                if size >= BATCH_BYTES {
                    break;
                }
                match reads.next().now_or_never() {
                    Some(next) => said = next,
                    None => break,
                }
            }
            if !batch.is_empty() {
                if let Err(close) = sender.send(batch).await {
                    return Ended::There(close);
                }
            }
            if let Some(ended) = then {
                return ended;
            }
        }
    };
    let down = async {
        loop {
            match receiver.recv().await {
                Relayed::Messages(messages) => {
                    for m in messages {
                        if writes.feed(Out::Message(m)).await.is_err() {
                            return Ended::Here(gone());
                        }
                    }
                    if writes.flush().await.is_err() {
                        return Ended::Here(gone());
                    }
                }
                Relayed::Closed(close) => return Ended::There(close),
            }
        }
    };
    let ended = tokio::select! {
        biased;
        close = end.cut() => Ended::There(close),
        () = stopping.cancelled() => Ended::Stopping,
        ended = up => ended,
        ended = down => ended,
    };
    match ended {
        Ended::Here(close) => sender.close(close).await,
        Ended::There(close) => {
            sender.done();
            let _ = tokio::time::timeout(CLOSE_WAIT, writes.send(Out::Close(close))).await;
        }
        Ended::Stopping => {
            let close = StreamClose {
                code: CODE_AWAY,
                reason: "the server is stopping; reconnect with ?after= to resume".into(),
            };
            let _ = tokio::time::timeout(CLOSE_WAIT, writes.send(Out::Close(close.clone()))).await;
            sender.close(close).await;
        }
    }
}

/// A close code that may be sent (1005, 1006 and 1015 are only reported).
fn sendable(code: u16) -> u16 {
    if matches!(code, 1000..=1003 | 1007..=1014 | 3000..=4999) {
        code
    } else {
        1000
    }
}

/// A close reason as a close frame holds it: at most 123 bytes.
fn fit(reason: &str) -> String {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    reason[..end].to_string()
}

fn text(m: StreamMessage) -> String {
    String::from_utf8(m.data.0)
        .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

fn from_axum(said: Result<ws::Message, axum::Error>) -> Said {
    match said {
        Ok(ws::Message::Text(t)) => Said::Message(StreamMessage {
            binary: false,
            data: wire::Bytes(t.as_str().as_bytes().to_vec()),
        }),
        Ok(ws::Message::Binary(b)) => Said::Message(StreamMessage {
            binary: true,
            data: wire::Bytes(b.to_vec()),
        }),
        Ok(ws::Message::Ping(_) | ws::Message::Pong(_)) => Said::Nothing,
        Ok(ws::Message::Close(frame)) => Said::Close(frame.map_or(
            StreamClose {
                code: 1000,
                reason: String::new(),
            },
            |f| StreamClose {
                code: f.code,
                reason: f.reason.to_string(),
            },
        )),
        Err(_) => Said::Gone,
    }
}

fn to_axum(out: Out) -> ws::Message {
    match out {
        Out::Message(m) if m.binary => ws::Message::Binary(m.data.0.into()),
        Out::Message(m) => ws::Message::Text(text(m).into()),
        Out::Close(c) => ws::Message::Close(Some(ws::CloseFrame {
            code: sendable(c.code),
            reason: fit(&c.reason).into(),
        })),
    }
}

fn from_tungstenite(said: Result<tg::Message, tg::Error>) -> Said {
    match said {
        Ok(tg::Message::Text(t)) => Said::Message(StreamMessage {
            binary: false,
            data: wire::Bytes(t.as_str().as_bytes().to_vec()),
        }),
        Ok(tg::Message::Binary(b)) => Said::Message(StreamMessage {
            binary: true,
            data: wire::Bytes(b.to_vec()),
        }),
        Ok(tg::Message::Ping(_) | tg::Message::Pong(_) | tg::Message::Frame(_)) => Said::Nothing,
        Ok(tg::Message::Close(frame)) => Said::Close(frame.map_or(
            StreamClose {
                code: 1000,
                reason: String::new(),
            },
            |f| StreamClose {
                code: f.code.into(),
                reason: f.reason.to_string(),
            },
        )),
        Err(_) => Said::Gone,
    }
}

fn to_tungstenite(out: Out) -> tg::Message {
    match out {
        Out::Message(m) if m.binary => tg::Message::Binary(m.data.0.into()),
        Out::Message(m) => tg::Message::Text(text(m).into()),
        Out::Close(c) => tg::Message::Close(Some(tg::protocol::CloseFrame {
            code: sendable(c.code).into(),
            reason: fit(&c.reason).into(),
        })),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_close_reason_is_cut_to_what_a_frame_holds_at_a_character() {
        let long = "é".repeat(100);
        let cut = fit(&long);
        assert!(cut.len() <= 123 && long.starts_with(&cut), "{}", cut.len());
        assert_eq!(fit("node `c` went down"), "node `c` went down");
    }

    #[test]
    fn only_sendable_close_codes_are_sent() {
        assert_eq!(sendable(1011), 1011);
        assert_eq!(sendable(4000), 4000);
        for reported in [1005, 1006, 1015, 999] {
            assert_eq!(sendable(reported), 1000, "{reported}");
        }
    }
}
