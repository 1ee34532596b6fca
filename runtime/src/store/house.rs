//! Houses, their members, threads, thread messages (with a full-text
//! index, in `house_messages.rs`) and the director's bookkeeping (in
//! `house_rounds.rs`).
//!
//! Every lookup of a thread names its house: a thread of another house is
//! not found, which is how one house's threads stay invisible to another's
//! members. Handles and names compare case-insensitively (`COLLATE NOCASE`).

use chrono::Utc;
use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::conversations::parse_id;
use super::error::StoreError;
use crate::id::{BotId, HouseId, ThreadId};
use crate::protocol::house::{
    House, ListenMode, Member, MemberKind, ThreadFilter, ThreadInfo, THREAD_LINK,
};

#[path = "house_messages.rs"]
mod messages;
#[path = "house_rounds.rs"]
mod rounds;
pub use messages::{
    append_message, append_message_with, messages_after, messages_before, messages_from,
    read_messages, search,
};
pub use rounds::{
    conversations_of, put_seat, round_answered, round_offered, round_state, seat, seat_of,
    seated_elsewhere, seats_of, SeatRow,
};

/// Migration 5: houses, members, threads, their messages and search, the
/// bots' seats in threads and the director's rounds. A home becomes the
/// house `home` with its owner and its bots as members.
pub const HOUSES: &str = r#"
CREATE TABLE houses (
    id         TEXT PRIMARY KEY,
    name       TEXT NOT NULL UNIQUE COLLATE NOCASE,
    settings   TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(settings)),
    created_at TEXT NOT NULL
);
CREATE TABLE house_members (
    house_id     TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    handle       TEXT NOT NULL COLLATE NOCASE,
    kind         TEXT NOT NULL CHECK (kind IN ('human', 'bot')),
    display_name TEXT NOT NULL DEFAULT '',
    bot_id       TEXT,
    listen       TEXT CHECK (listen IN ('all', 'mentions', 'off')),
    joined_at    TEXT NOT NULL,
    PRIMARY KEY (house_id, handle)
) WITHOUT ROWID;
CREATE INDEX house_members_by_bot ON house_members (bot_id) WHERE bot_id IS NOT NULL;
CREATE TABLE threads (
    id               TEXT PRIMARY KEY,
    house_id         TEXT NOT NULL REFERENCES houses(id) ON DELETE CASCADE,
    name             TEXT COLLATE NOCASE,
    tags             TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags)),
    pinned           INTEGER NOT NULL DEFAULT 0,
    archived_at      TEXT,
    created_by       TEXT NOT NULL DEFAULT '',
    created_at       TEXT NOT NULL,
    last_activity_at TEXT NOT NULL,
    messages         INTEGER NOT NULL DEFAULT 0
);
CREATE UNIQUE INDEX threads_by_name ON threads (house_id, name) WHERE name IS NOT NULL;
CREATE INDEX threads_by_activity ON threads (house_id, last_activity_at);
CREATE TABLE thread_participants (
    thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    handle    TEXT NOT NULL COLLATE NOCASE,
    added_at  TEXT NOT NULL,
    PRIMARY KEY (thread_id, handle)
) WITHOUT ROWID;
CREATE INDEX thread_participants_by_handle ON thread_participants (handle, thread_id);
CREATE TABLE thread_seats (
    thread_id       TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    handle          TEXT NOT NULL COLLATE NOCASE,
    conversation_id TEXT NOT NULL,
    seen_seq        INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, handle)
) WITHOUT ROWID;
CREATE TABLE thread_messages (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE,
    thread_id   TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    author      TEXT NOT NULL,
    author_kind TEXT NOT NULL CHECK (author_kind IN ('human', 'bot')),
    via_thread  TEXT,
    created_at  TEXT NOT NULL,
    text        TEXT NOT NULL
);
CREATE INDEX thread_messages_by_thread ON thread_messages (thread_id, seq);
CREATE VIRTUAL TABLE thread_fts USING fts5(
    text, content = 'thread_messages', content_rowid = 'seq',
    tokenize = 'unicode61 remove_diacritics 2'
);
CREATE TRIGGER thread_messages_ai AFTER INSERT ON thread_messages BEGIN
    INSERT INTO thread_fts (rowid, text) VALUES (new.seq, new.text);
