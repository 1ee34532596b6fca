//! The reviewer: the supervisor of background reviews, one child of the
//! node's root. Each review is a [`Review`] actor linked to it.
//!
//! ```text
//! node
//! └─ reviewer            decides which conversation is due, one review each
//!    └─ review:conv_…    one review of one conversation, until it ends
//! ```
//!
//! The reviewer owns the set of conversations with a review running. A
//! review is a temporary child: whatever ends it — its end, an error, a
//! panic, a kill — the reviewer's exit handling takes the conversation out
//! of that set, so the conversation is reviewed again when its next review
//! is due. A review that failed is not restarted: what it already kept is
//! committed, and the next one comes `every_n_turns` turns after the last
//! one that opened its conversation (one that failed before that counts
//! from the review before it, so it comes at the next turn).

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::RwLock;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio_util::task::task_tracker::TaskTrackerToken;
use tokio_util::task::TaskTracker;
use troupe_runtime::fault;
use troupe_runtime::id::ConversationId;
use troupe_runtime::supervise::{ChildSpec, ExitReason};
use troupe_runtime::tool::dispatch::CallGate;

use super::{review, since_last_review};
use crate::node::{ActorInfo, Branch};
use crate::node::{FinishedTurn, Node, NodeError};

/// The fault point a test arms (with the reviewed conversation's id) to
/// make a review panic as it starts.
pub const FAULT: &str = "review";

