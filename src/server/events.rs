//! The WebSocket event streams: a thread's, and a conversation's.
//!
//! A thread's stream sends its messages (each with its `id`, the message's
//! `seq`) and the live events of the bots' turns there. Connect with
//! `?after=<id>` to be sent first every message after that one, from the
//! store, then the live stream: the subscription is taken before the store
//! is read, the store is read only up to the last message published before
//! the subscription (later ones come live, after their turn's events, and
//! those committed before the connection still come before `ready`), and
//! messages already sent are skipped, so a reconnect misses nothing and
//! repeats nothing. Without `after`, the stream starts now and
//! its first frame, `{"type":"ready","after":<id>}`, names the newest
//! message, to resume from later.

use std::sync::Arc;

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde::Deserialize;
use tokio::sync::broadcast::{self, error::RecvError};
use troupe_actors::house::ThreadRef;
use troupe_runtime::id::ConversationId;

use super::auth::Caller;
use super::error::ApiError;
use super::feed::{Feed, Frame, Watch};
use super::AppState;

/// A watcher sends the server next to nothing: small buffers keep an idle
/// one cheap (tungstenite's defaults are 128 KiB each way), and frames go
/// out as they are written.
pub(super) fn small(upgrade: WebSocketUpgrade) -> WebSocketUpgrade {
    upgrade
        .read_buffer_size(4 * 1024)
        .write_buffer_size(0)
        .max_message_size(64 * 1024)
}

/// A page of the store replayed at a time.
const REPLAY_PAGE: usize = 500;

/// `?after=` of a thread's stream.
#[derive(Debug, Deserialize)]
pub struct After {
    /// Send every message after this id first.
    pub after: Option<i64>,
}

/// `GET /api/houses/{house}/threads/{thread}/events` (WebSocket).
pub async fn thread(
    State(state): State<AppState>,
    caller: Caller,
    Path((house, thread)): Path<(String, String)>,
    Query(after): Query<After>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let thread = super::threads::find(&state, &caller, &house, &thread).await?;
    let feed = state.feed().clone();
    let stop = state.stopping().clone();
    let cluster = state.inner.options.cluster.clone();
    Ok(small(upgrade).on_upgrade(move |socket| async move {
        let watch = feed.watch_thread(thread.info.id);
        let moved = departed(cluster, thread.house.id.to_string());
        if let Err(e) = stream_thread(socket, thread, watch, after.after, (stop, moved)).await {
            tracing::debug!(error = %e, "a thread stream ended");
        }
    }))
}

/// Resolves when the house `house` has moved from this node to another:
/// that node's name (never outside a cluster).
async fn departed(cluster: Option<troupe_actors::cluster::Cluster>, house: String) -> String {
    let Some(cluster) = cluster else {
        return std::future::pending().await;
    };
    let mut departures = cluster.departures();
    loop {
        if let Some(to) = cluster.moved_to(&house) {
            return to;
        }
        if departures.changed().await.is_err() {
            return std::future::pending().await;
        }
    }
}

async fn stream_thread(
    mut socket: WebSocket,
    thread: ThreadRef,
    watch: Watch,
    after: Option<i64>,
    (stop, moved): (
        tokio_util::sync::CancellationToken,
        impl std::future::Future<Output = String>,
    ),
) -> Result<(), axum::Error> {
    tokio::pin!(moved);
    let Watch {
        mut frames,
        published,
    } = watch;
    let mut last = match (after, published) {
        (Some(seq), Some(published)) => {
            let last = replay(&mut socket, &thread, seq, Some(published)).await?;
            forward_committed(&mut socket, &thread, &mut frames, last).await?
        }
        (Some(seq), None) => replay(&mut socket, &thread, seq, None).await?,
        (None, Some(published)) => published,
        (None, None) => newest(&thread).await,
    };
    let ready = serde_json::json!({"type": "ready", "after": last}).to_string();
    socket.send(Message::Text(ready.into())).await?;
    let away = || {
        Message::Close(Some(CloseFrame {
            code: axum::extract::ws::close_code::AWAY,
            reason: "the server is stopping; reconnect with ?after= to resume".into(),
        }))
    };
    loop {
        tokio::select! {
            biased;
            () = stop.cancelled() => {
                let _ = socket.send(away()).await;
                return Ok(());
            }
            to = &mut moved => {
                // A close reason holds 123 bytes at most.
                let mut reason = format!(
                    "house `{}` moved to node `{to}`; reconnect and read it again",
                    thread.house.name
                );
                if reason.len() > 123 {
                    reason = format!("this house moved to node `{to}`; reconnect");
                }
                let _ = socket
                    .send(Message::Close(Some(CloseFrame {
                        code: axum::extract::ws::close_code::RESTART,
                        reason: reason.into(),
                    })))
                    .await;
                return Ok(());
            }
            frame = frames.recv() => match frame {
                Ok(frame) => {
                    if let Some(seq) = frame.seq {
                        if seq <= last {
                            continue;
                        }
                        last = seq;
                    }
                    socket.send(Message::Text(frame.json.clone().into())).await?;
                }
                Err(RecvError::Lagged(_)) => last = replay(&mut socket, &thread, last, None).await?,
                Err(RecvError::Closed) => {
                    let _ = socket.send(away()).await;
                    return Ok(());
                }
            },
            incoming = socket.recv() => match incoming {
                None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return Ok(()),
                Some(Ok(_)) => {}
            },
        }
    }
}

