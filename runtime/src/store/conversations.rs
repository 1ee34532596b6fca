//! Conversations and their messages.
//!
//! A conversation is one history of one bot: the main chat, a routine run,
//! a subagent's task. Its messages are stored in order (`seq`) with their
//! plain text in `text` and the rest of the protocol [`Message`] as JSON in
//! `body` (its text left empty, so the text is stored once), which
//! the FTS5 index `messages_fts` takes in when the writer catches up (accents
//! ignored, so "cafe" finds "café"; see [`super::catch_up`]) and mirrors
//! through triggers on update and delete. When a long conversation is compacted, the new
//! segment is a conversation of its own whose `previous_segment` points at
//! the one it replaced.

use rusqlite::{params, Connection, OptionalExtension, Row, Transaction};

use super::error::StoreError;
use super::{now, parse_time};
use crate::id::{BotId, ConversationId, MsgId};
use crate::protocol::depth;
use crate::protocol::Message;

/// What a new conversation is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewConversation {
    /// Its id.
    pub id: ConversationId,
    /// The bot it belongs to.
    pub bot: BotId,
    /// What it is (`main`, `routine_run`, `subagent`, `thread`, …).
    pub kind: String,
    /// The conversation that started it (a subagent's delegator), if any.
    pub parent: Option<ConversationId>,
    /// A title for lists.
    pub title: String,
    /// The segment this one continues after a compaction, if any.
    pub previous_segment: Option<ConversationId>,
}

impl NewConversation {
    /// A top-level conversation with no title.
    pub fn new(id: ConversationId, bot: BotId, kind: impl Into<String>) -> Self {
        Self {
            id,
            bot,
            kind: kind.into(),
            parent: None,
            title: String::new(),
            previous_segment: None,
        }
    }
}

/// A stored conversation, as lists show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationRow {
    /// Its id.
    pub id: ConversationId,
    /// The bot it belongs to.
    pub bot: BotId,
    /// What it is.
    pub kind: String,
    /// The conversation that started it, if any.
    pub parent: Option<ConversationId>,
    /// Its title.
    pub title: String,
    /// When it was created.
    pub created_at: chrono::DateTime<chrono::Utc>,
    /// When a message was last appended.
    pub updated_at: chrono::DateTime<chrono::Utc>,
    /// The segment it continues, if any.
    pub previous_segment: Option<ConversationId>,
}

/// A stored message with its place in the conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct StoredMessage {
    /// Its position in the whole store, increasing with every append.
    pub seq: i64,
    /// Its id.
    pub id: MsgId,
    /// The message.
    pub message: Message,
    /// When it was appended.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// A message found by [`search_messages`].
#[derive(Debug, Clone, PartialEq)]
pub struct SearchHit {
    /// The message's position.
    pub seq: i64,
    /// The conversation it is in.
    pub conversation: ConversationId,
    /// The message's role (`user`, `assistant`, `tool`).
    pub role: String,
    /// The matching text with the matches in `[` `]`, cut to a few words.
    pub snippet: String,
    /// When it was appended.
    pub created_at: chrono::DateTime<chrono::Utc>,
}

/// Creates a conversation; fails with a constraint error if the id exists.
pub fn create_conversation(tx: &Transaction<'_>, new: &NewConversation) -> Result<(), StoreError> {
    insert_conversation(tx, new, false)?;
    Ok(())
}

/// Creates a conversation unless one with its id exists (then it changes
/// nothing); whether it created it. One statement: no read first.
pub fn create_conversation_if_missing(
    tx: &Transaction<'_>,
    new: &NewConversation,
) -> Result<bool, StoreError> {
    Ok(insert_conversation(tx, new, true)? == 1)
}

/// Inserts `new`'s row; with `unless_there`, an existing id is left as it
/// is. Returns the rows inserted.
fn insert_conversation(
    tx: &Transaction<'_>,
    new: &NewConversation,
    unless_there: bool,
) -> Result<usize, StoreError> {
    const INSERT: &str = "INSERT INTO conversations (id, bot_id, kind, parent_id, title, created_at, updated_at, previous_segment)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7)";
    const INSERT_UNLESS_THERE: &str = "INSERT INTO conversations (id, bot_id, kind, parent_id, title, created_at, updated_at, previous_segment)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?6, ?7) ON CONFLICT (id) DO NOTHING";
    let at = now();
    Ok(tx
        .prepare_cached(if unless_there {
            INSERT_UNLESS_THERE
        } else {
            INSERT
        })?
        .execute(params![
            new.id.to_string(),
            new.bot.to_string(),
            new.kind,
            new.parent.map(|p| p.to_string()),
            new.title,
            at,
            new.previous_segment.map(|p| p.to_string()),
        ])?)
}

