//! The full-text indexes the writer fills in batches, not row by row.
//!
//! FTS5 flushes its pending terms at every savepoint, and the writer runs
//! each job in one, so an index kept by an insert trigger costs more per
//! appended row than the row itself. Two tables are indexed this way:
//! `messages` (into `messages_fts`) and `delegation_events` (into
//! `delegation_fts`). For each, `kv[key]` holds the last `seq` indexed;
//! only rows at or below it are in the index, so only they are taken out
//! by the tables' delete and update triggers.
//!
//! The writer catches up in transactions of its own once [`CATCH_UP_ROWS`]
//! rows wait and no job has come for a while ([`step`]: off a burst's
//! path), in a batch only once [`CATCH_UP_ROWS_MOST`] wait in one table
//! ([`if_due`]), and when its queue closes; a reader that needs every row
//! searchable calls [`Store::catch_up`](super::Store::catch_up) first.
//! Nothing is lost meanwhile: the rows are stored, and the next catch-up
//! (in this process or the next) takes them.

use rusqlite::{params, Connection, Transaction};

use super::error::StoreError;

/// Rows left out of the full-text indexes before the writer catches up
/// when it is idle (see [`step`]), and how many it indexes per
/// transaction then. FTS5 writes each catch-up as a new segment and merges
/// segments as they pile up, so larger catch-ups cost less per row: 2,048
/// at a time cost a quarter less than 256.
pub(crate) const CATCH_UP_ROWS: i64 = 2048;

/// The most rows left out of one index: a batch that finds this many
/// catches up before it commits, idle or not (see [`if_due`]). 16,384 at a
/// time cost another fifth less per row than [`CATCH_UP_ROWS`]. A search
/// meanwhile catches up first, so it may wait for up to this many rows to
/// be indexed (tens of ms).
pub(crate) const CATCH_UP_ROWS_MOST: i64 = 16384;

