//! Claiming occurrences and recording runs: the half of the routine table
//! that two schedulers race on. See the parent module for the rules.

use std::collections::VecDeque;
use std::time::Duration;

use chrono::{DateTime, TimeDelta, Utc};
use troupe_runtime::id::{ConversationId, RoutineId, RunId};
use troupe_runtime::protocol::Usage;
use troupe_runtime::rusqlite::{self, params, Connection, OptionalExtension, Transaction};

use super::{
    fmt_ts, get_by_id_or_name, lease_end, parse_id, parse_opt_ts, parse_ts, query_routines,
    CatchUp, Claim, Due, Interrupted, Missed, Result, Routine, RoutineError, Run, RunStatus,
    MAX_SKIPPED_ROWS, ON_TIME_GRACE,
};
use crate::routine::schedule::Schedule;

/// At most this many missed occurrences are counted one by one; past this
/// the report's count is a lower bound.
const MAX_SCAN: u64 = 100_000;

/// Claims, for `holder`, every occurrence due at `now`. Occurrences at most
/// [`ON_TIME_GRACE`] late are on time: the latest of them is claimed (and
/// any earlier ones recorded as skipped). Occurrences found later than that
/// were missed and follow the routine's catch-up policy, as in [`recover`].
/// Each routine's next fire moves past `now`. Runs whose lease ran out are
/// settled as interrupted (see [`recover`]).
///
/// An occurrence is claimed by inserting its run row; if another holder
/// inserted it first, it is not in `claims`. Run this in an IMMEDIATE
/// transaction.
pub fn claim_due(
    tx: &Transaction<'_>,
    now: DateTime<Utc>,
    holder: &str,
    lease: Duration,
) -> Result<Due> {
    fire(tx, now, holder, lease, ON_TIME_GRACE)
}

/// At start-up: every occurrence already due was missed while nothing ran,
/// and follows its routine's catch-up policy: `skip` records each as a
/// `skipped` run, `run_once` claims the latest for `holder` and records the
/// others as skipped; all are reported in `missed`. Runs still `claimed` or
/// `running` whose lease ran out lost their holder: they are marked
/// `failed` with the summary "interrupted …" and reported in `interrupted`,
/// not re-run (a run stopped half-way may already have acted). Run this in
/// an IMMEDIATE transaction.
pub fn recover(
    tx: &Transaction<'_>,
    now: DateTime<Utc>,
    holder: &str,
    lease: Duration,
) -> Result<Due> {
    fire(tx, now, holder, lease, TimeDelta::zero())
}

fn fire(
    tx: &Transaction<'_>,
    now: DateTime<Utc>,
    holder: &str,
    lease: Duration,
    grace: TimeDelta,
) -> Result<Due> {
    let mut due = Due {
        interrupted: settle_expired(tx, now)?,
        ..Due::default()
    };
    let routines = query_routines(
        tx,
        "WHERE status = 'active' AND next_fire_at IS NOT NULL AND next_fire_at <= ?1 \
         ORDER BY next_fire_at, id",
        params![fmt_ts(now)],
    )?;
    for r in routines {
        let Some(first) = r.next_fire_at else {
            continue;
        };
        let span = Overdue::scan(&r.schedule, first, now);
        let late_cutoff = now - grace;
        // The occurrence to run, if any: the latest on-time one, else the
        // latest missed one under `run_once`.
        let run_at = if span.latest > late_cutoff || r.catch_up == CatchUp::RunOnce {
            Some(span.latest)
        } else {
            None
        };
        let claim = match run_at {
            Some(at) => insert_claim(tx, &r, at, holder, now, lease)?,
            None => None,
        };
        let skipped_count = span.count - u64::from(run_at.is_some());
        let mut skipped_won = false;
        let reason = if run_at.is_some() {
            format!("missed: caught up by the run for {}", fmt_ts(span.latest))
        } else {
            "missed: the scheduler was not running then (catch-up: skip)".to_string()
        };
        let to_record = span.recent.iter().filter(|at| Some(**at) != run_at);
        for at in to_record.rev().take(MAX_SKIPPED_ROWS) {
            skipped_won |= insert_skipped(tx, &r, *at, holder, now, &reason)?;
        }
        // Every occurrence not run is reported, whether it was late or was
        // superseded by a later on-time one; by whoever recorded it.
        if skipped_count > 0 && skipped_won {
            due.missed.push(Missed {
                routine_id: r.id,
                owner_bot: r.owner_bot.clone(),
                name: r.name.clone(),
                count: skipped_count,
                count_is_lower_bound: span.truncated,
                first: span.first,
                last: span
                    .recent
                    .iter()
                    .rev()
                    .find(|at| Some(**at) != run_at)
                    .copied()
                    .unwrap_or(span.first),
                caught_up_by: claim.as_ref().map(|c| c.run_id),
            });
        }
        tx.execute(
            "UPDATE routines SET next_fire_at = ?2, updated_at = ?3 \
             WHERE id = ?1 AND next_fire_at = ?4",
            params![
                r.id.to_string(),
                span.next.map(fmt_ts),
                fmt_ts(now),
                fmt_ts(first)
            ],
        )?;
        due.claims.extend(claim);
    }
    Ok(due)
}

