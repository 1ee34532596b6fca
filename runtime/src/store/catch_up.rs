//! What the writer brings up to date in batches, not row by row.
//!
//! FTS5 flushes its pending terms at every savepoint, and the writer runs
//! each job in one, so an index kept by an insert trigger costs more per
//! appended row than the row itself. Two tables are indexed this way:
//! `messages` (into `messages_fts`) and `delegation_events` (into
//! `delegation_fts`). For each, `kv[key]` holds the last `seq` indexed;
//! only rows at or below it are in the index, so only they are taken out
//! by the tables' delete and update triggers. A third follows the
//! messages the same way: their conversations' `updated_at`, moved to
//! their newest message (an update of a row and two of its indexes, the
//! dearest of these by far). A fourth is the model calls' usage, folded
//! from a table of calls into the totals ([`super::usage`]).
//!
//! The writer catches up in transactions of its own once [`CATCH_UP_ROWS`]
//! rows wait and no job has come for a while ([`step`]: off a burst's
//! path), and when its queue closes; a reader that needs every row
//! searchable, or every conversation's `updated_at`, calls
//! [`Store::catch_up`](super::Store::catch_up) first. A full-text index
//! is also caught up in a batch once [`CATCH_UP_ROWS_MOST`] rows wait
//! ([`if_due`]), so a search never has more than that to wait for; the
//! conversations' `updated_at` is not, so a long burst does not stop to
//! rewrite them. Nothing is lost meanwhile: the rows are stored, and the
//! next catch-up (in this process or the next) takes them.

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

