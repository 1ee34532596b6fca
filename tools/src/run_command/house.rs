//! `run_command` in a house thread: one command in the thread's
//! environment, as the house reference offers it.
//!
//! A house turn is offered its own schema — `cmd`, and the two things an
//! environment really supports, `cwd` and `timeout` — not the local
//! tool's (`background`, `notify_on_complete` and `stop` have no meaning
//! in an environment, whose command the turn waits for). `command` is
//! accepted too, as an alias the dispatcher resolves before the approval
//! gate judges the command.

use std::time::Duration;

use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{GateSubject, ToolContext};

use super::{process, MAX_TIMEOUT};

/// The arguments of `run_command` in a house thread.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct HouseRunCommandParams {
    /// The command, run by `bash -c` in the thread's environment (`command` is accepted too).
    pub cmd: String,
    /// The folder to run it in, relative to /workspace (default: /workspace).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds before the command and everything it started are killed (default 120, at most 600).
    #[serde(default)]
    #[schemars(range(min = 1, max = 600))]
    pub timeout: Option<u64>,
}

/// Run one shell command on this thread's environment (a sandbox bound to the thread, see
/// create_environment) and get its output (stdout and stderr together) and exit code; never on
/// the host. It runs by `bash -c` in /workspace, standard input closed, and the turn waits for
/// it: start a long job with `nohup … &` inside a command. `timeout` (default 120 s, at most
/// 600) kills it and everything it started. Output over 30,000 bytes shows its first and last
/// 15,000 bytes. Without an environment it answers with how to make one.
#[tool(
    alias("command", "cmd"),
    failure_tolerant,
    pages_own_output,
    timeout = MAX_TIMEOUT + process::TERM_GRACE + Duration::from_secs(30),
    gated_by = GateSubject::Command("cmd".into())
)]
pub async fn run_command(params: HouseRunCommandParams, ctx: &ToolContext) -> ToolResult {
    let envs = match (
        troupe_runtime::house::Seat::of(ctx),
        ctx.services.environments(),
    ) {
        (Some(_), Some(envs)) => envs,
        _ => return crate::host::no_environment(),
    };
    let command = params.cmd.trim();
    if command.is_empty() {
        return ToolResult::error("`cmd` is empty: give the command to run");
    }
    let timeout = match params.timeout {
        None => None,
        Some(secs) if secs == 0 || Duration::from_secs(secs) > MAX_TIMEOUT => {
            return ToolResult::error(format!(
                "`timeout` is from 1 to {} seconds; for a longer job start it with `nohup … &` \
                 and check on it with later commands",
                MAX_TIMEOUT.as_secs()
            ))
        }
        Some(secs) => Some(Duration::from_secs(secs)),
    };
    let command = match params.cwd.as_deref().filter(|d| !d.trim().is_empty()) {
        Some(dir) => format!("cd -- '{}' && {command}", dir.replace('\'', "'\\''")),
        None => command.to_string(),
    };
    envs.0.run_command(ctx, &command, timeout).await
}