/// The occurrences of a routine from its stored next fire up to now.
struct Overdue {
    first: DateTime<Utc>,
    latest: DateTime<Utc>,
    /// The latest [`MAX_SKIPPED_ROWS`] + 1 of them, oldest first.
    recent: VecDeque<DateTime<Utc>>,
    count: u64,
    truncated: bool,
    /// The first occurrence after now.
    next: Option<DateTime<Utc>>,
}

impl Overdue {
    fn scan(schedule: &Schedule, first: DateTime<Utc>, now: DateTime<Utc>) -> Self {
        let mut span = Overdue {
            first,
            latest: first,
            recent: VecDeque::from([first]),
            count: 1,
            truncated: false,
            next: None,
        };
        let mut at = first;
        loop {
            match schedule.next_after(at) {
                Some(n) if n <= now => {
                    if span.count >= MAX_SCAN {
                        span.truncated = true;
                        span.next = schedule.next_after(now);
                        return span;
                    }
                    span.count += 1;
                    span.latest = n;
                    span.recent.push_back(n);
                    if span.recent.len() > MAX_SKIPPED_ROWS + 1 {
                        span.recent.pop_front();
                    }
                    at = n;
                }
                next => {
                    span.next = next;
                    return span;
                }
            }
        }
    }
}

fn insert_claim(
    tx: &Transaction<'_>,
    r: &Routine,
    at: DateTime<Utc>,
    holder: &str,
    now: DateTime<Utc>,
    lease: Duration,
) -> Result<Option<Claim>> {
    let run_id = RunId::new();
    let lease_until = lease_end(now, lease);
    let inserted = tx.execute(
        "INSERT OR IGNORE INTO routine_runs (id, routine_id, scheduled_for, claimed_by, \
         lease_until, status) VALUES (?1, ?2, ?3, ?4, ?5, 'claimed')",
        params![
            run_id.to_string(),
            r.id.to_string(),
            fmt_ts(at),
            holder,
            fmt_ts(lease_until)
        ],
    )?;
    Ok((inserted == 1).then(|| Claim {
        run_id,
        routine_id: r.id,
        owner_bot: r.owner_bot.clone(),
        name: r.name.clone(),
        prompt: r.prompt.clone(),
        scheduled_for: at,
        lease_until,
    }))
}

fn insert_skipped(
    tx: &Transaction<'_>,
    r: &Routine,
    at: DateTime<Utc>,
    holder: &str,
    now: DateTime<Utc>,
    reason: &str,
) -> Result<bool> {
    let inserted = tx.execute(
        "INSERT OR IGNORE INTO routine_runs (id, routine_id, scheduled_for, claimed_by, \
         ended_at, status, summary) VALUES (?1, ?2, ?3, ?4, ?5, 'skipped', ?6)",
        params![
            RunId::new().to_string(),
            r.id.to_string(),
            fmt_ts(at),
            holder,
            fmt_ts(now),
            reason
        ],
    )?;
    Ok(inserted == 1)
}

