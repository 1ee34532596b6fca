//! The environment actor: one environment, its running commands, its
//! control group and its idle clock.
//!
//! It is activated by the `environments` router on its first message and
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
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use troupe_runtime::environment::CommandOutcome;
use troupe_runtime::id::{EnvironmentId, MsgId};
use troupe_runtime::sandbox::cgroup::{Cgroup, GroupLimits};
use troupe_runtime::sandbox::jail::Jail;
use troupe_runtime::sandbox::zygote::{OnConnection, Zygote};
use troupe_runtime::sandbox::Sandbox;
use troupe_runtime::store::environments as table;

use super::quota::Quota;
use super::relay::Relay;
use crate::node::{Node, WeakNode};
use command::{run, Spot};

mod command;

/// An environment actor's messages.
#[derive(Debug)]
pub enum EnvironmentMsg {
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

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for EnvironmentMsg {}

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
pub struct EnvironmentActor;

/// A running command's task, aborted (and its process killed) when dropped.
struct Running(tokio::task::JoinHandle<()>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// What the actor keeps.
pub struct EnvironmentState {
    node: WeakNode,
    environments: Weak<super::Environments>,
    id: EnvironmentId,
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
pub struct EnvironmentArgs {
    /// The node.
    pub(crate) node: WeakNode,
    /// The node's environments.
    pub environments: Weak<super::Environments>,
    /// The environment.
    pub id: EnvironmentId,
    /// Whether this incarnation replaces one that failed.
    pub restarted: bool,
}

impl Actor for EnvironmentActor {
    type Msg = EnvironmentMsg;
    type State = EnvironmentState;
    type Arguments = EnvironmentArgs;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let ctx = args.node.upgrade().ok_or("the node is stopping")?;
        let id = args.id;
        let (row, lost) = ctx
            .store()
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
        let settings = ctx.settings().environments.clone();
        let workdir = super::workdir(ctx.home(), id);
        prepare_workdir(&workdir, row.uid)?;
        let house = super::api::house_policy(ctx.store(), row.house)
            .await?
            .map_or_else(|| row.house.to_string(), |(name, _)| name);
        let mut group = None;
        let place = if row.sandboxed {
            let sandbox = Sandbox::detect().map_err(|why| why.clone())?.clone();
            let environments = args.environments.upgrade().ok_or("the node is stopping")?;
            let group_made = environments.group(id, || {
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
            jail.binds = super::executor_binds(ctx.home());
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
        Ok(EnvironmentState {
            node: args.node,
            environments: args.environments,
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
            EnvironmentMsg::Run {
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
            EnvironmentMsg::Touch(reply) => {
                state.last_used = Instant::now();
                let _ = reply.send(());
            }
            EnvironmentMsg::Ended(call) => {
                state.last_used = Instant::now();
                // Finished: aborting it on drop does nothing.
                state.running.remove(&call);
            }
            EnvironmentMsg::IdleCheck => {
                let Some(idle) = state.idle else {
                    return Ok(());
                };
                let quiet = state.last_used.elapsed();
                if state.running.is_empty() && quiet >= idle {
                    if let Some(environments) = state.environments.upgrade() {
                        environments.passivate(state.id, myself.get_id());
                    }
                } else {
                    schedule_idle_check(&myself, idle.saturating_sub(quiet).max(idle / 8));
                }
            }
            EnvironmentMsg::Stop(reply) => {
                state.running.clear();
                state.zygote.clear().await;
                if let Some(environments) = state.environments.upgrade() {
                    environments.remove_group(state.id);
                }
                let _ = reply.send(());
                myself.stop(Some("stopped".into()));
            }
            EnvironmentMsg::Fail => {
                return Err("a failure injected by a test".into());
            }
        }
        Ok(())
    }
}

fn schedule_idle_check(myself: &ActorRef<EnvironmentMsg>, after: Duration) {
    let me = myself.clone();
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let _ = me.send_message(EnvironmentMsg::IdleCheck);
    });
}

/// What the environment's egress proxy allows: `[environments] egress` and
/// the house's own list; `None` when both are empty (no proxy at all).
/// Through it, `relay` is reached too.
async fn egress_of(
    ctx: &Node,
    settings: &troupe_runtime::environment::EnvironmentSettings,
    house: troupe_runtime::id::HouseId,
    relay: &Relay,
) -> Result<Option<super::egress::Egress>, ActorProcessingErr> {
    let (name, policy) = super::api::house_policy(ctx.store(), house)
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
    myself: &ActorRef<EnvironmentMsg>,
    state: &mut EnvironmentState,
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
        let _ = me.send_message(EnvironmentMsg::Ended(call));
    });
    state.running.insert(key, Running(task));
}