/// What catching up rows `indexed < seq <= upto` also brings up to date.
type Then = fn(&Transaction<'_>, i64, i64) -> Result<(), StoreError>;

/// One table whose full-text index the writer fills in batches.
struct Deferred {
    /// The `kv` key holding the last `seq` in the index.
    key: &'static str,
    /// The newest `seq` of the table.
    newest: &'static str,
    /// Indexes the rows with `?1 < seq <= ?2`.
    index: &'static str,
    /// What else catching up those rows brings up to date.
    then: Option<Then>,
}

/// Messages, whose catch-up also moves their conversations' `updated_at`.
const MESSAGES: Deferred = Deferred {
    key: "store.messages_fts_seq",
    newest: "SELECT coalesce(max(seq), 0) FROM messages",
    index: "INSERT INTO messages_fts(rowid, text)
            SELECT seq, text FROM messages WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
    then: Some(super::conversations::touch_conversations),
};

/// The delegation record's entries (tasks, steers, answers, final texts).
const DELEGATION_EVENTS: Deferred = Deferred {
    key: "store.delegation_fts_seq",
    newest: "SELECT coalesce(max(seq), 0) FROM delegation_events",
    index: "INSERT INTO delegation_fts(rowid, text)
            SELECT seq, text FROM delegation_events WHERE seq > ?1 AND seq <= ?2 ORDER BY seq",
    then: None,
};

/// Every deferred index, in the order an idle writer catches them up.
const ALL: [&Deferred; 2] = [&MESSAGES, &DELEGATION_EVENTS];

impl Deferred {
    /// The last indexed `seq`, and the newest.
    fn positions(&self, conn: &Connection) -> Result<(i64, i64), StoreError> {
        Ok(conn
            .prepare_cached(&format!("SELECT {}", self.position_columns()))?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    /// [`Deferred::positions`] as two columns of a larger `SELECT`.
    fn position_columns(&self) -> String {
        format!(
            "coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = '{}'), 0), ({})",
            self.key, self.newest
        )
    }

    /// Indexes the rows after `indexed` up to `upto` and records `upto`.
    fn catch_up_from(
        &self,
        tx: &Transaction<'_>,
        indexed: i64,
        upto: i64,
    ) -> Result<(), StoreError> {
        if upto <= indexed {
            return Ok(());
        }
        tx.prepare_cached(self.index)?.execute([indexed, upto])?;
        if let Some(then) = self.then {
            then(tx, indexed, upto)?;
        }
        tx.prepare_cached(
            "INSERT INTO kv (key, value) VALUES (?1, ?2)
             ON CONFLICT (key) DO UPDATE SET value = excluded.value",
        )?
        .execute(params![self.key, upto.to_string()])?;
        Ok(())
    }
}

/// Brings every deferred index up to date (and, for messages, their
/// conversations' `updated_at`).
pub fn catch_up(tx: &Transaction<'_>) -> Result<(), StoreError> {
    for deferred in ALL {
        let (indexed, newest) = deferred.positions(tx)?;
        deferred.catch_up_from(tx, indexed, newest)?;
    }
    Ok(())
}

/// How many deferred indexes there are: [`position_columns`] gives two
/// columns for each.
pub(crate) const DEFERRED: usize = ALL.len();

/// The last indexed and the newest `seq` of every deferred index, in that
/// order, as `2 × DEFERRED` columns of a `SELECT` (the writer reads them
/// with the rest of its backlog in one statement after every batch).
pub(crate) fn position_columns() -> String {
    ALL.map(Deferred::position_columns).join(", ")
}

/// [`catch_up`] of each table with [`CATCH_UP_ROWS_MOST`] rows waiting,
/// given each index's positions as [`position_columns`] read them in
/// `tx`; run by the writer before every batch's commit. Answers how many
/// rows are left out of the indexes.
pub(crate) fn if_due(
    tx: &Transaction<'_>,
    positions: [(i64, i64); DEFERRED],
) -> Result<i64, StoreError> {
    let mut left = 0;
    for (deferred, (indexed, newest)) in ALL.into_iter().zip(positions) {
        if newest - indexed >= CATCH_UP_ROWS_MOST {
            deferred.catch_up_from(tx, indexed, newest)?;
        } else {
            left += (newest - indexed).max(0);
        }
    }
    Ok(left)
}

/// One step of catching up while the writer is idle: the next
/// [`CATCH_UP_ROWS`] rows at most, oldest first, of the first table behind.
/// Answers the last message indexed and how many rows are still left out.
pub(crate) fn step(tx: &Transaction<'_>) -> Result<(i64, i64), StoreError> {
    let mut budget = CATCH_UP_ROWS;
    let mut left = 0;
    let mut messages_indexed = 0;
    for deferred in ALL {
        let (indexed, newest) = deferred.positions(tx)?;
        let upto = newest.min(indexed.saturating_add(budget.max(0)));
        deferred.catch_up_from(tx, indexed, upto)?;
        budget -= (upto - indexed).max(0);
        left += (newest - upto).max(0);
        if deferred.key == MESSAGES.key {
            messages_indexed = upto.max(indexed);
        }
    }
    Ok((messages_indexed, left))
}

/// How many messages wait for [`catch_up`] to become searchable (a
/// read-only reader cannot catch up itself; it can say so).
pub fn unindexed_messages(conn: &Connection) -> Result<i64, StoreError> {
    let (indexed, newest) = MESSAGES.positions(conn)?;
    Ok((newest - indexed).max(0))
}

/// How many rows of every deferred index wait for [`catch_up`].
pub fn unindexed(conn: &Connection) -> Result<i64, StoreError> {
    let mut left = 0;
    for deferred in ALL {
        let (indexed, newest) = deferred.positions(conn)?;
        left += (newest - indexed).max(0);
    }
    Ok(left)
}

#[cfg(test)]
#[path = "catch_up_tests.rs"]
pub(crate) mod tests;
