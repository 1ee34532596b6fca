//! One run of a routine: its own conversation, then a report to the owner.
//!
//! A run is a fresh conversation of the routine's owner bot, of kind
//! [`ActorKind::RoutineRun`], so it gets the routine-run tool set (no
//! `ask_user`: nobody is there to answer; no `cronjob_manage`: a routine
//! cannot make routines). Its prompt is the routine's, under a header that
//! says what it is and how to stay quiet. When the turn ends the run is
//! recorded (`finish_run`) and the owner's conversation is told through the
//! durable mailbox, unless the reply is `[SILENT]`; a failed run is always
//! reported. While the turn runs its lease is renewed, so another
//! scheduler does not take it for dead.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{ActorKind, Address, Envelope, Payload, TurnOutcome, Usage};
use troupe_runtime::store::{mailbox, StoreError};

use super::clock::Clock;
use super::service::RoutineService;
use super::table::{self, Claim, RoutineError, RunStatus};
use crate::node::conversation::Input;
use crate::node::{Node, NodeError, Opening};

/// What a routine's final reply starts with when there is nothing to report.
pub const SILENT: &str = "[SILENT]";

/// The sender of routine notices.
pub const SENDER: &str = "scheduler";

pub use super::service::RunEnd;

/// The user's time zone, from the settings (UTC when the name is not a zone).
pub fn user_tz(node: &Node) -> Tz {
    node.settings().timezone.parse().unwrap_or(Tz::UTC)
}

/// An instant in the user's zone, with UTC beside it:
/// `2026-03-02 09:00 CET (08:00 UTC)`.
pub fn show(at: DateTime<Utc>, tz: Tz) -> String {
    let local = at.with_timezone(&tz);
    if tz == Tz::UTC {
        return format!("{} UTC", at.format("%Y-%m-%d %H:%M"));
    }
    let utc_fmt = if local.date_naive() == at.date_naive() {
        "%H:%M"
    } else {
        "%Y-%m-%d %H:%M"
    };
    format!(
        "{} ({} UTC)",
        local.format("%Y-%m-%d %H:%M %Z"),
        at.format(utc_fmt)
    )
}

/// A routine-table error as a store job's error (so the job rolls back).
pub(crate) fn to_store(e: RoutineError) -> StoreError {
    match e {
        RoutineError::Sqlite(e) => StoreError::from(e),
        other => StoreError::Invalid(other.to_string()),
    }
}

/// The fault point a test arms (with a routine's id) to make its run's actor panic
/// as it starts.
pub const FAULT: &str = "routine_run";

/// One run as an actor, a temporary child of the scheduler: its one
/// message runs the routine to its end ([`execute`]), announces the end on
/// the service and stops. If it fails instead, the scheduler's exit
/// handling settles the run as failed and reports it ([`crashed`]).
pub(super) struct RoutineRun;

/// What a run actor is told: only to run.
pub(super) enum RunMsg {
    Run,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for RunMsg {}

pub(super) struct RunState {
    node: Node,
    service: Arc<RoutineService>,
    claim: Claim,
}

impl ractor::Actor for RoutineRun {
    type Msg = RunMsg;
    type State = RunState;
    type Arguments = (Node, Arc<RoutineService>, Claim);

    async fn pre_start(
        &self,
        myself: ractor::ActorRef<Self::Msg>,
        (node, service, claim): Self::Arguments,
    ) -> Result<Self::State, ractor::ActorProcessingErr> {
        myself.send_message(RunMsg::Run)?;
        Ok(RunState {
            node,
            service,
            claim,
        })
    }

