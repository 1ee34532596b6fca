//! Background commands: started, logged to a file, stopped by id.
//!
//! A background command writes its output straight to
//! `<home>/commands/<id>.log` (no memory is held for it) and, when it ends,
//! a last line saying how. Whoever asked with `notify_on_complete` is told
//! through the [`CommandNotifier`] the conversation actor provides.
//!
//! Each command is a [`Command`](CommandActor) actor that owns its process
//! and waits for its end, under one supervisor, [`Commands`], which owns the
//! registry by id: any later call stops a command by its id, and shutdown
//! ends them all. A node starts the supervisor as its `commands` child
//! ([`BackgroundCommands::child`]) and lends the handle to `run_command`
//! typed, as the [`BackgroundCommandServices`] of its tools' services;
//! without one (a program using the tool alone) it starts on first use. A
//! command is a temporary child: it is never restarted (its process cannot
//! be taken over, and running it again could repeat what it did). When one
//! exits abnormally (a panic), the supervisor's exit handling ends its
//! processes, writes the ending line and sends the notification it owed,
//! so neither is lost.
//!
//! It runs in the same sandbox as a foreground command. troupe opens its log
//! file and hands the command the open file, so the log is written even
//! though `commands/` is read-only inside the sandbox.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use parking_lot::RwLock;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::process::Child;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use troupe_runtime::fault;
use troupe_runtime::id::ConversationId;
use troupe_runtime::supervise::{ChildSpec, ExitReason};
use troupe_runtime::tool::services::BackgroundCommandServices;
use troupe_runtime::tool::Services;
use troupe_runtime::trust::seal::Seal;

use super::process::{end_tree, shell, signal_group, Ending};
use super::tether::{self, Running, Watchdog};

/// How much of a log's end a notification carries.
const SUMMARY_TAIL_BYTES: u64 = 2000;

/// The fault point a test arms (with the id of the conversation that
/// starts the command) to make its actor panic once the command has
/// ended, before it tells anyone.
pub const FAULT: &str = "command";

pub use troupe_runtime::tool::services::background_commands::{Launch, Started};
pub use troupe_runtime::tool::services::CommandNotifier;

/// One background command, as its supervisor keeps it.
struct Job {
    command: String,
    log: PathBuf,
    stop: CancellationToken,
    /// The ending line once it has ended.
    ended: watch::Sender<Option<String>>,
    /// Its process group, while it may run.
    pgid: Option<u32>,
    notify: Option<(Arc<dyn CommandNotifier>, ConversationId)>,
    /// Its actor, while it runs.
    cell: Option<ActorId>,
}

/// A running background command, as `troupe ps` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunningCommand {
    /// Its id (`cmd_…`).
    pub id: String,
    /// The conversation that started it.
    pub conversation: ConversationId,
}

/// The handle on the background commands of a process: the supervisor's
/// address, and what is running for the tree's picture.
#[derive(Debug, Default)]
pub struct BackgroundCommands {
    actor: RwLock<Option<ActorRef<CommandsMsg>>>,
    first: tokio::sync::Mutex<()>,
    running: Arc<DashMap<String, ConversationId>>,
}

impl BackgroundCommands {
    /// The node's background commands
    /// ([`NodeServices::background_commands`](troupe_runtime::tool::services::NodeServices::background_commands));
    /// without a node, a handle of their own, made on first use.
    pub fn of(services: &Services) -> Arc<dyn BackgroundCommandServices> {
        services
            .node()
            .background_commands_or(|| Arc::new(Self::default()))
    }

    /// The supervisor as a child named `commands` of a node's root: each
    /// incarnation becomes the one this handle talks to.
    pub fn child(self: &Arc<Self>) -> ChildSpec {
        let weak = Arc::downgrade(self);
        ChildSpec::new("commands", move |supervisor: ActorCell| {
            let weak = weak.clone();
            async move {
                let this = weak.upgrade().ok_or("the node is stopping")?;
                let args = Arc::clone(&this.running);
                let (actor, _) = Actor::spawn_linked(None, Commands, args, supervisor).await?;
                *this.actor.write() = Some(actor.clone());
                Ok(actor.get_cell())
            }
        })
    }

