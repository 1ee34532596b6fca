//! The user's channel: questions from `ask_user` and approvals the gate asks
//! for, answered through whatever shows the conversation (the CLI's chat, the
//! server, the Rust API).
//!
//! A question is an event ([`AgentEvent::QuestionAsked`] or
//! [`AgentEvent::ApprovalRequested`]) with a request id; the answer comes
//! back through [`Questions::answer`]. Nobody listening means undelivered,
//! and an unattended run (routine, subagent) is never asked. A node that
//! keeps its conversations keeps the requests with the waiting turns
//! ([`stored`]), so they outlive a restart.

pub mod stored;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use dashmap::DashMap;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::AgentEvent;
use troupe_runtime::store::{Store, StoreError};
use troupe_runtime::tool::ToolContext;

pub use stored::StoredRequest;

/// How a wait for the user ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum Reply {
    /// The user answered.
    Submitted {
        /// The answer.
        answer: serde_json::Value,
    },
    /// The user cancelled.
    Cancelled,
    /// Nobody answered in time.
    TimedOut,
    /// Nobody could be asked.
    Undelivered {
        /// Why.
        reason: String,
    },
}

/// Questions waiting for an answer, by request id; kept in the store too
/// once [`Questions::keep_in`] gave it one (see [`stored`]).
#[derive(Debug, Default)]
pub struct Questions {
    waiting: DashMap<String, oneshot::Sender<Option<serde_json::Value>>>,
    store: OnceLock<Store>,
    /// Set when the node stops: a wait cut by it keeps its request.
    stopping: AtomicBool,
}

impl Questions {
    /// Keeps the requests in `store`, with the turns that wait on them
    /// (a node that keeps its conversations calls it).
    pub fn keep_in(&self, store: Store) {
        let _ = self.store.set(store);
    }