END;
CREATE TRIGGER thread_messages_ad AFTER DELETE ON thread_messages BEGIN
    INSERT INTO thread_fts (thread_fts, rowid, text) VALUES ('delete', old.seq, old.text);
END;
CREATE TABLE thread_rounds (
    round     TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL REFERENCES threads(id) ON DELETE CASCADE,
    offered   INTEGER NOT NULL DEFAULT 0,
    answered  INTEGER NOT NULL DEFAULT 0
) WITHOUT ROWID;
"#;

/// The house `home` every database has, with its owner and the bots there
/// were when houses came (none in a new database): the rows of the
/// migration that made houses ([`HOUSES`]).
pub const HOME_HOUSE: &str = r#"
INSERT INTO houses (id, name, created_at)
    VALUES ('house_' || lower(hex(randomblob(16))), 'home', strftime('%Y-%m-%dT%H:%M:%fZ', 'now'));
INSERT INTO house_members (house_id, handle, kind, display_name, joined_at)
    SELECT id, 'owner', 'human', 'Owner', created_at FROM houses WHERE name = 'home';
INSERT INTO house_members (house_id, handle, kind, display_name, bot_id, listen, joined_at)
    SELECT h.id, b.name, 'bot', b.name, b.id, 'mentions', h.created_at
    FROM houses h, bots b WHERE h.name = 'home' AND b.archived_at IS NULL;
"#;

/// Makes a house named `name`.
pub fn create_house(tx: &Transaction<'_>, name: &str) -> Result<House, StoreError> {
    let house = House {
        id: HouseId::new(),
        name: name.to_string(),
        created_at: Utc::now(),
    };
    tx.prepare_cached("INSERT INTO houses (id, name, created_at) VALUES (?1, ?2, ?3)")?
        .execute(params![
            house.id.to_string(),
            house.name,
            super::timestamp(house.created_at)
        ])?;
    Ok(house)
}

fn house_row(r: &Row<'_>) -> rusqlite::Result<(String, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
}

fn parse_house((id, name, created): (String, String, String)) -> Result<House, StoreError> {
    Ok(House {
        id: parse_id(&id)?,
        name,
        created_at: super::parse_time(&created)?,
    })
}

/// The house named `name` (case-insensitively).
pub fn house_by_name(conn: &Connection, name: &str) -> Result<Option<House>, StoreError> {
    conn.prepare_cached("SELECT id, name, created_at FROM houses WHERE name = ?1")?
        .query_row(params![name], house_row)
        .optional()?
        .map(parse_house)
        .transpose()
}

/// The house `id`.
pub fn house(conn: &Connection, id: HouseId) -> Result<Option<House>, StoreError> {
    conn.prepare_cached("SELECT id, name, created_at FROM houses WHERE id = ?1")?
        .query_row(params![id.to_string()], house_row)
        .optional()?
        .map(parse_house)
        .transpose()
}

/// Every house, by name.
pub fn list_houses(conn: &Connection) -> Result<Vec<House>, StoreError> {
    let mut stmt = conn.prepare_cached("SELECT id, name, created_at FROM houses ORDER BY name")?;
    let rows = stmt.query_map([], house_row)?;
    rows.map(|r| parse_house(r?)).collect()
}

/// Adds `member` to `house`, or updates the member with its handle
/// (display name, listen mode).
pub fn put_member(tx: &Transaction<'_>, house: HouseId, member: &Member) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO house_members (house_id, handle, kind, display_name, bot_id, listen, joined_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)
         ON CONFLICT (house_id, handle) DO UPDATE SET
             display_name = excluded.display_name, listen = excluded.listen, bot_id = excluded.bot_id",
    )?
    .execute(params![
        house.to_string(),
        member.handle,
        member.kind.as_str(),
        member.display_name,
        member.bot.map(|b| b.to_string()),
        member.listen.map(ListenMode::as_str),
        super::now(),
    ])?;
    Ok(())
}

