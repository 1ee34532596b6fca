//! Delegation: `delegate` hands tasks to subagents, each a conversation of
//! its own under the delegating one, and every subagent's end state reaches
//! the parent through the durable mailbox.
//!
//! A subagent is an agent actor of kind [`ActorKind::Subagent`]: a clean
//! context, the parent's model and at most the parent's tools, minus what the
//! table withholds from subagents. Its budget scope is a child of the
//! delegation's, which is a child of the parent turn's. When its turn ends —
//! done, failed, stopped or timed out — the end is recorded in the
//! transaction that closes the turn; the last one to end writes the report
//! to the parent's mailbox in that same transaction, so the parent hears
//! exactly once, across crashes. A routine run waits for the report instead.
//!
//! With `executor`, each task goes to an instance of an outside coding
//! harness instead (see [`crate::delegation::executor`]): a row like a subagent's,
//! with its executor and folder, ended and reported the same way.

mod actor;
pub mod executor;
pub mod executors;
pub mod record;
mod users_own;

pub use actor::{Delegation, DelegationMsg, KIND};

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};

use crate::node::routed::Routed;
use dashmap::{DashMap, DashSet};
use tokio::sync::oneshot;
use troupe_runtime::agents::{DelegateRequest, Task};
use troupe_runtime::id::{ConversationId, DelegationId, SubagentId};
use troupe_runtime::protocol::{ActorKind, ToolResult, TurnOutcome};
use troupe_runtime::tool::ToolContext;

use crate::budget::{Limits, Scope};
use crate::node::conversation::Input;
use crate::node::{
    ActorInfo, Branch, ClosingTurn, Committed, FinishedTurn, Node, Opening, StoredBudget, TurnHook,
    WeakNode,
};
use crate::toolset::Narrowing;
use troupe_runtime::rusqlite::Transaction;
use troupe_runtime::store::StoreError;

pub use crate::toolset::VisibleTools;

/// The node's delegations: the router of their actors (one per running
/// delegation), and what outlives an actor's incarnation — the routine runs
/// waiting for a report, the subagents stopped at their deadline.
pub struct Delegations {
    /// Itself, for what it does once a subagent's close committed.
    me: Weak<Delegations>,
    node: WeakNode,
    pub(crate) routed: Routed<DelegationId, DelegationMsg>,
    waiters: DashMap<DelegationId, oneshot::Sender<String>>,
    timed_out: DashSet<ConversationId>,
    /// Each live delegation's delegating conversation (its events go there).
    parents: DashMap<DelegationId, ConversationId>,
    /// The executor instances with a live actor in this process, by key.
    instances: DashMap<ConversationId, LiveInstance>,
    /// Counts the commits that grew an executor instance's record (an
    /// event, or its end): watchers wake on it and read the record after
    /// what they saw, so none of them misses anything.
    recorded: tokio::sync::watch::Sender<u64>,
}

/// An executor instance with a live actor, as the tree shows it.
#[derive(Debug, Clone)]
pub struct LiveInstance {
    /// Its delegation.
    pub delegation: DelegationId,
    /// Its id.
    pub sub: SubagentId,
    /// Its harness.
    pub executor: String,
    /// When its actor started.
    pub started: std::time::Instant,
}

impl std::fmt::Debug for Delegations {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Delegations")
            .field("waiting", &self.waiters.len())
            .finish()
    }
}

