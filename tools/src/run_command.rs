//! `run_command`: runs a shell command and answers with its output and how
//! it ended.
//!
//! The command runs under `bash -c` with standard input closed (a command
//! that waits for input ends at once instead of hanging the turn), pagers and
//! colors off, and standard output and error on one pipe so they interleave
//! as they were written. It leads its own process group, so a timeout, a
//! stop or a stopped turn ends the whole tree ([`process`]), and it dies with
//! troupe, however troupe ends ([`tether`]). The result shows at most
//! [`HEAD_BYTES`] + [`TAIL_BYTES`] of the output; a longer output is saved
//! whole, up to `[tools] command_output_cap`, to a file in the home's
//! `spill/` folder that the result names ([`output`]). In
//! the background, output goes to a log file instead ([`background`]).
//!
//! Where the machine has one, it runs in a sandbox
//! ([`troupe_runtime::sandbox`], per `[sandbox]` in `config.toml`): the
//! working folder is writable, the rest of the machine is read-only,
//! troupe's home is not there at all, `/tmp` is private, and the network is
//! the public internet through an egress proxy ([`egress`]). That is what keeps an agent from rewriting
//! troupe's own settings however it spells the command. Each result's
//! `sandbox` field says where it ran (`"bubblewrap"` or `"unsandboxed"`).
//! In a sandbox, what a command leaves running ends with it (its PID
//! namespace ends): a server belongs in `background: true`.

pub mod background;
pub mod egress;
pub mod house;
pub mod network;
pub mod output;
pub mod process;
pub use troupe_runtime::tether;

use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;
use tokio::io::AsyncReadExt;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::sandbox::{Confinement, Placement, Sandbox, SandboxSettings};
use troupe_runtime::tool::{GateSubject, ToolContext};
use troupe_runtime::trust::seal::Seal;

use background::{BackgroundCommands, Launch};
use output::BoundedOutput;
use process::{end_tree, shell, Ending};

/// The timeout when none is given.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest timeout allowed.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Output bytes kept from the start.
pub const HEAD_BYTES: usize = 15_000;
/// Output bytes kept from the end.
pub const TAIL_BYTES: usize = 15_000;
/// How long output is still read after the shell exits while something it
/// started keeps the pipe open.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// The longest output is read after the shell exits.
const DRAIN_LIMIT: Duration = Duration::from_secs(2);

/// The arguments of `run_command`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RunCommandParams {
    /// The command, run by `bash -c`. Required unless `stop` is given.
    #[serde(default)]
    pub command: Option<String>,
    /// The folder to run it in (default: the working folder).
    #[serde(default)]
    pub cwd: Option<String>,
    /// Seconds before the command and everything it started are killed (default 120, at most 600).
    #[serde(default)]
    #[schemars(range(min = 1, max = 600))]
    pub timeout: Option<u64>,
    /// Return at once with an id; the output goes to a log file read with read_file.
    #[serde(default)]
    pub background: bool,
    /// With `background`: be told when the command ends.
    #[serde(default)]
    pub notify_on_complete: bool,
    /// The id of a background command to stop, instead of running one.
    #[serde(default)]
    pub stop: Option<String>,
}

/// The most output bytes kept in a command's output file by default
/// (`[tools] command_output_cap`).
pub const DEFAULT_OUTPUT_CAP: u64 = 64 * 1024 * 1024;

/// Where `run_command` runs the home's commands: this machine, in its
/// sandbox when `[sandbox]` says so; the tool's state.
pub struct CommandHost {
    sandbox: SandboxSettings,
    output_cap: u64,
    /// The network sandboxed programs share (`browser_exec`'s too).
    network: Arc<network::CommandNetwork>,
}

impl CommandHost {
    /// Commands run where `sandbox` says, keeping [`DEFAULT_OUTPUT_CAP`]
    /// bytes of output.
    pub fn with_sandbox(sandbox: SandboxSettings) -> Self {
        Self {
            network: Arc::new(network::CommandNetwork::new(sandbox.clone())),
            sandbox,
            output_cap: DEFAULT_OUTPUT_CAP,
        }
    }

    /// The network its sandboxed commands share, for other programs that
    /// run as commands do (`browser_exec`'s).
    pub fn network(&self) -> Arc<network::CommandNetwork> {
        Arc::clone(&self.network)
    }

    /// Keeps at most `bytes` of a command's output in its output file
    /// (`[tools] command_output_cap`; 0 keeps none).
    pub fn output_cap(mut self, bytes: u64) -> Self {
        self.output_cap = bytes;
        self
    }
}

impl Default for CommandHost {
    /// The machine's sandbox when it has one (the default `[sandbox]` settings).
    fn default() -> Self {
        Self::with_sandbox(SandboxSettings::default())
    }
}

