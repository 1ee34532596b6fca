//! The Executor actor: one harness process, from launch to its recorded end.
//!
//! `pre_start` launches the harness (see [`Launch`]; what is particular to
//! each harness is its [`Harness`]) and a task reading its output
//! (`output.rs`); the task writes every byte to the instance's output file, turns
//! each line into [`Event`]s, queues what the record keeps for the
//! store's writer in the order it came (awaiting the queue, so a flood
//! waits for the writer instead of filling memory), and tells the actor
//! what changes its state. The actor decides the end — done, failed,
//! stopped, timed out — once, hands it to its delegation (which records it
//! and reports), closes the harness's input and stops when the process is
//! gone. The process group is killed when the actor's state is dropped,
//! whatever the reason.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio_util::sync::{CancellationToken, DropGuard};
use troupe_runtime::id::{ConversationId, DelegationId, SubagentId};

use super::harness::{self, Event, Harness, Stopping};
use super::host::{describe, Group, HeadStart, Started};
use super::output::read;
pub(super) use super::output::Output;
use crate::delegation::{record, Delegations};
use crate::node::Node;

/// How long a harness has to end its task after `abort` before it is killed.
const ABORT_GRACE: Duration = Duration::from_secs(5);

/// How long a harness has to exit after its task ended.
const EXIT_GRACE: Duration = Duration::from_secs(3);

/// Everything needed to start one instance.
#[derive(Debug, Clone)]
pub struct Launch {
    /// Its delegation.
    pub delegation: DelegationId,
    /// Its id (a row of the delegation's subagents).
    pub sub: SubagentId,
    /// The key its end is recorded under (the row's conversation id).
    pub key: ConversationId,
    /// The harness (`pi`, `claude-code`, `codex`).
    pub executor: String,
    /// The folder it works in (checked).
    pub folder: PathBuf,
    /// Its first message: the task.
    pub prompt: String,
    /// A session to continue (`resume`): what the harness said of it (pi's
    /// session file, Claude Code's or Codex's session id).
    pub session: Option<PathBuf>,
    /// troupe's model spec its calls are answered by.
    pub model: String,
    /// Where it runs.
    pub place: Place,
    /// The account it runs on (`[executors.NAME.accounts.ACCOUNT]`).
    pub account: String,
    /// That account's config folder: the harness's sessions and
    /// credentials (its own variable points there).
    pub account_dir: PathBuf,
}

/// Where an instance runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Place {
    /// On the machine, in the `run_command` sandbox, in its folder; it
    /// takes `steer` and `stop` on its input (pi's RPC mode).
    Host,
    /// In a house thread's environment, at `/workspace`, one task (pi's
    /// JSON mode), its progress posted by `bot` into `thread`.
    Environment {
        /// The environment.
        sandbox: troupe_runtime::id::EnvironmentId,
        /// The thread its progress goes to.
        thread: troupe_runtime::id::ThreadId,
        /// The bot it works for.
        bot: String,
        /// The harness session it continues.
        continued: super::house::Continue,
        /// A repository to clone first.
        repo: Option<String>,
    },
}

/// What an Executor actor is told.
#[derive(Debug)]
pub enum ExecutorMsg {
    /// The harness said something that changes the instance's state.
    Event(Event),
    /// Its output closed; `Some(why)` when it could not be read to the end.
    OutputEnded(Option<String>),
    /// Its process exited (how).
    Exited(String),
    /// Tell the running harness `message` before its next step.
    Steer(String, RpcReplyPort<Result<(), String>>),
    /// Stop it (`timed_out`: its deadline passed).
    Stop {
        /// Whether the deadline stopped it.
        timed_out: bool,
    },
    /// The grace after `abort` or after its end passed: kill it.
    Kill,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for ExecutorMsg {}

/// The actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Executor;

/// What it starts with.
pub struct ExecutorArgs {
    /// The instance.
    pub launch: Launch,
    /// The node.
    pub node: Node,
    /// The delegations its end goes to.
    pub delegations: Arc<Delegations>,
    /// Its harness, started on the machine while its admission committed
    /// (none: the actor starts it).
    pub head: Option<HeadStart>,
}

/// The harness an instance runs, or why there is none.
fn harness_of(launch: &Launch) -> Result<&'static dyn Harness, ActorProcessingErr> {
    harness::of(&launch.executor).ok_or_else(|| {
        ActorProcessingErr::from(format!(
            "troupe drives no executor called {}; `troupe executors list` names them",
            launch.executor
        ))
    })
}

/// Its state.
pub struct ExecutorState {
    args: ExecutorArgs,
    harness: &'static dyn Harness,
    stdin: Option<ChildStdin>,
    group: Group,
    _stop: DropGuard,
    stop: CancellationToken,
    last_text: String,
    error: Option<String>,
    stopping: Option<&'static str>,
    reported: bool,
    exited: bool,
    /// Whether its output was read to its end.
    output_ended: bool,
    /// Its exit, judged once its output is read (a one-shot harness).
    exit_waits: Option<String>,
    started: Instant,
}

