//! What outside harnesses used, per account, and the limits they hit.
//!
//! A plan's limits are windows over time (five hours, a week), so usage is
//! kept as one row per reported use, dated in Unix seconds: a window's
//! usage is a `SUM` over an index range, and a rolling window resets when
//! its oldest use falls out of it. A limit the harness reports (a
//! usage-limit error, with its reset time when it says one) is kept per
//! account, the latest one only: it holds until its reset time, or — with
//! none given — until the account is used again.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::error::StoreError;

/// Migration 13: executors' accounts. Each instance's account and route
/// (`subagents` columns: the target names it goes on to, a JSON array),
/// the accounts' usage (its index covers a window's sum) and their
/// reported limits.
pub const EXECUTOR_USAGE: &str = r#"
ALTER TABLE subagents ADD COLUMN account TEXT;
ALTER TABLE subagents ADD COLUMN route TEXT;
CREATE TABLE executor_usage (
    id          INTEGER PRIMARY KEY,
    executor    TEXT NOT NULL,
    account     TEXT NOT NULL,
    at          INTEGER NOT NULL,
    tokens      INTEGER NOT NULL DEFAULT 0,
    cost_usd    REAL NOT NULL DEFAULT 0,
    subagent_id TEXT
);
CREATE INDEX executor_usage_by_account ON executor_usage (executor, account, at, tokens, cost_usd);
CREATE TABLE executor_limits (
    executor    TEXT NOT NULL,
    account     TEXT NOT NULL,
    reached_at  INTEGER NOT NULL,
    resets_at   INTEGER,
    why         TEXT NOT NULL,
    subagent_id TEXT,
    PRIMARY KEY (executor, account)
);
"#;

/// A limit a harness reported for an account.
#[derive(Debug, Clone, PartialEq)]
pub struct Limit {
    /// When it was reached (Unix seconds).
    pub reached_at: i64,
    /// When the harness said it resets (Unix seconds), if it did.
    pub resets_at: Option<i64>,
    /// What it said.
    pub why: String,
}

/// Adds one use of `executor@account` at `at` (Unix seconds).
pub fn add(
    tx: &Transaction<'_>,
    (executor, account): (&str, &str),
    at: i64,
    tokens: u64,
    cost_usd: f64,
    subagent: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO executor_usage (executor, account, at, tokens, cost_usd, subagent_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?
    .execute(params![
        executor,
        account,
        at,
        i64::try_from(tokens).unwrap_or(i64::MAX),
        cost_usd,
        subagent
    ])?;
    Ok(())
}

/// Adds one use by instance `subagent`, on the executor and account its
/// row names (nothing when it names none).
pub fn add_by_instance(
    tx: &Transaction<'_>,
    subagent: &str,
    at: i64,
    tokens: u64,
    cost_usd: f64,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO executor_usage (executor, account, at, tokens, cost_usd, subagent_id)
         SELECT executor, COALESCE(account, 'main'), ?2, ?3, ?4, id FROM subagents
         WHERE id = ?1 AND executor IS NOT NULL",
    )?
    .execute(params![
        subagent,
        at,
        i64::try_from(tokens).unwrap_or(i64::MAX),
        cost_usd
    ])?;
    Ok(())
}

/// Records that `executor@account` reached a limit at `at`.
pub fn reach(
    tx: &Transaction<'_>,
    (executor, account): (&str, &str),
    limit: &Limit,
    subagent: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO executor_limits (executor, account, reached_at, resets_at, why, subagent_id)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (executor, account) DO UPDATE SET reached_at = excluded.reached_at,
            resets_at = excluded.resets_at, why = excluded.why, subagent_id = excluded.subagent_id",
    )?
    .execute(params![
        executor,
        account,
        limit.reached_at,
        limit.resets_at,
        limit.why,
        subagent
    ])?;
    Ok(())
}

