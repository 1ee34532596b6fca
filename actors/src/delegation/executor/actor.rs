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
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::io::AsyncWriteExt;
use tokio::process::ChildStdin;
use tokio_util::sync::{CancellationToken, DropGuard};
use troupe_runtime::id::{ConversationId, DelegationId, SubagentId};
use troupe_runtime::sandbox::{Confinement, Sandbox};

use super::harness::{self, Event, Harness, Setup, Stopping};
use super::output::read;
pub(super) use super::output::Output;
use crate::delegation::{record, Delegations};
use crate::environment::relay::{Offered, Relay};
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
        sandbox: troupe_runtime::id::SandboxId,
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
}

/// The harness's process group, killed when dropped.
struct Group(Option<rustix::process::Pid>);

impl Group {
    fn kill(&self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
        }
    }

    /// Asks it to stop, as Ctrl-C in its terminal would.
    fn interrupt(&self) {
        if let Some(pid) = self.0 {
            let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::INT);
        }
    }
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

impl Drop for Group {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A started harness: how to talk to it, read it, and end it.
pub(super) struct Started {
    /// Its input (a long-lived harness), if it takes any.
    pub input: Option<ChildStdin>,
    /// The lines written on its input once it runs: its task.
    pub first: Vec<String>,
    /// Its output.
    pub output: Output,
    /// Its process group on the machine (killed when dropped).
    group: Group,
    /// Cancelled when the instance ends: its relay, its environment job.
    pub stop: CancellationToken,
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
        let harness = harness_of(&args.launch)?;
        let run = match &args.launch.place {
            Place::Host => launch(&args, harness, &myself).await,
            Place::Environment { .. } => super::house::launch(&args, &myself).await,
        }
        .map_err(ActorProcessingErr::from)?;
        let Started {
            input: mut stdin,
            first,
            output,
            group,
            stop,
        } = run;
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
            _stop: stop.clone().drop_guard(),
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

fn describe(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => "ended".into(),
    }
}

/// Starts the harness on the machine: its folder of state, its relay, its
/// sandbox; a task reports its exit.
async fn launch(
    args: &ExecutorArgs,
    harness: &'static dyn Harness,
    myself: &ActorRef<ExecutorMsg>,
) -> Result<Started, String> {
    let launch = &args.launch;
    let node = &args.node;
    let home = node.home();
    let name = launch.executor.as_str();
    let installed = troupe_runtime::executors::installed(home, name).ok_or_else(|| {
        format!("{name} is not installed here; `troupe executors install {name}` installs it")
    })?;
    let sandbox = Sandbox::detect().map_err(|why| {
        format!(
            "{name} runs commands without asking anyone, so troupe runs it only in a sandbox, \
             and none works here: {why}"
        )
    })?;
    let dir = super::instance_dir(home, name, launch.sub);
    let sessions = launch.account_dir.clone();
    for d in [&dir, &sessions] {
        std::fs::create_dir_all(d)
            .map_err(|e| format!("{} could not be made: {e}", d.display()))?;
    }

    // Its relay: on the machine's loopback, for this instance alone.
    let secret = secret();
    let ctx = node.context();
    let model = super::pi::model_id(&launch.model);
    let endpoint = ctx.model_endpoint(&launch.model).map_err(|e| e.to_string());
    // A model with no address is answered here: a script, or the provider
    // the program gave the node.
    let served = match &endpoint {
        Ok(_) => None,
        Err(_) => ctx
            .served_model(&launch.model)
            .or_else(|| ctx.model_override()),
    };
    let api = match (&endpoint, &served) {
        (Ok(e), _) => Some(e.api),
        (Err(_), Some(_)) => None,
        (Err(_), None) => Some(troupe_runtime::model::Api::Openai),
    };
    let offered = Offered {
        name: model.clone(),
        endpoint,
        served,
    };
    let relay =
        Relay::new(format!("executor {}", launch.sub), vec![offered]).with_secret(secret.clone());
    let stopped = CancellationToken::new();
    let addr = relay
        .listen(stopped.clone())
        .await
        .map_err(|e| format!("its model relay could not listen on the loopback: {e}"))?;
    // The relay stops with the instance, or now if the harness cannot start.
    let unstarted = stopped.clone().drop_guard();
    let session = launch.session.as_ref().map(|s| s.display().to_string());
    let start = harness.start(&Setup {
        dir: &dir,
        sessions: &sessions,
        folder: &launch.folder,
        relay: addr.to_string(),
        key: &secret,
        model: &model,
        api,
        prompt: &launch.prompt,
        session: session.as_deref(),
    })?;
    for (path, text) in &start.files {
        write_private(path, text)?;
    }

    // Its sandbox: the folder writable, the home hidden but for its own
    // state (writable) and its installed files (read-only).
    let confinement = Confinement {
        writable: vec![launch.folder.clone(), dir.clone(), sessions.clone()],
        read_only: vec![installed.modules.clone()],
        network: troupe_runtime::sandbox::Network::Machine,
        hidden: vec![home.root().to_path_buf()],
    };
    let (program, argv) = if installed.harness.native {
        (installed.entry.display().to_string(), start.args)
    } else {
        let mut argv = vec![installed.entry.display().to_string()];
        argv.extend(start.args);
        ("node".to_string(), argv)
    };
    let mut command = sandbox.command(&program, &argv, &launch.folder, &confinement);
    let stderr = std::fs::File::create(dir.join("stderr.log"))
        .map_err(|e| format!("its error log could not be made: {e}"))?;
    let long_lived = harness.long_lived();
    command
        .env_clear()
        .env("PATH", "/usr/local/bin:/usr/bin:/bin")
        .env("HOME", &dir)
        .env("LANG", "C.UTF-8")
        .envs(start.env)
        .stdin(if long_lived {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::from(stderr));
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let mut command = tokio::process::Command::from(command);
    command.kill_on_drop(true);
    let mut child = command
        .spawn()
        .map_err(|e| format!("{name} could not start: {e}"))?;
    let input = child.stdin.take();
    let output = child
        .stdout
        .take()
        .map(Output::Pipe)
        .ok_or_else(|| format!("{name}'s output could not be read"))?;
    let group = Group(
        child
            .id()
            .and_then(|p| i32::try_from(p).ok())
            .and_then(rustix::process::Pid::from_raw),
    );
    let me = myself.clone();
    tokio::spawn(async move {
        let how = match child.wait().await {
            Ok(status) => describe(status),
            Err(e) => format!("its exit could not be read: {e}"),
        };
        let _ = me.send_message(ExecutorMsg::Exited(how));
    });
    unstarted.disarm();
    Ok(Started {
        input,
        first: start.input,
        output,
        group,
        stop: stopped,
    })
}

impl Started {
    /// A harness with no process of its own on the machine (an
    /// environment's job), ended through `stop`.
    pub(super) fn job(output: Output, stop: CancellationToken) -> Self {
        Self {
            input: None,
            first: Vec::new(),
            output,
            group: Group(None),
            stop,
        }
    }
}

/// A file only its owner reads (the relay's secret is in it).
fn write_private(path: &std::path::Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .map_err(|e| format!("{} could not be written: {e}", path.display()))?;
    file.write_all(text.as_bytes())
        .map_err(|e| format!("{} could not be written: {e}", path.display()))
}

/// A per-instance secret: 32 random bytes, hex.
fn secret() -> String {
    use rand::RngCore;
    let mut bytes = [0_u8; 32];
    rand::rng().fill_bytes(&mut bytes);
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}
