//! A small, tolerant client of the Chrome DevTools Protocol.
//!
//! The protocol is JSON over one WebSocket: a command is `{id, method,
//! params, sessionId?}`, its answer carries the same `id` with `result` or
//! `error`, and everything else is an event. A typed client generated from
//! one version of the protocol breaks when a newer browser sends an event or
//! a field it does not know; this one decodes only what it waits for (the
//! answers, by id) and lets every event and unknown field pass, so any
//! Chromium of the last years and the next ones drives the same way.
//! Commands are sent raw (`cdp` in the helpers); the helpers' typed calls
//! are built on [`Cdp::call`].

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::Message;
use tokio_util::sync::CancellationToken;

/// How long one command may wait for its answer.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a command got no result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CdpError {
    /// The browser answered with an error.
    #[error("{method}: {message}")]
    Protocol {
        /// The command.
        method: String,
        /// The browser's message.
        message: String,
    },
    /// The connection closed (the browser died or was stopped).
    #[error("the browser's connection closed (the browser died or was stopped)")]
    Closed,
    /// No answer in time.
    #[error("{method}: no answer from the browser within {} s", .after.as_secs())]
    Timeout {
        /// The command.
        method: String,
        /// How long it waited.
        after: Duration,
    },
    /// The connection could not be opened.
    #[error("cannot connect to the browser at {url}: {message}")]
    Connect {
        /// The DevTools WebSocket address.
        url: String,
        /// Why.
        message: String,
    },
}

type Pending = Arc<Mutex<HashMap<u64, oneshot::Sender<Result<Value, String>>>>>;

/// Someone waiting for the next event of a method (on a session).
struct Waiter {
    method: String,
    session: Option<String>,
    reply: oneshot::Sender<Value>,
}

type Waiters = Arc<Mutex<Vec<Waiter>>>;

/// One connection to a browser's DevTools endpoint.
pub struct Cdp {
    out: mpsc::UnboundedSender<Message>,
    pending: Pending,
    waiters: Waiters,
    next: AtomicU64,
    closed: CancellationToken,
}

impl Cdp {
    /// Connects to the browser-wide endpoint `url`
    /// (`ws://127.0.0.1:PORT/devtools/browser/ID`).
    pub async fn connect(url: &str) -> Result<Self, CdpError> {
        let (socket, _) =
            tokio_tungstenite::connect_async(url)
                .await
                .map_err(|e| CdpError::Connect {
                    url: url.to_owned(),
                    message: e.to_string(),
                })?;
        let (mut sink, mut stream) = socket.split();
        let (out, mut outgoing) = mpsc::unbounded_channel::<Message>();
        let pending: Pending = Arc::default();
        let closed = CancellationToken::new();
        let writer_closed = closed.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    message = outgoing.recv() => match message {
                        Some(message) => {
                            if sink.send(message).await.is_err() {
                                break;
                            }
                        }
                        None => break,
                    },
                    () = writer_closed.cancelled() => break,
                }
            }
            let _ = sink.close().await;
            writer_closed.cancel();
        });
        let reader_pending = Arc::clone(&pending);
        let waiters: Waiters = Arc::default();
        let reader_waiters = Arc::clone(&waiters);
        let reader_closed = closed.clone();
        tokio::spawn(async move {
            loop {
                let message = tokio::select! {
                    message = stream.next() => message,
                    () = reader_closed.cancelled() => break,
                };
                match message {
                    Some(Ok(Message::Text(text))) => {
                        answer(&reader_pending, &reader_waiters, text.as_str())
                    }
                    Some(Ok(Message::Binary(bytes))) => answer(
                        &reader_pending,
                        &reader_waiters,
                        &String::from_utf8_lossy(&bytes),
                    ),
                    Some(Ok(_)) => {}
                    Some(Err(_)) | None => break,
                }
            }
            reader_closed.cancel();
            // Every caller still waiting learns the connection is gone.
            reader_pending.lock().clear();
            reader_waiters.lock().clear();
        });
        Ok(Self {
            out,
            pending,
            waiters,
            next: AtomicU64::new(1),
            closed,
        })
    }

    /// Sends `method` with `params` (to the page session `session`, or the
    /// browser when `None`) and waits for its result.
    pub async fn call(
        &self,
        method: &str,
        params: Value,
        session: Option<&str>,
    ) -> Result<Value, CdpError> {
        if self.closed.is_cancelled() {
            return Err(CdpError::Closed);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut command = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            command["sessionId"] = Value::String(session.to_owned());
        }
        let (reply, answer) = oneshot::channel();
        self.pending.lock().insert(id, reply);
        if self.out.send(Message::text(command.to_string())).is_err() {
            self.pending.lock().remove(&id);
            return Err(CdpError::Closed);
        }
        let outcome = tokio::select! {
            answer = answer => answer.map_err(|_| CdpError::Closed),
            () = tokio::time::sleep(CALL_TIMEOUT) => Err(CdpError::Timeout {
                method: method.to_owned(),
                after: CALL_TIMEOUT,
            }),
        };
        self.pending.lock().remove(&id);
        outcome?.map_err(|message| CdpError::Protocol {
            method: method.to_owned(),
            message,
        })
    }

    /// The next event `method` (of the page session `session`, or the
    /// browser's when `None`), as its `params`. Ask before sending the
    /// command that causes it, so it cannot pass unseen; the receiver
    /// errs when the connection closes.
    pub fn next_event(&self, method: &str, session: Option<&str>) -> oneshot::Receiver<Value> {
        let (reply, event) = oneshot::channel();
        let mut waiters = self.waiters.lock();
        // Waiters given up on (their receiver dropped) go now.
        waiters.retain(|w| !w.reply.is_closed());
        waiters.push(Waiter {
            method: method.to_owned(),
            session: session.map(str::to_owned),
            reply,
        });
        event
    }

    /// Whether the connection has closed.
    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// Closes the connection; calls in flight fail with [`CdpError::Closed`].
    pub fn close(&self) {
        self.closed.cancel();
    }
}

impl Drop for Cdp {
    fn drop(&mut self) {
        self.closed.cancel();
    }
}

/// Hands an answer to the call waiting for it, and an event to whoever
/// waits for it; anything else, and every unknown field, is let through.
fn answer(pending: &Pending, waiters: &Waiters, text: &str) {
    let Ok(mut value) = serde_json::from_str::<Value>(text) else {
        return;
    };
    let Some(id) = value.get("id").and_then(Value::as_u64) else {
        if let Some(method) = value.get("method").and_then(Value::as_str) {
            let session = value.get("sessionId").and_then(Value::as_str);
            let mut waiters = waiters.lock();
            if let Some(at) = waiters
                .iter()
                .position(|w| w.method == method && w.session.as_deref() == session)
            {
                let waiter = waiters.swap_remove(at);
                let _ = waiter.reply.send(value["params"].take());
            }
        }
        return;
    };
    let Some(reply) = pending.lock().remove(&id) else {
        return;
    };
    let outcome = match value.get("error") {
        Some(error) => Err(error
            .get("message")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .unwrap_or_else(|| error.to_string())),
        None => Ok(value.get("result").cloned().unwrap_or(Value::Null)),
    };
    let _ = reply.send(outcome);
}
