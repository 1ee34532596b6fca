//! One actor per running delegation, under the node's `delegations` router.
//!
//! The Delegation actor follows its subagents' ends. A subagent's end is
//! recorded with [`record::end`] in the transaction that closes its turn
//! (the delegations' turn hook) — the last one enqueues the parent's report
//! there too — and the actor is told once it committed
//! ([`DelegationMsg::Recorded`]). Ends that close no turn (an executor
//! instance's, a subagent that could not start) come as
//! [`DelegationMsg::Ended`] and are recorded the same way, queued for the
//! store's writer in the order they arrive. It arms its
//! subagents' stored deadlines and stops a subagent still running at its
//! deadline. When none of its subagents runs any more it stops, and the
//! router forgets it.
//!
//! Its state is rebuilt from the store in `pre_start` (which subagents
//! still run, their deadlines), so the router can start it on any message
//! — the first after `delegate`, one after a restart, one after the process
//! died — and it carries on. The subagents themselves are conversations,
//! addressed and restarted by the conversations' router like any other;
//! the tree (`troupe ps`, `Runtime::tree()`, `actor_started` events) shows
//! them under their delegation.
//!
//! An outside executor's instance is the delegation's own child: an
//! [`Executor`] actor it launches ([`DelegationMsg::Launch`], its harness
//! often started already: [`HeadStart`]) and
//! supervises — a failed one is reported failed, once — and reaches for
//! `steer` and `stop`. Its end comes back as [`DelegationMsg::Ended`], like
//! a subagent's.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};
use troupe_runtime::id::{ConversationId, DelegationId, MsgId};
use troupe_runtime::protocol::{Address, AgentEvent, Envelope, Payload};
use troupe_runtime::router::{RouterConfig, RouterEvent};
use troupe_runtime::rusqlite::params;
use troupe_runtime::supervise::{Backoff, Intensity, Restart};

use super::{record, Delegations};
use crate::delegation::executor::{Executor, ExecutorMsg, HeadStart, Launch};
use crate::node::routed::{Routed, RoutedKind};
use crate::node::Node;

/// The kind a delegation has in the tree and its events.
pub const KIND: &str = "delegation";

