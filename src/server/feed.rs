//! The node's events, sorted into streams the server's watchers read.
//!
//! One task reads the node's two broadcast channels — thread events (posts,
//! offers, settled rounds) and conversation events (deltas, tool calls,
//! outcomes) — and republishes each as a [`Frame`], serialized to JSON
//! once, on the channel of its thread or conversation. A bot's
//! conversation in a thread is found by its seat (cached). A thousand
//! watchers of one thread cost one serialization and a thousand clones of
//! an `Arc`.
//!
//! The task also keeps the approvals and questions that wait for an
//! answer ([`PendingRequest`]), until they are answered or their turn ends;
//! those the node kept from before a restart, whose turn has not asked
//! again yet, are read from the store ([`Feed::pending_with_kept`]).
//!
//! Only a thread's messages are durable and carry an `id` (their `seq`):
//! a watcher that reconnects with `?after=<id>` is sent what it missed
//! from the store. Deltas and tool calls are live only; the messages they
//! end in are not. A new watcher learns, with its subscription, the last
//! message published before it ([`Watch::published`]): the store is read
//! up to there and the rest comes on the channel, each message after the
//! live events of the turn that wrote it, so a turn is never shown twice.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use dashmap::DashMap;
use serde::Serialize;
use serde_json::json;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio_util::sync::CancellationToken;
use troupe_actors::house::ThreadEvent;
use troupe_actors::node::Node;
use troupe_runtime::id::{ConversationId, HouseId, ThreadId};
use troupe_runtime::protocol::{AgentEvent, ToolCall};
use troupe_runtime::store::house as table;

/// How many frames a slow watcher may fall behind before it is told it
/// lagged (and, for a thread, re-sent the messages from the store).
const CHANNEL: usize = 2048;

/// The longest tool-result text a frame carries; the rest is in the
/// conversation's record.
const RESULT_TEXT: usize = super::history::RESULT_TEXT;

/// One event, ready to send.
#[derive(Debug)]
pub struct Frame {
    /// A thread message's `seq`, for resuming; `None` for live-only events.
    pub seq: Option<i64>,
    /// The JSON text sent to watchers.
    pub json: String,
}

/// A thread's channel, and the last message published on it.
struct ThreadFeed {
    /// `None` while nobody watches (a channel's buffer is not kept for
    /// a thread no one reads).
    tx: Option<broadcast::Sender<Arc<Frame>>>,
    /// The `seq` of the last message published, once one was.
    published: Option<i64>,
}

/// A new watcher of a thread: its frames, and where the store ends for it.
pub struct Watch {
    /// Frames of the thread from the subscription on.
    pub frames: broadcast::Receiver<Arc<Frame>>,
    /// The last message published before the subscription, when one was
    /// since the server started: messages after it come on `frames`.
    pub published: Option<i64>,
}

/// Where a bot's conversation speaks.
#[derive(Debug, Clone)]
struct SeatOf {
    house: HouseId,
    thread: ThreadId,
    bot: String,
}

/// An approval or a question that waits for a person's answer.
#[derive(Debug, Clone, Serialize)]
pub struct PendingRequest {
    /// The id to answer with.
    pub id: String,
    /// `approval` or `question`.
    pub kind: &'static str,
    /// The conversation that asks.
    pub conversation: ConversationId,
    /// Its house, for a bot's turn in a thread.
    pub house: Option<HouseId>,
    /// Its thread.
    pub thread: Option<ThreadId>,
    /// The bot asking, in a thread.
    pub bot: Option<String>,
    /// The call awaiting approval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<ToolCall>,
    /// Why the gate asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// The questions (`ask_user`'s arguments).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub questions: Option<serde_json::Value>,
    /// When it was asked.
    pub asked_at: chrono::DateTime<chrono::Utc>,
}

/// The streams and what waits for an answer.
#[derive(Clone)]
pub struct Feed {
    inner: Arc<Inner>,
}

