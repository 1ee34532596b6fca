//! The routine table: routines, their next fire time, and every occurrence
//! they were due, claimed, run, missed or interrupted at.
//!
//! The database, not a timer in memory, is the truth about what is due, so
//! a restart loses nothing and two schedulers sharing one database never
//! run an occurrence twice. The key is `UNIQUE(routine_id, scheduled_for)`
//! on `routine_runs`: a scheduler claims an occurrence by inserting its row
//! with `INSERT OR IGNORE`; whoever inserts it first holds it, everyone else
//! inserts nothing and moves on. A claim carries a lease; a run whose lease
//! ran out while claimed or running lost its holder (the process died) and
//! is settled as failed, "interrupted", and reported, never re-run: a prompt
//! that stopped half-way may already have acted, and running it again could
//! act twice.
//!
//! Occurrences that passed while nobody was running follow the routine's
//! catch-up policy: `skip` records each as a `skipped` run and reports them,
//! `run_once` runs the latest once and records the rest as skipped. An
//! occurrence is "missed" when it is found more than [`ON_TIME_GRACE`] late
//! (the host slept) or at start-up ([`recover`]).
//!
//! Call [`claim_due`], [`recover`] and [`run_now`] inside an IMMEDIATE
//! transaction, so that two schedulers take turns instead of failing with
//! `SQLITE_BUSY` when both try to write.

use std::time::Duration;

use chrono::{DateTime, SecondsFormat, TimeDelta, Utc};
use troupe_runtime::id::{RoutineId, RunId};
use troupe_runtime::rusqlite::{self, params, Connection, Row};

use super::schedule::{Schedule, ScheduleError};

/// The routine tables; run once per database (part of the store's migrations).
pub const SCHEMA: &str = troupe_runtime::store::migrations::ROUTINES;

/// How late an occurrence may be found and still count as on time in
/// [`claim_due`]; later than that it was missed and follows the catch-up policy.
pub const ON_TIME_GRACE: TimeDelta = TimeDelta::minutes(10);

/// At most this many missed occurrences of one routine are written as
/// `skipped` rows in one pass (the latest ones); the report counts them all.
pub const MAX_SKIPPED_ROWS: usize = 100;

/// What went wrong with a routine.
#[derive(Debug, thiserror::Error)]
pub enum RoutineError {
    /// SQLite failed.
    #[error("routine database: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// The schedule was refused.
    #[error(transparent)]
    Schedule(#[from] ScheduleError),
    /// The name is empty or unusable.
    #[error("routine name `{name}` is not usable: {reason}")]
    BadName {
        /// The name given.
        name: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The owner already has a routine of that name.
    #[error(
        "`{owner}` already has a routine named `{name}`: pick another name, or update that one"
    )]
    NameTaken {
        /// The owning bot.
        owner: String,
        /// The name.
        name: String,
    },
    /// The prompt is empty.
    #[error("a routine needs a prompt: write one that stands alone, since each run starts a fresh conversation")]
    EmptyPrompt,
    /// The schedule has no occurrence left.
    #[error("schedule `{text}` has no occurrence after {now}: give one that fires again")]
    NeverFires {
        /// The schedule's text.
        text: String,
        /// The time it was checked at.
        now: DateTime<Utc>,
    },
    /// No routine has that id or name (for this owner).
    #[error("no routine `{job}`{scope}: action `list` shows ids and names")]
    NotFound {
        /// The id or name asked for.
        job: String,
        /// ` for bot …`, or empty.
        scope: String,
    },
    /// The name is used by routines of several bots.
    #[error("`{job}` names several routines ({candidates}): give the id, or `owner/name`")]
    Ambiguous {
        /// The name asked for.
        job: String,
        /// `owner/name (id)` of each.
        candidates: String,
    },
    /// No run has that id.
    #[error("no routine run {0}")]
    RunNotFound(RunId),
    /// The run is no longer this holder's to change.
    #[error("run {run} is {status} and held by `{holder}`: it is not `{by}`'s to change any more (its lease may have run out)")]
    NotHeld {
        /// The run.
        run: RunId,
        /// Its status now.
        status: RunStatus,
        /// Who holds it.
        holder: String,
        /// Who tried.
        by: String,
    },
    /// A run may only finish as done or failed.
    #[error("a run finishes as done or failed, not {0}")]
    BadFinish(RunStatus),
    /// A stored row does not read back.
    #[error("routine table holds a bad value: {0}")]
    Corrupt(String),
}