const SELECT_MEMBER: &str =
    "SELECT handle, kind, display_name, bot_id, listen FROM house_members WHERE house_id = ?1";

fn member_row(r: &Row<'_>) -> rusqlite::Result<[Option<String>; 5]> {
    Ok([r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?])
}

fn parse_member(
    [handle, kind, display, bot, listen]: [Option<String>; 5],
) -> Result<Member, StoreError> {
    let kind = kind.unwrap_or_default();
    Ok(Member {
        handle: handle.unwrap_or_default(),
        kind: MemberKind::parse(&kind).ok_or_else(|| StoreError::Codec {
            what: "member kind",
            detail: kind.clone(),
        })?,
        display_name: display.unwrap_or_default(),
        bot: bot.as_deref().map(parse_id::<BotId>).transpose()?,
        listen: listen.as_deref().and_then(ListenMode::parse),
    })
}

/// The members of `house`: people first, then bots, each by handle.
pub fn members(conn: &Connection, house: HouseId) -> Result<Vec<Member>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT_MEMBER} ORDER BY kind DESC, handle"))?;
    let rows = stmt.query_map(params![house.to_string()], member_row)?;
    rows.map(|r| parse_member(r?)).collect()
}

/// The members of `house` among `handles` (any case, repeats allowed), in
/// the order of [`members`]: a lookup in the members' key for each handle,
/// where a post that concerns a few members of a large house would read them
/// all. (One query over the handles as a JSON list cost 70k instructions
/// for four: the list's virtual table, its temporary index and the sort.)
pub fn members_among(
    conn: &Connection,
    house: HouseId,
    handles: &[String],
) -> Result<Vec<Member>, StoreError> {
    let mut wanted: Vec<&str> = handles.iter().map(String::as_str).collect();
    wanted.sort_by_key(|h| h.to_ascii_lowercase());
    wanted.dedup_by(|a, b| a.eq_ignore_ascii_case(b));
    if wanted.is_empty() {
        return Ok(Vec::new());
    }
    let house = house.to_string();
    let mut stmt = conn.prepare_cached(&format!("{SELECT_MEMBER} AND handle = ?2"))?;
    let mut found = Vec::with_capacity(wanted.len());
    for handle in wanted {
        if let Some(row) = stmt
            .query_row(params![house, handle], member_row)
            .optional()?
        {
            found.push(parse_member(row)?);
        }
    }
    // As `members` orders them: people first, then bots, each by handle
    // (SQLite's NOCASE folds ASCII letters only, as this does).
    found.sort_by_cached_key(|m| (m.kind != MemberKind::Human, m.handle.to_ascii_lowercase()));
    Ok(found)
}

/// The member of `house` with `handle`.
pub fn member(
    conn: &Connection,
    house: HouseId,
    handle: &str,
) -> Result<Option<Member>, StoreError> {
    conn.prepare_cached(&format!("{SELECT_MEMBER} AND handle = ?2"))?
        .query_row(params![house.to_string(), handle], member_row)
        .optional()?
        .map(parse_member)
        .transpose()
}

/// Takes `handle` out of `house` and out of its threads; whether it was a member.
pub fn remove_member(
    tx: &Transaction<'_>,
    house: HouseId,
    handle: &str,
) -> Result<bool, StoreError> {
    tx.prepare_cached(
        "DELETE FROM thread_participants WHERE handle = ?2
         AND thread_id IN (SELECT id FROM threads WHERE house_id = ?1)",
    )?
    .execute(params![house.to_string(), handle])?;
    let n = tx
        .prepare_cached("DELETE FROM house_members WHERE house_id = ?1 AND handle = ?2")?
        .execute(params![house.to_string(), handle])?;
    Ok(n > 0)
}

