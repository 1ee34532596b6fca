//! The scheduler: one actor that fires routines when they are due.
//!
//! The routine table is the truth about what is due; the actor only decides
//! when to look. It asks the table for the earliest next fire, sleeps until
//! then (never more than [`MAX_NAP`], so routines made by another process
//! and jumps of the wall clock are noticed), claims what is due in one
//! write transaction and starts each claimed run as an actor of its own,
//! linked to it: a temporary child, never restarted (it may already have
//! acted); one that fails is settled as failed and reported to its owner
//! by the scheduler's exit handling. Claims
//! carry this scheduler's holder id and a lease, so two processes sharing a
//! home fire each occurrence once, and a process that dies mid-run is found
//! out when its lease runs out.
//!
//! The time comes from a [`Clock`]. A [`super::VirtualClock`] cannot wake a
//! sleeper, so a scheduler on one runs without timers ([`Wake::Manual`]) and
//! looks only when told: [`SchedulerHandle::tick`].
//!
//! What `cronjob_manage` needs of the scheduler — its clock, lease, holder,
//! catch-up policy, whether it runs — sits in a [`RoutineService`] in the
//! node's services, there even when no scheduler fires in this process.

use std::sync::Arc;
use std::time::Duration;
use troupe_runtime::supervise::{ChildSpec, Restart};

use std::collections::HashMap;

use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use troupe_runtime::supervise::ExitReason;

use super::run::{self, show, to_store, user_tz, RunEnd};
use super::table::{self, Claim, Due, Interrupted, Missed};
use crate::node::Node;

/// The longest the scheduler sleeps without looking at the table.
pub const MAX_NAP: Duration = Duration::from_secs(60);

