//! What the crash harness checks once the last worker stopped, from the
//! store (read-only) and the files the workers wrote.
//!
//! - Every acknowledged user message or post is in its conversation exactly
//!   once, and no message sent (acknowledged or not) is there twice.
//! - No `ledger_append` call id is in the ledger twice; a call whose stored
//!   result is a success is there once (one answered "outcome unknown" may
//!   be there or not); nothing ran for a call the store does not hold; every
//!   stored call has its result ([`super::ledger`]).
//! - The record files hold whole records only: one a kill cut off was set
//!   aside by the next worker ([`super::records`]).
//! - Every `message_agent` delivery has exactly one reply notice in the
//!   sender's conversation.
//! - Every delegation is reported, with exactly one notice in its parent.
//! - Every routine run that ended has exactly one notice.
//! - Every acknowledged post in the house's thread is there exactly once,
//!   and each bot answered it exactly once (no post lost, no turn offered
//!   twice); no post sent is there twice.
//! - Every version of the house files is whole, and every acknowledged
//!   file write is there ([`super::files`]).
//! - Every acknowledged durable send to the harness's actor kind is in its
//!   actor's stored state once, and none sent is there twice
//!   ([`super::actors`]).
//! - `PRAGMA integrity_check` says `ok`.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use serde_json::json;
use troupe_runtime::protocol::{Envelope, Message, Payload, ToolStatus};
use troupe_runtime::rusqlite::{Connection, OpenFlags};
use troupe_runtime::store::conversations::decode_message;

use super::Files;

/// One stored message.
pub(super) struct Row {
    /// Its id.
    pub id: String,
    /// Its conversation.
    pub conversation: String,
    /// The message.
    pub message: Message,
}

