//! Changes an agent proposed and the user decides on.
//!
//! The background review may add to memory but not take away from it: a
//! replace or a remove it asks for is kept here as a proposal until the
//! user approves it (then it is applied) or rejects it. A proposal is a
//! plain record — what to change, where, and why — so the CLI, the API and
//! later the web page list and decide them the same way.

use rusqlite::{params, Connection, OptionalExtension, Transaction};
use serde::{Deserialize, Serialize};

use super::error::StoreError;

/// The proposals table (part of the first migration).
pub const PROPOSALS: &str = r#"
CREATE TABLE proposals (
    id              INTEGER PRIMARY KEY AUTOINCREMENT,
    agent           TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    kind            TEXT NOT NULL,
    change          TEXT NOT NULL,
    summary         TEXT NOT NULL,
    status          TEXT NOT NULL CHECK (status IN ('pending', 'approved', 'rejected', 'failed')),
    note            TEXT NOT NULL DEFAULT '',
    created_at      TEXT NOT NULL,
    decided_at      TEXT
);
CREATE INDEX proposals_by_status ON proposals (status, id);
"#;

/// Where a proposal stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProposalStatus {
    /// Waiting for the user.
    Pending,
    /// Approved and applied.
    Approved,
    /// Rejected; nothing was changed.
    Rejected,
    /// Approved, but it no longer applied (the text it changes moved on).
    Failed,
}

impl ProposalStatus {
    /// The status as stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Approved => "approved",
            Self::Rejected => "rejected",
            Self::Failed => "failed",
        }
    }

    fn parse(s: &str) -> Self {
        match s {
            "approved" => Self::Approved,
            "rejected" => Self::Rejected,
            "failed" => Self::Failed,
            _ => Self::Pending,
        }
    }
}

/// A proposal as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Proposal {
    /// Its number, shown to the user.
    pub id: i64,
    /// The agent whose files it changes.
    pub agent: String,
    /// The conversation that proposed it.
    pub conversation: String,
    /// What kind of change it is (`memory`).
    pub kind: String,
    /// The change itself, as its kind reads it back.
    pub change: serde_json::Value,
    /// One line for the user.
    pub summary: String,
    /// Where it stands.
    pub status: ProposalStatus,
    /// Why it failed, when it did.
    pub note: String,
    /// When it was made (RFC 3339).
    pub created_at: String,
    /// When it was decided.
    pub decided_at: Option<String>,
}

/// A proposal to store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewProposal {
    /// The agent whose files it changes.
    pub agent: String,
    /// The conversation that proposed it.
    pub conversation: String,
    /// Its kind.
    pub kind: String,
    /// The change.
    pub change: serde_json::Value,
    /// One line for the user.
    pub summary: String,
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

/// Stores a pending proposal; answers its number.
pub fn insert(tx: &Transaction<'_>, new: &NewProposal) -> Result<i64, StoreError> {
    tx.prepare_cached(
        "INSERT INTO proposals (agent, conversation_id, kind, change, summary, status, created_at)
         VALUES (?1, ?2, ?3, ?4, ?5, 'pending', ?6)",
    )?
    .execute(params![
        new.agent,
        new.conversation,
        new.kind,
        new.change.to_string(),
        new.summary,
        now()
    ])?;
    Ok(tx.last_insert_rowid())
}

const SELECT: &str = "SELECT id, agent, conversation_id, kind, change, summary, status, note,
        created_at, decided_at FROM proposals";

fn row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Proposal> {
    let change: String = r.get(4)?;
    Ok(Proposal {
        id: r.get(0)?,
        agent: r.get(1)?,
        conversation: r.get(2)?,
        kind: r.get(3)?,
        change: serde_json::from_str(&change).unwrap_or(serde_json::Value::String(change)),
        summary: r.get(5)?,
        status: ProposalStatus::parse(&r.get::<_, String>(6)?),
        note: r.get(7)?,
        created_at: r.get(8)?,
        decided_at: r.get(9)?,
    })
}

/// The proposal numbered `id`.
pub fn get(conn: &Connection, id: i64) -> Result<Option<Proposal>, StoreError> {
    Ok(conn
        .prepare_cached(&format!("{SELECT} WHERE id = ?1"))?
        .query_row([id], row)
        .optional()?)
}

/// Proposals, oldest first: the pending ones, or all of them.
pub fn list(conn: &Connection, pending_only: bool) -> Result<Vec<Proposal>, StoreError> {
    let sql = if pending_only {
        format!("{SELECT} WHERE status = 'pending' ORDER BY id")
    } else {
        format!("{SELECT} ORDER BY id")
    };
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map([], row)?;
    Ok(rows.collect::<Result<_, _>>()?)
}

/// Records the decision on a pending proposal; false when it was not
/// pending (decided already, or no such proposal).
pub fn decide(
    tx: &Transaction<'_>,
    id: i64,
    status: ProposalStatus,
    note: &str,
) -> Result<bool, StoreError> {
    Ok(tx
        .prepare_cached(
            "UPDATE proposals SET status = ?2, note = ?3, decided_at = ?4
             WHERE id = ?1 AND status = 'pending'",
        )?
        .execute(params![id, status.as_str(), note, now()])?
        == 1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::Store;

    #[tokio::test]
    async fn a_proposal_is_decided_once() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let new = NewProposal {
            agent: "assistant".into(),
            conversation: "c1".into(),
            kind: "memory".into(),
            change: serde_json::json!({"target": "user", "action": "remove", "old_text": "tea"}),
            summary: "remove the entry about tea".into(),
        };
        let id = store.write(move |tx| insert(tx, &new)).await.unwrap();
        let pending = store.read(|c| list(c, true)).await.unwrap();
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].id, id);
        assert_eq!(pending[0].change["old_text"], "tea");
        assert_eq!(pending[0].status, ProposalStatus::Pending);

        let first = store
            .write(move |tx| decide(tx, id, ProposalStatus::Rejected, ""))
            .await
            .unwrap();
        let again = store
            .write(move |tx| decide(tx, id, ProposalStatus::Approved, ""))
            .await
            .unwrap();
        assert!(first && !again, "a decided proposal stays decided");
        let stored = store.read(move |c| get(c, id)).await.unwrap().unwrap();
        assert_eq!(stored.status, ProposalStatus::Rejected);
        assert!(stored.decided_at.is_some());
        assert!(store.read(|c| list(c, true)).await.unwrap().is_empty());
        assert_eq!(store.read(|c| list(c, false)).await.unwrap().len(), 1);
    }
}