struct Inner {
    node: Node,
    threads: DashMap<ThreadId, ThreadFeed>,
    /// How many threads have a channel (someone watches, or did).
    watched: std::sync::atomic::AtomicUsize,
    conversations: DashMap<ConversationId, broadcast::Sender<Arc<Frame>>>,
    seats: DashMap<ConversationId, Option<SeatOf>>,
    pending: DashMap<String, PendingRequest>,
}

impl Feed {
    /// Starts the task that sorts `node`'s events, until `stop`.
    pub fn start(node: &Node, stop: CancellationToken) -> (Feed, tokio::task::JoinHandle<()>) {
        let feed = Feed {
            inner: Arc::new(Inner {
                node: node.clone(),
                threads: DashMap::new(),
                watched: Default::default(),
                conversations: DashMap::new(),
                seats: DashMap::new(),
                pending: DashMap::new(),
            }),
        };
        let mut threads = node.thread_events();
        let mut conversations = node.subscribe();
        let me = feed.clone();
        let task = tokio::spawn(async move {
            loop {
                // Conversations first: a bot's turn emits its last event
                // before its answer is posted, so once the thread's post is
                // seen every event of the turn that wrote it has been
                // republished; a watcher never sees a turn's deltas after
                // the message they end in.
                tokio::select! {
                    biased;
                    () = stop.cancelled() => break,
                    event = conversations.recv() => match event {
                        // A registered actor's events belong to no
                        // conversation a watcher could follow.
                        Ok(e) if e.actor.is_some() => {}
                        Ok(e) => me.conversation_event(e.conversation, e.event).await,
                        Err(RecvError::Lagged(n)) => me.lagged_everywhere(n),
                        Err(RecvError::Closed) => break,
                    },
                    event = threads.recv() => match event {
                        Ok(e) => me.thread_event(e),
                        Err(RecvError::Lagged(n)) => me.lagged_everywhere(n),
                        Err(RecvError::Closed) => break,
                    },
                }
            }
            // Watchers see their channels close and end their sockets.
            me.inner.threads.clear();
            me.inner.conversations.clear();
        });
        (feed, task)
    }

    /// Frames of thread `id` from now on, and the last message published
    /// before them (read under the lock the publisher takes, so nothing
    /// falls between the two).
    pub fn watch_thread(&self, id: ThreadId) -> Watch {
        let mut feed = self.inner.threads.entry(id).or_insert_with(|| ThreadFeed {
            tx: None,
            published: None,
        });
        let frames = feed
            .tx
            .get_or_insert_with(|| {
                self.inner.watched.fetch_add(1, Ordering::Relaxed);
                broadcast::channel(CHANNEL).0
            })
            .subscribe();
        Watch {
            frames,
            published: feed.published,
        }
    }

    /// Frames of conversation `id` from now on.
    pub fn watch_conversation(&self, id: ConversationId) -> broadcast::Receiver<Arc<Frame>> {
        self.inner
            .conversations
            .entry(id)
            .or_insert_with(|| broadcast::channel(CHANNEL).0)
            .subscribe()
    }

    /// The requests waiting now, oldest first.
    pub fn pending(&self) -> Vec<PendingRequest> {
        let mut all: Vec<_> = self
            .inner
            .pending
            .iter()
            .map(|e| e.value().clone())
            .collect();
        all.sort_by_key(|r| r.asked_at);
        all
    }

    /// The requests waiting now and those kept from before a restart whose
    /// turn has not asked again yet, oldest first.
    pub async fn pending_with_kept(&self) -> Vec<PendingRequest> {
        let mut all = self.pending();
        let kept = match self.inner.node.kept_requests().await {
            Ok(kept) => kept,
            Err(e) => {
                tracing::warn!(error = %e, "the kept requests could not be read");
                Vec::new()
            }
        };
        for request in kept {
            if all.iter().any(|r| r.id == request.id) || request.answer.is_some() {
                continue;
            }
            let seat = self.seat(request.conversation).await;
            if let Some(mut pending) =
                pending_of(request.conversation, seat.as_ref(), &request.event)
            {
                pending.asked_at = request.asked_at;
                all.push(pending);
            }
        }
        all.sort_by_key(|r| r.asked_at);
        all
    }

