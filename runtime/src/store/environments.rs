//! The environments of houses: which exist, which thread is bound to
//! which, and the commands that ran in them.
//!
//! A command is recorded `running` before it starts and `ended` when it
//! ends. One still `running` when its environment's actor starts again was
//! cut short by a crash: it is marked `lost` (and reported), never run
//! again. Every query names its house or its environment.

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::error::StoreError;
use super::{now, parse_time};
use crate::id::{EnvironmentId, HouseId, ThreadId};

/// The migration that adds the environments' tables.
pub const ENVIRONMENTS: &str = r#"
CREATE TABLE environments (
    id         TEXT PRIMARY KEY,
    house_id   TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    uid        INTEGER,
    sandboxed  INTEGER NOT NULL DEFAULT 1,
    stopped    INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    last_used  TEXT NOT NULL
);
CREATE INDEX environments_by_house ON environments (house_id, created_at);
CREATE TABLE environment_threads (
    thread_id TEXT PRIMARY KEY,
    env_id    TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    bound_at  TEXT NOT NULL
);
CREATE INDEX environment_threads_by_env ON environment_threads (env_id);
CREATE TABLE environment_commands (
    id         TEXT PRIMARY KEY,
    env_id     TEXT NOT NULL REFERENCES environments(id) ON DELETE CASCADE,
    command    TEXT NOT NULL,
    status     TEXT NOT NULL CHECK (status IN ('running', 'ended', 'lost')),
    exit_code  INTEGER,
    started_at TEXT NOT NULL,
    ended_at   TEXT
);
CREATE INDEX environment_commands_by_env ON environment_commands (env_id, status);
"#;

/// The first user id given to an environment when troupe runs as root.
pub const FIRST_UID: u32 = 1_500_000_000;

/// An environment as stored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvironmentRow {
    /// Its id.
    pub id: EnvironmentId,
    /// Its house.
    pub house: HouseId,
    /// The user its commands run as, when troupe is root.
    pub uid: Option<u32>,
    /// Whether its commands run in a sandbox.
    pub sandboxed: bool,
    /// Stopped for good.
    pub stopped: bool,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When a command last ran.
    pub last_used: DateTime<Utc>,
    /// The threads bound to it.
    pub threads: Vec<ThreadId>,
    /// Commands marked lost.
    pub lost: u64,
}

fn parse<T: std::str::FromStr>(what: &'static str, text: &str) -> Result<T, StoreError> {
    text.parse().map_err(|_| StoreError::Codec {
        what,
        detail: format!("`{text}`"),
    })
}

fn row_of(c: &Connection, id: &str) -> Result<Option<EnvironmentRow>, StoreError> {
    let raw = c
        .prepare_cached(
            "SELECT id, house_id, uid, sandboxed, stopped, created_at, last_used, \
             (SELECT COUNT(*) FROM environment_commands WHERE env_id = e.id AND status = 'lost') \
             FROM environments e WHERE id = ?1",
        )?
        .query_row(params![id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, Option<u32>>(2)?,
                r.get::<_, bool>(3)?,
                r.get::<_, bool>(4)?,
                r.get::<_, String>(5)?,
                r.get::<_, String>(6)?,
                r.get::<_, u64>(7)?,
            ))
        })
        .optional()?;
    let Some((id, house, uid, sandboxed, stopped, created, used, lost)) = raw else {
        return Ok(None);
    };
    let threads = c
        .prepare_cached(
            "SELECT thread_id FROM environment_threads WHERE env_id = ?1 ORDER BY bound_at",
        )?
        .query_map(params![id], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?
        .iter()
        .map(|t| parse("thread id", t))
        .collect::<Result<Vec<ThreadId>, _>>()?;
    Ok(Some(EnvironmentRow {
        id: parse("sandbox id", &id)?,
        house: parse("house id", &house)?,
        uid,
        sandboxed,
        stopped,
        created_at: parse_time(&created)?,
        last_used: parse_time(&used)?,
        threads,
        lost,
    }))
}

/// The environment `id`.
pub fn get(c: &Connection, id: EnvironmentId) -> Result<Option<EnvironmentRow>, StoreError> {
    row_of(c, &id.to_string())
}

