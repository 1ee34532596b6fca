//! What routines need of the scheduler, whether or not one fires in this
//! process: its options (clock, lease, holder, catch-up, how it wakes), the
//! [`RoutineService`] the node holds (boot's typed handles), the scheduler actor's
//! messages, and how a run ends ([`RunEnd`]). The scheduler
//! (`super::scheduler`) and the runs (`super::run`) both build on it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use ractor::{ActorRef, RpcReplyPort};
use serde::{Deserialize, Serialize};
use tokio::sync::broadcast;
use troupe_runtime::bus::Bus;
use troupe_runtime::id::{ConversationId, RoutineId, RunId};

use super::clock::{Clock, SystemClock};
use super::table::{CatchUp, Due, RunStatus};
use crate::node::Node;

/// How the scheduler wakes up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Wake {
    /// On timers, at each next fire (a real clock).
    Timers,
    /// Only when told ([`SchedulerHandle::tick`]); for a virtual clock.
    Manual,
}

/// How the scheduler runs.
#[derive(Clone)]
pub struct SchedulerOptions {
    /// Where the time comes from.
    pub clock: Arc<dyn Clock>,
    /// How long a claim holds before another scheduler may settle it.
    pub lease: Duration,
    /// The catch-up policy of new routines.
    pub catch_up: CatchUp,
    /// This scheduler's holder id, unique per process.
    pub holder: String,
    /// How it wakes up.
    pub wake: Wake,
}

impl std::fmt::Debug for SchedulerOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SchedulerOptions")
            .field("lease", &self.lease)
            .field("catch_up", &self.catch_up)
            .field("holder", &self.holder)
            .field("wake", &self.wake)
            .finish_non_exhaustive()
    }
}

impl Default for SchedulerOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            lease: Duration::from_secs(60),
            catch_up: CatchUp::RunOnce,
            holder: new_holder(),
            wake: Wake::Timers,
        }
    }
}

/// A holder id for this process: `node-<pid>-<random>`.
pub fn new_holder() -> String {
    let random = uuid::Uuid::now_v7().simple().to_string();
    let tail = random
        .get(random.len().saturating_sub(8)..)
        .unwrap_or(&random);
    format!("node-{}-{tail}", std::process::id())
}

/// What routines need of the scheduler, held by the node (boot's typed
/// handles).
pub struct RoutineService {
    options: SchedulerOptions,
    pub(super) actor: RwLock<Option<ActorRef<SchedulerMsg>>>,
    stopping: AtomicBool,
    ended: Bus<RunEnd>,
    /// The runs in progress in this process (routine names by run), as
    /// the actor tree shows them.
    pub(super) runs: dashmap::DashMap<RunId, String>,
}

impl std::fmt::Debug for RoutineService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RoutineService")
            .field("options", &self.options)
            .field("live", &self.is_live())
            .finish_non_exhaustive()
    }
}

impl RoutineService {
    fn new(options: SchedulerOptions) -> Self {
        Self {
            options,
            actor: RwLock::new(None),
            stopping: AtomicBool::new(false),
            ended: Bus::new(256),
            runs: dashmap::DashMap::new(),
        }
    }

    /// The node's service; one with default options if none was configured.
    pub fn of(node: &Node) -> Arc<RoutineService> {
        let slot = &node.features().routines;
        if let Some(service) = slot.read().as_ref() {
            return Arc::clone(service);
        }
        Arc::clone(
            slot.write()
                .get_or_insert_with(|| Arc::new(RoutineService::new(SchedulerOptions::default()))),
        )
    }

    /// Gives the node a service with `options`, without a scheduler firing
    /// (short commands: routines can be managed, and fire where a
    /// scheduler runs).
    pub fn configure(node: &Node, options: SchedulerOptions) -> Arc<RoutineService> {
        let service = Arc::new(RoutineService::new(options));
        *node.features().routines.write() = Some(Arc::clone(&service));
        service
    }

    /// How the scheduler runs.
    pub fn options(&self) -> &SchedulerOptions {
        &self.options
    }

    /// Whether a scheduler fires routines in this process.
    pub fn is_live(&self) -> bool {
        self.actor.read().is_some() && !self.is_stopping()
    }

    /// Marks the process as stopping: notices are then only committed,
    /// and delivered at the next start.
    pub fn mark_stopping(&self) {
        self.stopping.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Every run's end, as it happens.
    pub fn subscribe(&self) -> broadcast::Receiver<RunEnd> {
        self.ended.subscribe()
    }

    pub(crate) fn announce(&self, end: RunEnd) {
        let _ = self.ended.send(end);
    }

    /// Tells the scheduler the routines changed, so it recomputes when to wake.
    pub fn rearm(&self) {
        if let Some(actor) = self.actor.read().as_ref() {
            let _ = actor.send_message(SchedulerMsg::Rearm);
        }
    }
}

/// The scheduler actor's messages.
#[derive(Debug)]
pub enum SchedulerMsg {
    /// Look now; reply with what was fired.
    Tick(Option<RpcReplyPort<Result<Due, String>>>),
    /// A timer went off (stale when its generation is not the latest).
    Wake(u64),
    /// The routines changed: recompute the next wake-up.
    Rearm,
    /// Start-up: settle what was missed while nothing ran.
    Recover(RpcReplyPort<Result<Due, String>>),
    /// Start this claimed run (one made by hand) as a child.
    Run(Box<super::table::Claim>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for SchedulerMsg {}

/// How a run ended, as the scheduler announces it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEnd {
    /// The run.
    pub run_id: RunId,
    /// The routine.
    pub routine_id: RoutineId,
    /// Its name.
    pub name: String,
    /// Its owner bot.
    pub owner_bot: String,
    /// The run's conversation, if it started.
    pub conversation: Option<ConversationId>,
    /// `Done` or `Failed`.
    pub status: RunStatus,
    /// The final text, or why it failed.
    pub summary: String,
    /// Whether the owner was sent a notice.
    pub notified: bool,
}

/// The runs in progress in the actor tree, under the scheduler.
pub(crate) struct Runs(pub(crate) Arc<RoutineService>);

impl crate::node::Branch for Runs {
    fn live(&self) -> Vec<crate::node::ActorInfo> {
        self.0
            .runs
            .iter()
            .map(|run| crate::node::ActorInfo {
                kind: "routine_run".into(),
                id: run.key().to_string(),
                parent: Some("scheduler".into()),
                state: "running".into(),
                restarts: 0,
            })
            .collect()
    }
}