/// Run a bash command and get its output (stdout and stderr together) and exit code. Standard
/// input is closed; pagers and colors are off. `timeout` (default 120 s, at most 600) kills the
/// command and everything it started. Output over 30,000 bytes shows its first and last 15,000
/// bytes; the whole output is saved to a file the result names. `background: true` returns at
/// once with an id; the output goes to a log file whose last line says how it ended;
/// `notify_on_complete` tells you when it ends; `stop: <id>` ends it. Where the machine has a
/// sandbox, commands run in it: the working folder is writable, the rest of the machine
/// read-only, troupe's home not there at all, /tmp private, and the network only the public
/// internet through a proxy (HTTPS_PROXY), never this machine's own services.
#[tool(
    failure_tolerant,
    // It cuts and saves its own output: the dispatcher's spill would only
    // save the cut text.
    pages_own_output,
    timeout = MAX_TIMEOUT + process::TERM_GRACE + Duration::from_secs(30),
    gated_by = GateSubject::Command("command".into())
)]
pub async fn run_command(
    params: RunCommandParams,
    ctx: &ToolContext,
    host: &CommandHost,
) -> ToolResult {
    let registry = BackgroundCommands::of(&ctx.services);
    let command = match (&params.stop, &params.command) {
        (Some(_), Some(_)) => {
            return ToolResult::error(
                "give either `command` (to run one) or `stop` (to stop one), not both",
            )
        }
        (Some(id), None) => {
            return match registry.stop(id).await {
                Ok(text) => ToolResult::ok(text),
                Err(text) => ToolResult::error(text),
            }
        }
        (None, None) => return ToolResult::error("`command` is required: give the command to run"),
        (None, Some(command)) => command.clone(),
    };
    let timeout = match params.timeout {
        None => None,
        Some(0) => return ToolResult::error("`timeout` must be at least 1 second"),
        Some(secs) if Duration::from_secs(secs) > MAX_TIMEOUT => {
            return ToolResult::error(format!(
                "`timeout` is at most {} seconds; for longer commands use background: true",
                MAX_TIMEOUT.as_secs()
            ))
        }
        Some(secs) => Some(Duration::from_secs(secs)),
    };
    let cwd = ctx.resolve(params.cwd.as_deref().unwrap_or("."));
    if !cwd.is_dir() {
        return ToolResult::error(format!(
            "`cwd` {} is not an existing folder; give a folder to run the command in",
            cwd.display()
        ));
    }
    if params.notify_on_complete && !params.background {
        return ToolResult::error("`notify_on_complete` applies only with background: true");
    }
    let placement = match host.sandbox.place() {
        Ok(placement) => placement,
        Err(e) => {
            return ToolResult::error_with(
                format!("the command did not run: {e}"),
                serde_json::json!({"sandbox": "none"}),
            )
        }
    };
    let confinement = match &placement {
        Placement::Sandboxed(sandbox) => match host.confinement(sandbox, &cwd, ctx).await {
            Ok(confinement) => confinement,
            Err(why) => {
                return ToolResult::error_with(
                    format!("the command did not run: {why}"),
                    serde_json::json!({"sandbox": placement.label()}),
                )
            }
        },
        Placement::Unsandboxed(_) => Confinement::default(),
    };
    let sandbox = match &placement {
        Placement::Sandboxed(sandbox) => Some((sandbox, &confinement)),
        Placement::Unsandboxed(_) => None,
    };
    if params.background {
        let notifier = ctx.services.node().command_notifier();
        let notify = match (params.notify_on_complete, notifier) {
            (true, Some(n)) => Some((n, ctx.conversation)),
            _ => None,
        };
        let missing_notifier = params.notify_on_complete && notify.is_none();
        // Unsandboxed, its supervisor seals troupe's settings as below.
        let launch = Launch {
            command: &command,
            cwd: &cwd,
            home: &ctx.home,
            timeout,
            notify,
            conversation: ctx.conversation,
            sandbox,
            allow: &host.sandbox.allow_addresses,
        };
        return match registry.start(launch).await {
            Ok(started) => {
                let mut text = format!(
                    "Started background command {id}. Its output goes to {log}, whose last \
                     line will say how it ended; stop it with stop: \"{id}\".",
                    id = started.id,
                    log = started.log.display()
                );
                if missing_notifier {
                    text.push_str(" No notifier is available here, so check the log instead of waiting to be told.");
                }
                ToolResult::ok_with(
                    text,
                    serde_json::json!({
                        "id": started.id,
                        "log": started.log,
                        "sandbox": placement.label(),
                    }),
                )
            }
            Err(e) => ToolResult::error(format!("could not start the command: {e}")),
        };
    }
    // Unsandboxed, troupe's settings are put back if the command changes them.
    let seal = sandbox.is_none().then(|| Seal::of(&ctx.home));
    let timeout = timeout.unwrap_or(DEFAULT_TIMEOUT);
    let mut result = run(
        &command,
        &cwd,
        timeout,
        sandbox,
        &host.sandbox.allow_addresses,
        host.output_cap,
        ctx,
    )
    .await;
    if let Some(report) = seal.and_then(|seal| seal.restore().report()) {
        tracing::warn!(command = %command, "{report}");
        result = ToolResult::error_with(format!("{}\n{report}", result.text), result.data);
    }
    if result.data.is_null() {
        result.data = serde_json::json!({});
    }
    if let Some(data) = result.data.as_object_mut() {
        data.insert("sandbox".into(), placement.label().into());
    }
    result
}