/// A new thread in `house`; `name` must be free there.
pub fn create_thread(
    tx: &Transaction<'_>,
    house: HouseId,
    name: Option<&str>,
    tags: &[String],
    created_by: &str,
    participants: &[String],
) -> Result<ThreadInfo, StoreError> {
    let id = ThreadId::new();
    let now = Utc::now();
    let at = super::timestamp(now);
    let tags_json = serde_json::to_string(tags).unwrap_or_else(|_| "[]".into());
    tx.prepare_cached(
        "INSERT INTO threads (id, house_id, name, tags, created_by, created_at, last_activity_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6)",
    )?
    .execute(params![
        id.to_string(),
        house.to_string(),
        name,
        tags_json,
        created_by,
        at
    ])?;
    for handle in participants {
        add_participant(tx, id, handle)?;
    }
    Ok(ThreadInfo {
        id,
        house,
        name: name.map(str::to_string),
        tags: tags.to_vec(),
        pinned: false,
        archived: false,
        created_by: created_by.to_string(),
        created_at: now,
        last_activity: now,
        messages: 0,
        participants: participants.to_vec(),
    })
}

const SELECT_THREAD: &str = "SELECT t.id, t.house_id, t.name, t.tags, t.pinned, t.archived_at, t.created_by,
        t.created_at, t.last_activity_at, t.messages,
        (SELECT group_concat(handle, char(31)) FROM
            (SELECT handle FROM thread_participants p WHERE p.thread_id = t.id ORDER BY added_at, handle))
     FROM threads t";

type RawThread = (
    String,
    String,
    Option<String>,
    String,
    bool,
    Option<String>,
    String,
    String,
    String,
    i64,
    Option<String>,
);

fn thread_row(r: &Row<'_>) -> rusqlite::Result<RawThread> {
    Ok((
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
        r.get(9)?,
        r.get(10)?,
    ))
}

fn parse_thread(raw: RawThread) -> Result<ThreadInfo, StoreError> {
    let (id, house, name, tags, pinned, archived, by, created, active, messages, people) = raw;
    Ok(ThreadInfo {
        id: parse_id(&id)?,
        house: parse_id(&house)?,
        name,
        tags: serde_json::from_str(&tags).unwrap_or_default(),
        pinned,
        archived: archived.is_some(),
        created_by: by,
        created_at: super::parse_time(&created)?,
        last_activity: super::parse_time(&active)?,
        messages: u64::try_from(messages).unwrap_or(0),
        participants: people
            .map(|p| p.split('\u{1f}').map(str::to_string).collect())
            .unwrap_or_default(),
    })
}

/// The thread `id`, in whichever house it is.
pub fn thread(conn: &Connection, id: ThreadId) -> Result<Option<ThreadInfo>, StoreError> {
    conn.prepare_cached(&format!("{SELECT_THREAD} WHERE t.id = ?1"))?
        .query_row(params![id.to_string()], thread_row)
        .optional()?
        .map(parse_thread)
        .transpose()
}

/// The thread of `house` that `reference` names: its id, its link or its
/// name. A thread of another house is not found.
pub fn resolve_thread(
    conn: &Connection,
    house: HouseId,
    reference: &str,
) -> Result<Option<ThreadInfo>, StoreError> {
    let reference = reference.trim();
    let bare = reference.strip_prefix(THREAD_LINK).unwrap_or(reference);
    if let Ok(id) = bare.parse::<ThreadId>() {
        return Ok(thread(conn, id)?.filter(|t| t.house == house));
    }
    let bare = bare.strip_prefix('#').unwrap_or(bare);
    conn.prepare_cached(&format!(
        "{SELECT_THREAD} WHERE t.house_id = ?1 AND t.name = ?2"
    ))?
    .query_row(params![house.to_string(), bare], thread_row)
    .optional()?
    .map(parse_thread)
    .transpose()
}

/// The threads of `house` that `filter` keeps: pinned first, then the most
/// recently active.
pub fn list_threads(
    conn: &Connection,
    house: HouseId,
    filter: &ThreadFilter,
) -> Result<Vec<ThreadInfo>, StoreError> {
    let mut sql = format!("{SELECT_THREAD} WHERE t.house_id = ?1");
    if !filter.include_archived {
        sql.push_str(" AND t.archived_at IS NULL");
    }
    if filter.named_only {
        sql.push_str(" AND t.name IS NOT NULL");
    }
    if filter.pinned_only {
        sql.push_str(" AND t.pinned = 1");
    }
    if filter.participant.is_some() {
        sql.push_str(
            " AND EXISTS (SELECT 1 FROM thread_participants p WHERE p.thread_id = t.id AND p.handle = ?3)",
        );
    }
    sql.push_str(" ORDER BY t.pinned DESC, t.last_activity_at DESC, t.id DESC LIMIT ?2");
    let limit = i64::try_from(filter.limit.max(1)).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(&sql)?;
    let house = house.to_string();
    let rows = match &filter.participant {
        Some(handle) => stmt.query_map(params![house, limit, handle], thread_row)?,
        None => stmt.query_map(params![house, limit], thread_row)?,
    };
    rows.map(|r| parse_thread(r?)).collect()
}

