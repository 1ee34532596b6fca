//! The director's bookkeeping: each bot's seat in a thread (its
//! conversation there and the last message it was shown) and each round's
//! offered and answered turns.

use rusqlite::{params, Connection, OptionalExtension, Transaction};

use super::super::conversations::parse_id;
use super::super::error::StoreError;
use crate::id::{ConversationId, HouseId, MsgId, ThreadId};

/// A bot's seat in a thread: its conversation there and the last message
/// it was shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SeatRow {
    /// The bot's conversation in the thread.
    pub conversation: ConversationId,
    /// The newest message it has been offered.
    pub seen_seq: i64,
}

/// `handle`'s seat in `thread`, if it has had one.
pub fn seat(
    conn: &Connection,
    thread: ThreadId,
    handle: &str,
) -> Result<Option<SeatRow>, StoreError> {
    conn.prepare_cached(
        "SELECT conversation_id, seen_seq FROM thread_seats WHERE thread_id = ?1 AND handle = ?2",
    )?
    .query_row(params![thread.to_string(), handle], |r| {
        Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?))
    })
    .optional()?
    .map(|(conv, seen)| {
        Ok(SeatRow {
            conversation: parse_id(&conv)?,
            seen_seq: seen,
        })
    })
    .transpose()
}

/// Records `handle`'s seat in `thread`.
pub fn put_seat(
    tx: &Transaction<'_>,
    thread: ThreadId,
    handle: &str,
    seat: SeatRow,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO thread_seats (thread_id, handle, conversation_id, seen_seq) VALUES (?1, ?2, ?3, ?4)
         ON CONFLICT (thread_id, handle) DO UPDATE SET conversation_id = excluded.conversation_id,
             seen_seq = max(seen_seq, excluded.seen_seq)",
    )?
    .execute(params![
        thread.to_string(),
        handle,
        seat.conversation.to_string(),
        seat.seen_seq
    ])?;
    Ok(())
}

/// The conversations that work for houses other than `house`: bots' seats
/// in their threads and the conversations opened for them (what a
/// conversation in `house` must not find by searching).
pub fn seated_elsewhere(
    conn: &Connection,
    house: HouseId,
) -> Result<Vec<ConversationId>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.conversation_id FROM thread_seats s JOIN threads t ON t.id = s.thread_id
         WHERE t.house_id != ?1
         UNION SELECT conversation_id FROM openings WHERE json_extract(spec, '$.house') != ?1",
    )?;
    let rows = stmt.query_map(params![house.to_string()], |r| r.get::<_, String>(0))?;
    rows.map(|r| parse_id(&r?)).collect()
}

/// The conversations that work for `house`: bots' seats in its threads,
/// and the conversations opened for it (a seated conversation's
/// subagents, a message from it to another bot).
pub fn conversations_of(
    conn: &Connection,
    house: HouseId,
) -> Result<Vec<ConversationId>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.conversation_id FROM thread_seats s JOIN threads t ON t.id = s.thread_id
         WHERE t.house_id = ?1
         UNION SELECT conversation_id FROM openings WHERE json_extract(spec, '$.house') = ?1",
    )?;
    let rows = stmt.query_map(params![house.to_string()], |r| r.get::<_, String>(0))?;
    rows.map(|r| parse_id(&r?)).collect()
}

/// The conversations of the bots seated in `thread`.
pub fn seats_of(conn: &Connection, thread: ThreadId) -> Result<Vec<ConversationId>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT conversation_id FROM thread_seats WHERE thread_id = ?1")?;
    let rows = stmt.query_map(params![thread.to_string()], |r| r.get::<_, String>(0))?;
    rows.map(|r| parse_id(&r?)).collect()
}

/// Counts `offered` more turns in `round` of `thread`.
pub fn round_offered(
    tx: &Transaction<'_>,
    round: MsgId,
    thread: ThreadId,
    offered: u32,
) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO thread_rounds (round, thread_id, offered) VALUES (?1, ?2, ?3)
         ON CONFLICT (round) DO UPDATE SET offered = offered + excluded.offered",
    )?
    .execute(params![round.to_string(), thread.to_string(), offered])?;
    Ok(())
}

/// Counts one offer of `round` answered; the round's (offered, answered) after.
pub fn round_answered(tx: &Transaction<'_>, round: MsgId) -> Result<(u32, u32), StoreError> {
    tx.prepare_cached("UPDATE thread_rounds SET answered = answered + 1 WHERE round = ?1")?
        .execute(params![round.to_string()])?;
    round_state(tx, round)
}

/// `round`'s (offered, answered) turns.
pub fn round_state(conn: &Connection, round: MsgId) -> Result<(u32, u32), StoreError> {
    Ok(conn
        .prepare_cached("SELECT offered, answered FROM thread_rounds WHERE round = ?1")?
        .query_row(params![round.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or((0, 0)))
}

/// The thread and the bot whose seat is `conversation`, with the thread's
/// house: how a conversation's events find their thread.
pub fn seat_of(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<Option<(HouseId, ThreadId, String)>, StoreError> {
    conn.prepare_cached(
        "SELECT t.house_id, s.thread_id, s.handle FROM thread_seats s
         JOIN threads t ON t.id = s.thread_id WHERE s.conversation_id = ?1",
    )?
    .query_row(params![conversation.to_string()], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
        ))
    })
    .optional()?
    .map(|(house, thread, handle)| Ok((parse_id(&house)?, parse_id(&thread)?, handle)))
    .transpose()
}