/// This module's result.
pub type Result<T, E = RoutineError> = std::result::Result<T, E>;

mod records;
pub use records::{
    CatchUp, Claim, Due, Interrupted, Missed, NewRoutine, Routine, RoutineStatus, RoutineUpdate,
    Run, RunStatus,
};

/// The stored form of an instant: RFC 3339 in UTC with milliseconds, so
/// text order is time order.
pub fn fmt_ts(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(SecondsFormat::Millis, true)
}

fn parse_ts(s: &str) -> Result<DateTime<Utc>> {
    DateTime::parse_from_rfc3339(s)
        .map(|t| t.with_timezone(&Utc))
        .map_err(|e| RoutineError::Corrupt(format!("time `{s}`: {e}")))
}

fn parse_opt_ts(s: Option<String>) -> Result<Option<DateTime<Utc>>> {
    s.as_deref().map(parse_ts).transpose()
}

fn parse_id<T: std::str::FromStr>(s: &str) -> Result<T>
where
    T::Err: std::fmt::Display,
{
    s.parse()
        .map_err(|e: T::Err| RoutineError::Corrupt(e.to_string()))
}

fn lease_end(now: DateTime<Utc>, lease: Duration) -> DateTime<Utc> {
    TimeDelta::from_std(lease)
        .ok()
        .and_then(|d| now.checked_add_signed(d))
        .unwrap_or(DateTime::<Utc>::MAX_UTC)
}

const ROUTINE_COLS: &str = "id, owner_bot, name, prompt, spec, status, catch_up, next_fire_at, \
                            created_at, updated_at";

/// The raw text of a routine row, read inside rusqlite's row callback and
/// checked outside it.
struct RoutineRow([String; 7], Option<String>, [String; 2]);

fn read_routine_row(row: &Row<'_>) -> rusqlite::Result<RoutineRow> {
    Ok(RoutineRow(
        [
            row.get(0)?,
            row.get(1)?,
            row.get(2)?,
            row.get(3)?,
            row.get(4)?,
            row.get(5)?,
            row.get(6)?,
        ],
        row.get(7)?,
        [row.get(8)?, row.get(9)?],
    ))
}

impl RoutineRow {
    fn into_routine(self) -> Result<Routine> {
        let RoutineRow([id, owner_bot, name, prompt, spec, status, catch_up], next, [c, u]) = self;
        let schedule: Schedule = serde_json::from_str(&spec)
            .map_err(|e| RoutineError::Corrupt(format!("schedule of `{name}`: {e}")))?;
        Ok(Routine {
            id: parse_id(&id)?,
            owner_bot,
            name,
            prompt,
            schedule,
            status: RoutineStatus::from_stored(&status)?,
            catch_up: CatchUp::from_stored(&catch_up)?,
            next_fire_at: parse_opt_ts(next)?,
            created_at: parse_ts(&c)?,
            updated_at: parse_ts(&u)?,
        })
    }
}