/// Where the last `seq` caught up is kept.
#[derive(PartialEq)]
enum Done {
    /// In `kv` under this key.
    Key(&'static str),
    /// Nowhere: the rows caught up leave their table, and this SQL
    /// expression gives the one before the oldest left.
    Gone(&'static str),
}

/// One table whose full-text index (or what else follows its rows) the
/// writer brings up to date in batches.
struct Deferred {
    /// The last `seq` caught up.
    done: Done,
    /// The newest `seq` of the table.
    newest: &'static str,
    /// Catch up the rows with `?1 < seq <= ?2`, in order.
    index: &'static [&'static str],
    /// Whether a batch catches it up once [`CATCH_UP_ROWS_MOST`] rows wait
    /// (an index a search waits for), or only the idle writer and
    /// [`catch_up`] do.
    in_batches: bool,
}

/// Messages, into their full-text index.
const MESSAGES: Deferred = Deferred {
    done: Done::Key("store.messages_fts_seq"),
    newest: "SELECT coalesce(max(seq), 0) FROM messages",
    index: &["INSERT INTO messages_fts(rowid, text)
             SELECT seq, text FROM messages WHERE seq > ?1 AND seq <= ?2 ORDER BY seq"],
    in_batches: true,
};

/// The delegation record's entries (tasks, steers, answers, final texts).
const DELEGATION_EVENTS: Deferred = Deferred {
    done: Done::Key("store.delegation_fts_seq"),
    newest: "SELECT coalesce(max(seq), 0) FROM delegation_events",
    index: &["INSERT INTO delegation_fts(rowid, text)
             SELECT seq, text FROM delegation_events WHERE seq > ?1 AND seq <= ?2 ORDER BY seq"],
    in_batches: true,
};

/// The conversations of new messages, moved to their newest message's
/// time ([`super::conversations::TOUCH_CONVERSATIONS`]). When the newest
/// messages are deleted, the messages' delete trigger moves this key back
/// with the index's, so new messages reusing those `seq`s are taken again.
const CONVERSATIONS: Deferred = Deferred {
    done: Done::Key("store.conversations_touched_seq"),
    newest: "SELECT coalesce(max(seq), 0) FROM messages",
    index: &[super::conversations::TOUCH_CONVERSATIONS],
    in_batches: false,
};

/// Model calls' usage, folded into its rows ([`super::usage`]). The calls
/// left are always the newest (they fold from the oldest), so the last one
/// folded is the one before the oldest left. Reads sum what waits too, so
/// a batch never stops to fold.
const USAGE: Deferred = Deferred {
    done: Done::Gone("coalesce((SELECT min(seq) FROM usage_pending), 1) - 1"),
    newest: "SELECT coalesce(max(seq), 0) FROM usage_pending",
    index: super::usage::FOLD,
    in_batches: false,
};

/// Everything deferred, in the order an idle writer catches it up (the
/// conversations after the messages' index they follow).
const ALL: [&Deferred; 4] = [&MESSAGES, &DELEGATION_EVENTS, &CONVERSATIONS, &USAGE];

impl Deferred {
    /// The last indexed `seq`, and the newest.
    fn positions(&self, conn: &Connection) -> Result<(i64, i64), StoreError> {
        Ok(conn
            .prepare_cached(&format!("SELECT {}", self.position_columns()))?
            .query_row([], |r| Ok((r.get(0)?, r.get(1)?)))?)
    }

    /// [`Deferred::positions`] as two columns of a larger `SELECT`.
    fn position_columns(&self) -> String {
        match self.done {
            Done::Key(key) => format!(
                "coalesce((SELECT CAST(value AS INTEGER) FROM kv WHERE key = '{key}'), 0), ({})",
                self.newest
            ),
            Done::Gone(done) => format!("{done}, ({})", self.newest),
        }
    }

    /// Catches up the rows after `indexed` up to `upto` and records `upto`.
    fn catch_up_from(
        &self,
        tx: &Transaction<'_>,
        indexed: i64,
        upto: i64,
    ) -> Result<(), StoreError> {
        if upto <= indexed {
            return Ok(());
        }
        for sql in self.index {
            tx.prepare_cached(sql)?.execute([indexed, upto])?;
        }
        if let Done::Key(key) = self.done {
            tx.prepare_cached(
                "INSERT INTO kv (key, value) VALUES (?1, ?2)
                 ON CONFLICT (key) DO UPDATE SET value = excluded.value",
            )?
            .execute(params![key, upto.to_string()])?;
        }
        Ok(())
    }
}

/// Brings every deferred index, and every conversation's `updated_at`, up
/// to date.
pub fn catch_up(tx: &Transaction<'_>) -> Result<(), StoreError> {
    for deferred in ALL {
        let (indexed, newest) = deferred.positions(tx)?;
        deferred.catch_up_from(tx, indexed, newest)?;
    }
    Ok(())
}

/// Brings the messages' full-text index alone up to date: what a store of
/// the first versions did (tests of old stores).
#[cfg(test)]
pub(crate) fn catch_up_messages(tx: &Transaction<'_>) -> Result<(), StoreError> {
    let (indexed, newest) = MESSAGES.positions(tx)?;
    MESSAGES.catch_up_from(tx, indexed, newest)
}

/// How many things are deferred: [`position_columns`] gives two columns
/// for each.
pub(crate) const DEFERRED: usize = ALL.len();

/// The last caught-up and the newest `seq` of everything deferred, in that
/// order, as `2 × DEFERRED` columns of a `SELECT` (the writer reads them
/// with the rest of its backlog in one statement after every batch).
pub(crate) fn position_columns() -> String {
    ALL.map(Deferred::position_columns).join(", ")
}

/// [`catch_up`] of each full-text index with [`CATCH_UP_ROWS_MOST`] rows
/// waiting, given every position as [`position_columns`] read them in
/// `tx`; run by the writer before every batch's commit. Answers how many
/// rows are left for the idle writer.
pub(crate) fn if_due(
    tx: &Transaction<'_>,
    positions: [(i64, i64); DEFERRED],
) -> Result<i64, StoreError> {
    let mut left = 0;
    for (deferred, (indexed, newest)) in ALL.into_iter().zip(positions) {
        if deferred.in_batches && newest - indexed >= CATCH_UP_ROWS_MOST {
            deferred.catch_up_from(tx, indexed, newest)?;
        } else {
            left += (newest - indexed).max(0);
        }
    }
    Ok(left)
}

/// One step of catching up while the writer is idle: the next
/// [`CATCH_UP_ROWS`] rows at most, oldest first, of the first thing behind.
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
        if deferred.done == MESSAGES.done {
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

/// How many rows wait for [`catch_up`], each time it would take them
/// (a message counts twice: its index, its conversation).
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
