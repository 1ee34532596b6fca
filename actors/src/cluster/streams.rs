//! A house's WebSocket streams opened on another node: relayed over the
//! cluster's own connection to the node that hosts the house.
//!
//! A client may connect to any node. When it opens a stream (a thread's
//! events) for a house a peer hosts, the node it connected to asks that
//! peer with a `stream_open` frame (the upgrade request: path, headers);
//! the peer runs the upgrade through its own router ([`StreamHandler`]) —
//! its token check, its 404 for another house, its stream code — and
//! answers `stream_accepted`, or `stream_refused` with its router's answer,
//! which the client gets as it is. Once accepted, each side relays what its
//! own socket says as `stream_data` frames and ends with a `stream_close`;
//! both ways, until either side closes. Every frame of a stream carries the
//! stream's id, and is a call the receiver answers (`stream_ack`): a sender
//! has one batch in flight at a time.
//!
//! Why it is bounded: what arrives for a side's socket waits in a queue of
//! [`QUEUE`] batches (of at most about [`BATCH_BYTES`] each), and a frame
//! that finds the queue full waits at most [`STALL`] for room before the
//! stream is dropped with a reason (a client that reads too slowly). Since a
//! sender waits for each acknowledgement, the node hosting the house reads
//! its stream's socket no faster than the client takes it: the stream code
//! there falls behind its feed and catches up from the store, as it does for
//! a slow client of its own. A peer going down ends its streams with a
//! reason naming it (membership says so: [`peer_down`]).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::time::Duration;

use dashmap::DashMap;
use ractor::ActorRef;
use tokio::sync::mpsc::{self, error::SendTimeoutError};
use tokio::sync::watch;
use troupe_runtime::protocol::wire::{
    self, kind, HttpRequest, HttpResponse, StreamAccepted, StreamAck, StreamClose, StreamData,
    StreamMessage, StreamOpen,
};

use super::houses::{exchange, PlaceError, CALL_TIMEOUT};
use super::inbox::{refuse, InboxMsg};
use super::{Cluster, Shared};

/// Batches queued for a side's socket, per stream.
pub const QUEUE: usize = 8;
/// How long a batch may wait for room in a full queue before the stream is
/// dropped (the socket it is for reads too slowly).
pub const STALL: Duration = Duration::from_secs(10);
/// A batch is cut at about this many bytes (one larger message goes alone).
pub const BATCH_BYTES: usize = 256 * 1024;
/// How long a side waits for the other to take its `stream_close`.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(5);

/// The close code of a stream whose peer went down or did not answer.
pub const CODE_DOWN: u16 = 1011;
/// The close code of a stream dropped because its socket read too slowly.
pub const CODE_SLOW: u16 = 1013;
/// The close code of a side that went away without closing.
pub const CODE_AWAY: u16 = 1001;

/// Opens the streams other nodes ask for, through this node's API (the
/// server registers one with [`Cluster::serve_streams`]).
#[async_trait::async_trait]
pub trait StreamHandler: Send + Sync + 'static {
    /// Runs `request`, a WebSocket upgrade, through this node's router. When
    /// it upgrades, relays between the stream and `link` in a task of its
    /// own until either side closes, and returns at once; else the router's
    /// answer.
    async fn open(&self, request: HttpRequest, link: StreamLink) -> Result<(), HttpResponse>;
}

/// What the other side of a stream said, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Relayed {
    /// Messages for this side's socket.
    Messages(Vec<StreamMessage>),
    /// It closed the stream.
    Closed(StreamClose),
}

/// Why a stream could not be opened on another node.
#[derive(Debug)]
pub enum OpenError {
    /// The house's node answered the upgrade otherwise: its answer.
    Refused(HttpResponse),
    /// The house's node could not be asked.
    Unreachable(PlaceError),
}

/// The streams open on this node, relayed to or from a peer.
#[derive(Default)]
pub(crate) struct Streams {
    open: DashMap<String, Entry>,
    handler: parking_lot::RwLock<Option<Arc<dyn StreamHandler>>>,
    made: AtomicU64,
}