    /// The supervisor, started on first use when no node started it.
    async fn actor(&self) -> std::io::Result<ActorRef<CommandsMsg>> {
        if let Some(actor) = self.actor.read().clone() {
            return Ok(actor);
        }
        let _first = self.first.lock().await;
        if let Some(actor) = self.actor.read().clone() {
            return Ok(actor);
        }
        let (actor, _) = Actor::spawn(None, Commands, Arc::clone(&self.running))
            .await
            .map_err(|e| std::io::Error::other(format!("the commands' supervisor: {e}")))?;
        *self.actor.write() = Some(actor.clone());
        Ok(actor)
    }

    /// Stops every command still running (at shutdown).
    pub fn stop_all(&self) {
        if let Some(actor) = self.actor.read().clone() {
            let _ = actor.send_message(CommandsMsg::StopAll);
        }
    }

    /// The commands running now.
    pub fn running(&self) -> Vec<RunningCommand> {
        self.running
            .iter()
            .map(|entry| RunningCommand {
                id: entry.key().clone(),
                conversation: *entry.value(),
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl BackgroundCommandServices for BackgroundCommands {
    async fn start(&self, launch: Launch<'_>) -> std::io::Result<Started> {
        // Unsandboxed, troupe's settings are put back if the command
        // changes them (when it ends), as a foreground command's are.
        let seal = launch.sandbox.is_none().then(|| Seal::of(launch.home));
        let actor = self.actor().await?;
        let dir = launch.home.commands_dir();
        std::fs::create_dir_all(&dir)?;
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        let id = format!("cmd_{}", &suffix[suffix.len() - 12..]);
        let log = dir.join(format!("{id}.log"));
        let file = std::fs::File::create(&log)?;
        let mut cmd = shell(launch.command, launch.cwd, launch.sandbox, launch.allow);
        cmd.stdout(Stdio::from(file.try_clone()?))
            .stderr(Stdio::from(file));
        let running = tether::start(cmd)?;
        let launched = Launched {
            id: id.clone(),
            command: launch.command.to_string(),
            log: log.clone(),
            running,
            timeout: launch.timeout,
            notify: launch.notify,
            conversation: launch.conversation,
            seal,
        };
        let answer = ractor::call!(actor, CommandsMsg::Start, Box::new(launched))
            .map_err(|e| std::io::Error::other(format!("the commands' supervisor: {e}")))?;
        answer.map_err(std::io::Error::other)?;
        Ok(Started { id, log })
    }

    async fn stop(&self, id: &str) -> Result<String, String> {
        let actor = self.actor().await.map_err(|e| e.to_string())?;
        let found = ractor::call!(actor, CommandsMsg::Find, id.to_string())
            .map_err(|e| format!("the commands' supervisor did not answer: {e}"))?;
        let Some((log, stop, mut ended)) = found else {
            return Err(format!(
                "there is no background command `{id}`; use the id that starting it returned (cmd_…)"
            ));
        };
        if let Some(line) = ended.borrow().clone() {
            return Ok(format!(
                "`{id}` had already ended: {line}. Its output is in {}.",
                log.display()
            ));
        }
        stop.cancel();
        let waited = tokio::time::timeout(
            super::process::TERM_GRACE * 5,
            ended.wait_for(Option::is_some),
        )
        .await;
        match waited {
            Ok(Ok(line)) => Ok(format!(
                "Stopped `{id}`: {}. Its output is in {}.",
                line.clone().unwrap_or_default(),
                log.display()
            )),
            _ => Err(format!(
                "`{id}` was told to stop but has not ended yet; check {}",
                log.display()
            )),
        }
    }
}

/// A started process, handed to the supervisor to become an actor.
pub struct Launched {
    id: String,
    command: String,
    log: PathBuf,
    running: Running,
    timeout: Option<Duration>,
    notify: Option<(Arc<dyn CommandNotifier>, ConversationId)>,
    conversation: ConversationId,
    seal: Option<Seal>,
}

/// What the commands' supervisor is asked.
pub enum CommandsMsg {
    /// Makes a started process a supervised command.
    Start(Box<Launched>, ractor::RpcReplyPort<Result<(), String>>),
    /// A command's log, stop token and ending, by id.
    #[allow(clippy::type_complexity)]
    Find(
        String,
        ractor::RpcReplyPort<Option<(PathBuf, CancellationToken, watch::Receiver<Option<String>>)>>,
    ),
    /// A command ended with this line (its actor then tells whom it owes).
    Ended(String, String),
    /// Stops every command still running.
    StopAll,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for CommandsMsg {}

/// The supervisor of the background commands.
pub struct Commands;

/// Its state: every command of the process, by id.
pub struct CommandsState {
    jobs: HashMap<String, Job>,
    running: Arc<DashMap<String, ConversationId>>,
}

impl CommandsState {
    /// The command whose actor was `cell` exited: abnormally, its
    /// processes are ended, its log says so, and whom it owed is told.
    fn exited(&mut self, cell: ActorId, reason: &ExitReason) {
        let Some((id, job)) = self.jobs.iter_mut().find(|(_, j)| j.cell == Some(cell)) else {
            return;
        };
        job.cell = None;
        self.running.remove(id.as_str());
        if !reason.is_abnormal() {
            // It ran to its end and told whom it owed.
            job.pgid = None;
            return;
        }
        if let Some(pgid) = job.pgid.take() {
            signal_group(pgid, rustix::process::Signal::KILL);
        }
        tracing::error!(command = %id, %reason, "a background command's actor failed; its processes were ended");
        let ended = job.ended.borrow().clone();
        let line = ended.clone().unwrap_or_else(|| {
            format!("[troupe lost track of it: {reason}; its processes were ended]")
        });
        if ended.is_none() {
            job.ended.send_replace(Some(line.clone()));
        }
        let (id, command, log, notify) = (
            id.clone(),
            job.command.clone(),
            job.log.clone(),
            job.notify.clone(),
        );
        tokio::spawn(async move {
            let (line, tail) = match ended {
                None => finish_log(log.clone(), line).await,
                Some(line) => {
                    let at = log.clone();
                    let tail = tokio::task::spawn_blocking(move || log_tail(&at)).await;
                    (line, tail.unwrap_or_default())
                }
            };
            // At least once: a notifier that failed may have told already.
            if let Some((notifier, conversation)) = notify {
                let summary = summary(&id, &command, &line, &log, &tail);
                notifier.command_finished(conversation, &id, &summary).await;
            }
        });
    }
}

impl Actor for Commands {
    type Msg = CommandsMsg;
    type State = CommandsState;
    type Arguments = Arc<DashMap<String, ConversationId>>;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        running: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        // A restarted supervisor starts with nothing running: its
        // predecessor's commands ended with it.
        running.clear();
        Ok(CommandsState {
            jobs: HashMap::new(),
            running,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            CommandsMsg::Start(launched, reply) => {
                let launched = *launched;
                let stop = CancellationToken::new();
                let (ended, _) = watch::channel(None);
                let job = Job {
                    command: launched.command.clone(),
                    log: launched.log.clone(),
                    stop: stop.clone(),
                    ended,
                    pgid: launched.running.pgid,
                    notify: launched.notify.clone(),
                    cell: None,
                };
                let (id, conversation) = (launched.id.clone(), launched.conversation);
                let args = CommandArgs {
                    launched,
                    stop,
                    supervisor: myself.clone(),
                };
                let spawned =
                    Actor::spawn_linked(None, CommandActor, Box::new(args), myself.get_cell())
                        .await;
                let answer = match spawned {
                    Ok((actor, _)) => {
                        let mut job = job;
                        job.cell = Some(actor.get_id());
                        state.jobs.insert(id.clone(), job);
                        state.running.insert(id, conversation);
                        Ok(())
                    }
                    Err(e) => {
                        if let Some(pgid) = job.pgid {
                            signal_group(pgid, rustix::process::Signal::KILL);
                        }
                        Err(format!("its actor did not start: {e}"))
                    }
                };
                let _ = reply.send(answer);
            }
            CommandsMsg::Find(id, reply) => {
                let found = state
                    .jobs
                    .get(&id)
                    .map(|j| (j.log.clone(), j.stop.clone(), j.ended.subscribe()));
                let _ = reply.send(found);
            }
            CommandsMsg::Ended(id, line) => {
                if let Some(job) = state.jobs.get_mut(&id) {
                    job.pgid = None;
                    job.ended.send_replace(Some(line));
                }
            }
            CommandsMsg::StopAll => {
                for job in state.jobs.values() {
                    job.stop.cancel();
                }
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
            state.exited(cell.get_id(), &reason);
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        // Its commands die with it: nothing would wait for them any more.
        for job in state.jobs.values_mut() {
            if let Some(pgid) = job.pgid.take() {
                signal_group(pgid, rustix::process::Signal::KILL);
            }
        }
        state.running.clear();
        Ok(())
    }
}

/// One background command: owns its process, waits for its end, writes
/// the ending line and tells whom it owes. Its one message does all that.
struct CommandActor;

struct CommandArgs {
    launched: Launched,
    stop: CancellationToken,
    supervisor: ActorRef<CommandsMsg>,
}

enum CommandMsg {
    Wait,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for CommandMsg {}

struct CommandState {
    id: String,
    command: String,
    log: PathBuf,
    child: Child,
    pgid: Option<u32>,
    watchdog: Option<Watchdog>,
    timeout: Option<Duration>,
    notify: Option<(Arc<dyn CommandNotifier>, ConversationId)>,
    conversation: ConversationId,
    seal: Option<Seal>,
    stop: CancellationToken,
    supervisor: ActorRef<CommandsMsg>,
}

impl Actor for CommandActor {
    type Msg = CommandMsg;
    type State = CommandState;
    type Arguments = Box<CommandArgs>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let CommandArgs {
            launched,
            stop,
            supervisor,
        } = *args;
        myself.send_message(CommandMsg::Wait)?;
        Ok(CommandState {
            id: launched.id,
            command: launched.command,
            log: launched.log,
            child: launched.running.child,
            pgid: launched.running.pgid,
            watchdog: launched.running.watchdog,
            timeout: launched.timeout,
            notify: launched.notify,
            conversation: launched.conversation,
            seal: launched.seal,
            stop,
            supervisor,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            CommandMsg::Wait => {
                wait(state).await;
                myself.stop(None);
            }
        }
        Ok(())
    }
}

/// Waits for the command's end, records it, and tells whom it owes.
async fn wait(state: &mut CommandState) {
    let timeout = state.timeout;
    let sleep = async {
        match timeout {
            Some(after) => tokio::time::sleep(after).await,
            None => std::future::pending().await,
        }
    };
    let ending = tokio::select! {
        status = state.child.wait() => match status {
            Ok(status) => Ending::of(status),
            Err(_) => Ending::Exit(-1),
        },
        () = state.stop.cancelled() => {
            end_tree(&mut state.child, state.pgid).await;
            Ending::Stopped
        }
        () = sleep => {
            end_tree(&mut state.child, state.pgid).await;
            Ending::Timeout(timeout.unwrap_or_default())
        }
    };
    // The shell has ended: what it left running keeps running.
    drop(state.watchdog.take());
    fault::check(FAULT, &state.conversation.to_string());
    let mut line = ending.to_string();
    if let Some(report) = state.seal.take().and_then(|seal| seal.restore().report()) {
        tracing::warn!(command = %state.command, "{report}");
        line = format!("{line}. {report}");
    }
    let (line, tail) = finish_log(state.log.clone(), line).await;
    let _ = state
        .supervisor
        .send_message(CommandsMsg::Ended(state.id.clone(), line.clone()));
    if let Some((notifier, conversation)) = state.notify.take() {
        let summary = summary(&state.id, &state.command, &line, &state.log, &tail);
        notifier
            .command_finished(conversation, &state.id, &summary)
            .await;
    }
}

/// Appends `line` to the log and reads the log's end, off the async threads.
async fn finish_log(log: PathBuf, line: String) -> (String, String) {
    let fallback = line.clone();
    let summary = tokio::task::spawn_blocking(move || {
        if let Err(e) = append_ending(&log, &line) {
            tracing::warn!(log = %log.display(), error = %e, "could not end a command's log");
        }
        (line, log_tail(&log))
    })
    .await;
    summary.unwrap_or_else(|_| (fallback, String::new()))
}

/// What the notification of command `id`'s end says.
fn summary(id: &str, command: &str, line: &str, log: &Path, tail: &str) -> String {
    format!(
        "Background command {id} (`{command}`) ended: {line}. Its output is in {}; it ends with:\n{tail}",
        log.display()
    )
}

/// Appends the ending line, on a line of its own.
fn append_ending(log: &Path, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(log)?;
    let len = file.metadata()?.len();
    let mut text = String::new();
    if len > 0 {
        let mut last = [0_u8; 1];
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            text.push('\n');
        }
    }
    text.push_str(line);
    text.push('\n');
    file.write_all(text.as_bytes())
}

/// The last bytes of a log, as text.
fn log_tail(log: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = std::fs::File::open(log)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(SUMMARY_TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    read().unwrap_or_default()
}