/// Appends a message to a conversation and returns its `seq`.
///
/// The message becomes searchable, and the conversation's `updated_at`
/// moves, when the writer catches up (see [`super::catch_up`]).
pub fn append_message(
    tx: &Transaction<'_>,
    conversation: ConversationId,
    message: &Message,
) -> Result<i64, StoreError> {
    append_message_with_id(tx, MsgId::new(), conversation, message)
}

/// Appends a message under a given id (e.g. the mailbox envelope's id, so a
/// redelivered message cannot be appended twice: the second append fails
/// with a constraint error).
pub fn append_message_with_id(
    tx: &Transaction<'_>,
    id: MsgId,
    conversation: ConversationId,
    message: &Message,
) -> Result<i64, StoreError> {
    PreparedMessage::with_id(id, conversation, message)?.append(tx)
}

/// A message made ready to append: encoded, its ids and time printed.
///
/// The store has one writer thread; what can be done before a write job
/// reaches it (serializing the message, formatting ids and times) is done
/// by the caller, so the writer only inserts: prepare the messages, then
/// append them in the job.
#[derive(Debug, Clone)]
pub struct PreparedMessage {
    id: String,
    conversation: String,
    role: &'static str,
    body: String,
    text: String,
    created_at: String,
}

impl PreparedMessage {
    /// `message` of `conversation`, under a new id, dated now.
    pub fn new(conversation: ConversationId, message: &Message) -> Result<Self, StoreError> {
        Self::with_id(MsgId::new(), conversation, message)
    }

    /// `message` under `id` (a delivered envelope's), dated now.
    pub fn with_id(
        id: MsgId,
        conversation: ConversationId,
        message: &Message,
    ) -> Result<Self, StoreError> {
        // The text goes in its own column; the body keeps the rest.
        let mut rest = message.clone();
        let text = std::mem::take(rest.text_mut());
        bound_depth(&mut rest);
        let body = serde_json::to_string(&rest).map_err(|e| StoreError::Codec {
            what: "message",
            detail: e.to_string(),
        })?;
        Ok(Self {
            id: id.to_string(),
            conversation: conversation.to_string(),
            role: message.role(),
            body,
            text,
            created_at: now(),
        })
    }

    /// Appends it; answers its `seq`.
    pub fn append(&self, tx: &Transaction<'_>) -> Result<i64, StoreError> {
        self.insert(&mut tx.prepare_cached(INSERT_MESSAGE)?)?;
        Ok(tx.last_insert_rowid())
    }

    /// Appends `messages` in order, with one statement for all.
    pub fn append_all(tx: &Transaction<'_>, messages: &[Self]) -> Result<(), StoreError> {
        let mut insert = tx.prepare_cached(INSERT_MESSAGE)?;
        messages.iter().try_for_each(|m| m.insert(&mut insert))
    }

    fn insert(&self, insert: &mut rusqlite::CachedStatement<'_>) -> Result<(), StoreError> {
        insert.execute(params![
            self.id,
            self.conversation,
            self.role,
            self.body,
            self.text,
            self.created_at,
        ])?;
        Ok(())
    }
}

/// Replaces tool-call arguments and tool-result data nested deeper than
/// [`depth::MAX_DEPTH`] with a stand-in, so every stored body stays well
/// within what [`decode_message`] reads (serde_json stops at 128 levels).
fn bound_depth(message: &mut Message) {
    match message {
        Message::User { .. } => {}
        Message::Assistant { tool_calls, .. } => {
            for call in tool_calls {
                if let Some(kept) = depth::stand_in(&call.arguments) {
                    call.arguments = kept;
                }
            }
        }
        Message::Tool { result, .. } => {
            if let Some(kept) = depth::stand_in(&result.data) {
                result.data = kept;
            }
        }
    }
}

const INSERT_MESSAGE: &str =
    "INSERT INTO messages (id, conversation_id, role, body, text, created_at)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// Moves the conversations of the messages with `?1 < seq <= ?2` to their
/// newest message's time (what [`super::catch_up`] brings up to date after
/// the messages' full-text index).
pub(crate) const TOUCH_CONVERSATIONS: &str =
    // NOT INDEXED: walk only the new rows by seq, never the whole
    // conversation index (which the GROUP BY would otherwise pick).
    "UPDATE conversations SET updated_at = pending.at
     FROM (SELECT conversation_id, max(created_at) AS at FROM messages NOT INDEXED
           WHERE seq > ?1 AND seq <= ?2 GROUP BY conversation_id) AS pending
     WHERE conversations.id = pending.conversation_id AND conversations.updated_at < pending.at";