fn query_routines(
    conn: &Connection,
    filter: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<Routine>> {
    let sql = format!("SELECT {ROUTINE_COLS} FROM routines {filter}");
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt
        .query_map(args, read_routine_row)?
        .collect::<rusqlite::Result<Vec<_>>>()?;
    rows.into_iter().map(RoutineRow::into_routine).collect()
}

fn check_name(name: &str) -> Result<String> {
    let name = name.trim();
    let bad = |reason| RoutineError::BadName {
        name: name.to_string(),
        reason,
    };
    if name.is_empty() {
        return Err(bad("it is empty; give the routine a short name"));
    }
    if name.chars().count() > 80 {
        return Err(bad("it is longer than 80 characters"));
    }
    if name.chars().any(char::is_control) {
        return Err(bad("it holds control characters or line breaks"));
    }
    if name.contains('/') {
        return Err(bad("`/` separates an owner from a name; leave it out"));
    }
    if name.parse::<RoutineId>().is_ok() {
        return Err(bad("it reads as a routine id"));
    }
    Ok(name.to_string())
}

fn check_prompt(prompt: &str) -> Result<()> {
    if prompt.trim().is_empty() {
        return Err(RoutineError::EmptyPrompt);
    }
    Ok(())
}

fn spec_json(schedule: &Schedule) -> Result<String> {
    serde_json::to_string(schedule).map_err(|e| RoutineError::Corrupt(e.to_string()))
}

fn is_unique_violation(e: &rusqlite::Error) -> bool {
    matches!(
        e,
        rusqlite::Error::SqliteFailure(f, _)
            if f.extended_code == rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
    )
}

/// Makes a routine; its first occurrence is the schedule's first after `now`.
pub fn create(conn: &Connection, new: NewRoutine, now: DateTime<Utc>) -> Result<Routine> {
    let name = check_name(&new.name)?;
    check_prompt(&new.prompt)?;
    let next = new
        .schedule
        .next_after(now)
        .ok_or_else(|| RoutineError::NeverFires {
            text: new.schedule.text().to_string(),
            now,
        })?;
    let routine = Routine {
        id: RoutineId::new(),
        owner_bot: new.owner_bot,
        name,
        prompt: new.prompt,
        schedule: new.schedule,
        status: RoutineStatus::Active,
        catch_up: new.catch_up,
        next_fire_at: Some(next),
        created_at: now,
        updated_at: now,
    };
    let inserted = conn.execute(
        "INSERT INTO routines (id, owner_bot, name, prompt, schedule, spec, tz, status, catch_up, \
         next_fire_at, created_at, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
        params![
            routine.id.to_string(),
            routine.owner_bot,
            routine.name,
            routine.prompt,
            routine.schedule.text(),
            spec_json(&routine.schedule)?,
            routine.schedule.tz().name(),
            routine.status.as_str(),
            routine.catch_up.as_str(),
            fmt_ts(next),
            fmt_ts(now),
        ],
    );
    match inserted {
        Ok(_) => Ok(routine),
        Err(e) if is_unique_violation(&e) => Err(RoutineError::NameTaken {
            owner: routine.owner_bot,
            name: routine.name,
        }),
        Err(e) => Err(e.into()),
    }
}

/// Finds a routine by id or by name. `owner: None` (the main agent) sees
/// every bot's routines and may also write `owner/name`; `Some(bot)` sees
/// only that bot's.
pub fn get_by_id_or_name(conn: &Connection, owner: Option<&str>, job: &str) -> Result<Routine> {
    let job = job.trim();
    let not_found = || RoutineError::NotFound {
        job: job.to_string(),
        scope: owner.map(|o| format!(" for `{o}`")).unwrap_or_default(),
    };
    let found = if let Ok(id) = job.parse::<RoutineId>() {
        query_routines(conn, "WHERE id = ?1", params![id.to_string()])?
    } else {
        let mut found = query_routines(conn, "WHERE name = ?1 ORDER BY owner_bot", params![job])?;
        if found.is_empty() && owner.is_none() {
            if let Some((bot, name)) = job.split_once('/') {
                found = query_routines(
                    conn,
                    "WHERE owner_bot = ?1 AND name = ?2",
                    params![bot.trim(), name.trim()],
                )?;
            }
        }
        found
    };
    let mut found: Vec<Routine> = found
        .into_iter()
        .filter(|r| owner.is_none_or(|o| r.owner_bot == o))
        .collect();
    match found.len() {
        0 => Err(not_found()),
        1 => found.pop().ok_or_else(not_found),
        _ => Err(RoutineError::Ambiguous {
            job: job.to_string(),
            candidates: found
                .iter()
                .map(|r| format!("{}/{} ({})", r.owner_bot, r.name, r.id))
                .collect::<Vec<_>>()
                .join(", "),
        }),
    }
}

/// The routines `owner` sees (all of them for `None`), by owner then name.
pub fn list(conn: &Connection, owner: Option<&str>) -> Result<Vec<Routine>> {
    match owner {
        Some(o) => query_routines(conn, "WHERE owner_bot = ?1 ORDER BY name", params![o]),
        None => query_routines(conn, "ORDER BY owner_bot, name", []),
    }
}

fn store(conn: &Connection, r: &Routine) -> Result<()> {
    let result = conn.execute(
        "UPDATE routines SET name = ?2, prompt = ?3, schedule = ?4, spec = ?5, tz = ?6, \
         status = ?7, catch_up = ?8, next_fire_at = ?9, updated_at = ?10 WHERE id = ?1",
        params![
            r.id.to_string(),
            r.name,
            r.prompt,
            r.schedule.text(),
            spec_json(&r.schedule)?,
            r.schedule.tz().name(),
            r.status.as_str(),
            r.catch_up.as_str(),
            r.next_fire_at.map(fmt_ts),
            fmt_ts(r.updated_at),
        ],
    );
    match result {
        Ok(_) => Ok(()),
        Err(e) if is_unique_violation(&e) => Err(RoutineError::NameTaken {
            owner: r.owner_bot.clone(),
            name: r.name.clone(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Changes a routine's name, prompt, schedule or catch-up policy. A new
/// schedule of an active routine fires next at its first occurrence after `now`.
pub fn update(
    conn: &Connection,
    owner: Option<&str>,
    job: &str,
    changes: RoutineUpdate,
    now: DateTime<Utc>,
) -> Result<Routine> {
    let mut r = get_by_id_or_name(conn, owner, job)?;
    if let Some(name) = changes.name {
        r.name = check_name(&name)?;
    }
    if let Some(prompt) = changes.prompt {
        check_prompt(&prompt)?;
        r.prompt = prompt;
    }
    if let Some(catch_up) = changes.catch_up {
        r.catch_up = catch_up;
    }
    if let Some(schedule) = changes.schedule {
        let next = schedule
            .next_after(now)
            .ok_or_else(|| RoutineError::NeverFires {
                text: schedule.text().to_string(),
                now,
            })?;
        if r.status == RoutineStatus::Active {
            r.next_fire_at = Some(next);
        }
        r.schedule = schedule;
    }
    r.updated_at = now;
    store(conn, &r)?;
    Ok(r)
}

/// Stops a routine firing until it is resumed.
pub fn pause(
    conn: &Connection,
    owner: Option<&str>,
    job: &str,
    now: DateTime<Utc>,
) -> Result<Routine> {
    let mut r = get_by_id_or_name(conn, owner, job)?;
    r.status = RoutineStatus::Paused;
    r.next_fire_at = None;
    r.updated_at = now;
    store(conn, &r)?;
    Ok(r)
}

/// Lets a paused routine fire again, next at its first occurrence after
/// `now` (what fell in the pause is not caught up). A once-routine whose
/// time has passed stays without a next fire.
pub fn resume(
    conn: &Connection,
    owner: Option<&str>,
    job: &str,
    now: DateTime<Utc>,
) -> Result<Routine> {
    let mut r = get_by_id_or_name(conn, owner, job)?;
    if r.status == RoutineStatus::Paused {
        r.status = RoutineStatus::Active;
        r.next_fire_at = r.schedule.next_after(now);
    }
    r.updated_at = now;
    store(conn, &r)?;
    Ok(r)
}

/// Deletes a routine and its run history; returns what was removed. A run
/// in flight keeps going, but can no longer be recorded.
pub fn remove(conn: &Connection, owner: Option<&str>, job: &str) -> Result<Routine> {
    let r = get_by_id_or_name(conn, owner, job)?;
    let id = r.id.to_string();
    conn.execute(
        "DELETE FROM routine_runs WHERE routine_id = ?1",
        params![id],
    )?;
    conn.execute("DELETE FROM routines WHERE id = ?1", params![id])?;
    Ok(r)
}

/// The earliest next fire time of any active routine: when the scheduler
/// should wake next.
pub fn next_fire(conn: &Connection) -> Result<Option<DateTime<Utc>>> {
    let next: Option<String> = conn.query_row(
        "SELECT MIN(next_fire_at) FROM routines WHERE status = 'active' AND next_fire_at IS NOT NULL",
        [],
        |row| row.get(0),
    )?;
    parse_opt_ts(next)
}

mod claim;
pub use claim::{claim_due, finish_run, recover, renew_lease, run_now, runs, start_run};

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
