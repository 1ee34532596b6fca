//! The backend of `cronjob_manage`: create, list, update, pause, resume,
//! remove and run routines, for the bot that asks.
//!
//! A bot sees and manages its own routines; the main agent manages every
//! bot's. Schedules are read in the user's time zone (the settings'
//! `timezone`), and every answer says when the routine fires next, in that
//! zone and in UTC, and whether a scheduler fires routines in this process:
//! a routine made during a one-off `troupe run` fires only where
//! `troupe serve` (or `chat`) runs.

use std::sync::Arc;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use troupe_runtime::agents::RoutineRequest;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::protocol::{ActorKind, ToolResult};
use troupe_runtime::tool::ToolContext;

use super::run::{self, show, to_store, user_tz};
use super::schedule;
use super::service::RoutineService;
use super::table::{self, NewRoutine, Routine, RoutineUpdate, Run};
use crate::node::Node;

/// Runs one `cronjob_manage` request for `ctx.agent` (the main agent
/// manages every bot's routines).
pub async fn manage(node: &Node, ctx: &ToolContext, request: RoutineRequest) -> ToolResult {
    if matches!(ctx.kind, ActorKind::RoutineRun | ActorKind::Subagent) {
        return ToolResult::error(format!(
            "a {} cannot manage routines; ask the owner's conversation to do it",
            ctx.kind.as_str()
        ));
    }
    manage_as(node, &ctx.agent, request).await
}

/// Runs one `cronjob_manage` request as the agent `agent` asks it (the
/// main agent manages every bot's routines): the server's routines routes.
pub async fn manage_as(node: &Node, agent: &str, request: RoutineRequest) -> ToolResult {
    let m = AgentRoutines {
        node,
        service: RoutineService::of(node),
        agent: agent.to_string(),
        tz: user_tz(node),
    };
    let job = request.job_id.clone().unwrap_or_default();
    let job = job.trim();
    let action = request.action.trim().to_string();
    let action = action.as_str();
    if !matches!(action, "create" | "list") && job.is_empty() {
        return ToolResult::error(format!(
            "`{action}` needs `job_id`: the routine's id or name (action `list` shows them)."
        ));
    }
    let result = match action {
        "create" => m.create(request).await,
        "list" => m.list().await,
        "update" => m.update(job, request).await,
        "pause" => m.simple(job, Simple::Pause).await,
        "resume" => m.simple(job, Simple::Resume).await,
        "remove" => m.simple(job, Simple::Remove).await,
        "run" => m.run(job).await,
        other => Err(format!(
            "unknown action `{other}`: use create, list, update, pause, resume, remove or run"
        )),
    };
    result.unwrap_or_else(ToolResult::error)
}

enum Simple {
    Pause,
    Resume,
    Remove,
}

/// The routines as one agent sees them: its own, or every bot's for the
/// main agent, with schedules read in the user's time zone.
struct AgentRoutines<'a> {
    node: &'a Node,
    service: Arc<RoutineService>,
    agent: String,
    tz: Tz,
}

type Answer = Result<ToolResult, String>;

