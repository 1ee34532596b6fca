//! `delegate` with an executor: admitting instances of an outside harness,
//! resuming them, steering them, and the workbench they are listed on.

use std::path::PathBuf;
use std::sync::Arc;

use tokio::sync::oneshot;
use troupe_runtime::agents::Task;
use troupe_runtime::id::{ConversationId, DelegationId, SubagentId, ThreadId};
use troupe_runtime::protocol::{ActorKind, ToolResult};
use troupe_runtime::tool::ToolContext;

use troupe_runtime::config::Target;
use troupe_runtime::store::executor_usage;

mod accounts;
mod login;

use super::{deadline_after, record, DelegationMsg, Delegations};
use crate::delegation::executor::{self, HeadStart, Launch, Place};
use crate::node::Node;
use accounts::{account_of, copy_to, packet_of};

/// Whose the user's own instances are (`troupe workbench start`): the
/// delegation's bot, in the record.
pub const USER: &str = "@user";

/// How long a steer waits for the instance to take it.
const STEER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// An instance's first message: its task, and what troupe expects back.
fn prompt(goal: &str, context: &str) -> String {
    let mut text = goal.trim().to_string();
    if !context.trim().is_empty() {
        text.push_str(&format!("\n\nContext:\n{}", context.trim()));
    }
    text.push_str(
        "\n\nWork on your own in this folder; nobody can answer questions. When you are done, end \
         with a short summary of what you did: it is all the delegating agent will see.",
    );
    text
}

/// Instances to start: one per task, each `(goal, context, folder, place)`.
pub struct Start {
    /// The harness, or a target name: `NAME@ACCOUNT` runs on that account,
    /// `NAME` alone on each task's folder's account, else the main one.
    pub executor: String,
    /// Whose they are: the delegating bot, or [`USER`].
    pub owner: String,
    /// The conversation that delegates (its mailbox gets the report).
    pub parent: ConversationId,
    /// troupe's model spec their model calls are answered by.
    pub model: String,
    /// Whether the caller waits for the report (a routine run, the CLI)
    /// instead of its mailbox getting it.
    pub waits: bool,
    /// The tasks.
    pub tasks: Vec<(String, String, PathBuf, Place)>,
    /// The house thread the report is posted into, instead of the
    /// delegating conversation's mailbox.
    pub report_to: Option<ThreadId>,
    /// A session the (single) instance continues.
    pub session: Option<String>,
}

/// What [`Delegations::start`] started.
pub struct Started {
    /// The delegation.
    pub delegation: DelegationId,
    /// Its instances, in task order.
    pub instances: Vec<SubagentId>,
    /// The report, for a routine run that waits for it.
    pub waiter: Option<oneshot::Receiver<String>>,
}

impl Delegations {
    /// Records a delegation of `start`'s tasks to instances of its
    /// executor (within the delegation limits, in one transaction) and
    /// launches them under its actor. The harnesses on the machine are
    /// started while that transaction commits and get their tasks once it
    /// did; if it refused them, they are killed and their folders removed
    /// before the refusal is returned.
    pub async fn start_instances(
        self: &Arc<Self>,
        node: &Node,
        start: Start,
    ) -> Result<Started, ToolResult> {
        self.start_routed(node, start, Vec::new()).await
    }

