//! Requests kept with the turn that waits on them.
//!
//! An approval or a question a turn waits on is written to the store
//! (`kv`, under `request:<conversation>:<call id>`, beside the turn's
//! `open_turn:<conversation>` mark) before it is shown, and removed when
//! the wait ends or the turn closes. So after a restart the requests are
//! listed again, and the resumed turn asks its call again *under the same
//! id*: an answer given to it, before or after the restart, is the one the
//! call gets. An answer that arrives while no turn waits yet is kept in
//! the row until the resumed turn asks.

use serde::{Deserialize, Serialize};
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::AgentEvent;
use troupe_runtime::rusqlite::{params, Connection, OptionalExtension, Transaction};
use troupe_runtime::store::StoreError;

/// A request as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredRequest {
    /// The id it is answered with.
    pub id: String,
    /// The conversation whose turn waits.
    pub conversation: ConversationId,
    /// The call that waits.
    pub call_id: String,
    /// What was shown: an approval request or questions.
    pub event: AgentEvent,
    /// When it was first asked.
    pub asked_at: chrono::DateTime<chrono::Utc>,
    /// An answer given while no turn waited (`Some(None)`: withdrawn).
    #[serde(default)]
    pub answer: Option<Option<serde_json::Value>>,
}

fn key(conversation: ConversationId, call_id: &str) -> String {
    format!("request:{conversation}:{call_id}")
}

/// The key range of `conversation`'s requests (`:` < `;`).
pub(crate) fn range(conversation: ConversationId) -> (String, String) {
    (
        format!("request:{conversation}:"),
        format!("request:{conversation};"),
    )
}

fn decode(value: &str) -> Result<StoredRequest, StoreError> {
    serde_json::from_str(value).map_err(|e| StoreError::Codec {
        what: "request",
        detail: e.to_string(),
    })
}

fn encode(request: &StoredRequest) -> Result<String, StoreError> {
    serde_json::to_string(request).map_err(|e| StoreError::Codec {
        what: "request",
        detail: e.to_string(),
    })
}

/// Writes `request` (a new one, or one given an answer).
pub fn put(tx: &Transaction<'_>, request: &StoredRequest) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")?
        .execute(params![
            key(request.conversation, &request.call_id),
            encode(request)?
        ])?;
    Ok(())
}

/// The request call `call_id` of `conversation` waits on, if one is kept.
pub fn of_call(
    conn: &Connection,
    conversation: ConversationId,
    call_id: &str,
) -> Result<Option<StoredRequest>, StoreError> {
    let value: Option<String> = conn
        .prepare_cached("SELECT value FROM kv WHERE key = ?1")?
        .query_row([key(conversation, call_id)], |r| r.get(0))
        .optional()?;
    value.as_deref().map(decode).transpose()
}

/// Removes the request call `call_id` of `conversation` waits on.
pub fn remove(
    tx: &Transaction<'_>,
    conversation: ConversationId,
    call_id: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM kv WHERE key = ?1")?
        .execute([key(conversation, call_id)])?;
    Ok(())
}

/// Removes every request of `conversation` (its turn closed).
pub fn remove_all(tx: &Transaction<'_>, conversation: ConversationId) -> Result<(), StoreError> {
    remove_range(tx, &range(conversation))
}

/// [`remove_all`] with the conversation's [`range`] printed beforehand.
pub(crate) fn remove_range(
    tx: &Transaction<'_>,
    (from, to): &(String, String),
) -> Result<(), StoreError> {
    tx.prepare_cached("DELETE FROM kv WHERE key >= ?1 AND key < ?2")?
        .execute([from, to])?;
    Ok(())
}

/// Every kept request of `conversation`.
pub fn of_conversation(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<Vec<StoredRequest>, StoreError> {
    let (from, to) = range(conversation);
    let mut stmt = conn.prepare_cached("SELECT value FROM kv WHERE key >= ?1 AND key < ?2")?;
    let values = stmt
        .query_map([from, to], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    values.iter().map(|v| decode(v)).collect()
}

/// Every kept request, oldest first.
pub fn all(conn: &Connection) -> Result<Vec<StoredRequest>, StoreError> {
    let mut stmt =
        conn.prepare_cached("SELECT value FROM kv WHERE key >= 'request:' AND key < 'request;'")?;
    let values = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    let mut all = values
        .iter()
        .map(|v| decode(v))
        .collect::<Result<Vec<_>, _>>()?;
    all.sort_by_key(|r| r.asked_at);
    Ok(all)
}

/// The kept request answered with `id`.
pub fn by_id(conn: &Connection, id: &str) -> Result<Option<StoredRequest>, StoreError> {
    Ok(all(conn)?.into_iter().find(|r| r.id == id))
}