impl CommandHost {
    /// What a sandboxed command in `cwd` may touch: the working folder,
    /// not troupe's home at all, and the network `[sandbox] network` says.
    ///
    /// A working folder inside the home is refused: the home is hidden
    /// from commands, so it could not be shown without showing the home.
    async fn confinement(
        &self,
        sandbox: &Sandbox,
        cwd: &std::path::Path,
        ctx: &ToolContext,
    ) -> Result<Confinement, String> {
        let home = ctx.home.root();
        let real_home = std::fs::canonicalize(home).unwrap_or_else(|_| home.to_path_buf());
        for dir in [cwd, ctx.cwd.as_path()] {
            let real = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
            if real.starts_with(&real_home) {
                return Err(format!(
                    "the working folder {} is inside troupe's home {}, which sandboxed commands \
                     cannot see; run commands in a folder outside the home (start troupe in \
                     your project's folder, or give `cwd` outside the home)",
                    dir.display(),
                    home.display()
                ));
            }
        }
        let network = self.network.for_program(sandbox).await?;
        Ok(Confinement {
            writable: vec![ctx.cwd.clone()],
            read_only: vec![],
            network,
            hidden: vec![home.to_path_buf()],
        })
    }
}

/// Runs a command in the foreground.
async fn run(
    command: &str,
    cwd: &std::path::Path,
    timeout: Duration,
    sandbox: Option<(&Sandbox, &Confinement)>,
    allow: &[std::net::IpAddr],
    output_cap: u64,
    ctx: &ToolContext,
) -> ToolResult {
    let spawned = (|| {
        let (sender, receiver) = tokio::net::unix::pipe::pipe()?;
        let out = sender.into_blocking_fd()?;
        let err = out.try_clone()?;
        let mut cmd = shell(command, cwd, sandbox, allow);
        cmd.stdout(Stdio::from(out)).stderr(Stdio::from(err));
        // The command holds the pipe's write end: starting it drops it here,
        // leaving only the child's, so the read ends when its tree is done.
        let running = tether::start(cmd)?;
        Ok::<_, std::io::Error>((running, receiver))
    })();
    let (running, mut pipe) = match spawned {
        Ok(spawned) => spawned,
        Err(e) => return ToolResult::error(format!("could not start bash: {e}")),
    };
    let tether::Running {
        mut child,
        pgid,
        watchdog,
    } = running;
    // A call outside the dispatcher (the Rust API, a test) may have no id.
    let call_id = if ctx.call_id.is_empty() {
        format!("command_{}", troupe_runtime::id::MsgId::new())
    } else {
        ctx.call_id.clone()
    };
    let file =
        troupe_runtime::tool::spill::spill_path(&ctx.home, &ctx.conversation.to_string(), &call_id);
    let mut output = BoundedOutput::new(HEAD_BYTES, TAIL_BYTES).spilling_to(file, output_cap);
    let mut buf = vec![0_u8; 64 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut ending: Option<Ending> = None;
    let mut pipe_open = true;
    while ending.is_none() {
        tokio::select! {
            read = pipe.read(&mut buf), if pipe_open => match read {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => output.push(&buf[..n]),
            },
            status = child.wait() => {
                ending = Some(match status {
                    Ok(status) => Ending::of(status),
                    Err(_) => Ending::Exit(-1),
                });
            }
            () = &mut deadline => {
                end_tree(&mut child, pgid).await;
                ending = Some(Ending::Timeout(timeout));
            }
            () = ctx.cancel.cancelled() => {
                end_tree(&mut child, pgid).await;
                ending = Some(Ending::TurnStopped);
            }
        }
    }
    // What was written before the end is still in the pipe; something the
    // command left running may keep it open, so stop reading once it idles.
    let drain_until = tokio::time::Instant::now() + DRAIN_LIMIT;
    while pipe_open && tokio::time::Instant::now() < drain_until {
        match tokio::time::timeout(DRAIN_GRACE, pipe.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => output.push(&buf[..n]),
            _ => pipe_open = false,
        }
    }
    // The shell has ended: what it left running keeps running, as before.
    drop(watchdog);
    output.finish();
    let ending = ending.unwrap_or(Ending::Exit(-1));
    let mut text = output.text();
    if text.is_empty() {
        text.push_str("(no output)");
    }
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&ending.to_string());
    let data = serde_json::json!({
        "exit_code": ending.code(),
        "ending": ending.to_string(),
        "output_bytes": output.total(),
        "cut_bytes": output.cut(),
        "output_file": output.file(),
    });
    if ending.success() {
        ToolResult::ok_with(text, data)
    } else {
        ToolResult::error_with(text, data)
    }
}

#[cfg(test)]
#[path = "run_command_tests.rs"]
mod tests;