/// Where a stream's end is said (once): by either side, or by a cut.
type End = Arc<watch::Sender<Option<StreamClose>>>;

/// A stream, as the frames arriving for it find it.
struct Entry {
    peer: String,
    queue: mpsc::Sender<Relayed>,
    end: End,
}

/// The queue and the end of open stream `id`, if it is open.
fn open_stream(shared: &Shared, id: &str) -> Option<(mpsc::Sender<Relayed>, End)> {
    shared
        .streams
        .open
        .get(id)
        .map(|e| (e.queue.clone(), Arc::clone(&e.end)))
}

/// Ends a stream at once with `close`, unless it ended already.
fn cut(end: &watch::Sender<Option<StreamClose>>, close: StreamClose) {
    end.send_if_modified(|now| {
        if now.is_some() {
            return false;
        }
        *now = Some(close);
        true
    });
}

/// A stream's two ways to the other node, and word of its sudden end.
pub struct StreamLink {
    /// To the other side.
    pub sender: StreamSender,
    /// From the other side.
    pub receiver: StreamReceiver,
    /// Says when the stream was cut: its peer down, or its socket too slow.
    pub end: StreamEnd,
}

impl std::fmt::Debug for StreamLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamLink")
            .field("id", &self.sender.id)
            .field("peer", &self.sender.peer)
            .finish_non_exhaustive()
    }
}

/// Sends a stream's messages and its close to the other side.
pub struct StreamSender {
    id: String,
    peer: String,
    inbox: ActorRef<InboxMsg>,
    closed: bool,
}

impl StreamSender {
    /// The other side's node.
    pub fn peer(&self) -> &str {
        &self.peer
    }

    /// Sends `messages`, once the other side has taken them; else how the
    /// stream ended.
    pub async fn send(&self, messages: Vec<StreamMessage>) -> Result<(), StreamClose> {
        let down = |why: String| StreamClose {
            code: CODE_DOWN,
            reason: format!("node `{}` did not take the stream: {why}", self.peer),
        };
        let frame = wire::encode(kind::STREAM_DATA, &self.id, &StreamData { messages })
            .map_err(|e| down(e.to_string()))?;
        let bytes = exchange(&self.inbox, frame, CALL_TIMEOUT)
            .await
            .map_err(down)?;
        let ack = wire::decode::<StreamAck>(&bytes, kind::STREAM_ACK)
            .map_err(|e| down(e.to_string()))?
            .body;
        if ack.open {
            Ok(())
        } else {
            Err(StreamClose {
                code: CODE_AWAY,
                reason: format!("the stream was closed on node `{}`", self.peer),
            })
        }
    }

    /// Ends this side without a word: the other side closed the stream, or
    /// knows it ended.
    pub fn done(mut self) {
        self.closed = true;
    }

    /// Tells the other side the stream is closed, with `close`.
    pub async fn close(mut self, close: StreamClose) {
        self.closed = true;
        send_close(&self.inbox, &self.id, &close).await;
    }
}

async fn send_close(inbox: &ActorRef<InboxMsg>, id: &str, close: &StreamClose) {
    if let Ok(frame) = wire::encode(kind::STREAM_CLOSE, id, close) {
        if let Err(e) = exchange(inbox, frame, CLOSE_TIMEOUT).await {
            tracing::debug!(stream = id, error = %e, "the other side did not take a stream's close");
        }
    }
}

impl Drop for StreamSender {
    /// A side dropped without closing (a refused upgrade, a task ended)
    /// still tells the other side.
    fn drop(&mut self) {
        if self.closed {
            return;
        }
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let (inbox, id) = (self.inbox.clone(), std::mem::take(&mut self.id));
            runtime.spawn(async move {
                let close = StreamClose {
                    code: CODE_AWAY,
                    reason: "the other side went away".into(),
                };
                send_close(&inbox, &id, &close).await;
            });
        }
    }
}

/// Receives what the other side sends; the stream is forgotten when it is
/// dropped.
pub struct StreamReceiver {
    id: String,
    queue: mpsc::Receiver<Relayed>,
    shared: Weak<Shared>,
}