/// Checks the home and returns the counts, as the JSON line's fields.
pub fn check(home: &Path, files: &Files) -> anyhow::Result<serde_json::Value> {
    let db = Connection::open_with_flags(home.join("troupe.db"), OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let integrity: String = db.query_row("PRAGMA integrity_check", [], |r| r.get(0))?;
    let rows = messages(&db)?;
    let mut out = serde_json::Map::new();
    out.insert("integrity".into(), json!(integrity));
    out.insert(
        "turns".into(),
        json!(rows
            .iter()
            .filter(|r| matches!(&r.message, Message::Assistant { tool_calls, .. } if tool_calls.is_empty()))
            .count()),
    );
    sends(files, &rows, &mut out)?;
    super::ledger::check(&db, files, &rows, &mut out)?;
    // Cut off by kills and set aside (not counted as records): a figure,
    // not a failure.
    let torn: usize = files
        .records()
        .iter()
        .map(|path| super::records::torn(path).len())
        .sum();
    out.insert("records_torn".into(), json!(torn));
    replies(&db, &rows, &mut out)?;
    delegations(&db, &rows, &mut out)?;
    routines(&db, &rows, &mut out)?;
    threads(&db, files, &mut out)?;
    super::files::check(&db, files, &mut out)?;
    super::actors::check(&db, files, &mut out)?;
    Ok(serde_json::Value::Object(out))
}

fn messages(db: &Connection) -> anyhow::Result<Vec<Row>> {
    let mut stmt =
        db.prepare("SELECT id, conversation_id, body, text FROM messages ORDER BY seq")?;
    let raw = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    raw.into_iter()
        .map(|(id, conversation, body, text)| {
            Ok(Row {
                id,
                conversation,
                message: decode_message(&body, text)?,
            })
        })
        .collect()
}

/// The whole records of a record file (see [`super::records`]).
fn lines(path: &Path) -> Vec<Vec<String>> {
    super::records::read(path)
}

/// The tokens of `<<task KIND TOKEN>>` markers in a user message.
fn markers(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("<<task ") {
        rest = &rest[at + 7..];
        if let Some((inner, after)) = rest.split_once(">>") {
            if let Some((_, token)) = inner.split_once(' ') {
                out.push(token);
            }
            rest = after;
        }
    }
    out
}

/// Acknowledged messages applied once; none sent applied twice.
fn sends(
    files: &Files,
    rows: &[Row],
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut applied: HashMap<(String, String), usize> = HashMap::new();
    let ids: HashSet<(&str, &str)> = rows
        .iter()
        .map(|r| (r.conversation.as_str(), r.id.as_str()))
        .collect();
    for row in rows {
        if let Message::User { content } = &row.message {
            for token in markers(content) {
                *applied
                    .entry((row.conversation.clone(), token.to_string()))
                    .or_default() += 1;
            }
        }
    }
    let sent = lines(&files.sent);
    let count = |conv: &str, token: &str| {
        applied
            .get(&(conv.to_string(), token.to_string()))
            .copied()
            .unwrap_or(0)
    };
    let mut lost = 0;
    let mut acknowledged = 0;
    let mut failed = 0;
    for ack in lines(&files.acks) {
        match ack.as_slice() {
            [kind, conv, token, id] if kind == "user" || kind == "post" => {
                acknowledged += 1;
                let by_id = kind == "user" || ids.contains(&(conv.as_str(), id.as_str()));
                if count(conv, token) == 0 || !by_id {
                    lost += 1;
                }
            }
            [kind, ..] if kind == "failed" => failed += 1,
            _ => {}
        }
    }
    let duplicated = sent
        .iter()
        .filter(|s| matches!(s.as_slice(), [_, conv, token] if count(conv, token) > 1))
        .count();
    out.insert("sent".into(), json!(sent.len()));
    out.insert("acknowledged".into(), json!(acknowledged));
    out.insert("turns_not_finished".into(), json!(failed));
    out.insert("lost".into(), json!(lost));
    out.insert("duplicated".into(), json!(duplicated));
    Ok(())
}

/// The mailbox's envelopes, parsed.
fn envelopes(db: &Connection) -> anyhow::Result<Vec<Envelope>> {
    let mut stmt = db.prepare("SELECT envelope FROM mailbox")?;
    let raw = stmt
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(raw
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
        .collect())
}

/// One reply notice per `message_agent` delivery, in the sender's history.
fn replies(
    db: &Connection,
    rows: &[Row],
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut replies_to: HashMap<String, Vec<String>> = HashMap::new();
    for envelope in envelopes(db)? {
        if let Payload::Notice { topic, data, .. } = &envelope.body {
            if let (true, Some(to)) = (
                topic == "reply",
                data.get("in_reply_to").and_then(|v| v.as_str()),
            ) {
                replies_to
                    .entry(to.to_string())
                    .or_default()
                    .push(envelope.id.to_string());
            }
        }
    }
    let applied: HashMap<&str, &str> = rows
        .iter()
        .map(|r| (r.id.as_str(), r.conversation.as_str()))
        .collect();
    let (mut sent, mut missing, mut duplicated) = (0, 0, 0);
    for row in rows {
        let Message::Tool { name, result, .. } = &row.message else {
            continue;
        };
        let delivery = result.data.get("delivery_id").and_then(|v| v.as_str());
        let (true, Some(delivery)) = (
            name == "message_agent" && result.status == ToolStatus::Ok,
            delivery,
        ) else {
            continue;
        };
        sent += 1;
        let in_sender = replies_to
            .get(delivery)
            .map(|ids| {
                ids.iter()
                    .filter(|id| applied.get(id.as_str()) == Some(&row.conversation.as_str()))
                    .count()
            })
            .unwrap_or(0);
        match in_sender {
            0 => missing += 1,
            1 => {}
            _ => duplicated += 1,
        }
    }
    out.insert("messages_to_agents".into(), json!(sent));
    out.insert("replies_missing".into(), json!(missing));
    out.insert("replies_duplicated".into(), json!(duplicated));
    Ok(())
}

/// Every delegation reported, once, in its parent's history.
fn delegations(
    db: &Connection,
    rows: &[Row],
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut stmt = db.prepare("SELECT id, parent_conversation, status, waits FROM delegations")?;
    let all = stmt
        .query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, bool>(3)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let mut notices: HashMap<&str, Vec<&str>> = HashMap::new();
    for row in rows {
        if let Message::User { content } = &row.message {
            if content.starts_with("[notice: delegation]") {
                notices
                    .entry(row.conversation.as_str())
                    .or_default()
                    .push(content);
            }
        }
    }
    let (mut missing, mut duplicated) = (0, 0);
    for (id, parent, status, waits) in &all {
        let told = notices
            .get(parent.as_str())
            .map(|n| n.iter().filter(|t| t.contains(id.as_str())).count())
            .unwrap_or(0);
        if status != "reported" || (!waits && told == 0) {
            missing += 1;
        } else if told > 1 {
            duplicated += 1;
        }
    }
    out.insert("delegations".into(), json!(all.len()));
    out.insert("reports_missing".into(), json!(missing));
    out.insert("reports_duplicated".into(), json!(duplicated));
    Ok(())
}

/// Every routine run that ended told its owner once. Notices name the run
/// by when it was scheduled (one run a minute, so that is unique).
fn routines(
    db: &Connection,
    rows: &[Row],
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut stmt =
        db.prepare("SELECT scheduled_for, status FROM routine_runs WHERE status != 'skipped'")?;
    let runs = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    let notices: Vec<&str> = rows
        .iter()
        .filter_map(|r| match &r.message {
            Message::User { content } if content.starts_with("[notice: routine]") => {
                Some(content.as_str())
            }
            _ => None,
        })
        .collect();
    let (mut missing, mut duplicated) = (0, 0);
    for (at, status) in &runs {
        let at = chrono::DateTime::parse_from_rfc3339(at)?.with_timezone(&chrono::Utc);
        let key = format!("scheduled for {}", at.format("%Y-%m-%d %H:%M UTC"));
        let told = notices.iter().filter(|n| n.contains(&key)).count();
        if (status != "done" && status != "failed") || told == 0 {
            missing += 1;
        } else if told > 1 {
            duplicated += 1;
        }
    }
    out.insert("routine_runs".into(), json!(runs.len()));
    out.insert("routine_reports_missing".into(), json!(missing));
    out.insert("routine_reports_duplicated".into(), json!(duplicated));
    Ok(())
}

/// The house's thread: each acknowledged post once, each bot's answer to it once.
fn threads(
    db: &Connection,
    files: &Files,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut stmt = db.prepare("SELECT author, text FROM thread_messages ORDER BY seq")?;
    let rows = stmt
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
        .collect::<Result<Vec<_>, _>>()?;
    let mut posted: HashMap<String, usize> = HashMap::new();
    let mut answered: HashMap<(String, String), usize> = HashMap::new();
    for (author, text) in &rows {
        if author == "ada" {
            for token in super::model::offered_posts(&format!("[ada] {text}")) {
                *posted.entry(token.to_string()).or_default() += 1;
            }
        } else if let Some(tokens) = text.strip_prefix("answered ") {
            for token in tokens.split_whitespace() {
                *answered
                    .entry((author.clone(), token.to_string()))
                    .or_default() += 1;
            }
        }
    }
    let (mut acknowledged, mut lost, mut missing, mut twice) = (0, 0, 0, 0);
    for ack in lines(&files.acks) {
        if let [kind, _, token, _] = ack.as_slice() {
            if kind != "thread" {
                continue;
            }
            acknowledged += 1;
            if posted.get(token.as_str()).copied().unwrap_or(0) == 0 {
                lost += 1;
            }
            for bot in ["alpha", super::model::PEER] {
                match answered
                    .get(&(bot.to_string(), token.clone()))
                    .copied()
                    .unwrap_or(0)
                {
                    0 => missing += 1,
                    1 => {}
                    _ => twice += 1,
                }
            }
        }
    }
    let duplicated = posted.values().filter(|n| **n > 1).count();
    out.insert("thread_posts_acknowledged".into(), json!(acknowledged));
    out.insert("thread_posts_lost".into(), json!(lost));
    out.insert("thread_posts_duplicated".into(), json!(duplicated));
    out.insert("thread_answers_missing".into(), json!(missing));
    out.insert("thread_answers_twice".into(), json!(twice));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_are_read_whole() {
        assert_eq!(
            markers("[message from user]\n<<task tool i1-10>> and <<task msg i2-3>>"),
            vec!["i1-10", "i2-3"]
        );
        assert_eq!(markers("no marker <<task"), Vec::<&str>::new());
    }
}
