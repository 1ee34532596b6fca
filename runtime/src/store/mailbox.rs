//! The durable mailbox between agents.
//!
//! A send between agents must survive a crash of either side, so it goes
//! through the store: [`Store::send`] answers only once the envelope is
//! committed. The receiver calls [`consume`] in the SAME write job that
//! applies the message (appends it to its conversation, records a result),
//! so the message is applied and marked consumed together or not at all.
//! After a crash, [`pending_all`] gives back every message not yet
//! consumed, and applying one again is safe: a consumed message is never
//! pending, and [`consume`] says `false` to a redelivery so the caller can
//! skip it. The envelope's [`MsgId`] is the idempotency key: sending the
//! same id twice stores it once.
//!
//! ```
//! use troupe_runtime::id::{ConversationId, MsgId};
//! use troupe_runtime::protocol::{Address, Envelope, Payload};
//! use troupe_runtime::store::{mailbox, Store};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! # let dir = tempfile::tempdir()?;
//! # let store = Store::open(&dir.path().join("troupe.db"))?;
//! let to = Address::Conversation(ConversationId::new());
//! let envelope = Envelope {
//!     id: MsgId::new(),
//!     from: Address::Service("node".into()),
//!     to: to.clone(),
//!     body: Payload::Notice { topic: "routine".into(), text: "done".into(), data: Default::default() },
//!     sent_at: chrono::Utc::now(),
//! };
//! let id = store.send(envelope).await?; // committed when this returns
//!
//! let inbox = store.read(move |conn| mailbox::pending(conn, &to, 10)).await?;
//! // The receiver applies and consumes in one write job.
//! let applied = store.write(move |tx| {
//!     if !mailbox::consume(tx, id)? {
//!         return Ok(false); // already applied before a crash
//!     }
//!     // … append inbox[0] to the conversation with `tx` here …
//!     Ok(true)
//! }).await?;
//! assert!(applied);
//! # Ok(())
//! # }
//! ```

use rusqlite::{params, Connection, Transaction};

use super::error::StoreError;
use super::{now, Store};
use crate::id::MsgId;
use crate::protocol::{Address, Envelope};

impl Store {
    /// Stores `envelope` for its recipient and returns its id once committed.
    ///
    /// Idempotent: sending an id that is already stored (consumed or not)
    /// changes nothing and returns the id again.
    pub async fn send(&self, envelope: Envelope) -> Result<MsgId, StoreError> {
        let id = envelope.id;
        self.write(move |tx| enqueue(tx, &envelope)).await?;
        Ok(id)
    }
}

/// Stores `envelope` in the caller's transaction; false if its id was
/// already stored (the earlier copy stands).
pub fn enqueue(tx: &Transaction<'_>, envelope: &Envelope) -> Result<bool, StoreError> {
    let json = serde_json::to_string(envelope).map_err(|e| StoreError::Codec {
        what: "envelope",
        detail: e.to_string(),
    })?;
    let inserted = tx
        .prepare_cached(
            "INSERT INTO mailbox (id, to_addr, from_addr, envelope, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT (id) DO NOTHING",
        )?
        .execute(params![
            envelope.id.to_string(),
            envelope.to.to_string(),
            envelope.from.to_string(),
            json,
            now(),
        ])?;
    Ok(inserted == 1)
}

/// Up to `limit` messages for `to` not yet consumed, in send order.
pub fn pending(conn: &Connection, to: &Address, limit: usize) -> Result<Vec<Envelope>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(
        "SELECT envelope FROM mailbox WHERE to_addr = ?1 AND consumed_at IS NULL
         ORDER BY rowid LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![to.to_string(), limit], |r| r.get::<_, String>(0))?;
    rows.map(|r| decode(&r?)).collect()
}

/// Whether message `id` is stored and not yet consumed: a receiver that
/// must not apply a message twice asks before it applies one, then
/// consumes it in the transaction that records the effect.
pub fn is_pending(conn: &Connection, id: MsgId) -> Result<bool, StoreError> {
    let found = conn
        .prepare_cached("SELECT 1 FROM mailbox WHERE id = ?1 AND consumed_at IS NULL")?
        .exists([id.to_string()])?;
    Ok(found)
}

/// Up to `limit` messages not yet consumed whose recipient's address
/// starts with `prefix` (`actor:desk/`: every actor of a kind), in send
/// order.
pub fn pending_prefixed(
    conn: &Connection,
    prefix: &str,
    limit: usize,
) -> Result<Vec<Envelope>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let end = format!("{prefix}\u{10FFFF}");
    let mut stmt = conn.prepare_cached(
        "SELECT envelope FROM mailbox WHERE to_addr >= ?1 AND to_addr < ?2 AND consumed_at IS NULL
         ORDER BY rowid LIMIT ?3",
    )?;
    let rows = stmt.query_map(params![prefix, end, limit], |r| r.get::<_, String>(0))?;
    rows.map(|r| decode(&r?)).collect()
}

/// Every message not yet consumed, for every recipient, in send order: what
/// start-up redelivers after a crash.
pub fn pending_all(conn: &Connection) -> Result<Vec<Envelope>, StoreError> {
    let mut stmt = conn
        .prepare_cached("SELECT envelope FROM mailbox WHERE consumed_at IS NULL ORDER BY rowid")?;
    let rows = stmt.query_map([], |r| r.get::<_, String>(0))?;
    rows.map(|r| decode(&r?)).collect()
}

/// How many messages wait to be consumed, for every recipient.
pub fn pending_count(conn: &Connection) -> Result<u64, StoreError> {
    let n: i64 = conn
        .prepare_cached("SELECT COUNT(*) FROM mailbox WHERE consumed_at IS NULL")?
        .query_row([], |r| r.get(0))?;
    Ok(u64::try_from(n).unwrap_or(0))
}

/// Marks message `id` consumed in the caller's transaction.
///
/// Returns false if it was already consumed (or is unknown): the caller must
/// then not apply it again. Roll the transaction back (return an error from
/// the job) and the message stays pending.
pub fn consume(tx: &Transaction<'_>, id: MsgId) -> Result<bool, StoreError> {
    let changed = tx
        .prepare_cached(
            "UPDATE mailbox SET consumed_at = ?2 WHERE id = ?1 AND consumed_at IS NULL",
        )?
        .execute(params![id.to_string(), now()])?;
    Ok(changed == 1)
}

/// Deletes consumed messages older than `before` (RFC 3339); returns how many.
pub fn purge_consumed(tx: &Transaction<'_>, before: &str) -> Result<usize, StoreError> {
    let n = tx
        .prepare_cached("DELETE FROM mailbox WHERE consumed_at IS NOT NULL AND consumed_at < ?1")?
        .execute([before])?;
    Ok(n)
}

fn decode(json: &str) -> Result<Envelope, StoreError> {
    serde_json::from_str(json).map_err(|e| StoreError::Codec {
        what: "envelope",
        detail: e.to_string(),
    })
}

#[cfg(test)]
#[path = "mailbox_tests.rs"]
mod tests;