/// What the reviewer is told.
#[derive(Debug)]
pub enum ReviewerMsg {
    /// A turn ended: review its conversation if it is due and not being
    /// reviewed already.
    Turn(Box<FinishedTurn>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for ReviewerMsg {}

/// The reviewer actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Reviewer;

/// What the reviews use of the node besides the node itself, given by
/// boot when it starts them: the gate a review's own sits in front of,
/// how many run now, and the work the node's shutdown waits for.
#[derive(Clone)]
pub struct ReviewWork {
    /// The node's gate.
    pub gate: Arc<dyn CallGate>,
    running: Arc<std::sync::atomic::AtomicUsize>,
    tracker: TaskTracker,
}

impl ReviewWork {
    /// The reviews' work in front of the node's `gate`.
    pub fn new(gate: Arc<dyn CallGate>) -> Self {
        Self {
            gate,
            running: Arc::default(),
            tracker: TaskTracker::new(),
        }
    }

    fn add(&self, n: usize) {
        self.running
            .fetch_add(n, std::sync::atomic::Ordering::Relaxed);
    }

    fn sub(&self, n: usize) {
        self.running
            .fetch_sub(n, std::sync::atomic::Ordering::Relaxed);
    }
}

/// The reviewer's state.
pub struct ReviewerState {
    node: Node,
    work: ReviewWork,
    every: u32,
    /// The running reviews: the reviewed conversation, and the token that
    /// keeps the node's shutdown waiting for it.
    running: HashMap<ActorId, (ConversationId, TaskTrackerToken)>,
    shown: Arc<DashMap<ConversationId, ()>>,
}

impl ReviewerState {
    /// The review `cell` ended: its conversation may be reviewed again.
    fn ended(&mut self, cell: ActorId, reason: &ExitReason) {
        let Some((conversation, _token)) = self.running.remove(&cell) else {
            return;
        };
        self.shown.remove(&conversation);
        self.work.sub(1);
        if reason.is_abnormal() {
            tracing::error!(%conversation, %reason, "a background review failed; the next one comes when due");
            self.node.publish(
                conversation,
                troupe_runtime::protocol::AgentEvent::ActorStopped {
                    kind: "review".into(),
                    id: format!("review:{conversation}"),
                    reason: reason.to_string(),
                },
            );
        }
    }
}

impl Actor for Reviewer {
    type Msg = ReviewerMsg;
    type State = ReviewerState;
    type Arguments = (Node, ReviewWork, u32, Arc<DashMap<ConversationId, ()>>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (node, work, every, shown): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        // A restarted reviewer starts with no review running.
        shown.clear();
        Ok(ReviewerState {
            node,
            work,
            every,
            running: HashMap::new(),
            shown,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ReviewerMsg::Turn(turn) => {
                let background = &state.work.tracker;
                let id = turn.conversation;
                if background.is_closed() || state.running.values().any(|(c, _)| *c == id) {
                    return Ok(());
                }
                let token = background.token();
                let args = (
                    state.node.clone(),
                    Arc::clone(&state.work.gate),
                    *turn,
                    state.every,
                );
                let child = match Actor::spawn_linked(None, Review, args, myself.get_cell()).await {
                    Ok((child, _)) => child,
                    Err(e) => {
                        tracing::error!(conversation = %id, error = %e, "a background review could not start");
                        return Ok(());
                    }
                };
                state.running.insert(child.get_id(), (id, token));
                state.shown.insert(id, ());
                state.work.add(1);
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((cell, reason)) = ExitReason::from_event(&event) {
            state.ended(cell.get_id(), &reason);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.work.sub(state.running.len());
        state.running.clear();
        state.shown.clear();
        Ok(())
    }
}

/// One review of one conversation: it decides whether the review is due,
/// runs it to its end and stops. It does only that, so its one message
/// runs the whole review.
struct Review;

enum ReviewMsg {
    Run,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for ReviewMsg {}

struct ReviewState {
    node: Node,
    gate: Arc<dyn CallGate>,
    turn: FinishedTurn,
    every: u32,
}

impl Actor for Review {
    type Msg = ReviewMsg;
    type State = ReviewState;
    type Arguments = (Node, Arc<dyn CallGate>, FinishedTurn, u32);

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        (node, gate, turn, every): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_message(ReviewMsg::Run)?;
        Ok(ReviewState {
            node,
            gate,
            turn,
            every,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            ReviewMsg::Run => {
                let id = state.turn.conversation;
                fault::check(FAULT, &id.to_string());
                let since = state
                    .node
                    .store()
                    .read(move |c| since_last_review(c, id))
                    .await
                    .map_err(|e| format!("the review cadence is unreadable: {e}"))?;
                if since.turns >= state.every {
                    review(&state.node, &state.gate, &state.turn, !since.memory_saved)
                        .await
                        .map_err(|e: NodeError| format!("the review failed: {e}"))?;
                }
                myself.stop(None);
            }
        }
        Ok(())
    }
}

/// The reviewer as a child of the node's root, and as the hook that hands
/// it turns.
pub struct Reviews {
    actor: RwLock<Option<ActorRef<ReviewerMsg>>>,
    shown: Arc<DashMap<ConversationId, ()>>,
    work: ReviewWork,
}

impl Reviews {
    /// Starts the reviewer under `node`'s root supervisor, reviewing every
    /// `every` turns (a permanent child: restarted if it fails itself),
    /// with what it uses of the node besides (`work`).
    pub async fn start(node: &Node, work: ReviewWork, every: u32) -> Result<Arc<Self>, NodeError> {
        let reviews = Arc::new(Self {
            actor: RwLock::new(None),
            shown: Arc::default(),
            work,
        });
        let (owner, weak) = (node.clone(), Arc::downgrade(&reviews));
        let child = ChildSpec::new("reviewer", move |supervisor| {
            let (node, weak) = (owner.clone(), weak.clone());
            async move {
                let reviews = weak.upgrade().ok_or("the node is stopping")?;
                let args = (
                    node,
                    reviews.work.clone(),
                    every,
                    Arc::clone(&reviews.shown),
                );
                let (actor, _) = Actor::spawn_linked(None, Reviewer, args, supervisor).await?;
                *reviews.actor.write() = Some(actor.clone());
                Ok(actor.get_cell())
            }
        });
        node.supervise(child).await?;
        Ok(reviews)
    }

    /// How many reviews are running now.
    pub fn running(&self) -> usize {
        self.work.running.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Hands `turn` to the reviewer.
    pub(super) fn offer(&self, turn: &FinishedTurn) {
        let actor = self.actor.read().clone();
        if let Some(actor) = actor {
            let _ = actor.send_message(ReviewerMsg::Turn(Box::new(turn.clone())));
        }
    }
}

impl Branch for Reviews {
    fn live(&self) -> Vec<ActorInfo> {
        self.shown
            .iter()
            .map(|entry| ActorInfo {
                kind: "review".into(),
                id: format!("review:{}", entry.key()),
                parent: Some("reviewer".into()),
                state: "running".into(),
                restarts: 0,
            })
            .collect()
    }

    /// No review starts once the node stops.
    fn stopping(&self) {
        self.work.tracker.close();
    }

    /// The reviews running when the node began to stop end first.
    fn drain(&self) -> futures::future::BoxFuture<'_, ()> {
        Box::pin(self.work.tracker.wait())
    }
}