    /// [`Delegations::start_instances`], each task going on along `route`
    /// (target names) when its account reaches its limit.
    pub async fn start_routed(
        self: &Arc<Self>,
        node: &Node,
        start: Start,
        route: Vec<String>,
    ) -> Result<Started, ToolResult> {
        let settings = node.settings();
        let target = Target::parse(&start.executor);
        let accounts: Vec<(String, PathBuf)> = start
            .tasks
            .iter()
            .map(|(_, _, folder, _)| account_of(node.home(), &settings.executors, &target, folder))
            .collect::<Result<_, _>>()
            .map_err(ToolResult::error)?;
        // Read once: the harnesses started below take it as it is.
        let installed = if start.tasks.iter().any(|t| t.3 == Place::Host) {
            Some(
                troupe_runtime::executors::installed(node.home(), &target.executor)
                    .ok_or_else(|| not_installed(&target.executor))?,
            )
        } else {
            None
        };
        let start = Start {
            executor: target.executor.clone(),
            ..start
        };
        let model = start.model.clone();
        let waits = start.waits && start.report_to.is_none();
        let delegation = DelegationId::new();
        let rows: Vec<(SubagentId, ConversationId, String, String)> = start
            .tasks
            .iter()
            .map(|(goal, context, ..)| {
                (
                    SubagentId::new(),
                    ConversationId::new(),
                    goal.clone(),
                    context.clone(),
                )
            })
            .collect();
        let marks: Vec<(SubagentId, String)> = rows
            .iter()
            .zip(&start.tasks)
            .map(|((sub, ..), (_, _, folder, _))| (*sub, folder.display().to_string()))
            .collect();
        let admission = record::Admission {
            per_bot: settings.max_subagents_per_bot,
            per_node: settings.max_subagents_per_node,
            deadline: deadline_after(settings.subagent_timeout),
        };
        let (parent, agent, name, owned, report_to) = (
            start.parent,
            start.owner.clone(),
            start.executor.clone(),
            rows.clone(),
            start.report_to,
        );
        let on: Vec<(String, String)> = rows
            .iter()
            .zip(&accounts)
            .map(|((sub, ..), (account, _))| (sub.to_string(), account.clone()))
            .collect();
        let asked = std::time::Instant::now();
        let queued = node
            .store()
            .submit(move |tx| {
                let admitted =
                    record::admit(tx, delegation, parent, &agent, waits, &owned, &admission)?;
                if admitted == record::Admitted::Yes {
                    record::mark_executor(tx, delegation, &name, &marks, report_to)?;
                    for (sub, account) in &on {
                        executor_usage::set_account(tx, sub, account)?;
                        executor_usage::set_route(tx, sub, &route)?;
                    }
                }
                Ok(admitted)
            })
            .await;
        let launches: Vec<Launch> = rows
            .iter()
            .zip(start.tasks)
            .zip(accounts)
            .map(
                |(((sub, key, goal, context), (_, _, folder, place)), (account, account_dir))| {
                    Launch {
                        delegation,
                        sub: *sub,
                        key: *key,
                        executor: start.executor.clone(),
                        folder,
                        prompt: prompt(goal, context),
                        session: start.session.as_deref().map(Into::into),
                        model: model.clone(),
                        place,
                        account,
                        account_dir,
                    }
                },
            )
            .collect();
        // While the admission commits, the harnesses on the machine start
        // (without their tasks): see `executor::HeadStart`.
        let mut heads = Vec::with_capacity(launches.len());
        if queued.is_ok() {
            for launch in &launches {
                heads.push(match launch.place {
                    Place::Host => Some(Box::new(
                        HeadStart::begin(node, launch, installed.clone()).await,
                    )),
                    Place::Environment { .. } => None,
                });
            }
        }
        let started_us = asked.elapsed().as_micros() as u64;
        let admitted = match queued {
            Ok(pending) => pending.wait().await,
            Err(e) => Err(e),
        };
        tracing::debug!(
            %delegation,
            harnesses_started_us = started_us,
            admission_committed_us = asked.elapsed().as_micros() as u64,
            "delegation admission committed"
        );
        let refused = match admitted {
            Ok(record::Admitted::Yes) => None,
            Ok(record::Admitted::No(why)) => Some(why),
            Err(e) => Some(format!("the delegation could not be recorded: {e}")),
        };
        if let Some(why) = refused {
            for head in heads.into_iter().flatten() {
                head.abandon().await;
            }
            return Err(ToolResult::error(why));
        }
        let waiter = waits.then(|| {
            let (tx, rx) = oneshot::channel();
            self.waiters.insert(delegation, tx);
            rx
        });
        let mut heads = heads.into_iter();
        for launch in launches {
            let head = heads.next().flatten();
            self.send(
                delegation,
                DelegationMsg::Launch {
                    launch: Box::new(launch),
                    head,
                },
            );
        }
        Ok(Started {
            delegation,
            instances: rows.iter().map(|(s, ..)| *s).collect(),
            waiter,
        })
    }