/// Every message of a conversation, in order.
pub fn load_messages(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<Vec<StoredMessage>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, id, body, text, created_at FROM messages WHERE conversation_id = ?1 ORDER BY seq",
    )?;
    let rows = stmt.query_map([conversation.to_string()], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, id, body, text, created_at) = row?;
        out.push(StoredMessage {
            seq,
            id: parse_id(&id)?,
            message: decode_message(&body, text).map_err(|e| match e {
                StoreError::Codec { what, detail } => StoreError::Codec {
                    what,
                    detail: format!("seq {seq}: {detail}"),
                },
                other => other,
            })?,
            created_at: parse_time(&created_at)?,
        });
    }
    Ok(out)
}

/// A stored message from its `body` and `text` columns.
///
/// The body holds the message with its text left empty (bodies written
/// before schema 3 hold the text too, the same text); the text column holds
/// the text.
pub fn decode_message(body: &str, text: String) -> Result<Message, StoreError> {
    let mut message: Message = serde_json::from_str(body).map_err(|e| StoreError::Codec {
        what: "message",
        detail: e.to_string(),
    })?;
    *message.text_mut() = text;
    Ok(message)
}

/// One conversation, if it exists.
pub fn get_conversation(
    conn: &Connection,
    id: ConversationId,
) -> Result<Option<ConversationRow>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("{SELECT_CONVERSATION} WHERE id = ?1"))?;
    let row = stmt
        .query_row([id.to_string()], raw_conversation)
        .optional()?;
    row.map(RawConversation::parse).transpose()
}

/// Conversations, most recently updated first; only `bot`'s if given.
pub fn list_conversations(
    conn: &Connection,
    bot: Option<BotId>,
    limit: usize,
) -> Result<Vec<ConversationRow>, StoreError> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(&format!(
        "{SELECT_CONVERSATION} WHERE ?1 IS NULL OR bot_id = ?1 ORDER BY updated_at DESC, id DESC LIMIT ?2"
    ))?;
    let rows = stmt.query_map(params![bot.map(|b| b.to_string()), limit], raw_conversation)?;
    rows.map(|r| r.map_err(StoreError::from).and_then(RawConversation::parse))
        .collect()
}

/// Full-text search over every message, best matches first.
///
/// `query` is taken as plain words (all must appear, accents and case
/// ignored); FTS5 operators in it are treated as text.
pub fn search_messages(
    conn: &Connection,
    query: &str,
    limit: usize,
) -> Result<Vec<SearchHit>, StoreError> {
    let words: Vec<String> = query
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    if words.is_empty() {
        return Ok(Vec::new());
    }
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let mut stmt = conn.prepare_cached(
        "SELECT m.seq, m.conversation_id, m.role,
                snippet(messages_fts, 0, '[', ']', '…', 16), m.created_at
         FROM messages_fts JOIN messages m ON m.seq = messages_fts.rowid
         WHERE messages_fts MATCH ?1 ORDER BY rank LIMIT ?2",
    )?;
    let rows = stmt.query_map(params![words.join(" "), limit], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, String>(1)?,
            r.get::<_, String>(2)?,
            r.get::<_, String>(3)?,
            r.get::<_, String>(4)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (seq, conversation, role, snippet, created_at) = row?;
        out.push(SearchHit {
            seq,
            conversation: parse_id(&conversation)?,
            role,
            snippet,
            created_at: parse_time(&created_at)?,
        });
    }
    Ok(out)
}

const SELECT_CONVERSATION: &str = "SELECT id, bot_id, kind, parent_id, title, created_at, updated_at, previous_segment FROM conversations";

struct RawConversation([Option<String>; 8]);

fn raw_conversation(r: &Row<'_>) -> rusqlite::Result<RawConversation> {
    Ok(RawConversation([
        r.get(0)?,
        r.get(1)?,
        r.get(2)?,
        r.get(3)?,
        r.get(4)?,
        r.get(5)?,
        r.get(6)?,
        r.get(7)?,
    ]))
}

impl RawConversation {
    fn parse(self) -> Result<ConversationRow, StoreError> {
        let [id, bot, kind, parent, title, created, updated, previous] = self.0;
        let text = |v: Option<String>| v.unwrap_or_default();
        Ok(ConversationRow {
            id: parse_id(&text(id))?,
            bot: parse_id(&text(bot))?,
            kind: text(kind),
            parent: parent.as_deref().map(parse_id).transpose()?,
            title: text(title),
            created_at: parse_time(&text(created))?,
            updated_at: parse_time(&text(updated))?,
            previous_segment: previous.as_deref().map(parse_id).transpose()?,
        })
    }
}

/// Parses a stored id.
pub(crate) fn parse_id<T>(text: &str) -> Result<T, StoreError>
where
    T: std::str::FromStr<Err = crate::id::ParseIdError>,
{
    text.parse()
        .map_err(|e: crate::id::ParseIdError| StoreError::Codec {
            what: "id",
            detail: e.to_string(),
        })
}
