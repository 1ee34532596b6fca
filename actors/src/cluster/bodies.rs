//! HTTP requests for a house another node hosts, with bodies of any size
//! the API takes: carried in pieces over the cluster's own connection.
//!
//! A request whose body fits one frame is one `http` frame, answered with
//! one `http_answer` — no extra round trip. A body over one frame goes as
//! an exchange named by the frame's id: an `http_open` frame (the head and
//! the body's first piece), then numbered `http_body` pieces, each answered
//! (`http_ack`) once the house's node has queued it for its router; then
//! `http_next` 0 asks for the answer's head. An answer over one frame says
//! `more` (only to a node that said it takes `pieces`), and the forwarding
//! node asks for its pieces one by one (`http_next` 1, 2, …) as its client
//! reads them.
//!
//! Why it is bounded: one piece ([`PIECE`]) is in flight per exchange at a
//! time, each way; the house's node queues at most [`QUEUE`] pieces for
//! its router, and a node answers at most [`MAX_EXCHANGES`] exchanges at
//! once. An exchange nobody asks anything of for [`IDLE`] (its client went
//! away, its node went down) is dropped with what it held.
//!
//! A node of wire 1.2 does not know `http_open`: a body over one frame for
//! a house there is refused 413 saying to upgrade that node; its answers
//! over one frame are 503 as before.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use bytes::{Bytes, BytesMut};
use dashmap::DashMap;
use futures::stream::{BoxStream, StreamExt};
use ractor::ActorRef;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use troupe_runtime::protocol::wire::{
    self, kind, BodyAck, BodyPiece, HttpRequest, HttpResponse, NextPiece,
};

use super::houses::{exchange, PlaceError, CALL_TIMEOUT};
use super::inbox::{refuse, InboxMsg};
use super::{Cluster, Shared};

/// The most body one frame carries with its head (the frame's limit, less
/// room for the rest of it). A body up to this is one frame.
pub const ONE_FRAME: usize = wire::MAX_FRAME - 64 * 1024;
/// The size of each further piece of a body carried in several frames.
pub const PIECE: usize = 1024 * 1024;
/// A request's pieces queued for the router of the house's node.
pub const QUEUE: usize = 2;
/// Exchanges a node answers at once; one more is refused (try again).
pub const MAX_EXCHANGES: usize = 64;
/// An exchange asked nothing for this long is dropped.
pub const IDLE: Duration = Duration::from_secs(30);

/// A body, as a stream of its bytes.
pub type BodyStream = BoxStream<'static, Result<Bytes, String>>;

/// The answer from another node: its head, with the body's first bytes in
/// `head.body`, and the rest when there is more.
pub struct HttpAnswer {
    /// Status, headers, and the body's first bytes.
    pub head: HttpResponse,
    /// The rest of the body, asked for piece by piece as it is read.
    pub rest: Option<BodyStream>,
}

/// Why a request could not be carried to another node.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The node could not be asked, or did not answer.
    #[error("{0}")]
    Unreachable(PlaceError),
    /// The node speaks wire 1.2 or older: it takes only bodies of one frame.
    #[error(
        "node `{node}` runs an older troupe (wire 1.2 or before) that takes a request \
         through another node only up to {ONE_FRAME} bytes; upgrade node `{node}`, or send \
         this request to it directly"
    )]
    Older {
        /// The node.
        node: String,
    },
    /// The client's body could not be read (cut short, or over a limit).
    #[error("{0}")]
    Body(String),
}

/// The exchanges this node answers, by id.
#[derive(Default)]
pub(crate) struct Bodies {
    open: DashMap<String, mpsc::Sender<Cmd>>,
    made: AtomicU64,
}

/// What the forwarding node asks of an exchange.
enum Cmd {
    /// A piece of the request's body.
    Piece(BodyPiece, oneshot::Sender<Vec<u8>>),
    /// The answer's head (0) or its next piece.
    Next(u64, oneshot::Sender<Vec<u8>>),
}

/// Reads a body in pieces of a given size, knowing which is the last.
struct Reader {
    stream: BodyStream,
    /// Read and not yet taken (cut from the front without copying the rest).
    buf: BytesMut,
    ended: bool,
}