    /// Starts one instance of `executor` per task, each in its folder on
    /// the machine; `resumed` continues a session (one task).
    pub(super) async fn spawn_executor(
        self: &Arc<Self>,
        node: &Node,
        ctx: &ToolContext,
        executor: &str,
        tasks: Vec<Task>,
        resumed: Option<String>,
        route: Vec<String>,
    ) -> ToolResult {
        let named = executor;
        let executor = Target::parse(named).executor;
        let executor = executor.as_str();
        if troupe_runtime::executors::harness(executor).is_none() {
            let known: Vec<&str> = troupe_runtime::executors::HARNESSES
                .iter()
                .map(|h| h.name)
                .collect();
            return ToolResult::error(format!(
                "there is no executor `{executor}`; troupe knows {}",
                known.join(", ")
            ));
        }
        let home = node.home().clone();
        let mut planned = Vec::with_capacity(tasks.len());
        for (i, task) in tasks.iter().enumerate() {
            let raw = task.folder.as_deref().unwrap_or_default();
            match executor::check_folder(&home, &ctx.cwd, raw) {
                Ok(folder) => {
                    planned.push((task.goal.clone(), task.context.clone(), folder, Place::Host))
                }
                Err(why) => return ToolResult::error(format!("task {}: {why}", i + 1)),
            }
        }
        let lines: Vec<String> = planned
            .iter()
            .map(|(goal, _, folder, _)| {
                format!(
                    "{} (in {})",
                    goal.lines().next().unwrap_or_default(),
                    folder.display()
                )
            })
            .collect();
        let folders: Vec<String> = planned
            .iter()
            .map(|(_, _, f, _)| f.display().to_string())
            .collect();
        let model = match model_of(node, &ctx.agent) {
            Ok(model) => model,
            Err(e) => return e,
        };
        let start = Start {
            executor: named.to_string(),
            owner: ctx.agent.clone(),
            parent: ctx.conversation,
            model,
            waits: ctx.kind == ActorKind::RoutineRun,
            tasks: planned,
            report_to: None,
            session: resumed,
        };
        let started = match self.start_routed(node, start, route).await {
            Ok(started) => started,
            Err(e) => return e,
        };
        let delegation = started.delegation;
        let data = serde_json::json!({
            "delegation_id": delegation.to_string(),
            "executor": executor,
            "instances": started.instances.iter().zip(tasks.iter().zip(&folders)).map(|(s, (t, f))| serde_json::json!({
                "id": s.to_string(), "goal": t.goal, "folder": f,
            })).collect::<Vec<_>>(),
        });
        match started.waiter {
            Some(rx) => match rx.await {
                Ok(report) => ToolResult::ok_with(report, data),
                Err(_) => ToolResult::error(
                    "the delegation ended without a report (the node is stopping).",
                ),
            },
            None => ToolResult::ok_with(
                format!(
                    "Started {} {executor} instance(s) in delegation {delegation}:\n{}\nThey work in the \
                     background; their reports arrive together in one message when the last one ends. \
                     `action: steer` or `stop` with an id reaches one; `action: list` shows the workbench.",
                    started.instances.len(),
                    started
                        .instances
                        .iter()
                        .zip(&lines)
                        .map(|(s, l)| format!("- {s}: {l}"))
                        .collect::<Vec<_>>()
                        .join("\n")
                ),
                data,
            ),
        }
    }