    /// The node stops: the waits its actors' stop cuts keep their
    /// requests (and their calls wait), for the next start to ask again.
    pub fn close(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    /// Answers a question waiting in this process: `None` cancels it.
    /// `false` when none waits with that id (answered already, timed out,
    /// never asked, or kept from before a restart: see
    /// [`Questions::answer_kept`]).
    pub fn answer(&self, request_id: &str, answer: Option<serde_json::Value>) -> bool {
        match self.waiting.remove(request_id) {
            Some((_, tx)) => tx.send(answer).is_ok(),
            None => false,
        }
    }

    /// Answers a question waiting here, or one kept in the store whose turn
    /// does not wait yet (it resumes after a restart): the answer is kept
    /// for it. `false` when no request has that id.
    pub async fn answer_kept(
        &self,
        request_id: &str,
        answer: Option<serde_json::Value>,
    ) -> Result<bool, StoreError> {
        if self.answer(request_id, answer.clone()) {
            return Ok(true);
        }
        let Some(store) = self.store.get() else {
            return Ok(false);
        };
        let id = request_id.to_string();
        let kept = store
            .write(move |tx| {
                let Some(mut request) = stored::by_id(tx, &id)? else {
                    return Ok(false);
                };
                request.answer = Some(answer.clone());
                stored::put(tx, &request)?;
                Ok(true)
            })
            .await?;
        // The resumed turn may have asked between the two looks.
        Ok(kept || self.waiting.contains_key(request_id))
    }

    /// The ids waiting now.
    pub fn pending(&self) -> Vec<String> {
        self.waiting.iter().map(|e| e.key().clone()).collect()
    }

    /// The requests kept in the store, oldest first (none when nothing is
    /// kept).
    pub async fn kept(&self) -> Result<Vec<StoredRequest>, StoreError> {
        match self.store.get() {
            Some(store) => store.read(stored::all).await,
            None => Ok(Vec::new()),
        }
    }

    /// The calls of `conversation` that wait on a kept request: they never
    /// ran, and its resumed turn asks them again.
    pub async fn kept_calls(
        &self,
        conversation: ConversationId,
    ) -> Result<Vec<String>, StoreError> {
        match self.store.get() {
            Some(store) => Ok(store
                .read(move |c| stored::of_conversation(c, conversation))
                .await?
                .into_iter()
                .map(|r| r.call_id)
                .collect()),
            None => Ok(Vec::new()),
        }
    }

    /// Emits the event `make(request_id)` on the turn's channel and waits for
    /// the answer, the turn's stop, or `timeout`. With a store, the request
    /// is kept until then; a call asked again after a restart reuses its
    /// kept request's id (and takes an answer given to it meanwhile).
    pub async fn ask(
        self: &Arc<Self>,
        ctx: &ToolContext,
        timeout: Duration,
        make: impl FnOnce(String) -> AgentEvent,
    ) -> Reply {
        if ctx.kind.is_unattended() {
            return Reply::Undelivered {
                reason: "this run is unattended: nobody is there to answer".into(),
            };
        }
        let Some(channel) = ctx.services.user_channel() else {
            return Reply::Undelivered {
                reason: "this conversation has no channel to the user".into(),
            };
        };
        let store = self.store.get().cloned();
        let (conversation, call_id) = (ctx.conversation, ctx.call_id.clone());
        let kept = match &store {
            Some(store) => {
                let call = call_id.clone();
                store
                    .read(move |c| stored::of_call(c, conversation, &call))
                    .await
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "a kept request could not be read");
                        None
                    })
            }
            None => None,
        };
        // A request kept from before a restart is listed from the store
        // whoever watches now: it is asked again all the same.
        if kept.is_none() && !channel.has_listeners() {
            return Reply::Undelivered {
                reason: "nobody is watching this conversation".into(),
            };
        }
        if let (
            Some(store),
            Some(StoredRequest {
                answer: Some(answer),
                ..
            }),
        ) = (&store, &kept)
        {
            // Answered while no turn waited: that is the answer.
            let call = call_id.clone();
            let _ = store
                .write(move |tx| stored::remove(tx, conversation, &call))
                .await;
            return match answer {
                Some(answer) => Reply::Submitted {
                    answer: answer.clone(),
                },
                None => Reply::Cancelled,
            };
        }
        let request_id = kept
            .as_ref()
            .map(|k| k.id.clone())
            .unwrap_or_else(|| format!("ask_{}", uuid::Uuid::now_v7().simple()));
        let event = make(request_id.clone());
        let (tx, rx) = oneshot::channel();
        self.waiting.insert(request_id.clone(), tx);
        if let Some(store) = &store {
            let request = StoredRequest {
                id: request_id.clone(),
                conversation,
                call_id: call_id.clone(),
                event: event.clone(),
                asked_at: kept.map(|k| k.asked_at).unwrap_or_else(chrono::Utc::now),
                answer: None,
            };
            if let Err(e) = store.write(move |tx| stored::put(tx, &request)).await {
                tracing::warn!(error = %e, "a request could not be kept; a restart drops it");
            }
        }
        channel.emit(event);
        let reply = tokio::select! {
            answer = rx => match answer {
                Ok(Some(answer)) => Reply::Submitted { answer },
                Ok(None) | Err(_) => Reply::Cancelled,
            },
            () = tokio::time::sleep(timeout) => Reply::TimedOut,
            () = ctx.cancel.cancelled() => Reply::Cancelled,
        };
        self.waiting.remove(&request_id);
        if reply == Reply::Cancelled && self.stopping.load(Ordering::SeqCst) {
            // The node stops: the request stays kept and the call waits
            // (nothing is committed for it); the next start asks again.
            std::future::pending::<()>().await;
        }
        if let Some(store) = &store {
            if let Err(e) = store
                .write(move |tx| stored::remove(tx, conversation, &call_id))
                .await
            {
                tracing::warn!(error = %e, "an answered request could not be removed");
            }
        }
        reply
    }
}