impl Delegations {
    /// The delegations of the node `node` (not running until the root
    /// starts their router).
    pub(crate) fn new(node: WeakNode) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            node,
            routed: Routed::new("delegations", KIND),
            waiters: DashMap::new(),
            timed_out: DashSet::new(),
            parents: DashMap::new(),
            instances: DashMap::new(),
            recorded: tokio::sync::watch::channel(0).0,
        })
    }

    fn node(&self) -> Option<Node> {
        self.node.upgrade()
    }

    /// Sends `msg` to delegation `id`'s actor, starting it if needed (it
    /// rebuilds itself from the store).
    fn send(&self, id: DelegationId, msg: DelegationMsg) {
        if let Err(e) = self.routed.send(id, msg) {
            tracing::error!(delegation = %id, error = %e, "a delegation could not be reached; the next start recovers it");
        }
    }

    /// The delegations with a live actor.
    pub fn live(&self) -> Vec<DelegationId> {
        self.routed.live()
    }

    /// Notes an executor instance whose actor is starting.
    pub(crate) fn note_instance(&self, launch: &crate::delegation::executor::Launch) {
        self.instances.insert(
            launch.key,
            LiveInstance {
                delegation: launch.delegation,
                sub: launch.sub,
                executor: launch.executor.clone(),
                started: std::time::Instant::now(),
            },
        );
    }

    /// Forgets an executor instance whose actor is gone.
    pub(crate) fn forget_instance(&self, key: ConversationId) {
        self.instances.remove(&key);
    }

    /// The executor instances with a live actor here.
    pub fn live_instances(&self) -> Vec<LiveInstance> {
        self.instances.iter().map(|i| i.value().clone()).collect()
    }

    /// Tells delegation `delegation` (its actor) that the subagent of
    /// `conversation` ended; when it is not given, it is read from the store.
    pub(crate) fn end(
        self: &Arc<Self>,
        delegation: Option<DelegationId>,
        conversation: ConversationId,
        status: &str,
        result: &str,
    ) {
        let msg = DelegationMsg::Ended {
            conversation,
            status: status.to_string(),
            result: result.to_string(),
        };
        if let Some(delegation) = delegation {
            self.send(delegation, msg);
            return;
        }
        let Some(node) = self.node() else { return };
        let this = Arc::clone(self);
        tokio::spawn(async move {
            match node
                .store()
                .read(move |c| record::by_conversation(c, conversation))
                .await
            {
                Ok(Some(sub)) => this.send(sub.delegation, msg),
                Ok(None) => {}
                Err(e) => {
                    tracing::error!(error = %e, %conversation, "a subagent's delegation could not be read")
                }
            }
        });
    }

    /// Runs a `delegate` request.
    pub async fn handle(
        self: &Arc<Self>,
        ctx: &ToolContext,
        request: DelegateRequest,
    ) -> ToolResult {
        let Some(node) = self.node() else {
            return ToolResult::error("the node is shutting down");
        };
        match request {
            DelegateRequest::Spawn {
                tasks,
                executor: Some(executor),
                route,
            } => {
                self.spawn_executor(&node, ctx, &executor, tasks, None, route)
                    .await
            }
            DelegateRequest::Spawn {
                tasks,
                executor: None,
                route: _,
            } => self.spawn(&node, ctx, tasks).await,
            DelegateRequest::Resume {
                subagent_id,
                message,
                executor,
                route,
            } => {
                self.resume(&node, ctx, &subagent_id, message, executor, route)
                    .await
            }
            DelegateRequest::List => list(&node, ctx).await,
            DelegateRequest::Steer {
                subagent_id,
                message,
            } => match self
                .find_or_users(&node, ctx, &subagent_id, "steer", Some(&message))
                .await
            {
                Ok(sub) if sub.status == "running" && sub.executor.is_some() => {
                    self.steer_instance(&sub, message).await
                }
                Ok(sub) if sub.status == "running" => {
                    match node.steer(sub.conversation, message.clone()).await {
                        Ok(()) => {
                            let (d, s) = (sub.delegation, sub.id);
                            let _ = node
                                .store()
                                .write(move |tx| record::event(tx, d, Some(s), "steer", &message))
                                .await;
                            self.record_grew();
                            ToolResult::ok(format!(
                                "Sent to {subagent_id}; it reads it before its next step."
                            ))
                        }
                        Err(e) => ToolResult::error(format!("could not reach {subagent_id}: {e}")),
                    }
                }
                Ok(sub) => ToolResult::error(format!(
                    "{subagent_id} has ended ({}); steer only reaches a running subagent.",
                    sub.status
                )),
                Err(e) => e,
            },
            DelegateRequest::Account { target } => self.log_in(&node, ctx, &target).await,
            DelegateRequest::Stop { subagent_id } => match self
                .find_or_users(&node, ctx, &subagent_id, "stop", None)
                .await
            {
                Ok(sub) if sub.status == "running" && sub.executor.is_some() => {
                    self.send(
                        sub.delegation,
                        DelegationMsg::StopInstance(sub.conversation),
                    );
                    ToolResult::ok(format!(
                        "Stopping {subagent_id}; what it had so far will be in the report."
                    ))
                }
                Ok(sub) if sub.status == "running" => {
                    let _ = node.stop(sub.conversation).await;
                    ToolResult::ok(format!(
                        "Stopping {subagent_id}; its state will be in the report."
                    ))
                }
                Ok(sub) => {
                    ToolResult::ok(format!("{subagent_id} had already ended ({}).", sub.status))
                }
                Err(e) => e,
            },
        }
    }

    async fn spawn(
        self: &Arc<Self>,
        node: &Node,
        ctx: &ToolContext,
        tasks: Vec<Task>,
    ) -> ToolResult {
        let settings = node.settings();
        if ctx.kind == ActorKind::Subagent && settings.max_delegation_depth <= 1 {
            return ToolResult::error(format!(
                "a subagent cannot delegate: the delegation depth limit is {} ([delegation] max_depth).",
                settings.max_delegation_depth
            ));
        }
        let n = tasks.len();
        let bot = match node.bot(&ctx.agent) {
            Ok(bot) => bot,
            Err(e) => return ToolResult::error(e.to_string()),
        };
        let waits = ctx.kind == ActorKind::RoutineRun;
        let delegation = DelegationId::new();
        let subs: Vec<(SubagentId, ConversationId, String, String)> = tasks
            .iter()
            .map(|t| {
                (
                    SubagentId::new(),
                    ConversationId::new(),
                    t.goal.clone(),
                    t.context.clone(),
                )
            })
            .collect();
        let rows = subs.clone();
        let (parent, agent) = (ctx.conversation, ctx.agent.clone());
        let admission = record::Admission {
            per_bot: settings.max_subagents_per_bot,
            per_node: settings.max_subagents_per_node,
            deadline: deadline_after(settings.subagent_timeout),
        };
        let admitted = node
            .store()
            .write(move |tx| {
                record::admit(tx, delegation, parent, &agent, waits, &rows, &admission)
            })
            .await;
        match admitted {
            Ok(record::Admitted::Yes) => {}
            Ok(record::Admitted::No(why)) => return ToolResult::error(why),
            Err(e) => {
                return ToolResult::error(format!("the delegation could not be recorded: {e}"))
            }
        }
        let waiter = waits.then(|| {
            let (tx, rx) = oneshot::channel();
            self.waiters.insert(delegation, tx);
            rx
        });
        // Its actor starts now: it arms the stored deadlines and collects
        // the ends.
        self.send(delegation, DelegationMsg::Check);
        let parent_scope = ctx
            .services
            .turn_scope()
            .unwrap_or_else(|| Scope::root("turn", Limits::default()));
        let scope = Scope::child(&parent_scope, "delegation", settings.delegation_budget);
        let tools = ctx.services.visible_tools().map(|v| v.0);
        let mut lines = Vec::new();
        for (sub, conversation, goal, context) in &subs {
            let opening = Opening {
                id: *conversation,
                kind: ActorKind::Subagent,
                narrowing: Narrowing {
                    only: None,
                    parent: tools.clone(),
                },
                parent: Some(ctx.conversation),
                budget: Some(Scope::child(&scope, "subagent", Limits::default())),
                stored_budget: Some(StoredBudget {
                    scope: "delegation".into(),
                    limits: settings.delegation_budget,
                    delegation: Some(delegation),
                }),
                title: goal.chars().take(80).collect(),
                fresh: true,
                house: troupe_runtime::house::HouseScope::of(ctx).map(|s| s.house),
                ..Opening::new(bot.clone())
            };
            let started = match node.open(opening).await {
                Ok(_) => node
                    .request(*conversation, Input::User(task_message(goal, context)))
                    .await
                    .map(|_| ()),
                Err(e) => Err(e),
            };
            if let Err(e) = started {
                self.end(
                    Some(delegation),
                    *conversation,
                    "failed",
                    &format!("could not start: {e}"),
                );
                lines.push(format!("- {sub}: could not start ({e})"));
                continue;
            }
            lines.push(format!(
                "- {sub}: {}",
                goal.lines().next().unwrap_or_default()
            ));
        }
        let data = serde_json::json!({
            "delegation_id": delegation.to_string(),
            "subagents": subs.iter().map(|(s, c, g, _)| serde_json::json!({"id": s.to_string(), "conversation": c.to_string(), "goal": g})).collect::<Vec<_>>(),
        });
        match waiter {
            Some(rx) => match rx.await {
                Ok(report) => ToolResult::ok_with(report, data),
                Err(_) => ToolResult::error("the delegation ended without a report (the node is stopping)."),
            },
            None => ToolResult::ok_with(
                format!(
                    "Started {n} subagent(s) in delegation {delegation}:\n{}\nThey work in the background; their summaries \
                     arrive together in one message when the last one ends.",
                    lines.join("\n")
                ),
                data,
            ),
        }
    }

    /// Stops every running subagent `parent` delegated to (and, through
    /// their own stop, theirs).
    pub fn stop_children(&self, parent: ConversationId) {
        let Some(node) = self.node() else { return };
        tokio::spawn(async move {
            let Ok(children) = node.store().read(move |c| record::list(c, parent)).await else {
                return;
            };
            for child in children.into_iter().filter(|c| c.status == "running") {
                let _ = node.stop(child.conversation).await;
            }
        });
    }

    /// At start-up: every delegation with a subagent recorded as running
    /// gets its actor again (which re-arms the stored deadlines); subagents
    /// not mid-turn ended while troupe was down, or never started.
    pub async fn recover(self: &Arc<Self>, node: &Node) {
        let Ok(running) = node.store().read(record::running).await else {
            return;
        };
        let delegations: BTreeSet<DelegationId> =
            running.iter().map(|u| u.sub.delegation).collect();
        for delegation in delegations {
            self.send(delegation, DelegationMsg::Check);
        }
        for unfinished in running {
            let conversation = unfinished.sub.conversation;
            let delegation = Some(unfinished.sub.delegation);
            if unfinished.sub.executor.is_some() {
                executors::interrupted(self, &unfinished.sub);
                continue;
            }
            if unfinished.open {
                // Its turn resumes; its close records its end.
                continue;
            }
            if !unfinished.started {
                // Troupe stopped before its task reached it: start it again
                // (its opening — tool ceiling, budget — was stored).
                let restarted = node
                    .request(
                        conversation,
                        Input::User(task_message(&unfinished.sub.goal, &unfinished.context)),
                    )
                    .await;
                if let Err(e) = restarted {
                    self.end(
                        delegation,
                        conversation,
                        "failed",
                        &format!("could not start after a restart: {e}"),
                    );
                }
                continue;
            }
            // Its turn closed but no end was recorded with it: a store
            // written by a troupe that recorded ends apart from the close.
            self.end(
                delegation,
                conversation,
                "failed",
                &format!(
                    "troupe stopped after its turn ended but before its end was recorded; \
                     its conversation {conversation} holds what it did"
                ),
            );
        }
    }
}