    /// `action: resume`: a new instance on the ended instance's session.
    pub(super) async fn resume(
        self: &Arc<Self>,
        node: &Node,
        ctx: &ToolContext,
        id: &str,
        message: String,
        to: Option<String>,
        route: Vec<String>,
    ) -> ToolResult {
        let sub = match super::find(node, ctx, id).await {
            Ok(sub) => sub,
            Err(e) => return e,
        };
        let Some(executor) = sub.executor.clone() else {
            return ToolResult::error(format!(
                "{id} is a subagent, not an executor instance; only an executor's session can be \
                 resumed. Delegate a new task instead."
            ));
        };
        if sub.status == "running" {
            return ToolResult::error(format!(
                "{id} is still running; `action: steer` reaches it now."
            ));
        }
        let Some(session) = sub
            .session
            .clone()
            // pi's is a file; Claude Code's and Codex's an id in their state.
            .filter(|s| !s.starts_with('/') || std::path::Path::new(s).is_file())
        else {
            return ToolResult::error(format!(
                "{id}'s {executor} session is not kept (it never said where, or it was deleted), \
                 so it cannot be resumed; delegate a new task instead."
            ));
        };
        // The session is in its account's folder: it goes on there,
        // unless `to` names another account (a copy) or harness (a packet).
        let key = sub.id.to_string();
        let here = match node
            .store()
            .read(move |c| executor_usage::account_of(c, &key))
            .await
        {
            Ok(Some((name, account))) => Target {
                executor: name,
                account: Some(account),
            },
            Ok(None) | Err(_) => Target {
                executor: executor.clone(),
                account: None,
            },
        };
        let folder = PathBuf::from(&sub.folder);
        let there = to.map(|t| Target::parse(&t)).filter(|t| *t != here);
        let moved = match there {
            None => Ok((here.to_string(), message, Some(session), None)),
            Some(there) if there.executor == here.executor => copy_to(
                node.home(),
                &node.settings().executors,
                &here,
                &there,
                &folder,
                &session,
            )
            .map(|(copy, note)| (there.to_string(), message, Some(copy), note)),
            Some(there) => {
                let packet = packet_of(node, &sub, &here, &there, &folder).await;
                let note = packet.text();
                let goal = format!("{note}\n\n## Now\n{message}");
                Ok((there.to_string(), goal, None, Some(note)))
            }
        };
        let (target, goal, session, note) = match moved {
            Ok(moved) => moved,
            Err(e) => return ToolResult::error(e),
        };
        if let Some(note) = note {
            let (d, s) = (sub.delegation, sub.id);
            let _ = node
                .store()
                .write(move |tx| record::event(tx, d, Some(s), "note", &note))
                .await;
            self.record_grew();
        }
        let task = Task {
            goal,
            context: String::new(),
            folder: Some(sub.folder.clone()),
        };
        let copied = session.is_some() && target != here.to_string();
        let mut result = self
            .spawn_executor(node, ctx, &target, vec![task], session, route)
            .await;
        if !result.is_error() {
            let how = if target == here.to_string() {
                format!("Resuming {id}'s session.")
            } else if copied {
                format!("Resuming {id}'s session on {target}, in a copy of it.")
            } else {
                format!("{id} goes on on {target} from a handoff packet (in its record).")
            };
            result.text = format!("{how}\n{}", result.text);
        }
        result
    }

    /// Stops instance `sub`, if it runs (through its delegation).
    pub async fn stop_instance(&self, node: &Node, sub: SubagentId) {
        let id = sub.to_string();
        if let Ok(Some(row)) = node.store().read(move |c| record::instance(c, &id)).await {
            if row.status == "running" {
                self.send(
                    row.delegation,
                    DelegationMsg::StopInstance(row.conversation),
                );
            }
        }
    }

    /// Tells running instance `id` (anyone's) `message`; why not, if it
    /// could not.
    pub async fn steer_by_id(&self, node: &Node, id: &str, message: String) -> Result<(), String> {
        let owned = id.to_string();
        let row = node
            .store()
            .read(move |c| record::instance(c, &owned))
            .await
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("no executor instance {id}"))?;
        if row.status != "running" {
            return Err(format!(
                "{id} has ended ({}); steer reaches a running instance",
                row.status
            ));
        }
        let result = self.steer_instance(&row, message).await;
        if result.is_error() {
            Err(result.text)
        } else {
            Ok(())
        }
    }

    /// Tells a running instance `message` through its delegation.
    pub(super) async fn steer_instance(
        &self,
        sub: &record::SubagentRow,
        message: String,
    ) -> ToolResult {
        let Ok(router) = self.routed.router() else {
            return ToolResult::error("the node's delegations are not running");
        };
        let key = sub.conversation;
        let answer = router
            .call(
                sub.delegation,
                |reply| DelegationMsg::Steer {
                    key,
                    message,
                    reply,
                },
                STEER_TIMEOUT,
            )
            .await;
        match answer {
            Ok(Ok(())) => ToolResult::ok(format!(
                "Sent to {}; it reads it before its next step.",
                sub.id
            )),
            Ok(Err(why)) => ToolResult::error(format!("{} did not take it: {why}", sub.id)),
            Err(e) => ToolResult::error(format!("could not reach {}: {e}", sub.id)),
        }
    }
}