impl Reader {
    fn new(stream: BodyStream) -> Self {
        Self {
            stream,
            buf: BytesMut::new(),
            ended: false,
        }
    }

    /// The next `n` bytes at most, and whether they end the body.
    async fn take(&mut self, n: usize) -> Result<(Vec<u8>, bool), String> {
        while !self.ended && self.buf.len() <= n {
            match self.stream.next().await {
                Some(chunk) => self.buf.extend_from_slice(&chunk?),
                None => self.ended = true,
            }
        }
        if self.buf.len() <= n {
            return Ok((std::mem::take(&mut self.buf).to_vec(), true));
        }
        Ok((self.buf.split_to(n).to_vec(), false))
    }
}

/// A request's body fed piece by piece: cut short (its sender gone before
/// the last piece) is an error, never a shorter body.
fn fed(first: Vec<u8>, pieces: mpsc::Receiver<(Vec<u8>, bool)>) -> BodyStream {
    let first = futures::stream::once(async move { Ok(Bytes::from(first)) });
    let rest = futures::stream::unfold(Some(pieces), |state| async move {
        let mut pieces = state?;
        match pieces.recv().await {
            Some((data, true)) => Some((Ok(Bytes::from(data)), None)),
            Some((data, false)) => Some((Ok(Bytes::from(data)), Some(pieces))),
            None => Some((
                Err("the request's body was cut short on its way between nodes".to_string()),
                None,
            )),
        }
    });
    first.chain(rest).boxed()
}

impl Cluster {
    /// Sends `request` with `body` to `node`, which runs it through its own
    /// API: in one frame when the body fits one, else in pieces. The
    /// answer's rest, if any, is asked for as it is read.
    pub async fn send_http(
        &self,
        node: &str,
        mut request: HttpRequest,
        body: BodyStream,
    ) -> Result<HttpAnswer, ForwardError> {
        let shared = &self.shared;
        let peer = self.peer_up(node).map_err(ForwardError::Unreachable)?;
        let inbox = shared
            .inboxes
            .get(&peer.node)
            .map(|r| r.clone())
            .ok_or_else(|| {
                ForwardError::Unreachable(PlaceError::Down {
                    node: peer.node.clone(),
                    http: peer.http.clone(),
                })
            })?;
        let failed = |why: String| {
            ForwardError::Unreachable(PlaceError::Failed {
                node: node.to_string(),
                why,
            })
        };
        let id = format!(
            "{}.{}.h{}",
            shared.options.node,
            std::process::id(),
            shared.bodies.made.fetch_add(1, Ordering::Relaxed)
        );
        let mut body = Reader::new(body);
        let (first, last) = body.take(ONE_FRAME).await.map_err(ForwardError::Body)?;
        request.body = wire::Bytes(first);
        request.pieces = true;
        let answer = if last {
            let frame =
                wire::encode(kind::HTTP, &id, &request).map_err(|e| failed(e.to_string()))?;
            exchange(&inbox, frame, CALL_TIMEOUT)
                .await
                .map_err(failed)?
        } else {
            send_body(node, &inbox, &id, request, body).await?
        };
        let head = wire::decode::<HttpResponse>(&answer, kind::HTTP_ANSWER)
            .map_err(|e| failed(e.to_string()))?
            .body;
        let rest = head.more.then(|| rest(inbox, id));
        Ok(HttpAnswer { head, rest })
    }
}

