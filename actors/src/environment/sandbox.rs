//! A Sandbox actor: one environment, its running commands, its control
//! group and its idle clock.
//!
//! It is activated by the `sandboxes` router on its first message and
//! rebuilds itself from the store: the workdir (made again if missing, and
//! owned by the environment's user), the control group, the jail its
//! commands run in. It owns the environment's sandbox: one long-lived
//! process ([`Zygote`]) started with its first command, which forks each
//! command already confined. A command runs in a task the actor spawns, so
//! the actor still takes `Stop` and other commands meanwhile; the task
//! hands the command to the sandbox and answers the caller itself. When
//! the actor stops — idle, stopped, or crashed — its state is dropped with
//! the tasks and the sandbox, which kills every process in it; the
//! router's exit handling empties the control group as well.
//!
//! A command is recorded `running` before it starts. When the sandbox's
//! process dies under running commands (killed from outside, or out of
//! memory), each is marked lost and its caller told so; the next command
//! starts a new one. When the actor starts and finds commands still
//! `running`, an earlier incarnation died under them: they are marked
//! lost, and their callers were told so (their reply ports closed). Lost
//! commands are never run again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::io::AsyncReadExt;
use troupe_runtime::environment::CommandOutcome;
use troupe_runtime::id::{MsgId, SandboxId};
use troupe_runtime::sandbox::cgroup::{Cgroup, GroupLimits};
use troupe_runtime::sandbox::jail::Jail;
use troupe_runtime::sandbox::zygote::{Exit, OnConnection, Zygote};
use troupe_runtime::sandbox::Sandbox;
use troupe_runtime::store::environments as table;
use troupe_tools::run_command::output::BoundedOutput;

use super::quota::{self, Quota};
use super::relay::Relay;
use crate::node::NodeContext;

/// Output bytes kept from a command's start and from its end.
const KEPT: usize = 15_000;

/// A Sandbox actor's messages.
#[derive(Debug)]
pub enum SandboxMsg {
    /// Runs a command; answered with how it ended.
    Run {
        /// The command, for `bash -c`.
        command: String,
        /// Its wall time.
        timeout: Duration,
        /// Who watches it as it runs (an executor instance), if anyone.
        watch: Option<Watch>,
        /// Run while the workdir is over its quota, to free space (the
        /// house's owner): it is killed if it makes the workdir grow.
        free_space: bool,
        /// The answer.
        reply: RpcReplyPort<Result<CommandOutcome, String>>,
    },
    /// Wakes it (provisioning: the workdir, the control group).
    Touch(RpcReplyPort<()>),
    /// A command's task ended.
    Ended(String),
    /// Time to see whether it has been idle long enough.
    IdleCheck,
    /// Kills its processes and stops it.
    Stop(RpcReplyPort<()>),
    /// Fails on purpose: the tests of supervision use it.
    #[doc(hidden)]
    Fail,
}

/// A command's watcher: it gets the output as it comes (besides the
/// outcome's bounded copy), and can stop the command.
#[derive(Debug, Clone)]
pub struct Watch {
    /// Every piece of output, in order.
    pub tap: tokio::sync::mpsc::UnboundedSender<bytes::Bytes>,
    /// Cancelled: the command is killed.
    pub cancel: tokio_util::sync::CancellationToken,
}

/// The actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct SandboxActor;

/// A running command's task, aborted (and its process killed) when dropped.
struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the actor keeps.
pub struct SandboxState {
    node: Weak<NodeContext>,
    sandboxes: Weak<super::Sandboxes>,
    id: SandboxId,
    workdir: PathBuf,
    place: Place,
    zygote: ZygoteSlot,
    running: HashMap<String, Running>,
    last_used: Instant,
    idle: Option<Duration>,
    quota: Quota,
    group: Option<Cgroup>,
    house: String,
}

/// Where its commands run.
#[derive(Clone)]
enum Place {
    Jailed(Sandbox, Box<Jail>, Option<OnConnection>),
    Unsandboxed,
}

/// The environment's sandbox process, started by the first command that
/// needs it (and again after it died).
#[derive(Clone, Default)]
pub(crate) struct ZygoteSlot(Arc<tokio::sync::Mutex<Option<Arc<Zygote>>>>);

impl ZygoteSlot {
    /// The live process, started now when there is none.
    pub(crate) async fn get(
        &self,
        sandbox: &Sandbox,
        jail: &Jail,
        serve: Option<OnConnection>,
    ) -> Result<Arc<Zygote>, String> {
        let mut slot = self.0.lock().await;
        if let Some(zygote) = slot.as_ref().filter(|z| z.alive()) {
            return Ok(Arc::clone(zygote));
        }
        *slot = None;
        let zygote = Arc::new(
            Zygote::start(sandbox, jail, serve)
                .await
                .map_err(|why| format!("the environment's sandbox could not start: {why}"))?,
        );
        *slot = Some(Arc::clone(&zygote));
        Ok(zygote)
    }

