//! One run of a routine: its own conversation, then a report to the owner.
//!
//! A run is a fresh conversation of the routine's owner bot, of kind
//! [`ActorKind::RoutineRun`], so it gets the routine-run tool set (no
//! `ask_user`: nobody is there to answer; no `cronjob_manage`: a routine
//! cannot make routines). Its prompt is the routine's, under a header that
//! says what it is and how to stay quiet. When the turn ends the run is
//! recorded (`finish_run`) and, in the same commit, a notice for the owner's
//! conversation is put in the durable mailbox, unless the reply is
//! `[SILENT]`; a failed run is always reported. While the turn runs its lease is renewed, so another
//! scheduler does not take it for dead.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::id::{ConversationId, MsgId, RoutineId, RunId};
use troupe_runtime::protocol::{ActorKind, Address, Envelope, Payload, TurnOutcome, Usage};
use troupe_runtime::store::StoreError;

use super::clock::Clock;
use super::scheduler::RoutineService;
use super::table::{self, Claim, RoutineError, RunStatus};
use crate::conversation::Input;
use crate::node::{Node, NodeError, Opening};

/// What a routine's final reply starts with when there is nothing to report.
pub const SILENT: &str = "[SILENT]";

/// The sender of routine notices.
pub const SENDER: &str = "scheduler";

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

/// The user's time zone, from the settings (UTC when the name is not a zone).
pub fn user_tz(node: &Node) -> Tz {
    node.context().settings.timezone.parse().unwrap_or(Tz::UTC)
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

/// Starts `claim`'s run in a task; its end is announced on the service.
pub fn spawn(node: Node, service: Arc<RoutineService>, claim: Claim) {
    tokio::spawn(async move {
        let end = execute(&node, &service, claim).await;
        service.announce(end);
    });
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
            record(node, &end, None, clock.as_ref(), None).await;
            end.notified = report(node, service, &claim, &end, tz).await;
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
    let silent = end.status == RunStatus::Done && end.summary.trim_start().starts_with(SILENT);
    // The notice is enqueued in the transaction that records the end, so a
    // crash between the two cannot lose it (nor can a run settled by another
    // scheduler meanwhile be reported twice: then neither is written).
    let notice = if silent {
        None
    } else {
        let (text, data) = report_text(&claim, &end, tz);
        envelope(node, &claim.owner_bot, text, data)
    };
    let recorded = record(node, &end, usage.as_ref(), clock.as_ref(), notice.clone()).await;
    if let (true, Some(notice)) = (recorded, notice) {
        end.notified = service.is_stopping() || node.route(notice).await.is_ok();
    }
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

/// Records the run's end, with `notice` enqueued in the same commit;
/// whether it was recorded. A run no longer held (settled by another
/// scheduler) is left as it is.
async fn record(
    node: &Node,
    end: &RunEnd,
    usage: Option<&Usage>,
    clock: &dyn Clock,
    notice: Option<Envelope>,
) -> bool {
    let (run, status, summary, usage, now) = (
        end.run_id,
        end.status,
        end.summary.clone(),
        usage.copied(),
        clock.now(),
    );
    let finished = node
        .store()
        .write(move |tx| {
            table::finish_run(tx, run, status, &summary, usage.as_ref(), now).map_err(to_store)?;
            if let Some(notice) = &notice {
                troupe_runtime::store::mailbox::enqueue(tx, notice)?;
            }
            Ok(())
        })
        .await;
    if let Err(e) = &finished {
        tracing::warn!(run = %end.run_id, error = %e, "could not record a routine run's end");
    }
    finished.is_ok()
}

/// Tells the owner how the run went; whether the notice was sent.
async fn report(
    node: &Node,
    service: &RoutineService,
    claim: &Claim,
    end: &RunEnd,
    tz: Tz,
) -> bool {
    let (text, data) = report_text(claim, end, tz);
    notify(node, service, &claim.owner_bot, text, data).await
}

/// The text and data of the notice telling the owner how the run went.
fn report_text(claim: &Claim, end: &RunEnd, tz: Tz) -> (String, serde_json::Value) {
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

/// Sends a `routine` notice to `owner`'s conversation (the main agent's
/// when the owner is gone); whether it was sent. While the service stops,
/// it is only committed: the next start delivers it.
pub(crate) async fn notify(
    node: &Node,
    service: &RoutineService,
    owner: &str,
    text: String,
    data: serde_json::Value,
) -> bool {
    let Some(envelope) = envelope(node, owner, text, data) else {
        return false;
    };
    let sent = if service.is_stopping() {
        node.store()
            .send(envelope)
            .await
            .map(|_| ())
            .map_err(NodeError::from)
    } else {
        node.deliver(envelope).await.map(|_| ())
    };
    match sent {
        Ok(()) => true,
        Err(e) => {
            tracing::error!(owner, error = %e, "could not send a routine notice");
            false
        }
    }
}

/// A `routine` notice for `owner`'s conversation (the main agent's when the
/// owner is gone); `None` when neither exists.
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
