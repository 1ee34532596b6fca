//! Moving a house from one node's store to another's (docs/cluster.md,
//! "Moving a house").
//!
//! A house's data is its rows in a handful of tables — the house, its
//! members and tokens, its threads with their participants and messages,
//! its files' versions, revisions and contents, its environments' records
//! — all found by the house's id. [`export`] reads them in one snapshot as a
//! stream of parts (MessagePack, LZ4; each under [`PART_BYTES`] before
//! compression, each decoded alone), and [`commit`] writes the parts staged
//! in another store into it in one transaction, one part at a time — so
//! neither node holds more of the house in memory than a part and its
//! largest file. What is the node's own is not carried:
//! the bots' seats in the threads (their conversations live with the bots;
//! a bot of the new node takes its seat anew and reads what it has not
//! seen), the rounds (a house moves only once every round is answered), the
//! files' search index (the new node indexes the files again) and the
//! environments' running state (they move stopped, with a user id of the
//! new node).
//!
//! Who serves a house is decided by its **fence**, a row per house in each
//! store, with an epoch that only grows:
//!
//! - the source records `moving` (epoch e, to the target) before it copies
//!   anything, and from then on does not serve the house;
//! - the target stages the bundle's parts, then commits the whole house
//!   with its fence `owned` at epoch e — from that commit it serves it;
//! - the source then deletes the house and records `moved` (epoch e, to the
//!   target), in one transaction ([`finish`]).
//!
//! When the source cannot tell whether the target committed (either node
//! was killed, a call timed out) it asks the target to refuse epoch e
//! ([`refuse`]): the answer is either "committed already" (the source
//! finishes) or "refused", after which a late commit of epoch e is refused
//! too, and the source serves the house again ([`roll_back`]). So at no time
//! do two nodes serve one house.

mod parts;

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use parts::{codec, Importer};
pub use parts::{export, Counts, PART_BYTES};

use super::house::delete_house;
use super::{cluster, mailbox, now, StoreError};
use crate::id::MsgId;
use crate::protocol::Address;

/// The migration that makes the fences and the staged parts.
pub const HOUSE_MOVES: &str = r#"
CREATE TABLE house_fences (
    house_id   TEXT PRIMARY KEY,
    name       TEXT NOT NULL,
    epoch      INTEGER NOT NULL,
    state      TEXT NOT NULL CHECK (state IN ('owned', 'moving', 'moved', 'refused')),
    peer       TEXT NOT NULL DEFAULT '',
    updated_at TEXT NOT NULL
);
CREATE TABLE house_move_parts (
    house_id TEXT NOT NULL,
    epoch    INTEGER NOT NULL,
    seq      INTEGER NOT NULL,
    data     BLOB NOT NULL,
    PRIMARY KEY (house_id, epoch, seq)
) WITHOUT ROWID;
"#;

/// Who serves a house, as this store knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fence {
    /// The house's id.
    pub house_id: String,
    /// Its name.
    pub name: String,
    /// The epoch of the last move this store took part in.
    pub epoch: i64,
    /// `owned`, `moving` (to `peer`), `moved` (to `peer`) or `refused`.
    pub state: String,
    /// The other node of that move.
    pub peer: String,
}

fn fence_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Fence> {
    Ok(Fence {
        house_id: r.get(0)?,
        name: r.get(1)?,
        epoch: r.get(2)?,
        state: r.get(3)?,
        peer: r.get(4)?,
    })
}

const FENCE: &str = "SELECT house_id, name, epoch, state, peer FROM house_fences";

/// The fence of `house_id`, if a move ever touched it here.
pub fn fence(conn: &Connection, house_id: &str) -> Result<Option<Fence>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{FENCE} WHERE house_id = ?1"))?
        .query_row(params![house_id], fence_row)
        .optional()?)
}

/// Every move this store is in the middle of or made (`moving`, `moved`).
pub fn moves(conn: &Connection) -> Result<Vec<Fence>, StoreError> {
    Ok(conn
        .prepare(&format!("{FENCE} WHERE state IN ('moving', 'moved')"))?
        .query_map([], fence_row)?
        .collect::<Result<_, _>>()?)
}

fn set_fence(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    epoch: i64,
    state: &str,
    peer: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO house_fences (house_id, name, epoch, state, peer, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6)
         ON CONFLICT (house_id) DO UPDATE SET name = excluded.name, epoch = excluded.epoch,
             state = excluded.state, peer = excluded.peer, updated_at = excluded.updated_at",
    )?
    .execute(params![house_id, name, epoch, state, peer, now()])?;
    Ok(())
}