/// The environments of `house`, newest first; stopped ones only with
/// `include_stopped`; at most `limit`.
pub fn list(
    c: &Connection,
    house: HouseId,
    include_stopped: bool,
    limit: usize,
) -> Result<Vec<EnvironmentRow>, StoreError> {
    let ids = c
        .prepare_cached(
            "SELECT id FROM environments WHERE house_id = ?1 AND (?2 OR stopped = 0) \
             ORDER BY created_at DESC, id DESC LIMIT ?3",
        )?
        .query_map(
            params![
                house.to_string(),
                include_stopped,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |r| r.get::<_, String>(0),
        )?
        .collect::<Result<Vec<_>, _>>()?;
    let mut rows = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(row) = row_of(c, &id)? {
            rows.push(row);
        }
    }
    Ok(rows)
}

/// Makes an environment of `house`; `with_uid` gives it a user id of its
/// own (troupe runs as root).
pub fn create(
    tx: &Transaction,
    house: HouseId,
    sandboxed: bool,
    with_uid: bool,
) -> Result<EnvironmentRow, StoreError> {
    let id = EnvironmentId::new();
    let uid = if with_uid {
        let last: Option<u32> =
            tx.query_row("SELECT MAX(uid) FROM environments", [], |r| r.get(0))?;
        Some(last.map_or(FIRST_UID, |u| u.saturating_add(1)))
    } else {
        None
    };
    let at = now();
    tx.prepare_cached(
        "INSERT INTO environments (id, house_id, uid, sandboxed, stopped, created_at, last_used) \
         VALUES (?1, ?2, ?3, ?4, 0, ?5, ?5)",
    )?
    .execute(params![
        id.to_string(),
        house.to_string(),
        uid,
        sandboxed,
        at
    ])?;
    row_of(tx, &id.to_string())?
        .ok_or_else(|| StoreError::Invalid("the new environment is gone".into()))
}

/// The newest environment of `house` that is not stopped and has no
/// thread bound (to reuse).
pub fn unbound(c: &Connection, house: HouseId) -> Result<Option<EnvironmentId>, StoreError> {
    let id: Option<String> = c
        .prepare_cached(
            "SELECT id FROM environments e WHERE house_id = ?1 AND stopped = 0 AND NOT EXISTS \
             (SELECT 1 FROM environment_threads t WHERE t.env_id = e.id) \
             ORDER BY created_at DESC LIMIT 1",
        )?
        .query_row(params![house.to_string()], |r| r.get(0))
        .optional()?;
    id.map(|i| parse("sandbox id", &i)).transpose()
}

/// Binds `thread` to `env` (replacing any binding it had).
pub fn bind(tx: &Transaction, env: EnvironmentId, thread: ThreadId) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO environment_threads (thread_id, env_id, bound_at) VALUES (?1, ?2, ?3) \
         ON CONFLICT (thread_id) DO UPDATE SET env_id = excluded.env_id, bound_at = excluded.bound_at",
    )?
    .execute(params![thread.to_string(), env.to_string(), now()])?;
    Ok(())
}

/// Every binding of a live environment: thread → environment.
pub fn bindings(c: &Connection) -> Result<Vec<(ThreadId, EnvironmentId)>, StoreError> {
    let rows = c
        .prepare_cached(
            "SELECT t.thread_id, t.env_id FROM environment_threads t \
             JOIN environments e ON e.id = t.env_id WHERE e.stopped = 0",
        )?
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    rows.iter()
        .map(|(t, e)| Ok((parse("thread id", t)?, parse("sandbox id", e)?)))
        .collect()
}

/// Notes that a command ran in `env` now.
pub fn touch(tx: &Transaction, env: EnvironmentId) -> Result<(), StoreError> {
    tx.prepare_cached("UPDATE environments SET last_used = ?2 WHERE id = ?1")?
        .execute(params![env.to_string(), now()])?;
    Ok(())
}

/// Stops `env` for good and unbinds its threads; the threads it had.
pub fn stop(tx: &Transaction, env: EnvironmentId) -> Result<Vec<ThreadId>, StoreError> {
    let threads = row_of(tx, &env.to_string())?
        .map(|r| r.threads)
        .unwrap_or_default();
    tx.prepare_cached("UPDATE environments SET stopped = 1 WHERE id = ?1")?
        .execute(params![env.to_string()])?;
    tx.prepare_cached("DELETE FROM environment_threads WHERE env_id = ?1")?
        .execute(params![env.to_string()])?;
    Ok(threads)
}