    async fn handle(
        &self,
        myself: ractor::ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ractor::ActorProcessingErr> {
        match message {
            RunMsg::Run => {
                troupe_runtime::fault::check(FAULT, &state.claim.routine_id.to_string());
                let end = execute(&state.node, &state.service, state.claim.clone()).await;
                state.service.announce(end);
                myself.stop(None);
            }
        }
        Ok(())
    }
}

/// Starts `claim`'s run (a run made by hand, `cronjob_manage` run): under
/// the scheduler when one fires routines in this process; else as an actor
/// of its own, whose failure leaves the run claimed until its lease runs
/// out and a scheduler reports it interrupted.
pub async fn start(node: &Node, service: &Arc<RoutineService>, claim: Claim) {
    let scheduler = service.actor.read().clone();
    if let Some(scheduler) = scheduler {
        let run = super::service::SchedulerMsg::Run(Box::new(claim.clone()));
        if scheduler.send_message(run).is_ok() {
            return;
        }
    }
    start_alone(node, service, claim).await
}

async fn start_alone(node: &Node, service: &Arc<RoutineService>, claim: Claim) {
    let args = (node.clone(), Arc::clone(service), claim.clone());
    if let Err(e) = ractor::Actor::spawn(None, RoutineRun, args).await {
        crashed(
            node,
            service,
            &claim,
            &format!("its actor did not start: {e}"),
        )
        .await;
    }
}

/// The run of `claim` failed (its actor panicked): it is recorded as
/// failed and its owner is told, in one commit, and its end announced. A
/// run another scheduler settled meanwhile is left as it is.
pub(super) async fn crashed(node: &Node, service: &RoutineService, claim: &Claim, why: &str) {
    let end = RunEnd {
        run_id: claim.run_id,
        routine_id: claim.routine_id,
        name: claim.name.clone(),
        owner_bot: claim.owner_bot.clone(),
        conversation: None,
        status: RunStatus::Failed,
        summary: format!("the run crashed: {why}"),
        notified: false,
    };
    let options = service.options();
    let notified = settle(
        node,
        service,
        claim,
        &end,
        None,
        options.clock.as_ref(),
        user_tz(node),
    )
    .await;
    service.announce(RunEnd { notified, ..end });
}

/// Runs `claim` to its end: opens its conversation, waits for the turn,
/// records it and reports it.
pub async fn execute(node: &Node, service: &RoutineService, claim: Claim) -> RunEnd {
    let options = service.options();
    let clock = Arc::clone(&options.clock);
    let holder = options.holder.clone();
    let lease = options.lease;
    let tz = user_tz(node);
    let mut end = RunEnd {
        run_id: claim.run_id,
        routine_id: claim.routine_id,
        name: claim.name.clone(),
        owner_bot: claim.owner_bot.clone(),
        conversation: None,
        status: RunStatus::Failed,
        summary: String::new(),
        notified: false,
    };
    let bot = match node.bot(&claim.owner_bot) {
        Ok(bot) => bot,
        Err(e) => {
            end.summary = format!("not run: {e}");
            end.notified = settle(node, service, &claim, &end, None, clock.as_ref(), tz).await;
            return end;
        }
    };
    let conversation = ConversationId::new();
    let now = clock.now();
    let (run, h) = (claim.run_id, holder.clone());
    let started = node
        .store()
        .write(move |tx| table::start_run(tx, run, &h, conversation, now, lease).map_err(to_store))
        .await;
    if let Err(e) = started {
        // Not ours any more (its lease ran out and another scheduler
        // settled it): whoever settled it reports it.
        tracing::warn!(run = %claim.run_id, error = %e, "a claimed routine run could not start");
        end.summary = format!("not started: {e}");
        return end;
    }
    end.conversation = Some(conversation);
    let outcome = converse(node, &claim, bot, conversation, tz, service).await;
    let usage = match outcome {
        Ok((outcome, text, usage)) => {
            end.status = if outcome == TurnOutcome::Finished {
                RunStatus::Done
            } else {
                RunStatus::Failed
            };
            end.summary = match failure(&outcome) {
                None => text,
                Some(why) if text.is_empty() => why,
                Some(why) => format!("{why}\n\n{text}"),
            };
            Some(usage)
        }
        Err(why) => {
            end.summary = why;
            None
        }
    };
    end.notified = settle(
        node,
        service,
        &claim,
        &end,
        usage.as_ref(),
        clock.as_ref(),
        tz,
    )
    .await;
    end
}

/// Opens the run's conversation, runs its turn while renewing the lease,
/// and closes it. Returns the outcome, the final text and the usage, or
/// why the turn never ended.
async fn converse(
    node: &Node,
    claim: &Claim,
    bot: crate::bot::BotRecord,
    conversation: ConversationId,
    tz: Tz,
    service: &RoutineService,
) -> Result<(TurnOutcome, String, Usage), String> {
    let options = service.options();
    let title = format!("routine {} — {}", claim.name, show(claim.scheduled_for, tz));
    node.open(Opening {
        id: conversation,
        kind: ActorKind::RoutineRun,
        title,
        fresh: true,
        ..Opening::new(bot)
    })
    .await
    .map_err(|e| format!("the run's conversation could not open: {e}"))?;
    let result = async {
        let (_events, mut done) = node
            .request(conversation, Input::User(prompt(claim, tz)))
            .await
            .map_err(|e: NodeError| format!("the run could not start: {e}"))?;
        let every = (options.lease / 3).max(Duration::from_secs(1));
        let mut renew = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        loop {
            tokio::select! {
                report = &mut done => {
                    return report
                        .map(|r| (r.outcome, r.text, r.usage))
                        .map_err(|_| "stopped: troupe shut down before the run ended".to_string());
                }
                _ = renew.tick() => {
                    let (run, holder, lease) = (claim.run_id, options.holder.clone(), options.lease);
                    let now = options.clock.now();
                    let renewed = node
                        .store()
                        .write(move |tx| table::renew_lease(tx, run, &holder, now, lease).map_err(to_store))
                        .await;
                    if let Err(e) = renewed {
                        tracing::warn!(run = %run, error = %e, "could not renew a routine run's lease");
                    }
                }
            }
        }
    }
    .await;
    node.release(conversation);
    result
}

/// The run's first message: what it is, then the routine's prompt.
fn prompt(claim: &Claim, tz: Tz) -> String {
    format!(
        "[routine `{name}`, run {run}, scheduled for {at}]\n\
         This is a scheduled run: nobody is watching, so do the task without asking questions. \
         Your final reply is sent to `{owner}` as a notification; if there is nothing worth \
         reporting, reply exactly {SILENT} and nothing is sent.\n\n{prompt}",
        name = claim.name,
        run = claim.run_id,
        at = show(claim.scheduled_for, tz),
        owner = claim.owner_bot,
        prompt = claim.prompt,
    )
}

/// Why a turn did not finish, in one line (`None` when it finished).
fn failure(outcome: &TurnOutcome) -> Option<String> {
    match outcome {
        TurnOutcome::Finished => None,
        TurnOutcome::Stopped => Some("the run was stopped".into()),
        TurnOutcome::Guard { reason } => Some(format!("stopped by a guard: {reason}")),
        TurnOutcome::Budget { budget, detail } => {
            Some(format!("stopped by the `{budget}` budget: {detail}"))
        }
        TurnOutcome::Refused { detail } => Some(format!("the model refused: {detail}")),
        TurnOutcome::Crashed { error, .. } => Some(format!("the run crashed: {error}")),
        TurnOutcome::Failed { error } => Some(format!("the run failed: {error}")),
    }
}

/// Records the run's end and, unless it ended silently, enqueues its
/// notice to the owner in the same commit, then delivers it; whether a
/// notice was committed. A run no longer held (settled by another
/// scheduler) is left as it is, and reported by whoever settled it.
async fn settle(
    node: &Node,
    service: &RoutineService,
    claim: &Claim,
    end: &RunEnd,
    usage: Option<&Usage>,
    clock: &dyn Clock,
    tz: Tz,
) -> bool {
    let silent = end.status == RunStatus::Done && end.summary.trim_start().starts_with(SILENT);
    let notice = if silent {
        None
    } else {
        let (text, data) = report(claim, end, tz);
        envelope(node, &claim.owner_bot, text, data)
    };
    let (run, status, summary, usage, now) = (
        end.run_id,
        end.status,
        end.summary.clone(),
        usage.copied(),
        clock.now(),
    );
    let committed = notice.clone();
    let finished = node
        .store()
        .write(move |tx| {
            table::finish_run(tx, run, status, &summary, usage.as_ref(), now).map_err(to_store)?;
            if let Some(envelope) = &committed {
                mailbox::enqueue(tx, envelope)?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = finished {
        tracing::warn!(run = %end.run_id, error = %e, "could not record a routine run's end");
        return false;
    }
    let Some(envelope) = notice else {
        return false;
    };
    if !service.is_stopping() {
        // Committed: routing is only the wake-up; the next start delivers
        // whatever is still pending.
        if let Err(e) = node.route(envelope).await {
            tracing::warn!(run = %end.run_id, error = %e, "a routine notice waits in the mailbox");
        }
    }
    true
}

/// The notice telling the owner how the run went: its text and data.
fn report(claim: &Claim, end: &RunEnd, tz: Tz) -> (String, serde_json::Value) {
    let at = show(claim.scheduled_for, tz);
    let text = match end.status {
        RunStatus::Done => format!(
            "Routine `{}` ran (scheduled for {at}).\n\n{}",
            end.name, end.summary
        ),
        _ => format!(
            "Routine `{}` failed (scheduled for {at}): {}",
            end.name, end.summary
        ),
    };
    let data = serde_json::json!({
        "routine_id": claim.routine_id.to_string(),
        "run_id": claim.run_id.to_string(),
        "name": claim.name,
        "status": end.status.as_str(),
        "conversation": end.conversation.map(|c| c.to_string()),
        "scheduled_for": table::fmt_ts(claim.scheduled_for),
    });
    (text, data)
}

/// A `routine` notice to `owner`'s conversation (the main agent's when the
/// owner is gone); `None` when there is neither.
pub(crate) fn envelope(
    node: &Node,
    owner: &str,
    text: String,
    data: serde_json::Value,
) -> Option<Envelope> {
    let bot = node.bot(owner).or_else(|_| node.bot(MAIN_AGENT)).ok()?;
    Some(Envelope {
        id: MsgId::new(),
        from: Address::Service(SENDER.into()),
        to: Address::Bot(bot.id),
        body: Payload::Notice {
            topic: "routine".into(),
            text,
            data,
        },
        sent_at: Utc::now(),
    })
}