/// What a Delegation actor is told.
#[derive(Debug)]
pub enum DelegationMsg {
    /// Look at what still runs; stop when nothing does (its first message).
    Check,
    /// A subagent (an executor instance, one that could not start) ended
    /// without closing a turn: record it (the last end reports).
    Ended {
        /// The subagent's conversation.
        conversation: ConversationId,
        /// `done`, `failed`, `stopped` or `timed_out`.
        status: String,
        /// Its summary, or why it ended.
        result: String,
    },
    /// A subagent's end is committed (by the close of its turn, or by the
    /// task that waited for an `Ended`).
    Recorded(ConversationId),
    /// A subagent's stored deadline passed.
    Deadline(ConversationId),
    /// Start an executor instance (its row is recorded already).
    Launch {
        /// The instance.
        launch: Box<Launch>,
        /// Its harness, started while its admission committed.
        head: Option<Box<HeadStart>>,
    },
    /// Tell a running executor instance `message`.
    Steer {
        /// The instance's key.
        key: ConversationId,
        /// The message.
        message: String,
        /// Whether it took it.
        reply: RpcReplyPort<Result<(), String>>,
    },
    /// Stop a running executor instance.
    StopInstance(ConversationId),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for DelegationMsg {}

/// The Delegation actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Delegation;

/// What a Delegation actor starts with.
pub struct DelegationArgs {
    id: DelegationId,
    node: Node,
    delegations: Arc<Delegations>,
    restarted: bool,
}

/// Its state: what it found in the store, less what ended since.
pub struct DelegationState {
    args: DelegationArgs,
    running: HashSet<ConversationId>,
    /// Its executor instances' actors, by key.
    executors: HashMap<ConversationId, ActorRef<ExecutorMsg>>,
}

/// A subagent of a delegation, as its actor needs it.
struct Running {
    conversation: ConversationId,
    deadline: Option<chrono::DateTime<chrono::Utc>>,
}

/// The delegating conversation and the subagents still running.
fn load(
    conn: &troupe_runtime::rusqlite::Connection,
    id: DelegationId,
) -> Result<Option<(ConversationId, Vec<Running>)>, troupe_runtime::store::StoreError> {
    use troupe_runtime::rusqlite::OptionalExtension;
    let parent: Option<String> = conn
        .prepare_cached("SELECT parent_conversation FROM delegations WHERE id = ?1")?
        .query_row(params![id.to_string()], |r| r.get(0))
        .optional()?;
    let Some(parent) = parent else {
        return Ok(None);
    };
    let rows = conn
        .prepare_cached(
            "SELECT conversation_id, deadline FROM subagents
             WHERE delegation_id = ?1 AND status = 'running' ORDER BY position",
        )?
        .query_map(params![id.to_string()], |r| {
            Ok((r.get::<_, String>(0)?, r.get::<_, Option<String>>(1)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let codec = |detail: String| troupe_runtime::store::StoreError::Codec { what: "id", detail };
    let parent = parent.parse().map_err(|e| codec(format!("{e}")))?;
    let running = rows
        .into_iter()
        .map(|(conversation, deadline)| {
            Ok(Running {
                conversation: conversation.parse().map_err(|e| codec(format!("{e}")))?,
                deadline: deadline
                    .and_then(|d| chrono::DateTime::parse_from_rfc3339(&d).ok())
                    .map(|d| d.with_timezone(&chrono::Utc)),
            })
        })
        .collect::<Result<Vec<_>, troupe_runtime::store::StoreError>>()?;
    Ok(Some((parent, running)))
}

impl Actor for Delegation {
    type Msg = DelegationMsg;
    type State = DelegationState;
    type Arguments = DelegationArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<DelegationMsg>,
        args: DelegationArgs,
    ) -> Result<DelegationState, ActorProcessingErr> {
        let id = args.id;
        let (parent, running) = args
            .node
            .store()
            .read(move |c| load(c, id))
            .await?
            .ok_or_else(|| format!("there is no delegation {id}"))?;
        let now = chrono::Utc::now();
        for sub in &running {
            if let Some(deadline) = sub.deadline {
                let left = (deadline - now).to_std().unwrap_or_default();
                let conversation = sub.conversation;
                myself.send_after(left, move || DelegationMsg::Deadline(conversation));
            }
        }
        let state = DelegationState {
            running: running.iter().map(|r| r.conversation).collect(),
            executors: HashMap::new(),
            args,
        };
        state.args.delegations.parents.insert(id, parent);
        let event = if state.args.restarted {
            AgentEvent::ActorRestarted {
                kind: KIND.into(),
                id: id.to_string(),
                parent: Some("delegations".into()),
                restarts: 1,
                reason: "its last incarnation failed".into(),
            }
        } else {
            AgentEvent::ActorStarted {
                kind: KIND.into(),
                id: id.to_string(),
                parent: Some("delegations".into()),
            }
        };
        publish(&state.args.node, parent, event);
        Ok(state)
    }

    async fn handle(
        &self,
        myself: ActorRef<DelegationMsg>,
        msg: DelegationMsg,
        state: &mut DelegationState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            DelegationMsg::Check => {}
            DelegationMsg::Ended {
                conversation,
                status,
                result,
            } => record_end(&myself, state, conversation, status, result).await,
            DelegationMsg::Recorded(conversation) => {
                state.running.remove(&conversation);
            }
            DelegationMsg::Deadline(conversation) => {
                if let Some(executor) = state.executors.get(&conversation) {
                    let _ = executor.send_message(ExecutorMsg::Stop { timed_out: true });
                } else if state.running.contains(&conversation) {
                    state.args.delegations.timed_out.insert(conversation);
                    // Through the router even when it is not live (a turn
                    // resuming after a restart): the stop follows the resumption.
                    let _ = state.args.node.conversations().send(
                        conversation,
                        crate::node::conversation::ConversationMsg::Stop,
                    );
                }
            }
            DelegationMsg::Launch { launch, head } => {
                tracing::debug!(instance = %launch.sub, "launching an executor instance");
                let key = launch.key;
                state.args.delegations.note_instance(&launch);
                let args = crate::delegation::executor::ExecutorArgs {
                    launch: *launch,
                    node: state.args.node.clone(),
                    delegations: Arc::clone(&state.args.delegations),
                    head: head.map(|h| *h),
                };
                match Actor::spawn_linked(None, Executor, args, myself.get_cell()).await {
                    Ok((executor, _)) => {
                        state.executors.insert(key, executor);
                    }
                    Err(e) => {
                        let e = match e {
                            ractor::SpawnErr::StartupFailed(why) => why.to_string(),
                            other => other.to_string(),
                        };
                        state.args.delegations.forget_instance(key);
                        state.args.delegations.end(
                            Some(state.args.id),
                            key,
                            "failed",
                            &format!("could not start: {e}"),
                        );
                    }
                }
            }
            DelegationMsg::Steer {
                key,
                message,
                reply,
            } => match state.executors.get(&key) {
                Some(executor) => {
                    let _ = executor.send_message(ExecutorMsg::Steer(message, reply));
                }
                None => {
                    let _ = reply.send(Err("it is not running in this process any more".into()));
                }
            },
            DelegationMsg::StopInstance(key) => {
                if let Some(executor) = state.executors.get(&key) {
                    let _ = executor.send_message(ExecutorMsg::Stop { timed_out: false });
                }
            }
        }
        if state.running.is_empty() && state.executors.is_empty() {
            myself.stop(None);
        }
        Ok(())
    }

    /// Its executor instances' exits: one that failed is reported failed
    /// (a second report of one that ended is ignored by the record).
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<DelegationMsg>,
        event: SupervisionEvent,
        state: &mut DelegationState,
    ) -> Result<(), ActorProcessingErr> {
        let (cell, failure) = match event {
            SupervisionEvent::ActorTerminated(cell, _, _) => (cell, None),
            SupervisionEvent::ActorFailed(cell, error) => (cell, Some(error.to_string())),
            SupervisionEvent::ActorStarted(_)
            | SupervisionEvent::ProcessGroupChanged(_)
            | SupervisionEvent::PidLifecycleEvent(_) => return Ok(()),
        };
        let key = state
            .executors
            .iter()
            .find(|(_, e)| e.get_id() == cell.get_id())
            .map(|(k, _)| *k);
        if let Some(key) = key {
            state.executors.remove(&key);
            state.args.delegations.forget_instance(key);
            if let Some(error) = failure {
                tracing::error!(delegation = %state.args.id, instance = %key, %error, "an executor instance's actor failed");
                state.args.delegations.end(
                    Some(state.args.id),
                    key,
                    "failed",
                    &format!("its actor failed: {error} (the harness was killed)"),
                );
            }
        }
        if state.running.is_empty() && state.executors.is_empty() {
            myself.stop(None);
        }
        Ok(())
    }
}

/// Queues the end of a subagent that did not end by closing a turn (an
/// executor instance, one that could not start) for the writer, in arrival
/// order (the last one writes the report); a task waits for its commit,
/// then hands the report to a routine run waiting for it, or routes the
/// notice the same commit put in the parent's mailbox, and tells the
/// actor. A subagent whose turn closes records its end in that close
/// ([`super::Delegations`]'s `closing` hook).
async fn record_end(
    myself: &ActorRef<DelegationMsg>,
    state: &DelegationState,
    conversation: ConversationId,
    status: String,
    result: String,
) {
    let node = state.args.node.clone();
    let queued = node
        .store()
        .submit(move |tx| record::end(tx, conversation, &status, &result, report_notice))
        .await;
    let delegations = Arc::clone(&state.args.delegations);
    let myself = myself.clone();
    tokio::spawn(async move {
        let ended = match queued {
            Ok(pending) => pending.wait().await,
            Err(e) => Err(e),
        };
        match ended {
            Ok(Some(ended)) => {
                if let Some(report) = &ended.report {
                    if let Some((_, tx)) = delegations.waiters.remove(&ended.delegation) {
                        let _ = tx.send(report.clone());
                    }
                }
                if let Some(notice) = ended.notice {
                    if let Err(e) = node.route(notice).await {
                        tracing::error!(error = %e, "a delegation report could not be routed; it stays in the mailbox");
                    }
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::error!(error = %e, %conversation, "a subagent's end could not be recorded");
            }
        }
        delegations.record_grew();
        // Gone already (restarted, stopping): the next incarnation reads
        // what still runs from the store.
        let _ = myself.send_message(DelegationMsg::Recorded(conversation));
    });
}

/// A delegation's report, as a notice to the delegating conversation.
pub(super) fn report_notice(parent: ConversationId, text: String) -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Service(KIND.into()),
        to: Address::Conversation(parent),
        body: Payload::Notice {
            topic: KIND.into(),
            text,
            data: serde_json::Value::Null,
        },
        sent_at: chrono::Utc::now(),
    }
}

fn publish(node: &Node, conversation: ConversationId, event: AgentEvent) {
    node.publish(conversation, event);
}

/// Delegations are restarted from the store within their intensity; a
/// delegation's exit is reported on its delegating conversation's stream.
#[async_trait::async_trait]
impl RoutedKind for Delegations {
    type Key = DelegationId;
    type Msg = DelegationMsg;