/// Records that command `id` starts in `env`.
pub fn command_started(
    tx: &Transaction,
    id: &str,
    env: EnvironmentId,
    command: &str,
) -> Result<(), StoreError> {
    let at = now();
    tx.prepare_cached(
        "INSERT INTO environment_commands (id, env_id, command, status, started_at) \
         VALUES (?1, ?2, ?3, 'running', ?4)",
    )?
    .execute(params![id, env.to_string(), command, at])?;
    tx.prepare_cached("UPDATE environments SET last_used = ?2 WHERE id = ?1")?
        .execute(params![env.to_string(), at])?;
    Ok(())
}

/// Records that command `id` ended (with `exit_code` when it exited).
pub fn command_ended(tx: &Transaction, id: &str, exit_code: Option<i32>) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE environment_commands SET status = 'ended', exit_code = ?2, ended_at = ?3 \
         WHERE id = ?1 AND status = 'running'",
    )?
    .execute(params![id, exit_code, now()])?;
    Ok(())
}

/// Marks command `id` lost: its sandbox died under it.
pub fn command_lost(tx: &Transaction, id: &str) -> Result<(), StoreError> {
    tx.prepare_cached(
        "UPDATE environment_commands SET status = 'lost', ended_at = ?2 \
         WHERE id = ?1 AND status = 'running'",
    )?
    .execute(params![id, now()])?;
    Ok(())
}

/// Marks the commands of `env` still `running` as lost; the commands.
pub fn mark_lost(tx: &Transaction, env: EnvironmentId) -> Result<Vec<String>, StoreError> {
    let lost = tx
        .prepare_cached(
            "SELECT command FROM environment_commands WHERE env_id = ?1 AND status = 'running' \
             ORDER BY started_at",
        )?
        .query_map(params![env.to_string()], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    tx.prepare_cached(
        "UPDATE environment_commands SET status = 'lost', ended_at = ?2 \
         WHERE env_id = ?1 AND status = 'running'",
    )?
    .execute(params![env.to_string(), now()])?;
    Ok(lost)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[tokio::test]
    async fn environments_bind_reuse_stop_and_lose_commands() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("troupe.db")).unwrap();
        let (house, thread) = store
            .write(|tx| {
                let house = crate::store::house::create_house(tx, "acme")?;
                let thread =
                    crate::store::house::create_thread(tx, house.id, Some("t"), &[], "ada", &[])?;
                Ok((house.id, thread.id))
            })
            .await
            .unwrap();
        let (a, b) = store
            .write(move |tx| {
                let a = create(tx, house, true, true)?;
                let b = create(tx, house, true, true)?;
                Ok((a, b))
            })
            .await
            .unwrap();
        assert_eq!(a.uid, Some(FIRST_UID));
        assert_eq!(b.uid, Some(FIRST_UID + 1));
        let (ida, idb) = (a.id, b.id);
        store
            .write(move |tx| {
                bind(tx, ida, thread)?;
                command_started(tx, "c1", ida, "sleep 100")?;
                command_started(tx, "c2", ida, "true")?;
                command_ended(tx, "c2", Some(0))
            })
            .await
            .unwrap();
        assert_eq!(store.read(bindings).await.unwrap(), vec![(thread, ida)]);
        assert_eq!(
            store.read(move |c| unbound(c, house)).await.unwrap(),
            Some(idb)
        );
        let lost = store.write(move |tx| mark_lost(tx, ida)).await.unwrap();
        assert_eq!(lost, vec!["sleep 100".to_string()]);
        let row = store.read(move |c| get(c, ida)).await.unwrap().unwrap();
        assert_eq!((row.lost, row.threads.clone()), (1, vec![thread]));
        let unbound_threads = store.write(move |tx| stop(tx, ida)).await.unwrap();
        assert_eq!(unbound_threads, vec![thread]);
        assert!(store.read(bindings).await.unwrap().is_empty());
        let live = store
            .read(move |c| list(c, house, false, 10))
            .await
            .unwrap();
        assert_eq!(live.iter().map(|r| r.id).collect::<Vec<_>>(), vec![idb]);
        let all = store.read(move |c| list(c, house, true, 10)).await.unwrap();
        assert_eq!(all.len(), 2);
    }
}