/// Sends a request whose body is over one frame: `http_open`, the pieces,
/// then `http_next` 0 for the answer (its bytes).
async fn send_body(
    node: &str,
    inbox: &ActorRef<InboxMsg>,
    id: &str,
    request: HttpRequest,
    mut body: Reader,
) -> Result<Vec<u8>, ForwardError> {
    let failed = |why: String| {
        ForwardError::Unreachable(PlaceError::Failed {
            node: node.to_string(),
            why,
        })
    };
    let frame = wire::encode(kind::HTTP_OPEN, id, &request).map_err(|e| failed(e.to_string()))?;
    let acked = |bytes: Vec<u8>| {
        wire::decode::<BodyAck>(&bytes, kind::HTTP_ACK)
            .map(|f| f.body.open)
            .map_err(|e| failed(e.to_string()))
    };
    let mut open = match exchange(inbox, frame, CALL_TIMEOUT).await {
        Ok(bytes) => acked(bytes)?,
        Err(why) if why.contains("does not know frames of kind") => {
            return Err(ForwardError::Older {
                node: node.to_string(),
            })
        }
        Err(why) => return Err(failed(why)),
    };
    let mut seq = 1;
    while open {
        let (data, last) = body.take(PIECE).await.map_err(ForwardError::Body)?;
        let piece = BodyPiece {
            seq,
            data: wire::Bytes(data),
            last,
        };
        let frame = wire::encode(kind::HTTP_BODY, id, &piece).map_err(|e| failed(e.to_string()))?;
        open = acked(exchange(inbox, frame, CALL_TIMEOUT).await.map_err(failed)?)? && !last;
        seq += 1;
    }
    let frame = wire::encode(kind::HTTP_NEXT, id, &NextPiece { seq: 0 })
        .map_err(|e| failed(e.to_string()))?;
    exchange(inbox, frame, CALL_TIMEOUT).await.map_err(failed)
}

/// The rest of an answer, each piece asked for when the last was read.
fn rest(inbox: ActorRef<InboxMsg>, id: String) -> BodyStream {
    futures::stream::unfold(Some(1u64), move |state| {
        let (inbox, id) = (inbox.clone(), id.clone());
        async move {
            let seq = state?;
            let asked = async {
                let frame = wire::encode(kind::HTTP_NEXT, &id, &NextPiece { seq })
                    .map_err(|e| e.to_string())?;
                let bytes = exchange(&inbox, frame, CALL_TIMEOUT).await?;
                wire::decode::<BodyPiece>(&bytes, kind::HTTP_BODY)
                    .map(|f| f.body)
                    .map_err(|e| e.to_string())
            };
            match asked.await {
                Ok(piece) => {
                    let next = (!piece.last).then_some(seq + 1);
                    Some((Ok(Bytes::from(piece.data.0)), next))
                }
                Err(e) => Some((Err(format!("the answer was cut short: {e}")), None)),
            }
        }
    })
    .boxed()
}

/// The house's node's side of `http`: the request run through this
/// node's API; its answer in one frame, or its head when it goes in pieces.
pub(crate) async fn http(shared: &Arc<Shared>, frame: &[u8], id: &str) -> Vec<u8> {
    let mut request = match wire::decode::<HttpRequest>(frame, kind::HTTP) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let pieces = request.pieces;
    let body = std::mem::take(&mut request.body.0);
    let body = futures::stream::once(async move { Ok(Bytes::from(body)) }).boxed();
    let Some(handler) = shared.houses.handler() else {
        return no_api(shared, id);
    };
    let (head, rest) = handler.handle(request, body).await;
    let (frame, rest) = head_frame(shared, id, head, Reader::new(rest), pieces).await;
    let Some(rest) = rest else {
        return frame;
    };
    let exchange = Exchange {
        id: id.to_string(),
        pieces: None,
        expect: 1,
        answer: None,
        reader: Some(rest),
        next: 1,
    };
    match start(shared, exchange) {
        Ok(()) => frame,
        Err(why) => wire::encode(kind::HTTP_ANSWER, id, &status(503, "busy", why))
            .unwrap_or_else(|e| refuse(id, e.to_string())),
    }
}

/// The house's node's side of `http_open`: the router started on the
/// body's first piece; the pieces after it go to the exchange.
pub(crate) async fn open(shared: &Arc<Shared>, frame: &[u8], id: &str) -> Vec<u8> {
    let mut request = match wire::decode::<HttpRequest>(frame, kind::HTTP_OPEN) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let Some(handler) = shared.houses.handler() else {
        return no_api(shared, id);
    };
    let first = std::mem::take(&mut request.body.0);
    let (pieces, fed_by) = mpsc::channel(QUEUE);
    let body = fed(first, fed_by);
    let answer = tokio::spawn(async move { handler.handle(request, body).await });
    let exchange = Exchange {
        id: id.to_string(),
        pieces: Some(pieces),
        expect: 1,
        answer: Some(answer),
        reader: None,
        next: 1,
    };
    if let Err(why) = start(shared, exchange) {
        return refuse(id, why);
    }
    ack(id, true)
}