    /// Kills the process (and everything in its sandbox).
    async fn clear(&self) {
        self.0.lock().await.take();
    }
}

/// What the actor starts with.
pub struct SandboxArgs {
    /// The node.
    pub node: Weak<NodeContext>,
    /// The node's environments.
    pub sandboxes: Weak<super::Sandboxes>,
    /// The environment.
    pub id: SandboxId,
    /// Whether this incarnation replaces one that failed.
    pub restarted: bool,
}

impl Actor for SandboxActor {
    type Msg = SandboxMsg;
    type State = SandboxState;
    type Arguments = SandboxArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let ctx = args.node.upgrade().ok_or("the node is stopping")?;
        let id = args.id;
        let (row, lost) = ctx
            .store
            .write(move |tx| {
                let Some(row) = table::get(tx, id)? else {
                    return Ok(None);
                };
                let lost = table::mark_lost(tx, id)?;
                Ok(Some((row, lost)))
            })
            .await?
            .ok_or_else(|| format!("there is no environment {id}"))?;
        if row.stopped {
            return Err(format!("environment {id} is stopped").into());
        }
        if !lost.is_empty() {
            tracing::warn!(
                sandbox = %id,
                restarted = args.restarted,
                lost = ?lost,
                "commands cut short when this environment's actor ended are reported lost, not run again"
            );
        }
        let settings = ctx.settings.environments.clone();
        let workdir = super::workdir(&ctx.home, id);
        prepare_workdir(&workdir, row.uid)?;
        let house = super::api::house_policy(&ctx.store, row.house)
            .await?
            .map_or_else(|| row.house.to_string(), |(name, _)| name);
        let mut group = None;
        let place = if row.sandboxed {
            let sandbox = Sandbox::detect().map_err(|why| why.clone())?.clone();
            let sandboxes = args.sandboxes.upgrade().ok_or("the node is stopping")?;
            let group_made = sandboxes.group(id, || {
                Cgroup::create(
                    &id.to_string(),
                    GroupLimits {
                        memory_bytes: settings.memory_bytes(),
                        pids: settings.processes,
                        cpu_percent: settings.cpu_percent,
                    },
                )
            });
            let mut jail = super::jail_for(&settings, &row, &workdir, group_made.as_ref());
            group = group_made;
            // Installed outside executors run here too (`delegate_task`).
            jail.binds = super::executor_binds(&ctx.home);
            // With the machine's network there is no loopback of its own
            // to listen on: neither the relay nor the proxy.
            let serve = if settings.network {
                None
            } else {
                let relay = Relay::new(id.to_string(), super::relay::offered(&ctx));
                jail.listen.push(super::relay::PORT);
                jail.env.extend(super::relay::environment());
                let egress = egress_of(&ctx, &settings, row.house, &relay).await?;
                if egress.is_some() {
                    jail.listen.push(super::egress::PORT);
                    jail.env.extend(super::egress::environment());
                }
                let serve: OnConnection = Arc::new(move |port, stream, stopped| match port {
                    super::relay::PORT => relay.serve(stream, stopped),
                    super::egress::PORT => {
                        if let Some(egress) = &egress {
                            egress.serve(stream, stopped);
                        }
                    }
                    // Not listened on: dropping it closes it.
                    _ => drop(stream),
                });
                Some(serve)
            };
            Place::Jailed(sandbox, Box::new(jail), serve)
        } else {
            Place::Unsandboxed
        };
        let idle = settings.idle();
        if let Some(idle) = idle {
            schedule_idle_check(&myself, idle);
        }
        Ok(SandboxState {
            node: args.node,
            sandboxes: args.sandboxes,
            id,
            workdir,
            place,
            zygote: ZygoteSlot::default(),
            running: HashMap::new(),
            last_used: Instant::now(),
            idle,
            quota: Quota::of(&settings),
            group,
            house,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SandboxMsg::Run {
                command,
                timeout,
                watch,
                free_space,
                reply,
            } => {
                state.last_used = Instant::now();
                let run = Order {
                    command,
                    timeout,
                    watch,
                    free_space,
                };
                start(&myself, state, run, reply);
            }
            SandboxMsg::Touch(reply) => {
                state.last_used = Instant::now();
                let _ = reply.send(());
            }
            SandboxMsg::Ended(call) => {
                state.last_used = Instant::now();
                // Finished: aborting it on drop does nothing.
                state.running.remove(&call);
            }
            SandboxMsg::IdleCheck => {
                let Some(idle) = state.idle else {
                    return Ok(());
                };
                let quiet = state.last_used.elapsed();
                if state.running.is_empty() && quiet >= idle {
                    if let Some(sandboxes) = state.sandboxes.upgrade() {
                        sandboxes.passivate(state.id, myself.get_id());
                    }
                } else {
                    schedule_idle_check(&myself, idle.saturating_sub(quiet).max(idle / 8));
                }
            }
            SandboxMsg::Stop(reply) => {
                state.running.clear();
                state.zygote.clear().await;
                if let Some(sandboxes) = state.sandboxes.upgrade() {
                    sandboxes.remove_group(state.id);
                }
                let _ = reply.send(());
                myself.stop(Some("stopped".into()));
            }
            SandboxMsg::Fail => {
                return Err("a failure injected by a test".into());
            }
        }
        Ok(())
    }
}