/// The source's first step: the house stops being served here, to be
/// moved to `to` at the returned epoch. Refused while another move of it
/// is under way.
pub fn begin(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    to: &str,
) -> Result<i64, StoreError> {
    let last = fence(tx, house_id)?;
    if let Some(f) = last.as_ref().filter(|f| f.state == "moving") {
        return Err(StoreError::Conflict(format!(
            "house `{name}` is being moved to node `{}` already",
            f.peer
        )));
    }
    let epoch = last.map_or(0, |f| f.epoch) + 1;
    set_fence(tx, house_id, name, epoch, "moving", to)?;
    Ok(epoch)
}

/// What [`finish`] did besides deleting the house.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Finished {
    /// The house's threads, routed to the target from now on.
    pub threads: Vec<String>,
    /// The messages for them that waited here, moved to the outbox for the
    /// target (oldest first).
    pub forwarded: Vec<MsgId>,
}

/// The source's last step, once the target committed the house at
/// `epoch`, in one transaction: what waits in the mailbox for the house's
/// threads (posts made during the move) moved to the outbox for the
/// target, the threads' route noted (a later send to one goes there), the
/// house deleted here and the fence `moved`. `None` if the fence is not
/// that move's (finished before, or rolled back).
pub fn finish(
    tx: &Transaction<'_>,
    house_id: &str,
    epoch: i64,
) -> Result<Option<Finished>, StoreError> {
    let Some(f) = fence(tx, house_id)?.filter(|f| f.state == "moving" && f.epoch == epoch) else {
        return Ok(None);
    };
    let threads = thread_ids(tx, house_id)?;
    let mut forwarded = Vec::new();
    for thread in &threads {
        let addr = Address::Thread(thread.parse().map_err(|e| codec(format!("{e}")))?);
        for envelope in mailbox::pending(tx, &addr, usize::MAX)? {
            if cluster::forward(tx, &envelope, &f.peer)? {
                forwarded.push(envelope.id);
            }
        }
        cluster::set_route(tx, thread, &f.peer)?;
    }
    delete_house(tx, house_id)?;
    set_fence(tx, house_id, &f.name, epoch, "moved", &f.peer)?;
    Ok(Some(Finished { threads, forwarded }))
}

/// The ids of the house's threads.
pub fn thread_ids(conn: &Connection, house_id: &str) -> Result<Vec<String>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT id FROM threads WHERE house_id = ?1")?;
    let rows = stmt.query_map(params![house_id], |r| r.get(0))?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// The source serves the house again: the target refused `epoch`.
pub fn roll_back(tx: &Transaction<'_>, house_id: &str, epoch: i64) -> Result<bool, StoreError> {
    let Some(f) = fence(tx, house_id)?.filter(|f| f.state == "moving" && f.epoch == epoch) else {
        return Ok(false);
    };
    set_fence(tx, house_id, &f.name, epoch, "owned", "")?;
    Ok(true)
}

/// Why the target will not take a move at `epoch`, if it will not.
fn refused_at(
    tx: &Transaction<'_>,
    house_id: &str,
    epoch: i64,
) -> Result<Option<String>, StoreError> {
    Ok(match fence(tx, house_id)? {
        Some(f) if f.epoch > epoch || (f.epoch == epoch && f.state != "owned") => Some(format!(
            "this node has seen move {} of house `{}` ({}); move {epoch} is over",
            f.epoch, f.name, f.state
        )),
        _ => None,
    })
}

/// The target keeps piece `seq` of the house at `epoch` (the parts of an
/// earlier epoch go).
pub fn stage(
    tx: &Transaction<'_>,
    house_id: &str,
    epoch: i64,
    seq: i64,
    data: &[u8],
) -> Result<(), StoreError> {
    if let Some(why) = refused_at(tx, house_id, epoch)? {
        return Err(StoreError::Conflict(why));
    }
    tx.prepare_cached("DELETE FROM house_move_parts WHERE house_id = ?1 AND epoch < ?2")?
        .execute(params![house_id, epoch])?;
    tx.prepare_cached(
        "INSERT INTO house_move_parts (house_id, epoch, seq, data) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (house_id, epoch, seq) DO UPDATE SET data = excluded.data",
    )?
    .execute(params![house_id, epoch, seq, data])?;
    Ok(())
}

/// What a commit did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Committed {
    /// The house is this node's now, holding this much.
    Now(Counts),
    /// It was already, at this epoch (a retried commit).
    Already,
}