/// Why the scheduler could not do what was asked.
#[derive(Debug, thiserror::Error)]
pub enum SchedulerError {
    /// The store failed.
    #[error("routine scheduler: {0}")]
    Store(#[from] troupe_runtime::store::StoreError),
    /// The actor could not be started or reached.
    #[error("routine scheduler: {0}; restart troupe")]
    Actor(String),
}

pub use super::service::{new_holder, RoutineService, SchedulerMsg, SchedulerOptions, Wake};

/// The scheduler actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Scheduler;

/// The actor's state.
pub struct SchedulerState {
    node: Node,
    service: Arc<RoutineService>,
    timer: Option<JoinHandle<()>>,
    generation: u64,
    /// The runs in progress, each a child actor: their claims by actor.
    runs: HashMap<ActorId, (ActorCell, Claim)>,
}

impl Actor for Scheduler {
    type Msg = SchedulerMsg;
    type State = SchedulerState;
    type Arguments = (Node, Arc<RoutineService>);

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        (node, service): Self::Arguments,
    ) -> Result<SchedulerState, ActorProcessingErr> {
        Ok(SchedulerState {
            node,
            service,
            timer: None,
            generation: 0,
            runs: HashMap::new(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            SchedulerMsg::Tick(reply) => {
                let due = pass(&myself, state, false).await;
                arm(&myself, state).await;
                if let Some(reply) = reply {
                    let _ = reply.send(due);
                }
            }
            SchedulerMsg::Wake(generation) => {
                if generation == state.generation {
                    if let Err(e) = pass(&myself, state, false).await {
                        tracing::error!(error = %e, "the routine scheduler could not look for due routines");
                    }
                    arm(&myself, state).await;
                }
            }
            SchedulerMsg::Rearm => arm(&myself, state).await,
            SchedulerMsg::Run(claim) => start_run(&myself, state, *claim).await,
            SchedulerMsg::Recover(reply) => {
                let due = pass(&myself, state, true).await;
                arm(&myself, state).await;
                let _ = reply.send(due);
            }
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(timer) = state.timer.take() {
            timer.abort();
        }
        // Stopped on purpose (`SchedulerHandle::stop`): the runs in
        // progress go on until the node stops, then settle themselves.
        for (cell, claim) in state.runs.values() {
            cell.unlink(_myself.get_cell());
            state.service.runs.remove(&claim.run_id);
        }
        state.runs.clear();
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        _myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut SchedulerState,
    ) -> Result<(), ActorProcessingErr> {
        let Some((cell, reason)) = ExitReason::from_event(&event) else {
            return Ok(());
        };
        let Some((_, claim)) = state.runs.remove(&cell.get_id()) else {
            return Ok(());
        };
        state.service.runs.remove(&claim.run_id);
        if reason.is_abnormal() {
            // Not restarted: it may already have acted. Settled as failed
            // and reported, in one commit.
            tracing::error!(run = %claim.run_id, %reason, "a routine run failed; it is reported as failed");
            run::crashed(&state.node, &state.service, &claim, &reason.to_string()).await;
        }
        Ok(())
    }
}

/// Claims what is due (or, at start-up, settles what was missed), reports
/// missed and interrupted runs, and starts the claimed ones. The reports are
/// enqueued in the transaction that records them, so a crash right after
/// it cannot lose one.
async fn pass(
    myself: &ActorRef<SchedulerMsg>,
    state: &mut SchedulerState,
    recovering: bool,
) -> Result<Due, String> {
    let options = state.service.options();
    let now = options.clock.now();
    let (holder, lease) = (options.holder.clone(), options.lease);
    let tz = user_tz(&state.node);
    let node = state.node.clone();
    let (due, notices) = state
        .node
        .store()
        .write(move |tx| {
            let due = if recovering {
                table::recover(tx, now, &holder, lease)
            } else {
                table::claim_due(tx, now, &holder, lease)
            };
            let due = due.map_err(to_store)?;
            let reports = due
                .missed
                .iter()
                .map(|m| (m.owner_bot.as_str(), missed_notice(m, tz)))
                .chain(
                    due.interrupted
                        .iter()
                        .map(|i| (i.owner_bot.as_str(), interrupted_notice(i, tz))),
                );
            let notices: Vec<_> = reports
                .filter_map(|(owner, (text, data))| run::envelope(&node, owner, text, data))
                .collect();
            for notice in &notices {
                troupe_runtime::store::mailbox::enqueue(tx, notice)?;
            }
            Ok((due, notices))
        })
        .await
        .map_err(|e| e.to_string())?;
    if !state.service.is_stopping() {
        for notice in notices {
            if let Err(e) = state.node.route(notice).await {
                // Committed: the next start delivers it.
                tracing::error!(error = %e, "could not deliver a routine notice");
            }
        }
    }
    for claim in &due.claims {
        start_run(myself, state, claim.clone()).await;
    }
    Ok(due)
}

/// Starts `claim`'s run as a child of the scheduler.
async fn start_run(myself: &ActorRef<SchedulerMsg>, state: &mut SchedulerState, claim: Claim) {
    let args = (
        state.node.clone(),
        Arc::clone(&state.service),
        claim.clone(),
    );
    match Actor::spawn_linked(None, run::RoutineRun, args, myself.get_cell()).await {
        Ok((actor, _)) => {
            let cell = actor.get_cell();
            state.service.runs.insert(claim.run_id, claim.name.clone());
            state.runs.insert(cell.get_id(), (cell, claim));
        }
        Err(e) => {
            let why = format!("its actor did not start: {e}");
            run::crashed(&state.node, &state.service, &claim, &why).await;
        }
    }
}

fn missed_notice(m: &Missed, tz: chrono_tz::Tz) -> (String, serde_json::Value) {
    let count = if m.count_is_lower_bound {
        format!("at least {}", m.count)
    } else {
        m.count.to_string()
    };
    let span = if m.first == m.last {
        format!("at {}", show(m.first, tz))
    } else {
        format!("from {} to {}", show(m.first, tz), show(m.last, tz))
    };
    let then = match m.caught_up_by {
        Some(run) => format!("One run ({run}) is made now in their place."),
        None => "They were skipped (catch-up: skip); it fires next as scheduled.".into(),
    };
    let text = format!(
        "Routine `{}` missed {count} occurrence(s) {span}, while no scheduler was running. {then}",
        m.name
    );
    let data = serde_json::json!({
        "routine_id": m.routine_id.to_string(),
        "name": m.name,
        "status": "missed",
        "count": m.count,
        "first": table::fmt_ts(m.first),
        "last": table::fmt_ts(m.last),
        "caught_up_by": m.caught_up_by.map(|r| r.to_string()),
    });
    (text, data)
}

fn interrupted_notice(i: &Interrupted, tz: chrono_tz::Tz) -> (String, serde_json::Value) {
    let text = format!(
        "Routine `{}`: the run scheduled for {} was interrupted (`{}` stopped before it ended). \
         It was not re-run, since it may already have acted{}.",
        i.name,
        show(i.scheduled_for, tz),
        i.claimed_by,
        i.conversation_id
            .map(|c| format!("; its conversation is {c}"))
            .unwrap_or_default(),
    );
    let data = serde_json::json!({
        "routine_id": i.routine_id.to_string(),
        "run_id": i.run_id.to_string(),
        "name": i.name,
        "status": "interrupted",
        "scheduled_for": table::fmt_ts(i.scheduled_for),
        "conversation": i.conversation_id.map(|c| c.to_string()),
    });
    (text, data)
}

/// Sets the timer for the next look (timers only).
async fn arm(myself: &ActorRef<SchedulerMsg>, state: &mut SchedulerState) {
    if let Some(timer) = state.timer.take() {
        timer.abort();
    }
    let options = state.service.options();
    if options.wake == Wake::Manual {
        return;
    }
    let next = match state.node.store().read(|c| Ok(table::next_fire(c))).await {
        Ok(Ok(next)) => next,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "could not read the next routine fire time");
            None
        }
        Err(e) => {
            tracing::error!(error = %e, "could not read the next routine fire time");
            None
        }
    };
    let wait = next
        .map(|at| {
            (at - options.clock.now())
                .to_std()
                .unwrap_or(Duration::ZERO)
                // Wake just after, never just before.
                .saturating_add(Duration::from_millis(5))
        })
        .unwrap_or(MAX_NAP)
        .min(MAX_NAP);
    state.generation += 1;
    let generation = state.generation;
    let actor = myself.clone();
    state.timer = Some(tokio::spawn(async move {
        tokio::time::sleep(wait).await;
        let _ = actor.send_message(SchedulerMsg::Wake(generation));
    }));
}

/// A running scheduler.
#[derive(Debug, Clone)]
pub struct SchedulerHandle {
    service: Arc<RoutineService>,
    recovered: Due,
}

impl SchedulerHandle {
    /// Starts the scheduler of `node`: puts its [`RoutineService`] in the
    /// node's services, settles what was missed while nothing ran
    /// ([`table::recover`]: missed occurrences follow their catch-up policy
    /// and are reported to their owners), then fires routines as they fall due.
    ///
    /// The scheduler is a child of the node's root supervisor: if it fails,
    /// it is started again and looks for due routines at once.
    pub async fn start(node: &Node, options: SchedulerOptions) -> Result<Self, SchedulerError> {
        let service = RoutineService::configure(node, options);
        node.add_branch(Arc::new(super::service::Runs(Arc::clone(&service))));
        let (owner, shared) = (node.clone(), Arc::clone(&service));
        let started = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let child = ChildSpec::new("scheduler", move |supervisor| {
            let (node, service, started) =
                (owner.clone(), Arc::clone(&shared), Arc::clone(&started));
            async move {
                let args = (node, Arc::clone(&service));
                let (actor, _) = Actor::spawn_linked(None, Scheduler, args, supervisor).await?;
                *service.actor.write() = Some(actor.clone());
                if started.swap(true, std::sync::atomic::Ordering::SeqCst) {
                    // A restart: arm the timer again.
                    actor.send_message(SchedulerMsg::Tick(None))?;
                }
                Ok(actor.get_cell())
            }
        })
        // Stopped on purpose (`stop`), it stays stopped.
        .restart(Restart::Transient);
        node.supervise(child)
            .await
            .map_err(|e| SchedulerError::Actor(format!("could not start: {e}")))?;
        let actor = service
            .actor
            .read()
            .clone()
            .ok_or_else(|| SchedulerError::Actor("it stopped as it started".into()))?;
        let recovered = ractor::call!(actor, SchedulerMsg::Recover)
            .map_err(|e| SchedulerError::Actor(e.to_string()))?
            .map_err(SchedulerError::Actor)?;
        Ok(Self { service, recovered })
    }