/// Either `http_body` (a request's piece) or `http_next` (the answer):
/// handed to its exchange, whose answer this is.
pub(crate) async fn piece(shared: &Shared, frame: &[u8], id: &str, asked: &str) -> Vec<u8> {
    let Some(exchange) = shared.bodies.open.get(id).map(|e| e.clone()) else {
        return refuse(
            id,
            format!(
                "node `{}` has no exchange `{id}` open (it ended, or was idle over {}s); \
                 send the request again",
                shared.options.node,
                IDLE.as_secs()
            ),
        );
    };
    let (reply, answer) = oneshot::channel();
    let cmd = if asked == kind::HTTP_BODY {
        match wire::decode::<BodyPiece>(frame, kind::HTTP_BODY) {
            Ok(f) => Cmd::Piece(f.body, reply),
            Err(e) => return refuse(id, e.to_string()),
        }
    } else {
        match wire::decode::<NextPiece>(frame, kind::HTTP_NEXT) {
            Ok(f) => Cmd::Next(f.body.seq, reply),
            Err(e) => return refuse(id, e.to_string()),
        }
    };
    if exchange.send(cmd).await.is_err() {
        return refuse(
            id,
            format!("the exchange `{id}` ended; send the request again"),
        );
    }
    answer.await.unwrap_or_else(|_| {
        refuse(
            id,
            format!("the exchange `{id}` ended; send the request again"),
        )
    })
}

fn no_api(shared: &Shared, id: &str) -> Vec<u8> {
    let answer = status(
        503,
        "unavailable",
        format!(
            "node `{}` serves no HTTP API; start it with `troupe serve`",
            shared.options.node
        ),
    );
    wire::encode(kind::HTTP_ANSWER, id, &answer).unwrap_or_else(|e| refuse(id, e.to_string()))
}

fn status(status: u16, code: &str, message: String) -> HttpResponse {
    HttpResponse {
        status,
        headers: vec![("content-type".into(), "application/json".into())],
        body: wire::Bytes(
            serde_json::json!({"error": {"code": code, "message": message}})
                .to_string()
                .into_bytes(),
        ),
        more: false,
    }
}

fn ack(id: &str, open: bool) -> Vec<u8> {
    wire::encode(kind::HTTP_ACK, id, &BodyAck { open }).unwrap_or_default()
}

/// The answer's head frame: the whole answer when it fits one frame; else
/// its first piece, and the reader of the rest (when the forwarding node
/// takes pieces; else a 503 saying what to do).
async fn head_frame(
    shared: &Shared,
    id: &str,
    mut head: HttpResponse,
    mut body: Reader,
    pieces: bool,
) -> (Vec<u8>, Option<Reader>) {
    let (first, last) = match body.take(ONE_FRAME).await {
        Ok(read) => read,
        Err(e) => return (refuse(id, format!("the answer's body failed: {e}")), None),
    };
    let mut rest = None;
    if last {
        head.body = wire::Bytes(first);
    } else if pieces {
        head.body = wire::Bytes(first);
        head.more = true;
        rest = Some(body);
    } else {
        head = status(
            503,
            "forwarding",
            format!(
                "the answer is over {ONE_FRAME} bytes, more than the asking node's troupe (wire \
                 1.2 or before) takes from another node; upgrade it, or ask node `{}` directly{}",
                shared.options.node,
                shared
                    .houses
                    .http_url()
                    .map(|u| format!(" at {u}"))
                    .unwrap_or_default()
            ),
        );
    }
    let frame =
        wire::encode(kind::HTTP_ANSWER, id, &head).unwrap_or_else(|e| refuse(id, e.to_string()));
    (frame, rest)
}

/// An exchange in progress on the house's node.
struct Exchange {
    id: String,
    /// Where the request's pieces go, while the router reads them.
    pieces: Option<mpsc::Sender<(Vec<u8>, bool)>>,
    /// The request's next piece.
    expect: u64,
    /// The router's answer, until its head is asked for.
    answer: Option<JoinHandle<(HttpResponse, BodyStream)>>,
    /// The answer's body, once its head went.
    reader: Option<Reader>,
    /// The answer's next piece.
    next: u64,
}