/// The target takes the house at `epoch` from `from`: the `parts` pieces
/// staged, imported, its fence `owned`, in the caller's transaction.
pub fn commit(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    epoch: i64,
    from: &str,
    parts: i64,
) -> Result<Committed, StoreError> {
    if fence(tx, house_id)?.is_some_and(|f| f.epoch == epoch && f.state == "owned") {
        return Ok(Committed::Already);
    }
    if let Some(why) = refused_at(tx, house_id, epoch)? {
        return Err(StoreError::Conflict(why));
    }
    let taken: Option<String> = tx
        .query_row(
            "SELECT name FROM houses WHERE id = ?1 OR name = ?2 COLLATE NOCASE",
            params![house_id, name],
            |r| r.get(0),
        )
        .optional()?;
    if let Some(other) = taken {
        return Err(StoreError::Conflict(format!(
            "this node has a house `{other}` already; a house named `{name}` cannot move here"
        )));
    }
    let staged: i64 = tx.query_row(
        "SELECT COUNT(*) FROM house_move_parts WHERE house_id = ?1 AND epoch = ?2",
        params![house_id, epoch],
        |r| r.get(0),
    )?;
    if staged != parts {
        return Err(StoreError::Invalid(format!(
            "{staged} of the house's {parts} parts arrived; send them again"
        )));
    }
    let mut importer = Importer::new(tx);
    {
        let mut stmt = tx.prepare(
            "SELECT data FROM house_move_parts WHERE house_id = ?1 AND epoch = ?2 ORDER BY seq",
        )?;
        let mut rows = stmt.query(params![house_id, epoch])?;
        while let Some(row) = rows.next()? {
            let data = row.get_ref(0)?.as_blob().map_err(rusqlite::Error::from)?;
            importer.take(data)?;
        }
    }
    let (id, counts) = importer.finish()?;
    if id != house_id {
        return Err(codec(format!(
            "the parts are of house {id}, not {house_id}"
        )));
    }
    tx.prepare_cached("DELETE FROM house_move_parts WHERE house_id = ?1")?
        .execute(params![house_id])?;
    // Its threads are here again, should they have been routed away.
    tx.prepare_cached(
        "DELETE FROM cluster_routes WHERE addr IN (SELECT id FROM threads WHERE house_id = ?1)",
    )?
    .execute(params![house_id])?;
    set_fence(tx, house_id, name, epoch, "owned", from)?;
    Ok(Committed::Now(counts))
}

/// The target answers a source that cannot tell whether the move at
/// `epoch` was committed: true if it was; else the epoch is refused from
/// now on (a late commit of it fails) and its staged parts go.
pub fn refuse(
    tx: &Transaction<'_>,
    house_id: &str,
    name: &str,
    epoch: i64,
) -> Result<bool, StoreError> {
    match fence(tx, house_id)? {
        Some(f) if f.epoch == epoch && f.state == "owned" => return Ok(true),
        Some(f) if f.epoch > epoch => return Ok(false),
        _ => {}
    }
    tx.prepare_cached("DELETE FROM house_move_parts WHERE house_id = ?1")?
        .execute(params![house_id])?;
    set_fence(tx, house_id, name, epoch, "refused", "")?;
    Ok(false)
}

/// Whether a round of the house is unanswered, or a message for its bots'
/// seats waits, or one for its threads that is not in `held` (posts made
/// during the move, held for the house's new node): a house moves only
/// when none.
pub fn busy(
    conn: &Connection,
    house_id: &str,
    held: &dyn Fn(&str) -> bool,
) -> Result<bool, StoreError> {
    let rounds_or_seats: bool = conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM thread_rounds r JOIN threads t ON t.id = r.thread_id
                            WHERE t.house_id = ?1 AND r.answered < r.offered)
                 OR EXISTS (SELECT 1 FROM mailbox m WHERE m.consumed_at IS NULL AND m.to_addr IN (
                            SELECT s.conversation_id FROM thread_seats s
                            JOIN threads t ON t.id = s.thread_id WHERE t.house_id = ?1))",
        )?
        .query_row(params![house_id], |r| r.get(0))?;
    if rounds_or_seats {
        return Ok(true);
    }
    let mut stmt = conn.prepare_cached(
        "SELECT m.id FROM mailbox m WHERE m.consumed_at IS NULL AND m.to_addr IN (
             SELECT id FROM threads WHERE house_id = ?1)",
    )?;
    let mut rows = stmt.query(params![house_id])?;
    while let Some(row) = rows.next()? {
        let id: String = row.get(0)?;
        if !held(&id) {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
#[path = "house_move_tests.rs"]
mod tests;