impl StreamReceiver {
    /// The next batch, or the other side's close.
    pub async fn recv(&mut self) -> Relayed {
        self.queue.recv().await.unwrap_or_else(|| {
            Relayed::Closed(StreamClose {
                code: CODE_AWAY,
                reason: "the stream ended".into(),
            })
        })
    }
}

impl Drop for StreamReceiver {
    fn drop(&mut self) {
        if let Some(shared) = self.shared.upgrade() {
            shared.streams.open.remove(&self.id);
        }
    }
}

/// Word of a stream's sudden end.
pub struct StreamEnd(watch::Receiver<Option<StreamClose>>);

impl StreamEnd {
    /// Waits until the stream is cut; why.
    pub async fn cut(&mut self) -> StreamClose {
        match self.0.wait_for(Option::is_some).await {
            Ok(close) => close.clone().unwrap_or_else(ended),
            Err(_) => ended(),
        }
    }
}

fn ended() -> StreamClose {
    StreamClose {
        code: CODE_AWAY,
        reason: "the stream ended".into(),
    }
}

/// Keeps a new stream `id` with `peer` (whose inbox is `inbox`).
fn register(shared: &Arc<Shared>, id: String, peer: &str, inbox: ActorRef<InboxMsg>) -> StreamLink {
    let (queue_tx, queue_rx) = mpsc::channel(QUEUE);
    let (end_tx, end_rx) = watch::channel(None);
    shared.streams.open.insert(
        id.clone(),
        Entry {
            peer: peer.to_string(),
            queue: queue_tx,
            end: Arc::new(end_tx),
        },
    );
    StreamLink {
        sender: StreamSender {
            id: id.clone(),
            peer: peer.to_string(),
            inbox,
            closed: false,
        },
        receiver: StreamReceiver {
            id,
            queue: queue_rx,
            shared: Arc::downgrade(shared),
        },
        end: StreamEnd(end_rx),
    }
}

impl Cluster {
    /// Opens the stream `request` (a WebSocket upgrade) on `node`, whose
    /// router answers it: the link to relay it over, or that answer.
    pub async fn open_stream(
        &self,
        node: &str,
        request: HttpRequest,
    ) -> Result<StreamLink, OpenError> {
        let shared = &self.shared;
        let peer = self.peer_up(node).map_err(OpenError::Unreachable)?;
        let inbox = shared
            .inboxes
            .get(&peer.node)
            .map(|r| r.clone())
            .ok_or_else(|| {
                OpenError::Unreachable(PlaceError::Down {
                    node: peer.node.clone(),
                    http: peer.http.clone(),
                })
            })?;
        let me = &shared.options.node;
        let id = format!(
            "{me}.{}.{}",
            std::process::id(),
            shared.streams.made.fetch_add(1, Ordering::Relaxed)
        );
        let failed = |why: String| {
            OpenError::Unreachable(PlaceError::Failed {
                node: node.to_string(),
                why,
            })
        };
        // Kept before asking: the peer's first messages may come before
        // its answer is read here.
        let link = register(shared, id.clone(), node, inbox.clone());
        let open = StreamOpen {
            from_node: me.clone(),
            request,
        };
        let frame =
            wire::encode(kind::STREAM_OPEN, &id, &open).map_err(|e| failed(e.to_string()))?;
        let bytes = exchange(&inbox, frame, CALL_TIMEOUT)
            .await
            .map_err(failed)?;
        let (got, _) = wire::head(&bytes).map_err(|e| failed(e.to_string()))?;
        match got.as_str() {
            kind::STREAM_ACCEPTED => Ok(link),
            kind::STREAM_REFUSED => {
                // Nothing to close on the peer: it never opened.
                let mut link = link;
                link.sender.closed = true;
                let answer = wire::decode::<HttpResponse>(&bytes, kind::STREAM_REFUSED)
                    .map_err(|e| failed(e.to_string()))?;
                Err(OpenError::Refused(answer.body))
            }
            other => Err(failed(format!("it answered a `{other}` frame"))),
        }
    }