/// Marks failed every run whose lease ran out while claimed or running.
fn settle_expired(tx: &Transaction<'_>, now: DateTime<Utc>) -> Result<Vec<Interrupted>> {
    let mut stmt = tx.prepare_cached(
        "SELECT r.id, r.routine_id, r.scheduled_for, r.claimed_by, r.conversation_id, \
         t.owner_bot, t.name FROM routine_runs r JOIN routines t ON t.id = r.routine_id \
         WHERE r.status IN ('claimed', 'running') AND r.lease_until < ?1 ORDER BY r.id",
    )?;
    let rows = stmt
        .query_map(params![fmt_ts(now)], |row| {
            Ok((
                row.get::<_, String>(0)?,
                row.get::<_, String>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, String>(3)?,
                row.get::<_, Option<String>>(4)?,
                row.get::<_, String>(5)?,
                row.get::<_, String>(6)?,
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    let mut out = Vec::with_capacity(rows.len());
    for (run, routine, at, claimed_by, conv, owner_bot, name) in rows {
        tx.execute(
            "UPDATE routine_runs SET status = 'failed', ended_at = ?2, summary = ?3 \
             WHERE id = ?1 AND status IN ('claimed', 'running')",
            params![
                run,
                fmt_ts(now),
                format!("interrupted: `{claimed_by}` stopped holding this run before it ended (lease ran out); it was not re-run")
            ],
        )?;
        out.push(Interrupted {
            run_id: parse_id(&run)?,
            routine_id: parse_id(&routine)?,
            owner_bot,
            name,
            scheduled_for: parse_ts(&at)?,
            claimed_by,
            conversation_id: conv.as_deref().map(parse_id).transpose()?,
        });
    }
    Ok(out)
}

/// Claims a run of a routine now, outside its schedule (`action: run`);
/// its next scheduled fire is unchanged.
pub fn run_now(
    tx: &Transaction<'_>,
    owner: Option<&str>,
    job: &str,
    now: DateTime<Utc>,
    holder: &str,
    lease: Duration,
) -> Result<Claim> {
    let r = get_by_id_or_name(tx, owner, job)?;
    // Two manual runs in the same millisecond would share an occurrence;
    // step forward to the next free one.
    let mut at = now;
    loop {
        if let Some(claim) = insert_claim(tx, &r, at, holder, now, lease)? {
            return Ok(claim);
        }
        at += TimeDelta::milliseconds(1);
    }
}

fn run_holder(conn: &Connection, run: RunId) -> Result<(RunStatus, String)> {
    let row: Option<(String, String)> = conn
        .query_row(
            "SELECT status, claimed_by FROM routine_runs WHERE id = ?1",
            params![run.to_string()],
            |row| Ok((row.get(0)?, row.get(1)?)),
        )
        .optional()?;
    let (status, holder) = row.ok_or(RoutineError::RunNotFound(run))?;
    Ok((RunStatus::from_stored(&status)?, holder))
}

fn not_held(conn: &Connection, run: RunId, by: &str) -> RoutineError {
    match run_holder(conn, run) {
        Ok((status, holder)) => RoutineError::NotHeld {
            run,
            status,
            holder,
            by: by.to_string(),
        },
        Err(e) => e,
    }
}

/// Marks a claimed run as running in `conversation`, renewing its lease.
pub fn start_run(
    conn: &Connection,
    run: RunId,
    holder: &str,
    conversation: ConversationId,
    now: DateTime<Utc>,
    lease: Duration,
) -> Result<()> {
    let changed = conn.execute(
        "UPDATE routine_runs SET status = 'running', started_at = ?3, conversation_id = ?4, \
         lease_until = ?5 WHERE id = ?1 AND claimed_by = ?2 AND status = 'claimed'",
        params![
            run.to_string(),
            holder,
            fmt_ts(now),
            conversation.to_string(),
            fmt_ts(lease_end(now, lease))
        ],
    )?;
    if changed == 1 {
        Ok(())
    } else {
        Err(not_held(conn, run, holder))
    }
}

/// Extends the lease of a run `holder` still holds, to `now + lease`.
pub fn renew_lease(
    conn: &Connection,
    run: RunId,
    holder: &str,
    now: DateTime<Utc>,
    lease: Duration,
) -> Result<()> {
    let changed = conn.execute(
        "UPDATE routine_runs SET lease_until = ?3 \
         WHERE id = ?1 AND claimed_by = ?2 AND status IN ('claimed', 'running')",
        params![run.to_string(), holder, fmt_ts(lease_end(now, lease))],
    )?;
    if changed == 1 {
        Ok(())
    } else {
        Err(not_held(conn, run, holder))
    }
}

/// Records how a run ended (`Done` or `Failed`). A run already settled
/// (its lease ran out and it was marked interrupted) is left as it is and
/// the call fails with [`RoutineError::NotHeld`].
pub fn finish_run(
    conn: &Connection,
    run: RunId,
    status: RunStatus,
    summary: &str,
    usage: Option<&Usage>,
    now: DateTime<Utc>,
) -> Result<()> {
    if !matches!(status, RunStatus::Done | RunStatus::Failed) {
        return Err(RoutineError::BadFinish(status));
    }
    let usage = usage
        .map(serde_json::to_string)
        .transpose()
        .map_err(|e| RoutineError::Corrupt(e.to_string()))?;
    let changed = conn.execute(
        "UPDATE routine_runs SET status = ?2, summary = ?3, usage = ?4, ended_at = ?5 \
         WHERE id = ?1 AND status IN ('claimed', 'running')",
        params![
            run.to_string(),
            status.as_str(),
            summary,
            usage,
            fmt_ts(now)
        ],
    )?;
    if changed == 1 {
        Ok(())
    } else {
        Err(not_held(conn, run, "this holder"))
    }
}

/// The latest `limit` runs of a routine, newest occurrence first.
pub fn runs(conn: &Connection, routine: RoutineId, limit: usize) -> Result<Vec<Run>> {
    let mut stmt = conn.prepare_cached(
        "SELECT id, routine_id, scheduled_for, claimed_by, lease_until, started_at, ended_at, \
         status, conversation_id, summary, usage FROM routine_runs WHERE routine_id = ?1 \
         ORDER BY scheduled_for DESC, id DESC LIMIT ?2",
    )?;
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    type RawRun = (
        [String; 4],
        [Option<String>; 3],
        String,
        [Option<String>; 3],
    );
    let rows: Vec<RawRun> = stmt
        .query_map(params![routine.to_string(), limit], |row| {
            Ok((
                [row.get(0)?, row.get(1)?, row.get(2)?, row.get(3)?],
                [row.get(4)?, row.get(5)?, row.get(6)?],
                row.get(7)?,
                [row.get(8)?, row.get(9)?, row.get(10)?],
            ))
        })?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter()
        .map(
            |([id, rid, at, by], [lease, started, ended], status, [conv, summary, usage])| {
                Ok(Run {
                    id: parse_id(&id)?,
                    routine_id: parse_id(&rid)?,
                    scheduled_for: parse_ts(&at)?,
                    claimed_by: by,
                    lease_until: parse_opt_ts(lease)?,
                    started_at: parse_opt_ts(started)?,
                    ended_at: parse_opt_ts(ended)?,
                    status: RunStatus::from_stored(&status)?,
                    conversation_id: conv.as_deref().map(parse_id).transpose()?,
                    summary,
                    usage: usage
                        .as_deref()
                        .map(serde_json::from_str)
                        .transpose()
                        .map_err(|e| RoutineError::Corrupt(format!("usage: {e}")))?,
                })
            },
        )
        .collect()
}