fn schedule_idle_check(myself: &ActorRef<SandboxMsg>, after: Duration) {
    let me = myself.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let _ = me.send_message(SandboxMsg::IdleCheck);
    });
}

/// What the environment's egress proxy allows: `[environments] egress` and
/// the house's own list; `None` when both are empty (no proxy at all).
/// Through it, `relay` is reached too.
async fn egress_of(
    ctx: &NodeContext,
    settings: &troupe_runtime::environment::EnvironmentSettings,
    house: troupe_runtime::id::HouseId,
    relay: &Relay,
) -> Result<Option<super::egress::Egress>, ActorProcessingErr> {
    let (name, policy) = super::api::house_policy(&ctx.store, house)
        .await?
        .unwrap_or_default();
    let mut allow = settings.egress.clone();
    for endpoint in policy.egress {
        if !allow.contains(&endpoint) {
            allow.push(endpoint);
        }
    }
    Ok((!allow.is_empty()).then(|| super::egress::Egress {
        allow: Arc::new(allow),
        house: name,
        relay: Some(relay.clone()),
    }))
}

/// Makes the workdir (owned by the environment's user, when it has one).
fn prepare_workdir(workdir: &Path, uid: Option<u32>) -> Result<(), String> {
    std::fs::create_dir_all(workdir)
        .map_err(|e| format!("could not make the workdir {}: {e}", workdir.display()))?;
    if let Some(uid) = uid {
        std::os::unix::fs::chown(workdir, Some(uid), Some(uid))
            .map_err(|e| format!("could not give the workdir to user {uid}: {e}"))?;
    }
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(workdir, std::fs::Permissions::from_mode(0o711))
        .map_err(|e| format!("could not set the workdir's mode: {e}"))?;
    Ok(())
}

/// A command to run, as the caller asked.
struct Order {
    command: String,
    timeout: Duration,
    watch: Option<Watch>,
    free_space: bool,
}

/// Starts a command's task.
fn start(
    myself: &ActorRef<SandboxMsg>,
    state: &mut SandboxState,
    order: Order,
    reply: RpcReplyPort<Result<CommandOutcome, String>>,
) {
    let call = MsgId::new().to_string();
    let (node, id, workdir, place, quota, group, house) = (
        state.node.clone(),
        state.id,
        state.workdir.clone(),
        state.place.clone(),
        state.quota,
        state.group.clone(),
        state.house.clone(),
    );
    let zygote = state.zygote.clone();
    let me = myself.clone();
    let key = call.clone();
    let task = tokio::spawn(async move {
        let spot = Spot {
            node: &node,
            id,
            workdir: &workdir,
            place: &place,
            zygote: &zygote,
            quota,
            group: group.as_ref(),
            house: &house,
        };
        let outcome = run(&spot, &call, &order).await;
        let _ = reply.send(outcome);
        let _ = me.send_message(SandboxMsg::Ended(call));
    });
    state.running.insert(key, Running(task));
}

/// Where a command runs: its environment and what the actor holds for it.
struct Spot<'a> {
    node: &'a Weak<NodeContext>,
    id: SandboxId,
    workdir: &'a Path,
    place: &'a Place,
    zygote: &'a ZygoteSlot,
    quota: Quota,
    group: Option<&'a Cgroup>,
    house: &'a str,
}

/// A command started: in the sandbox's process, or on the machine (an
/// unsandboxed environment).
enum Job {
    Jailed {
        zygote: Arc<Zygote>,
        id: u64,
        ended: tokio::sync::oneshot::Receiver<Exit>,
    },
    Host(tokio::process::Child),
}

