//! A house thread's messages: appended once each (by id), read in pages,
//! and found through their full-text index — always within one house.

use chrono::Utc;
use rusqlite::{params, Connection, Row, Transaction};

use super::parse_id;
use crate::id::{HouseId, MsgId, ThreadId};
use crate::protocol::house::{Attachment, MemberKind, ThreadHit, ThreadMessage};
use crate::store::error::StoreError;

/// Appends a message to `thread` (once: a message with the same id is not
/// added again) and marks the thread active. `None` when it was there already.
pub fn append_message(
    tx: &Transaction<'_>,
    thread: ThreadId,
    id: MsgId,
    author: &str,
    kind: MemberKind,
    via: Option<ThreadId>,
    text: &str,
) -> Result<Option<ThreadMessage>, StoreError> {
    append_message_with(tx, thread, id, (author, kind), via, text, &[])
}

/// [`append_message`] of a message carrying `attachments`.
pub fn append_message_with(
    tx: &Transaction<'_>,
    thread: ThreadId,
    id: MsgId,
    (author, kind): (&str, MemberKind),
    via: Option<ThreadId>,
    text: &str,
    attachments: &[Attachment],
) -> Result<Option<ThreadMessage>, StoreError> {
    let now = Utc::now();
    let at = crate::store::timestamp(now);
    let carried = serde_json::to_string(attachments)?;
    let n = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO thread_messages (id, thread_id, author, author_kind, via_thread, created_at, text, attachments)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        )?
        .execute(params![
            id.to_string(),
            thread.to_string(),
            author,
            kind.as_str(),
            via.map(|v| v.to_string()),
            at,
            text,
            carried
        ])?;
    if n == 0 {
        return Ok(None);
    }
    let seq = tx.last_insert_rowid();
    tx.prepare_cached(
        "UPDATE threads SET last_activity_at = ?2, messages = messages + 1 WHERE id = ?1",
    )?
    .execute(params![thread.to_string(), at])?;
    Ok(Some(ThreadMessage {
        seq,
        id,
        author: author.to_string(),
        author_kind: kind,
        via,
        text: text.to_string(),
        attachments: attachments.to_vec(),
        created_at: now,
    }))
}

const SELECT_MESSAGE: &str =
    "SELECT seq, id, author, author_kind, via_thread, text, created_at, attachments FROM thread_messages";

type RawMessage = (
    i64,
    String,
    String,
    String,
    Option<String>,
    String,
    String,
    String,
);

fn message_row(r: &Row<'_>) -> rusqlite::Result<RawMessage> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ))
}

fn parse_message(
    (seq, id, author, kind, via, text, at, attachments): RawMessage,
) -> Result<ThreadMessage, StoreError> {
    Ok(ThreadMessage {
        seq,
        id: parse_id(&id)?,
        author,
        author_kind: MemberKind::parse(&kind).unwrap_or(MemberKind::Human),
        via: via.as_deref().map(parse_id).transpose()?,
        text,
        // Written by this code as JSON; a row it cannot read shows no image.
        attachments: serde_json::from_str(&attachments).unwrap_or_default(),
        created_at: crate::store::parse_time(&at)?,
    })
}

/// A page of `thread`'s messages, oldest first: the `limit` messages before
/// the newest `offset` ones.
pub fn read_messages(
    conn: &Connection,
    thread: ThreadId,
    offset: usize,
    limit: usize,
) -> Result<Vec<ThreadMessage>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT * FROM ({SELECT_MESSAGE} WHERE thread_id = ?1 ORDER BY seq DESC LIMIT ?2 OFFSET ?3)
         ORDER BY seq"
    ))?;
    let rows = stmt.query_map(
        params![
            thread.to_string(),
            i64::try_from(limit).unwrap_or(i64::MAX),
            i64::try_from(offset).unwrap_or(i64::MAX)
        ],
        message_row,
    )?;
    rows.map(|r| parse_message(r?)).collect()
}

/// `thread`'s messages after `seq`, oldest first, at most the newest `limit`.
pub fn messages_after(
    conn: &Connection,
    thread: ThreadId,
    seq: i64,
    limit: usize,
) -> Result<Vec<ThreadMessage>, StoreError> {
    page(conn, thread, seq, limit, ">", true)
}

/// `thread`'s messages after `seq`, oldest first, at most the oldest
/// `limit`: a page of a replay.
pub fn messages_from(
    conn: &Connection,
    thread: ThreadId,
    seq: i64,
    limit: usize,
) -> Result<Vec<ThreadMessage>, StoreError> {
    page(conn, thread, seq, limit, ">", false)
}

/// `thread`'s messages before `seq`, oldest first, at most the newest
/// `limit`: a page back.
pub fn messages_before(
    conn: &Connection,
    thread: ThreadId,
    seq: i64,
    limit: usize,
) -> Result<Vec<ThreadMessage>, StoreError> {
    page(conn, thread, seq, limit, "<", true)
}

/// A page of `thread`'s messages beside `seq` (`cmp`: `>` or `<`),
/// oldest first: the newest `limit` of them when `newest`, else the oldest.
fn page(
    conn: &Connection,
    thread: ThreadId,
    seq: i64,
    limit: usize,
    cmp: &str,
    newest: bool,
) -> Result<Vec<ThreadMessage>, StoreError> {
    let inner = format!(
        "{SELECT_MESSAGE} WHERE thread_id = ?1 AND seq {cmp} ?2 ORDER BY seq {} LIMIT ?3",
        if newest { "DESC" } else { "" }
    );
    let sql = if newest {
        format!("SELECT * FROM ({inner}) ORDER BY seq")
    } else {
        inner
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(
        params![
            thread.to_string(),
            seq,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
        message_row,
    )?;
    rows.map(|r| parse_message(r?)).collect()
}

/// Keyword search over the messages of `house`'s threads (archived ones
/// included), best first. Words are taken as plain text, all required.
pub fn search(
    conn: &Connection,
    house: HouseId,
    query: &str,
    limit: usize,
) -> Result<Vec<ThreadHit>, StoreError> {
    let Some(words) = crate::store::search::fts_query(query) else {
        return Ok(Vec::new());
    };
    let mut stmt = conn.prepare_cached(
        "SELECT m.thread_id, t.name, m.seq, m.author, snippet(thread_fts, 0, '[', ']', '…', 16), m.created_at
         FROM thread_fts JOIN thread_messages m ON m.seq = thread_fts.rowid
         JOIN threads t ON t.id = m.thread_id
         WHERE thread_fts MATCH ?1 AND t.house_id = ?2 ORDER BY rank LIMIT ?3",
    )?;
    let rows = stmt.query_map(
        params![
            words,
            house.to_string(),
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
        |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, Option<String>>(1)?,
                r.get::<_, i64>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, String>(5)?,
            ))
        },
    )?;
    let mut hits = Vec::new();
    for row in rows {
        let (thread, thread_name, seq, author, snippet, at) = row?;
        hits.push(ThreadHit {
            thread: parse_id(&thread)?,
            thread_name,
            seq,
            author,
            snippet,
            created_at: crate::store::parse_time(&at)?,
        });
    }
    Ok(hits)
}