impl Actor for Executor {
    type Msg = ExecutorMsg;
    type State = ExecutorState;
    type Arguments = ExecutorArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<ExecutorMsg>,
        args: ExecutorArgs,
    ) -> Result<ExecutorState, ActorProcessingErr> {
        let started = Instant::now();
        let mut args = args;
        let harness = harness_of(&args.launch)?;
        let run = match (args.head.take(), &args.launch.place) {
            (Some(head), _) => head.into_started(),
            (None, Place::Host) => {
                super::host::start(&args.node, &args.launch, harness, None).await
            }
            (None, Place::Environment { .. }) => super::house::launch(&args, &myself).await,
        }
        .map_err(ActorProcessingErr::from)?;
        let Started {
            input: mut stdin,
            first,
            output,
            group,
            child,
            stop,
            stopped_on_drop,
        } = run;
        if let Some(mut child) = child {
            let me = myself.clone();
            tokio::spawn(async move {
                let how = match child.wait().await {
                    Ok(status) => describe(status),
                    Err(e) => format!("its exit could not be read: {e}"),
                };
                let _ = me.send_message(ExecutorMsg::Exited(how));
            });
        }
        let launch = &args.launch;
        if let Some(input) = stdin.as_mut() {
            let written = async {
                for line in &first {
                    input.write_all(line.as_bytes()).await?;
                }
                input.flush().await
            };
            written
                .await
                .map_err(|e| format!("{} did not take its task: {e}", launch.executor))?;
        }
        let file = super::output_file(args.node.home(), &launch.executor, launch.sub);
        let posts = match &launch.place {
            Place::Host => None,
            Place::Environment { thread, bot, .. } => Some((*thread, bot.clone())),
        };
        tokio::spawn(read(
            harness,
            output,
            file,
            args.node.clone(),
            Arc::clone(&args.delegations),
            (launch.delegation, launch.sub),
            posts,
            myself.clone(),
        ));
        tracing::info!(
            executor = %launch.executor,
            instance = %launch.sub,
            delegation = %launch.delegation,
            folder = %launch.folder.display(),
            millis = started.elapsed().as_millis() as u64,
            "executor instance started"
        );
        Ok(ExecutorState {
            args,
            harness,
            stdin,
            group,
            _stop: stopped_on_drop,
            stop,
            last_text: String::new(),
            error: None,
            stopping: None,
            reported: false,
            exited: false,
            output_ended: false,
            exit_waits: None,
            started,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<ExecutorMsg>,
        msg: ExecutorMsg,
        state: &mut ExecutorState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ExecutorMsg::Event(event) => match event {
                Event::Assistant { text, error, .. } => {
                    if !text.trim().is_empty() {
                        state.last_text = text;
                    }
                    if error.is_some() {
                        state.error = error;
                    }
                }
                Event::AgentEnd => {
                    if let (None, Some(error)) = (state.stopping, state.error.clone()) {
                        let started = std::time::SystemTime::now() - state.started.elapsed();
                        let summary = state.last_text.clone();
                        if super::hand_over::go_on(&state.args, &error, &summary, started).await {
                            // The next account goes on under this row; no report.
                            state.reported = true;
                            state.stdin = None;
                            if !state.exited {
                                myself.send_after(EXIT_GRACE, || ExecutorMsg::Kill);
                            }
                            return Ok(());
                        }
                    }
                    let (status, result) = match (state.stopping, &state.error) {
                        (Some(status), _) => (
                            status,
                            format!(
                                "{status}; what it had so far:\n{}",
                                or_nothing(&state.last_text)
                            ),
                        ),
                        (None, Some(error)) => (
                            "failed",
                            format!("its model call failed: {error}\n{}", state.last_text),
                        ),
                        (None, None) => ("done", or_nothing(&state.last_text).to_string()),
                    };
                    finish(&myself, state, status, result);
                }
                Event::Refused { command, error } if command == "prompt" => {
                    finish(
                        &myself,
                        state,
                        "failed",
                        format!("{} refused its task: {error}", state.args.launch.executor),
                    );
                }
                Event::Refused { .. }
                | Event::ToolStarted(_)
                | Event::ToolEnded(_)
                | Event::Record { .. }
                | Event::Session(_)
                | Event::Cost { .. }
                | Event::RateLimit(_)
                | Event::Ignored
                | Event::Garbage => {}
            },
            ExecutorMsg::OutputEnded(why) => {
                state.output_ended = true;
                if let Some(why) = why {
                    state.group.kill();
                    finish(&myself, state, "failed", why);
                }
                if let Some(how) = state.exit_waits.take() {
                    let _ = myself.send_message(ExecutorMsg::Exited(how));
                }
            }
            ExecutorMsg::Exited(how) => {
                state.exited = true;
                // A one-shot harness exits as soon as it printed its end:
                // that end is read before its exit is judged.
                if !state.harness.long_lived() && !state.output_ended && !state.reported {
                    state.exit_waits = Some(how);
                    myself.send_after(EXIT_GRACE, || ExecutorMsg::Kill);
                    return Ok(());
                }
                if !state.reported {
                    let status = state.stopping.unwrap_or("failed");
                    let tail = stderr_tail(&state.args);
                    let result = match status {
                        "failed" => format!(
                            "{} exited before ending its task ({how}).{tail}\nWhat it had so far:\n{}",
                            state.args.launch.executor,
                            or_nothing(&state.last_text)
                        ),
                        _ => format!("{status}; what it had so far:\n{}", or_nothing(&state.last_text)),
                    };
                    finish(&myself, state, status, result);
                }
                myself.stop(None);
            }
            ExecutorMsg::Steer(message, reply) => {
                let answer = steer(state, &message).await;
                if answer.is_ok() {
                    let (node, d, s) = (
                        state.args.node.clone(),
                        state.args.launch.delegation,
                        state.args.launch.sub,
                    );
                    let _ = node
                        .store()
                        .write(move |tx| record::event(tx, d, Some(s), "steer", &message))
                        .await;
                    state.args.delegations.record_grew();
                }
                let _ = reply.send(answer);
            }
            ExecutorMsg::Stop { timed_out } => {
                if !state.reported && state.stopping.is_none() {
                    state.stopping = Some(if timed_out { "timed_out" } else { "stopped" });
                    if let Place::Environment { .. } = state.args.launch.place {
                        // One task, no input: the job is killed.
                        state.stop.cancel();
                    }
                    match (state.harness.stop(), state.stdin.as_mut()) {
                        (Stopping::Line(abort), Some(input)) => {
                            let _ = tokio::time::timeout(
                                Duration::from_secs(1),
                                input.write_all(abort.as_bytes()),
                            )
                            .await;
                        }
                        (Stopping::Line(_), None) => {}
                        (Stopping::Interrupt, _) => state.group.interrupt(),
                    }
                    myself.send_after(ABORT_GRACE, || ExecutorMsg::Kill);
                }
            }
            ExecutorMsg::Kill => {
                state.group.kill();
                state.stop.cancel();
                if !state.reported {
                    let status = state.stopping.unwrap_or("failed");
                    let result = format!(
                        "{status} (it did not end its task in time and was killed); what it had so far:\n{}",
                        or_nothing(&state.last_text)
                    );
                    finish(&myself, state, status, result);
                }
                if state.exited {
                    myself.stop(None);
                }
            }
        }
        Ok(())
    }
}