/// How a job ended, or that its outcome is lost.
enum Ended {
    As(String),
    Lost,
}

impl Job {
    async fn wait(&mut self) -> Ended {
        match self {
            Job::Jailed { ended, .. } => match ended.await {
                Ok(Exit::Code(code)) => Ended::As(format!("[exit {code}]")),
                Ok(Exit::Signal(9)) => Ended::As(
                    "[killed by signal 9: a limit was reached (memory, or stopped)]".into(),
                ),
                Ok(Exit::Signal(signal)) => Ended::As(format!("[killed by signal {signal}]")),
                Ok(Exit::Failed(why)) => Ended::As(format!("[did not start: {why}]")),
                Err(_) => Ended::Lost,
            },
            Job::Host(child) => Ended::As(match child.wait().await {
                Ok(status) => ending_of(status),
                Err(e) => format!("[lost: {e}]"),
            }),
        }
    }

    async fn kill(&self) {
        match self {
            Job::Jailed { zygote, id, .. } => zygote.kill(*id).await,
            Job::Host(child) => kill_group(child.id()),
        }
    }
}

async fn run(spot: &Spot<'_>, call: &str, order: &Order) -> Result<CommandOutcome, String> {
    let (id, workdir) = (spot.id, spot.workdir);
    let (command, timeout, watch) = (order.command.as_str(), order.timeout, order.watch.as_ref());
    let ctx = spot.node.upgrade().ok_or("the node is stopping")?;
    let dir = workdir.to_path_buf();
    let used = tokio::task::spawn_blocking(move || quota::usage(&dir))
        .await
        .unwrap_or_default();
    // Freeing space, a command may not make the workdir grow; otherwise it
    // may not start over the quota.
    let held_to = match (spot.quota.passed(used), order.free_space) {
        (Some(passed), false) => {
            return Err(quota::refusal(
                &passed,
                spot.house,
                &id.to_string(),
                workdir,
            ))
        }
        (_, true) => spot.quota.at_least(used),
        (None, false) => spot.quota,
    };
    let (owned_call, owned_command) = (call.to_string(), command.to_string());
    ctx.store
        .write(move |tx| table::command_started(tx, &owned_call, id, &owned_command))
        .await
        .map_err(|e| e.to_string())?;
    drop(ctx);
    let started = Instant::now();
    let outcome = match supervise(spot, held_to, command, timeout, started, watch).await {
        Ok(outcome) => outcome,
        Err(failure) => {
            // Its sandbox died under it: lost, never run again. (One that
            // did not start ended without an exit code.)
            if let Some(ctx) = spot.node.upgrade() {
                let owned = call.to_string();
                let lost = matches!(failure, Failure::Lost(_));
                let _ = ctx
                    .store
                    .write(move |tx| {
                        if lost {
                            table::command_lost(tx, &owned)
                        } else {
                            table::command_ended(tx, &owned, None)
                        }
                    })
                    .await;
            }
            return Err(match failure {
                Failure::Lost(why) | Failure::NotStarted(why) => why,
            });
        }
    };
    if let Some(ctx) = spot.node.upgrade() {
        let owned = call.to_string();
        let code = outcome.exit_code;
        let _ = ctx
            .store
            .write(move |tx| table::command_ended(tx, &owned, code))
            .await;
    }
    Ok(outcome)
}

/// Why a command has no outcome.
enum Failure {
    /// It did not start.
    NotStarted(String),
    /// Its sandbox died while it ran.
    Lost(String),
}