/// The refusal of a task for an executor that is not installed (whether it
/// is, `start_routed` reads once, for the harnesses it starts).
fn not_installed(executor: &str) -> ToolResult {
    ToolResult::error(format!(
        "executor `{executor}` is not installed here, so it cannot take tasks; the user installs \
         it with `troupe executors install {executor}`. Delegate to subagents (no `executor`) \
         meanwhile."
    ))
}

/// The model spec of `agent`'s calls (its own, or the default).
pub fn model_of(node: &Node, agent: &str) -> Result<String, ToolResult> {
    let bot = node
        .bot(agent)
        .map_err(|e| ToolResult::error(e.to_string()))?;
    Ok(if bot.spec.model.trim().is_empty() {
        node.settings().default_model.clone()
    } else {
        bot.spec.model.clone()
    })
}

/// The workbench as `delegate action: list` shows it: every executor
/// instance running on this node, and the caller's ended ones.
pub(super) async fn workbench(node: &Node, ctx: &ToolContext) -> Vec<String> {
    let Ok(instances) = node.store().read(|c| record::instances(c, false, 50)).await else {
        return Vec::new();
    };
    instances
        .into_iter()
        .filter(|i| i.row.status == "running" || i.parent == ctx.conversation)
        .map(|i| {
            let whose = if i.parent == ctx.conversation {
                "yours".to_string()
            } else if i.bot == USER {
                "the user's".to_string()
            } else {
                format!("{}'s conversation {}", i.bot, i.parent)
            };
            let elapsed = elapsed(&i.created_at, i.ended_at.as_deref());
            format!(
                "- {} [{}] {} in {} · {elapsed} · {} tokens · {whose}: {}",
                i.row.id,
                i.row.status,
                i.row.executor.as_deref().unwrap_or("executor"),
                i.row.folder,
                i.tokens,
                i.row.goal.lines().next().unwrap_or_default()
            )
        })
        .collect()
}

/// How long an instance ran (or has run), in words.
pub fn elapsed(created_at: &str, ended_at: Option<&str>) -> String {
    let parse = |t: &str| {
        chrono::DateTime::parse_from_rfc3339(t)
            .ok()
            .map(|d| d.with_timezone(&chrono::Utc))
    };
    let Some(start) = parse(created_at) else {
        return "?".into();
    };
    let end = ended_at.and_then(parse).unwrap_or_else(chrono::Utc::now);
    let secs = (end - start).num_seconds().max(0);
    if secs < 60 {
        format!("{secs}s")
    } else if secs < 3600 {
        format!("{}m{:02}s", secs / 60, secs % 60)
    } else {
        format!("{}h{:02}m", secs / 3600, (secs % 3600) / 60)
    }
}

/// At start-up: an executor instance still recorded as running died with
/// the last process (its sandbox dies with its parent); it is reported as
/// interrupted, with `resume` offered, once.
pub(super) fn interrupted(delegations: &Arc<Delegations>, sub: &record::SubagentRow) {
    let executor = sub.executor.as_deref().unwrap_or("executor");
    delegations.end(
        Some(sub.delegation),
        sub.conversation,
        "stopped",
        &format!(
            "interrupted: troupe stopped while this {executor} instance worked in {}, and the \
             harness stopped with it. What it changed in the folder stays; `delegate action: resume \
             subagent_id: {} message: …` continues its session.",
            sub.folder, sub.id
        ),
    );
}