/// Adds `handle` to `thread`; whether it was not in it yet.
pub fn add_participant(
    tx: &Transaction<'_>,
    thread: ThreadId,
    handle: &str,
) -> Result<bool, StoreError> {
    let n = tx
        .prepare_cached(
            "INSERT OR IGNORE INTO thread_participants (thread_id, handle, added_at) VALUES (?1, ?2, ?3)",
        )?
        .execute(params![thread.to_string(), handle, super::now()])?;
    Ok(n > 0)
}

/// Takes `handle` out of `thread`; whether it was in it.
pub fn remove_participant(
    tx: &Transaction<'_>,
    thread: ThreadId,
    handle: &str,
) -> Result<bool, StoreError> {
    let n = tx
        .prepare_cached("DELETE FROM thread_participants WHERE thread_id = ?1 AND handle = ?2")?
        .execute(params![thread.to_string(), handle])?;
    Ok(n > 0)
}

/// Archives (or unarchives) `thread`; whether that changed anything.
pub fn set_archived(
    tx: &Transaction<'_>,
    thread: ThreadId,
    archived: bool,
) -> Result<bool, StoreError> {
    let sql = if archived {
        "UPDATE threads SET archived_at = ?2 WHERE id = ?1 AND archived_at IS NULL"
    } else {
        "UPDATE threads SET archived_at = NULL WHERE id = ?1 AND archived_at IS NOT NULL"
    };
    let n = if archived {
        tx.prepare_cached(sql)?
            .execute(params![thread.to_string(), super::now()])?
    } else {
        tx.prepare_cached(sql)?
            .execute(params![thread.to_string()])?
    };
    Ok(n > 0)
}

/// Migration 12: what a thread message carries beside its text (a GIF a
/// bot posted), as a JSON array of [`Attachment`]s.
pub const THREAD_ATTACHMENTS: &str = r#"
ALTER TABLE thread_messages ADD COLUMN attachments TEXT NOT NULL DEFAULT '[]'
    CHECK (json_valid(attachments));
"#;

/// Pins (or unpins) `thread`; whether that changed anything.
pub fn set_pinned(
    tx: &Transaction<'_>,
    thread: ThreadId,
    pinned: bool,
) -> Result<bool, StoreError> {
    let n = tx
        .prepare_cached("UPDATE threads SET pinned = ?2 WHERE id = ?1 AND pinned != ?2")?
        .execute(params![thread.to_string(), pinned])?;
    Ok(n > 0)
}

/// Deletes the house `house_id` and everything of it from this store,
/// releasing its files' contents.
pub fn delete_house(tx: &Transaction<'_>, house_id: &str) -> Result<(), StoreError> {
    let held: Vec<(i64, Option<i64>)> = tx
        .prepare("SELECT content, text_content FROM house_file_revisions WHERE house_id = ?1")?
        .query_map(params![house_id], |r| Ok((r.get(0)?, r.get(1)?)))?
        .collect::<Result<_, _>>()?;
    for (c, text) in held {
        super::house_files::content::release(tx, c)?;
        if let Some(t) = text {
            super::house_files::content::release(tx, t)?;
        }
    }
    tx.execute(
        "DELETE FROM house_file_chunks WHERE house_id = ?1",
        params![house_id],
    )?;
    tx.execute("DELETE FROM houses WHERE id = ?1", params![house_id])?;
    Ok(())
}

#[cfg(test)]
#[path = "house_tests.rs"]
mod tests;