/// Starts the command, watches its wall time and the workdir's quota,
/// gathers its output.
async fn supervise(
    spot: &Spot<'_>,
    quota: Quota,
    command: &str,
    timeout: Duration,
    started: Instant,
    watch: Option<&Watch>,
) -> Result<CommandOutcome, Failure> {
    let cancel = watch.map(|w| w.cancel.clone()).unwrap_or_default();
    let not_started = |e: String| Failure::NotStarted(e);
    let workdir = spot.workdir;
    let oom_kills = || spot.group.and_then(Cgroup::oom_kills);
    let oom_before = oom_kills();
    let (sender, mut pipe) =
        tokio::net::unix::pipe::pipe().map_err(|e| not_started(e.to_string()))?;
    let out = sender
        .into_blocking_fd()
        .map_err(|e| not_started(e.to_string()))?;
    let mut job = match spot.place {
        Place::Jailed(sandbox, jail, serve) => {
            let zygote = spot
                .zygote
                .get(sandbox, jail, serve.clone())
                .await
                .map_err(not_started)?;
            let started = zygote.run(command, out).await.map_err(not_started)?;
            Job::Jailed {
                zygote,
                id: started.id,
                ended: started.ended,
            }
        }
        Place::Unsandboxed => {
            let err = out.try_clone().map_err(|e| not_started(e.to_string()))?;
            let mut c = tokio::process::Command::new("bash");
            c.arg("-c")
                .arg(command)
                .env_clear()
                .envs(troupe_runtime::sandbox::jail::environment())
                .env("HOME", workdir)
                .current_dir(workdir)
                .stdin(Stdio::null())
                .stdout(Stdio::from(out))
                .stderr(Stdio::from(err))
                .process_group(0)
                .kill_on_drop(true);
            let child = c
                .spawn()
                .map_err(|e| not_started(format!("the command could not start: {e}")))?;
            Job::Host(child)
        }
    };
    let mut output = BoundedOutput::new(KEPT, KEPT);
    let mut buf = vec![0_u8; 64 * 1024];
    let deadline = tokio::time::sleep(timeout);
    tokio::pin!(deadline);
    let mut quota_check = tokio::time::interval(Duration::from_millis(250));
    quota_check.reset();
    let mut pipe_open = true;
    let mut cut: Option<String> = None;
    let ended = loop {
        tokio::select! {
            read = pipe.read(&mut buf), if pipe_open => match read {
                Ok(0) | Err(_) => pipe_open = false,
                Ok(n) => {
                    output.push(&buf[..n]);
                    if let Some(w) = watch {
                        let _ = w.tap.send(bytes::Bytes::copy_from_slice(&buf[..n]));
                    }
                }
            },
            ended = job.wait() => break ended,
            () = cancel.cancelled(), if cut.is_none() => {
                job.kill().await;
                cut = Some("[killed: stopped]".into());
            }
            () = &mut deadline, if cut.is_none() => {
                job.kill().await;
                cut = Some(format!("[killed: timeout after {} s]", timeout.as_secs()));
            }
            _ = quota_check.tick(), if cut.is_none() => {
                let dir = workdir.to_path_buf();
                let used = tokio::task::spawn_blocking(move || quota::usage(&dir))
                    .await
                    .unwrap_or_default();
                if quota.passed(used).is_some() {
                    job.kill().await;
                    cut = Some(quota.ending(used));
                }
            }
        }
    };
    let ending = match (ended, cut) {
        (Ended::Lost, _) => {
            return Err(Failure::Lost(format!(
                "the command's outcome is lost: environment {}'s sandbox process ended while it \
                 ran (its processes were killed). It was not run again; run it again if it is \
                 safe to",
                spot.id
            )))
        }
        (Ended::As(_), Some(cut)) => cut,
        (Ended::As(ending), None) if ending.starts_with("[killed by signal 9") => {
            match (oom_before, oom_kills()) {
                (Some(before), Some(after)) if after > before => {
                    "[killed by signal 9: the environment's memory limit was reached — by this \
                     command's memory, or by the kernel's for the files it made (each costs \
                     some); the environment's other commands run on]"
                        .to_string()
                }
                _ => ending,
            }
        }
        (Ended::As(ending), None) => ending,
    };
    // The command has ended, and what it left running was killed: the
    // pipe closes soon.
    let drain_until = tokio::time::Instant::now() + Duration::from_secs(1);
    while pipe_open && tokio::time::Instant::now() < drain_until {
        match tokio::time::timeout(Duration::from_millis(200), pipe.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => {
                output.push(&buf[..n]);
                if let Some(w) = watch {
                    let _ = w.tap.send(bytes::Bytes::copy_from_slice(&buf[..n]));
                }
            }
            _ => pipe_open = false,
        }
    }
    output.finish();
    let exit_code = ending
        .strip_prefix("[exit ")
        .and_then(|r| r.strip_suffix(']'))
        .and_then(|n| n.parse().ok());
    Ok(CommandOutcome {
        environment: spot.id,
        exit_code,
        ending,
        output: output.text(),
        output_bytes: output.total(),
        sandboxed: matches!(spot.place, Place::Jailed(..)),
        millis: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

fn ending_of(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("[exit {code}]"),
        (None, Some(9)) => "[killed by signal 9: a limit was reached (memory, or stopped)]".into(),
        (None, Some(signal)) => format!("[killed by signal {signal}]"),
        (None, None) => "[exit -1]".into(),
    }
}

fn kill_group(pgid: Option<u32>) {
    if let Some(pid) = pgid
        .and_then(|p| i32::try_from(p).ok())
        .and_then(rustix::process::Pid::from_raw)
    {
        let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
    }
}