    /// Forgets request `id` (answered).
    pub fn settle(&self, id: &str) -> Option<PendingRequest> {
        self.inner.pending.remove(id).map(|(_, r)| r)
    }

    /// Serializes a thread message's frame (also used for the replay of
    /// the store).
    pub fn message_frame(
        message: &troupe_runtime::protocol::house::ThreadMessage,
        round: Option<troupe_runtime::id::MsgId>,
    ) -> Frame {
        Frame {
            seq: Some(message.seq),
            json: json!({"type": "message", "id": message.seq, "round": round,
                "message": super::markdown::message_json(message)})
            .to_string(),
        }
    }

    /// Sends a frame to thread `thread`'s watchers. A message's `seq` is
    /// noted as published in the same step, watched or not.
    fn publish_thread(&self, thread: ThreadId, seq: Option<i64>, frame: impl FnOnce() -> Frame) {
        let feed = match seq {
            Some(_) => Some(
                self.inner
                    .threads
                    .entry(thread)
                    .or_insert_with(|| ThreadFeed {
                        tx: None,
                        published: None,
                    }),
            ),
            None => self.inner.threads.get_mut(&thread),
        };
        let Some(mut feed) = feed else { return };
        if seq.is_some() {
            feed.published = seq;
        }
        match &feed.tx {
            Some(tx) if tx.receiver_count() > 0 => {
                let _ = tx.send(Arc::new(frame()));
            }
            // No one watches: the channel's buffer goes with its last
            // watcher; what was published stays known.
            Some(_) => {
                feed.tx = None;
                self.inner.watched.fetch_sub(1, Ordering::Relaxed);
            }
            None => {}
        }
    }

    fn thread_event(&self, event: ThreadEvent) {
        match event {
            ThreadEvent::Posted(p) => {
                self.publish_thread(p.thread, Some(p.message.seq), || {
                    Self::message_frame(&p.message, Some(p.round))
                });
            }
            ThreadEvent::Offered { thread, round, bot } => {
                self.publish_thread(thread, None, || Frame {
                    seq: None,
                    json: json!({"type": "offered", "bot": bot, "round": round}).to_string(),
                })
            }
            ThreadEvent::TurnFailed {
                thread,
                round,
                bot,
                reason,
            } => self.publish_thread(thread, None, || Frame {
                seq: None,
                json: json!({"type": "turn_failed", "bot": bot, "round": round, "reason": reason})
                    .to_string(),
            }),
            ThreadEvent::Held {
                thread,
                round,
                bot,
                reason,
            } => self.publish_thread(thread, None, || Frame {
                seq: None,
                json: json!({"type": "held", "bot": bot, "round": round, "reason": reason})
                    .to_string(),
            }),
            ThreadEvent::RoundSettled { thread, round } => {
                self.publish_thread(thread, None, || Frame {
                    seq: None,
                    json: json!({"type": "settled", "round": round}).to_string(),
                })
            }
        }
    }

    /// A channel lagged: every watcher is told, and thread watchers re-read
    /// the store from their last message.
    fn lagged_everywhere(&self, missed: u64) {
        tracing::warn!(missed, "the server's event feed lagged behind the node");
        let frame = Arc::new(Frame {
            seq: None,
            json: json!({"type": "lagged", "missed": missed}).to_string(),
        });
        for feed in self.inner.threads.iter() {
            if let Some(tx) = &feed.tx {
                let _ = tx.send(frame.clone());
            }
        }
        for tx in self.inner.conversations.iter() {
            let _ = tx.send(frame.clone());
        }
    }

    async fn seat(&self, conversation: ConversationId) -> Option<SeatOf> {
        if let Some(known) = self.inner.seats.get(&conversation) {
            return known.clone();
        }
        let found = self
            .inner
            .node
            .store()
            .read(move |c| table::seat_of(c, conversation))
            .await
            .ok()
            .flatten()
            .map(|(house, thread, bot)| SeatOf { house, thread, bot });
        self.inner.seats.insert(conversation, found.clone());
        found
    }