/// Runs `exchange` in a task of its own until it is done or idle.
fn start(shared: &Arc<Shared>, exchange: Exchange) -> Result<(), String> {
    let bodies = &shared.bodies;
    if bodies.open.len() >= MAX_EXCHANGES {
        return Err(format!(
            "node `{}` carries {MAX_EXCHANGES} large bodies already; try again shortly",
            shared.options.node
        ));
    }
    let (tx, rx) = mpsc::channel(1);
    let id = exchange.id.clone();
    match bodies.open.entry(id.clone()) {
        dashmap::Entry::Occupied(_) => return Err(format!("exchange `{id}` is open already")),
        dashmap::Entry::Vacant(v) => {
            v.insert(tx);
        }
    }
    let weak = Arc::downgrade(shared);
    tokio::spawn(run(weak, exchange, rx));
    Ok(())
}

async fn run(shared: Weak<Shared>, mut exchange: Exchange, mut asked: mpsc::Receiver<Cmd>) {
    loop {
        let cmd = match tokio::time::timeout(IDLE, asked.recv()).await {
            Ok(Some(cmd)) => cmd,
            Ok(None) | Err(_) => break,
        };
        match cmd {
            Cmd::Piece(piece, reply) => {
                let _ = reply.send(exchange.piece(piece).await);
            }
            Cmd::Next(seq, reply) => {
                let Some(shared) = shared.upgrade() else {
                    break;
                };
                let (frame, done) = exchange.next(&shared, seq).await;
                let _ = reply.send(frame);
                if done {
                    break;
                }
            }
        }
    }
    if let Some(answer) = exchange.answer.take() {
        answer.abort();
    }
    if let Some(shared) = shared.upgrade() {
        shared.bodies.open.remove(&exchange.id);
    }
}

impl Exchange {
    /// A request's piece, queued for the router.
    async fn piece(&mut self, piece: BodyPiece) -> Vec<u8> {
        let id = self.id.as_str();
        if piece.seq != self.expect {
            return refuse(
                id,
                format!(
                    "piece {} of the request came where {} was due; send the request again",
                    piece.seq, self.expect
                ),
            );
        }
        self.expect += 1;
        let Some(pieces) = self.pieces.as_ref() else {
            return ack(id, false);
        };
        match pieces.send_timeout((piece.data.0, piece.last), IDLE).await {
            Ok(()) if !piece.last => ack(id, true),
            Ok(()) | Err(_) => {
                self.pieces = None;
                ack(id, false)
            }
        }
    }

    /// The answer's head (0) or its next piece; whether it is done.
    async fn next(&mut self, shared: &Arc<Shared>, seq: u64) -> (Vec<u8>, bool) {
        let id = self.id.clone();
        if seq == 0 {
            // No more of the request: its router answers with what it has.
            self.pieces = None;
            let Some(answer) = self.answer.take() else {
                return (
                    refuse(&id, "the answer's head was asked twice".into()),
                    true,
                );
            };
            let (head, rest) = match answer.await {
                Ok(answered) => answered,
                Err(e) => return (refuse(&id, format!("the request failed here: {e}")), true),
            };
            let (frame, rest) = head_frame(shared, &id, head, Reader::new(rest), true).await;
            self.reader = rest;
            return (frame, self.reader.is_none());
        }
        let Some(reader) = self.reader.as_mut() else {
            return (refuse(&id, "no answer is being read".into()), true);
        };
        if seq != self.next {
            return (
                refuse(
                    &id,
                    format!(
                        "piece {seq} of the answer asked where {} was due",
                        self.next
                    ),
                ),
                true,
            );
        }
        self.next += 1;
        match reader.take(PIECE).await {
            Ok((data, last)) => {
                let piece = BodyPiece {
                    seq,
                    data: wire::Bytes(data),
                    last,
                };
                let frame = wire::encode(kind::HTTP_BODY, &id, &piece)
                    .unwrap_or_else(|e| refuse(&id, e.to_string()));
                (frame, last)
            }
            Err(e) => (refuse(&id, format!("the answer's body failed: {e}")), true),
        }
    }
}

#[cfg(test)]
#[path = "bodies_tests.rs"]
mod tests;
