//! `cronjob_manage`: makes and manages routines, prompts run on a schedule.
//!
//! Each run is its own conversation and ends with a notification, unless
//! the reply is `[SILENT]`. The prompt must stand alone and is scanned for
//! threats before it is kept.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::agents::{Agents, RoutineRequest};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// What to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Make a routine (`name`, `prompt`, `schedule`).
    Create,
    /// List the routines.
    List,
    /// Change a routine's name, prompt or schedule.
    Update,
    /// Stop firing it for now.
    Pause,
    /// Fire it again.
    Resume,
    /// Delete it.
    Remove,
    /// Run it now.
    Run,
}

impl Action {
    fn as_str(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::List => "list",
            Self::Update => "update",
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Remove => "remove",
            Self::Run => "run",
        }
    }
}

/// Arguments of `cronjob_manage`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// create, list, update, pause, resume, remove or run.
    pub action: Action,
    /// The routine's id or name (all actions but create and list).
    pub job_id: Option<String>,
    /// Its name (create, update).
    pub name: Option<String>,
    /// What to do at each run; it must stand alone (create, update).
    pub prompt: Option<String>,
    /// `every 30m`, `in 30m` (once), `weekdays at 9am`, `every day at 18:30`, cron syntax, or an ISO time (once).
    pub schedule: Option<String>,
}

/// Whether the conversation is the home's own, not a foreign house's: routines belong to the
/// home's owner.
fn in_the_homes_own(ctx: &ToolContext) -> bool {
    !troupe_runtime::house::HouseScope::foreign(ctx)
}

/// Make and manage routines: a prompt run on a schedule, each run its own conversation, ending
/// with a notification (none when the reply is [SILENT]). The prompt must stand alone.
/// Schedules: `every 30m`, `in 30m` (once), `weekdays at 9am`, `every day at 18:30` (the user's
/// time), cron syntax, or an ISO time (once).
#[tool(deferred, offered = in_the_homes_own)]
pub async fn cronjob_manage(p: Params, ctx: &ToolContext) -> ToolResult {
    if troupe_runtime::house::HouseScope::foreign(ctx) {
        return ToolResult::error(
            "routines belong to the home's owner and run outside any house; a house's conversation \
             cannot list or make them. Ask the owner to set one up.",
        );
    }
    let needs_job = !matches!(p.action, Action::Create | Action::List);
    if needs_job && p.job_id.as_deref().is_none_or(|j| j.trim().is_empty()) {
        return ToolResult::error(format!(
            "`{}` needs `job_id`: the routine's id or name.",
            p.action.as_str()
        ));
    }
    if p.action == Action::Create {
        for (field, value) in [
            ("name", &p.name),
            ("prompt", &p.prompt),
            ("schedule", &p.schedule),
        ] {
            if value.as_deref().is_none_or(|v| v.trim().is_empty()) {
                return ToolResult::error(format!("`create` needs `{field}`."));
            }
        }
    }
    for text in [&p.prompt, &p.name].into_iter().flatten() {
        if let Some(threat) = crate::scan::scan(text) {
            return ToolResult::error(format!(
                "the routine was not kept: its text looks like {} ({}). Write the prompt as a plain task.",
                threat.family, threat.detail
            ));
        }
    }
    let request = RoutineRequest {
        action: p.action.as_str().into(),
        job_id: p.job_id,
        name: p.name,
        prompt: p.prompt,
        schedule: p.schedule,
    };
    match Agents::of(ctx) {
        Ok(agents) => agents.routines(ctx, request).await,
        Err(e) => e,
    }
}