    async fn conversation_event(&self, conversation: ConversationId, event: AgentEvent) {
        if let Some(tx) = self.inner.conversations.get(&conversation) {
            if tx.receiver_count() > 0 {
                if let Ok(text) = serde_json::to_string(&event) {
                    let _ = tx.send(Arc::new(Frame {
                        seq: None,
                        json: text,
                    }));
                }
            }
        }
        let asks = matches!(
            event,
            AgentEvent::ApprovalRequested { .. } | AgentEvent::QuestionAsked { .. }
        );
        if let AgentEvent::TurnFinished { .. } = &event {
            self.inner
                .pending
                .retain(|_, r| r.conversation != conversation);
        }
        // A new conversation is looked up once; thread watchers or a
        // request make it worth it.
        let watched = self.inner.watched.load(Ordering::Relaxed) > 0 || asks;
        let seat = if watched {
            self.seat(conversation).await
        } else {
            None
        };
        if asks {
            self.remember(conversation, seat.as_ref(), &event);
        }
        if let Some(seat) = seat {
            if let Some(frame) = thread_frame(&seat.bot, &event) {
                self.publish_thread(seat.thread, None, || frame);
            }
        }
    }

    fn remember(&self, conversation: ConversationId, seat: Option<&SeatOf>, event: &AgentEvent) {
        if let Some(request) = pending_of(conversation, seat, event) {
            self.inner.pending.insert(request.id.clone(), request);
        }
    }
}

/// The request `event` shows, asked now by `conversation`.
fn pending_of(
    conversation: ConversationId,
    seat: Option<&SeatOf>,
    event: &AgentEvent,
) -> Option<PendingRequest> {
    let (id, kind, call, reason, questions) = match event {
        AgentEvent::ApprovalRequested {
            request_id,
            call,
            reason,
        } => (
            request_id,
            "approval",
            Some(call.clone()),
            Some(reason.clone()),
            None,
        ),
        AgentEvent::QuestionAsked {
            request_id,
            questions,
        } => (request_id, "question", None, None, Some(questions.clone())),
        _ => return None,
    };
    Some(PendingRequest {
        id: id.clone(),
        kind,
        conversation,
        house: seat.map(|s| s.house),
        thread: seat.map(|s| s.thread),
        bot: seat.map(|s| s.bot.clone()),
        call,
        reason,
        questions,
        asked_at: chrono::Utc::now(),
    })
}

/// What a thread's watchers see of a bot's turn there.
fn thread_frame(bot: &str, event: &AgentEvent) -> Option<Frame> {
    let json = match event {
        AgentEvent::TurnStarted { turn, .. } => {
            json!({"type": "turn_started", "bot": bot, "turn": turn})
        }
        AgentEvent::TextDelta { text } => json!({"type": "delta", "bot": bot, "text": text}),
        AgentEvent::ToolCallStarted { call } => {
            json!({"type": "tool_call", "bot": bot, "call": call})
        }
        AgentEvent::ToolCallFinished {
            call_id,
            name,
            result,
            elapsed_ms,
        } => {
            let (text, untrusted) = super::history::plain(&result.text);
            let text = super::history::cut(text, RESULT_TEXT);
            json!({
                "type": "tool_result", "bot": bot, "call_id": call_id, "name": name,
                "status": result.status, "text": text, "untrusted": untrusted, "elapsed_ms": elapsed_ms,
                "data": super::history::small(&result.data),
            })
        }
        AgentEvent::ApprovalRequested {
            request_id,
            call,
            reason,
        } => json!({
            "type": "request", "kind": "approval", "bot": bot, "request_id": request_id,
            "call": call, "reason": reason,
        }),
        AgentEvent::QuestionAsked {
            request_id,
            questions,
        } => json!({
            "type": "request", "kind": "question", "bot": bot, "request_id": request_id,
            "questions": questions,
        }),
        AgentEvent::TurnFinished { outcome, .. } => {
            json!({"type": "turn_finished", "bot": bot, "outcome": outcome})
        }
        _ => return None,
    };
    Some(Frame {
        seq: None,
        json: json.to_string(),
    })
}