fn or_nothing(text: &str) -> &str {
    if text.trim().is_empty() {
        "(no message from it)"
    } else {
        text.trim()
    }
}

/// Hands the instance's end to its delegation (once), closes the
/// harness's input so it exits, and kills it if it does not.
fn finish(myself: &ActorRef<ExecutorMsg>, state: &mut ExecutorState, status: &str, result: String) {
    if state.reported {
        return;
    }
    state.reported = true;
    state.stdin = None;
    let launch = &state.args.launch;
    tracing::info!(
        executor = %launch.executor,
        instance = %launch.sub,
        status,
        secs = state.started.elapsed().as_secs(),
        "executor instance ended"
    );
    state
        .args
        .delegations
        .end(Some(launch.delegation), launch.key, status, &result);
    if !state.exited {
        myself.send_after(EXIT_GRACE, || ExecutorMsg::Kill);
    }
}

async fn steer(state: &mut ExecutorState, message: &str) -> Result<(), String> {
    let executor = state.args.launch.executor.clone();
    if let Place::Environment { .. } = state.args.launch.place {
        return Err(format!(
            "{executor} runs one task in an environment and takes no messages while it works; \
             stop it and delegate again, or let it finish"
        ));
    }
    if state.reported || state.stopping.is_some() {
        return Err(format!(
            "{executor} has ended its task; `resume` continues its session"
        ));
    }
    let Some(line) = state.harness.steer(message) else {
        return Err(format!(
            "{executor} runs one task at a time and takes no messages while it works; \
             stop it and `resume` its session with the message, or let it finish"
        ));
    };
    let Some(input) = state.stdin.as_mut() else {
        return Err(format!("{executor} no longer takes input"));
    };
    match tokio::time::timeout(Duration::from_secs(5), input.write_all(line.as_bytes())).await {
        Ok(Ok(())) => Ok(()),
        Ok(Err(e)) => Err(format!("{executor} did not take the message: {e}")),
        Err(_) => Err(format!("{executor} did not read its input for 5 s")),
    }
}

/// The last lines the harness wrote on its error output, for a failure.
fn stderr_tail(args: &ExecutorArgs) -> String {
    let launch = &args.launch;
    let path =
        super::instance_dir(args.node.home(), &launch.executor, launch.sub).join("stderr.log");
    let text = std::fs::read(&path).unwrap_or_default();
    let text = String::from_utf8_lossy(&text[text.len().saturating_sub(2000)..]).to_string();
    if text.trim().is_empty() {
        String::new()
    } else {
        format!(" It said:\n{}", text.trim())
    }
}