/// The executor and account of instance `subagent`, if it is one.
pub fn account_of(
    conn: &Connection,
    subagent: &str,
) -> Result<Option<(String, String)>, StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT executor, COALESCE(account, 'main') FROM subagents
             WHERE id = ?1 AND executor IS NOT NULL",
        )?
        .query_row([subagent], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?)
}

/// Sets the account instance `subagent` runs on.
pub fn set_account(tx: &Transaction<'_>, subagent: &str, account: &str) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE subagents SET account = ?2 WHERE id = ?1")?
        .execute(params![subagent, account])?;
    Ok(())
}

/// Usage of `executor@account` since `since`: tokens, cost, and the
/// oldest use counted (when the window starts to free up).
pub fn since(
    conn: &Connection,
    (executor, account): (&str, &str),
    since: i64,
) -> Result<(u64, f64, Option<i64>), StoreError> {
    Ok(conn
        .prepare_cached(
            "SELECT COALESCE(SUM(tokens), 0), COALESCE(SUM(cost_usd), 0), MIN(at)
             FROM executor_usage WHERE executor = ?1 AND account = ?2 AND at >= ?3",
        )?
        .query_row(params![executor, account, since], |r| {
            Ok((
                u64::try_from(r.get::<_, i64>(0)?).unwrap_or(0),
                r.get(1)?,
                r.get(2)?,
            ))
        })?)
}

/// The latest limit reported for `executor@account` that still holds at
/// `now`: before its reset time, or (none given) with no use since.
pub fn holding(
    conn: &Connection,
    (executor, account): (&str, &str),
    now: i64,
) -> Result<Option<Limit>, StoreError> {
    let limit = conn
        .prepare_cached(
            "SELECT reached_at, resets_at, why FROM executor_limits
             WHERE executor = ?1 AND account = ?2",
        )?
        .query_row(params![executor, account], |r| {
            Ok(Limit {
                reached_at: r.get(0)?,
                resets_at: r.get(1)?,
                why: r.get(2)?,
            })
        })
        .optional()?;
    let Some(limit) = limit else { return Ok(None) };
    let holds = match limit.resets_at {
        Some(resets) => resets > now,
        None => {
            let used_since: bool = conn
                .prepare_cached(
                    "SELECT EXISTS (SELECT 1 FROM executor_usage
                     WHERE executor = ?1 AND account = ?2 AND at > ?3 AND tokens > 0)",
                )?
                .query_row(params![executor, account, limit.reached_at], |r| r.get(0))?;
            !used_since
        }
    };
    Ok(holds.then_some(limit))
}

/// Sets the route of instance `subagent`: the target names it goes on to
/// when its account reaches its limit (empty: its executor's own order).
pub fn set_route(tx: &Transaction<'_>, subagent: &str, route: &[String]) -> Result<(), StoreError> {
    let route = (!route.is_empty())
        .then(|| serde_json::to_string(route))
        .transpose()
        .map_err(|e| StoreError::Codec {
            what: "route",
            detail: e.to_string(),
        })?;
    tx.prepare_cached("UPDATE subagents SET route = ?2 WHERE id = ?1")?
        .execute(params![subagent, route])?;
    Ok(())
}

/// The route of instance `subagent` (empty: none given).
pub fn route_of(conn: &Connection, subagent: &str) -> Result<Vec<String>, StoreError> {
    let text: Option<String> = conn
        .prepare_cached("SELECT route FROM subagents WHERE id = ?1")?
        .query_row([subagent], |r| r.get(0))
        .optional()?
        .flatten();
    Ok(text
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default())
}

/// Moves instance `subagent` to `executor@account`: the session it goes
/// on from (`None`: a session of its own).
pub fn move_to(
    tx: &Transaction<'_>,
    subagent: &str,
    (executor, account): (&str, &str),
    session: Option<&str>,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE subagents SET executor = ?2, account = ?3, session = ?4 WHERE id = ?1",
    )?
    .execute(params![subagent, executor, account, session])?;
    Ok(())
}