/// The deadline of a subagent starting now.
fn deadline_after(timeout: std::time::Duration) -> chrono::DateTime<chrono::Utc> {
    chrono::Duration::from_std(timeout)
        .ok()
        .and_then(|d| chrono::Utc::now().checked_add_signed(d))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

fn task_message(goal: &str, context: &str) -> String {
    let mut text = format!("Your task: {goal}");
    if !context.trim().is_empty() {
        text.push_str(&format!("\n\nContext:\n{context}"));
    }
    text.push_str(
        "\n\nWork on your own; nobody can answer questions. When you are done, reply with a concise summary of what \
         you did and found: it is all the delegating agent will see.",
    );
    text
}

async fn find(node: &Node, ctx: &ToolContext, id: &str) -> Result<record::SubagentRow, ToolResult> {
    let (parent, key) = (ctx.conversation, id.to_string());
    match node
        .store()
        .read(move |c| record::of_parent(c, parent, &key))
        .await
    {
        Ok(Some(sub)) => Ok(sub),
        Ok(None) => Err(ToolResult::error(format!(
            "no subagent {id} belongs to this conversation; `action: list` shows them."
        ))),
        Err(e) => Err(ToolResult::error(format!(
            "the delegation record could not be read: {e}"
        ))),
    }
}

async fn list(node: &Node, ctx: &ToolContext) -> ToolResult {
    let parent = ctx.conversation;
    let bench = executors::workbench(node, ctx).await;
    let bench = if bench.is_empty() {
        String::new()
    } else {
        format!(
            "\n\nThe workbench (executor instances):\n{}",
            bench.join("\n")
        )
    };
    match node.store().read(move |c| record::list(c, parent)).await {
        Ok(rows) if rows.is_empty() && bench.is_empty() => {
            ToolResult::ok("This conversation has no subagents, and no executor instance runs.")
        }
        Ok(rows) => {
            let text = rows
                .iter()
                .filter(|r| r.executor.is_none())
                .map(|r| {
                    format!(
                        "- {} [{}] {} (delegation {})",
                        r.id,
                        r.status,
                        r.goal.lines().next().unwrap_or_default(),
                        r.delegation
                    )
                })
                .collect::<Vec<_>>()
                .join("\n");
            let text = if text.is_empty() {
                "This conversation has no subagents.".to_string()
            } else {
                format!("Subagents:\n{text}")
            };
            ToolResult::ok(format!("{text}{bench}"))
        }
        Err(e) => ToolResult::error(format!("the delegation record could not be read: {e}")),
    }
}

impl Branch for Delegations {
    fn live(&self) -> Vec<ActorInfo> {
        let delegations = self.routed.actors().into_iter();
        let instances = self.live_instances().into_iter().map(|i| ActorInfo {
            kind: crate::delegation::executor::KIND.into(),
            id: i.sub.to_string(),
            parent: Some(i.delegation.to_string()),
            state: "running".into(),
            restarts: 0,
        });
        delegations.chain(instances).collect()
    }
}

impl TurnHook for Delegations {
    fn stopped(&self, conversation: ConversationId) {
        self.stop_children(conversation);
    }

    /// A subagent's work ends with its turn: its actor stops now rather
    /// than at its idle time (a `resume`, a steer or a report it waits for
    /// brings it back from the store), so a delegation's finished
    /// subagents hold no memory while the others run. Without a store
    /// the actor is all there is of it, so it stays.
    fn turn_finished(&self, turn: &FinishedTurn) {
        if turn.kind != ActorKind::Subagent {
            return;
        }
        if let Some(node) = self.node().filter(|n| n.settings().durable) {
            node.release(turn.conversation);
        }
    }

    fn closes(&self, kind: ActorKind) -> bool {
        kind == ActorKind::Subagent
    }

    /// A subagent's turn closing records its end — and, when it is the
    /// last of its delegation, the report in the parent's mailbox — in the
    /// transaction that closes the turn, so the parent hears exactly once
    /// whenever the process dies. Once committed, a routine run waiting for
    /// the report gets it and the delegation's actor is told.
    fn closing(
        &self,
        tx: &Transaction<'_>,
        turn: &ClosingTurn<'_>,
    ) -> Result<Option<Committed>, StoreError> {
        if turn.kind != ActorKind::Subagent {
            return Ok(None);
        }
        let conversation = turn.conversation;
        let timed_out = self.timed_out.contains(&conversation);
        let (status, result) = subagent_end(turn.outcome, turn.text, timed_out);
        let Some(ended) = record::end(tx, conversation, status, &result, actor::report_notice)?
        else {
            return Ok(None);
        };
        let enqueued = ended.notice.clone().into_iter().collect();
        let me = self.me.clone();
        let then = move || {
            let Some(this) = me.upgrade() else { return };
            this.timed_out.remove(&conversation);
            if let Some(report) = ended.report {
                if let Some((_, tx)) = this.waiters.remove(&ended.delegation) {
                    let _ = tx.send(report);
                }
            }
            this.send(ended.delegation, DelegationMsg::Recorded(conversation));
        };
        Ok(Some(Committed {
            enqueued,
            then: Some(Box::new(then)),
        }))
    }
}

/// How a subagent's turn that ended with `outcome` and `text` is recorded:
/// its status and its result.
fn subagent_end(outcome: &TurnOutcome, text: &str, timed_out: bool) -> (&'static str, String) {
    let text = text.trim();
    match outcome {
        TurnOutcome::Finished if text.is_empty() => ("done", "(no summary)".to_string()),
        TurnOutcome::Finished => ("done", text.to_string()),
        TurnOutcome::Stopped if timed_out => (
            "timed_out",
            format!("timed out; what it had so far:\n{text}"),
        ),
        TurnOutcome::Stopped => ("stopped", format!("stopped; what it had so far:\n{text}")),
        TurnOutcome::Failed { error } => ("failed", error.clone()),
        TurnOutcome::Guard { reason } => ("failed", format!("halted by a guard: {reason}\n{text}")),
        TurnOutcome::Budget { budget, detail } => (
            "failed",
            format!("stopped by the `{budget}` budget ({detail})\n{text}"),
        ),
        TurnOutcome::Refused { detail } => ("failed", format!("the model refused: {detail}")),
        TurnOutcome::Crashed { error, .. } => ("failed", format!("it crashed: {error}")),
    }
}

impl Delegations {
    /// Changes whenever an executor instance's record grew (an event
    /// committed) or an instance's end committed. A watcher reads the
    /// record after the last event it saw each time it changes (the value
    /// itself means nothing); it never misses a commit, however slow.
    pub fn record_changes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.recorded.subscribe()
    }

    /// Tells the watchers a record grew (after its commit).
    pub(crate) fn record_grew(&self) {
        self.recorded.send_modify(|n| *n = n.wrapping_add(1));
    }
}