impl AgentRoutines<'_> {
    /// Whose routines this agent sees: all of them for the main agent.
    fn owner(&self) -> Option<String> {
        (self.agent != MAIN_AGENT).then(|| self.agent.clone())
    }

    fn now(&self) -> DateTime<Utc> {
        self.service.options().clock.now()
    }

    fn parse(&self, text: &str) -> Result<schedule::Schedule, String> {
        schedule::parse(text, self.now(), self.tz).map_err(|e| e.to_string())
    }

    fn liveness(&self) -> &'static str {
        if self.service.is_live() {
            "The scheduler is running in this process."
        } else {
            "No scheduler runs in this process: routines fire while `troupe serve` (or `troupe chat`) runs on this home."
        }
    }

    fn next(&self, r: &Routine) -> String {
        match r.next_fire_at {
            Some(at) => format!("next run {}", show(at, self.tz)),
            None if r.status == table::RoutineStatus::Paused => "paused, no next run".into(),
            None => "no next run (its time has passed)".into(),
        }
    }

    fn data(&self, r: &Routine) -> serde_json::Value {
        serde_json::json!({
            "id": r.id.to_string(),
            "name": r.name,
            "owner": r.owner_bot,
            "schedule": r.schedule.text(),
            "status": r.status.as_str(),
            "catch_up": r.catch_up.as_str(),
            "next_fire_at": r.next_fire_at.map(table::fmt_ts),
            "scheduler_live": self.service.is_live(),
        })
    }

    fn answer(&self, headline: String, r: &Routine) -> ToolResult {
        let text = format!(
            "{headline}\n`{}` ({}) of `{}`: {}; {}.\n{}",
            r.name,
            r.id,
            r.owner_bot,
            r.schedule.describe(),
            self.next(r),
            self.liveness()
        );
        ToolResult::ok_with(text, self.data(r))
    }

    async fn create(&self, request: RoutineRequest) -> Answer {
        let field = |v: Option<String>, name: &str| {
            v.filter(|s| !s.trim().is_empty())
                .ok_or_else(|| format!("`create` needs `{name}`."))
        };
        let name = field(request.name, "name")?;
        let prompt = field(request.prompt, "prompt")?;
        let schedule = self.parse(&field(request.schedule, "schedule")?)?;
        let new = NewRoutine {
            owner_bot: self.agent.clone(),
            name,
            prompt,
            schedule,
            catch_up: self.service.options().catch_up,
        };
        let now = self.now();
        let r = self
            .node
            .store()
            .write(move |tx| table::create(tx, new.clone(), now).map_err(to_store))
            .await
            .map_err(|e| e.to_string())?;
        self.service.rearm();
        Ok(self.answer("Routine created.".into(), &r))
    }

    async fn list(&self) -> Answer {
        let owner = self.owner();
        let rows: Vec<(Routine, Option<Run>)> = self
            .node
            .store()
            .read(move |c| {
                let routines = table::list(c, owner.as_deref()).map_err(to_store)?;
                routines
                    .into_iter()
                    .map(|r| {
                        let last = table::runs(c, r.id, 1).map_err(to_store)?.pop();
                        Ok((r, last))
                    })
                    .collect()
            })
            .await
            .map_err(|e| e.to_string())?;
        if rows.is_empty() {
            return Ok(ToolResult::ok_with(
                format!("No routines yet. {}", self.liveness()),
                serde_json::json!({"routines": [], "scheduler_live": self.service.is_live()}),
            ));
        }
        let mut text = format!("{} routine(s):\n", rows.len());
        let mut data = Vec::new();
        for (r, last) in &rows {
            let last_text = match last {
                Some(run) => format!(
                    "last run {} ({})",
                    show(run.scheduled_for, self.tz),
                    run.status
                ),
                None => "never ran".into(),
            };
            text.push_str(&format!(
                "- `{}` ({}) of `{}`: {}; {}; {last_text}\n",
                r.name,
                r.id,
                r.owner_bot,
                r.schedule.describe(),
                self.next(r),
            ));
            let mut d = self.data(r);
            d["last_run"] = serde_json::json!(last.as_ref().map(|run| serde_json::json!({
                "id": run.id.to_string(),
                "scheduled_for": table::fmt_ts(run.scheduled_for),
                "status": run.status.as_str(),
            })));
            data.push(d);
        }
        text.push_str(self.liveness());
        Ok(ToolResult::ok_with(
            text,
            serde_json::json!({"routines": data, "scheduler_live": self.service.is_live()}),
        ))
    }

    async fn update(&self, job: &str, request: RoutineRequest) -> Answer {
        let nonempty = |v: Option<String>| v.filter(|s| !s.trim().is_empty());
        let changes = RoutineUpdate {
            name: nonempty(request.name),
            prompt: nonempty(request.prompt),
            schedule: nonempty(request.schedule)
                .map(|s| self.parse(&s))
                .transpose()?,
            catch_up: None,
        };
        if changes.name.is_none() && changes.prompt.is_none() && changes.schedule.is_none() {
            return Err("`update` needs at least one of `name`, `prompt`, `schedule`.".into());
        }
        let (owner, job_owned, now) = (self.owner(), job.to_string(), self.now());
        let r = self
            .node
            .store()
            .write(move |tx| {
                table::update(tx, owner.as_deref(), &job_owned, changes.clone(), now)
                    .map_err(to_store)
            })
            .await
            .map_err(|e| e.to_string())?;
        self.service.rearm();
        Ok(self.answer("Routine updated.".into(), &r))
    }

    async fn simple(&self, job: &str, what: Simple) -> Answer {
        let (owner, job_owned, now) = (self.owner(), job.to_string(), self.now());
        let (done, r) = match what {
            Simple::Pause => (
                "Routine paused.",
                self.node
                    .store()
                    .write(move |tx| {
                        table::pause(tx, owner.as_deref(), &job_owned, now).map_err(to_store)
                    })
                    .await,
            ),
            Simple::Resume => (
                "Routine resumed.",
                self.node
                    .store()
                    .write(move |tx| {
                        table::resume(tx, owner.as_deref(), &job_owned, now).map_err(to_store)
                    })
                    .await,
            ),
            Simple::Remove => (
                "Routine removed, with its run history.",
                self.node
                    .store()
                    .write(move |tx| {
                        table::remove(tx, owner.as_deref(), &job_owned).map_err(to_store)
                    })
                    .await,
            ),
        };
        let r = r.map_err(|e| e.to_string())?;
        self.service.rearm();
        if matches!(what, Simple::Remove) {
            return Ok(ToolResult::ok_with(
                format!(
                    "{done} It was `{}` ({}) of `{}`.",
                    r.name, r.id, r.owner_bot
                ),
                serde_json::json!({"id": r.id.to_string(), "name": r.name, "removed": true}),
            ));
        }
        Ok(self.answer(done.into(), &r))
    }

    async fn run(&self, job: &str) -> Answer {
        let options = self.service.options();
        let (owner, job_owned, now) = (self.owner(), job.to_string(), self.now());
        let (holder, lease) = (options.holder.clone(), options.lease);
        let claim = self
            .node
            .store()
            .write(move |tx| {
                table::run_now(tx, owner.as_deref(), &job_owned, now, &holder, lease)
                    .map_err(to_store)
            })
            .await
            .map_err(|e| e.to_string())?;
        let text = format!(
            "Started a run of `{}` now (run {}). It is its own conversation; its report comes as a notice when it ends (none if it replies [SILENT]). Its schedule is unchanged.",
            claim.name, claim.run_id
        );
        let data = serde_json::json!({
            "routine_id": claim.routine_id.to_string(),
            "run_id": claim.run_id.to_string(),
            "name": claim.name,
        });
        run::start(self.node, &self.service, claim).await;
        Ok(ToolResult::ok_with(text, data))
    }
}