    fn actor(&self) -> Result<ActorRef<SchedulerMsg>, SchedulerError> {
        self.service
            .actor
            .read()
            .clone()
            .ok_or_else(|| SchedulerError::Actor("the scheduler has stopped".into()))
    }

    /// What start-up settled: runs caught up, occurrences missed, runs
    /// interrupted.
    pub fn recovered(&self) -> &Due {
        &self.recovered
    }

    /// Looks now and returns what it fired (the claimed runs are started,
    /// not finished: [`SchedulerHandle::subscribe`] tells their ends).
    pub async fn tick(&self) -> Result<Due, SchedulerError> {
        ractor::call!(self.actor()?, |reply| SchedulerMsg::Tick(Some(reply)))
            .map_err(|e| SchedulerError::Actor(e.to_string()))?
            .map_err(SchedulerError::Actor)
    }

    /// Every run's end, as it happens.
    pub fn subscribe(&self) -> broadcast::Receiver<RunEnd> {
        self.service.subscribe()
    }

    /// The service `cronjob_manage` uses.
    pub fn service(&self) -> &Arc<RoutineService> {
        &self.service
    }

    /// This scheduler's holder id.
    pub fn holder(&self) -> &str {
        &self.service.options().holder
    }

    /// Stops firing routines. Runs in progress go on until the node stops;
    /// their reports are then committed and delivered at the next start.
    pub async fn stop(&self) {
        self.service.mark_stopping();
        let actor = self.service.actor.write().take();
        if let Some(actor) = actor {
            let _ = actor
                .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(5)))
                .await;
        }
    }
}