/// The newest message's `seq` in the store (0 for none).
async fn newest(thread: &ThreadRef) -> i64 {
    thread
        .read(0, 1)
        .await
        .ok()
        .and_then(|m| m.last().map(|m| m.seq))
        .unwrap_or(0)
}

/// How long a new watcher waits for the feed to publish messages that were
/// committed before it subscribed, before it reads them from the store.
const PUBLISH_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// Forwards from the channel the messages committed before the watcher
/// subscribed but published after (each after its turn's events), so that
/// everything committed before the connection is sent before `ready`; the
/// last one sent. Should the feed not publish them in time, the store
/// sends them.
async fn forward_committed(
    socket: &mut WebSocket,
    thread: &ThreadRef,
    frames: &mut broadcast::Receiver<Arc<Frame>>,
    mut last: i64,
) -> Result<i64, axum::Error> {
    let committed = newest(thread).await;
    let deadline = tokio::time::Instant::now() + PUBLISH_WAIT;
    while last < committed {
        match tokio::time::timeout_at(deadline, frames.recv()).await {
            Ok(Ok(frame)) => {
                if let Some(seq) = frame.seq {
                    if seq <= last {
                        continue;
                    }
                    last = seq;
                }
                socket
                    .send(Message::Text(frame.json.clone().into()))
                    .await?;
            }
            Ok(Err(RecvError::Closed)) => break,
            Ok(Err(RecvError::Lagged(_))) | Err(_) => {
                return replay(socket, thread, last, None).await;
            }
        }
    }
    Ok(last)
}

/// Sends the thread's messages after `seq` from the store, up to `until`
/// when given (what was published before the watcher subscribed: the rest
/// comes live); the last one sent.
async fn replay(
    socket: &mut WebSocket,
    thread: &ThreadRef,
    mut seq: i64,
    until: Option<i64>,
) -> Result<i64, axum::Error> {
    loop {
        let page = thread
            .read_after(seq, REPLAY_PAGE)
            .await
            .map_err(axum::Error::new)?;
        for message in &page {
            if until.is_some_and(|until| message.seq > until) {
                return Ok(seq);
            }
            socket
                .send(Message::Text(
                    Feed::message_frame(message, None).json.into(),
                ))
                .await?;
            seq = message.seq;
        }
        if page.len() < REPLAY_PAGE {
            return Ok(seq);
        }
    }
}

/// `GET /api/conversations/{id}/events` (WebSocket): a conversation's
/// events as the node emits them (`AgentEvent`s), live only. For the
/// people of the house `home`.
pub async fn conversation(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let id: ConversationId = id
        .parse()
        .map_err(|e| ApiError::BadRequest(format!("`{id}` is not a conversation id: {e}")))?;
    let mut frames = state.feed().watch_conversation(id);
    let stop = state.stopping().clone();
    Ok(small(upgrade).on_upgrade(move |mut socket| async move {
        loop {
            tokio::select! {
                biased;
                () = stop.cancelled() => {
                    let _ = socket.send(Message::Close(None)).await;
                    return;
                }
                frame = frames.recv() => match frame {
                    Ok(frame) => {
                        if socket.send(Message::Text(frame.json.clone().into())).await.is_err() {
                            return;
                        }
                    }
                    Err(RecvError::Lagged(n)) => {
                        let lagged = serde_json::json!({"type": "lagged", "missed": n}).to_string();
                        if socket.send(Message::Text(lagged.into())).await.is_err() {
                            return;
                        }
                    }
                    Err(RecvError::Closed) => {
                        let _ = socket.send(Message::Close(None)).await;
                        return;
                    }
                },
                incoming = socket.recv() => match incoming {
                    None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                    Some(Ok(_)) => {}
                },
            }
        }
    }))
}