    /// Opens the streams other nodes ask for with `handler`.
    pub fn serve_streams(&self, handler: Arc<dyn StreamHandler>) {
        *self.shared.streams.handler.write() = Some(handler);
    }
}

fn ack(id: &str, open: bool) -> Vec<u8> {
    wire::encode(kind::STREAM_ACK, id, &StreamAck { open }).unwrap_or_default()
}

/// The house's node's side of `stream_open`: the upgrade run through this
/// node's API, and its answer.
pub(crate) async fn open(shared: &Arc<Shared>, frame: &[u8], id: &str) -> Vec<u8> {
    let asked: StreamOpen = match wire::decode(frame, kind::STREAM_OPEN) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let handler = shared.streams.handler.read().clone();
    let Some(handler) = handler else {
        return refuse(
            id,
            format!(
                "node `{}` serves no HTTP API; start it with `troupe serve`",
                shared.options.node
            ),
        );
    };
    let Some(inbox) = shared.inboxes.get(&asked.from_node).map(|r| r.clone()) else {
        return refuse(
            id,
            format!(
                "node `{}` has not met node `{}` yet; try again",
                shared.options.node, asked.from_node
            ),
        );
    };
    let link = register(shared, id.to_string(), &asked.from_node, inbox);
    match handler.open(asked.request, link).await {
        Ok(()) => wire::encode(kind::STREAM_ACCEPTED, id, &StreamAccepted {})
            .unwrap_or_else(|e| refuse(id, e.to_string())),
        Err(answer) => wire::encode(kind::STREAM_REFUSED, id, &answer)
            .unwrap_or_else(|e| refuse(id, e.to_string())),
    }
}

/// Either side's `stream_data`: queued for its socket, waiting at most
/// [`STALL`] for room.
pub(crate) async fn data(shared: &Shared, frame: &[u8], id: &str) -> Vec<u8> {
    let data: StreamData = match wire::decode(frame, kind::STREAM_DATA) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let Some((queue, end)) = open_stream(shared, id) else {
        return ack(id, false);
    };
    match queue
        .send_timeout(Relayed::Messages(data.messages), STALL)
        .await
    {
        Ok(()) => ack(id, true),
        Err(SendTimeoutError::Timeout(_)) => {
            tracing::info!(
                stream = id,
                "a relayed stream's socket read too slowly; dropped"
            );
            cut(
                &end,
                StreamClose {
                    code: CODE_SLOW,
                    reason: format!(
                        "this stream fell over {}s behind; reconnect with ?after= to resume",
                        STALL.as_secs()
                    ),
                },
            );
            ack(id, false)
        }
        Err(SendTimeoutError::Closed(_)) => ack(id, false),
    }
}

/// Either side's `stream_close`: after what was queued, or at once when
/// nothing more fits.
pub(crate) async fn close(shared: &Shared, frame: &[u8], id: &str) -> Vec<u8> {
    let close: StreamClose = match wire::decode(frame, kind::STREAM_CLOSE) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let Some((queue, end)) = open_stream(shared, id) else {
        return ack(id, false);
    };
    if let Err(e) = queue.try_send(Relayed::Closed(close)) {
        let close = match e.into_inner() {
            Relayed::Closed(close) => close,
            Relayed::Messages(_) => ended(),
        };
        cut(&end, close);
    }
    ack(id, true)
}

/// Ends every stream with `node`, which is gone.
pub(crate) fn peer_down(shared: &Shared, node: &str) {
    for entry in shared.streams.open.iter().filter(|e| e.peer == node) {
        cut(
            &entry.end,
            StreamClose {
                code: CODE_DOWN,
                reason: format!("node `{node}` went down; reconnect when it is back"),
            },
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_cut_once_with_the_first_reason() {
        let (tx, mut rx) = watch::channel(None);
        let first = StreamClose {
            code: CODE_DOWN,
            reason: "node `c` went down".into(),
        };
        cut(&tx, first.clone());
        cut(
            &tx,
            StreamClose {
                code: CODE_SLOW,
                reason: "later".into(),
            },
        );
        assert_eq!(rx.borrow_and_update().clone(), Some(first));
    }
}