    fn routed(&self) -> &Routed<DelegationId, DelegationMsg> {
        &self.routed
    }

    fn config(&self) -> RouterConfig {
        RouterConfig {
            // A delegation stops when its last subagent ended, not when idle.
            idle_after: None,
            restart: Restart::Transient,
            intensity: Intensity::new(3, std::time::Duration::from_secs(60)),
            backoff: Backoff::None,
            shutdown: std::time::Duration::from_secs(5),
            events: 1024,
            // It announces its own start.
            report_activations: false,
        }
    }

    async fn activate(
        self: Arc<Self>,
        id: DelegationId,
        supervisor: ActorCell,
        restarted: bool,
    ) -> Result<ActorRef<DelegationMsg>, ActorProcessingErr> {
        let node = self.node().ok_or("the node is stopping")?;
        let args = DelegationArgs {
            id,
            node,
            delegations: self,
            restarted,
        };
        let (actor, _) = Actor::spawn_linked(None, Delegation, args, supervisor).await?;
        Ok(actor)
    }

    /// Reports a delegation's exit on the node's bus (on the delegating
    /// conversation's stream).
    async fn on_event(&self, event: RouterEvent<DelegationId>) {
        let Some(node) = self.node() else { return };
        match event {
            RouterEvent::Exited { key, reason } => {
                let parent = if reason.is_abnormal() {
                    self.parents.get(&key).map(|p| *p)
                } else {
                    self.parents.remove(&key).map(|(_, p)| p)
                };
                if let Some(parent) = parent {
                    publish(
                        &node,
                        parent,
                        AgentEvent::ActorStopped {
                            kind: KIND.into(),
                            id: key.to_string(),
                            reason: reason.to_string(),
                        },
                    );
                }
            }
            RouterEvent::GaveUp { key, .. } => {
                self.parents.remove(&key);
            }
            RouterEvent::Activated { .. } | RouterEvent::Passivated { .. } => {}
        }
    }
}
