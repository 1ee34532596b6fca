//! The delegation record in the store: delegations, their subagents and what
//! happened in them.

use troupe_runtime::id::{ConversationId, DelegationId, SubagentId};
use troupe_runtime::protocol::Envelope;
use troupe_runtime::rusqlite::{params, Connection, OptionalExtension, Transaction};
use troupe_runtime::store::{self, mailbox, StoreError};

/// A subagent as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentRow {
    /// Its id.
    pub id: SubagentId,
    /// Its delegation.
    pub delegation: DelegationId,
    /// Its conversation.
    pub conversation: ConversationId,
    /// Its goal.
    pub goal: String,
    /// `running`, `done`, `failed`, `stopped` or `timed_out`.
    pub status: String,
    /// Its summary or error.
    pub result: String,
    /// The outside executor it is an instance of (`None`: a subagent).
    pub executor: Option<String>,
    /// The folder an executor instance works in.
    pub folder: String,
    /// The harness's session file, once it said.
    pub session: Option<String>,
}

fn parse<T: std::str::FromStr>(s: String) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    s.parse::<T>().map_err(|e| StoreError::Codec {
        what: "id",
        detail: e.to_string(),
    })
}

/// How many subagents may run at once, and when new ones must end.
#[derive(Debug, Clone, PartialEq)]
pub struct Admission {
    /// Subagents of one bot.
    pub per_bot: usize,
    /// Subagents of the node.
    pub per_node: usize,
    /// When the new subagents time out.
    pub deadline: chrono::DateTime<chrono::Utc>,
}

impl Default for Admission {
    /// No limit, and no deadline worth the name (tests, tools of our own).
    fn default() -> Self {
        Self {
            per_bot: usize::MAX,
            per_node: usize::MAX,
            deadline: chrono::DateTime::<chrono::Utc>::MAX_UTC,
        }
    }
}

/// Whether a delegation was admitted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admitted {
    /// Recorded; its subagents count as running.
    Yes,
    /// Past a limit: why, in words for the model.
    No(String),
}

/// Counts the running subagents (of the node, and of `bot`) and, within
/// `admission`'s limits, records a new delegation and its subagents, each
/// with its task and deadline — in one transaction, so concurrent
/// `delegate` calls never pass a limit, and the count after a restart is
/// the store's.
pub fn admit(
    tx: &Transaction<'_>,
    id: DelegationId,
    parent: ConversationId,
    bot: &str,
    waits: bool,
    subagents: &[(SubagentId, ConversationId, String, String)],
    admission: &Admission,
) -> Result<Admitted, StoreError> {
    let n = subagents.len();
    let count =
        |sql: &str, p: &[&dyn troupe_runtime::rusqlite::ToSql]| -> Result<usize, StoreError> {
            let c: i64 = tx.prepare_cached(sql)?.query_row(p, |r| r.get(0))?;
            Ok(usize::try_from(c).unwrap_or(0))
        };
    let on_bot = count(
        "SELECT COALESCE((SELECT running FROM running_subagents WHERE bot_id = ?1), 0)",
        &[&bot],
    )?;
    if on_bot.saturating_add(n) > admission.per_bot {
        return Ok(Admitted::No(format!(
            "{on_bot} subagent(s) of `{bot}` are running and {n} more would pass its limit of {} \
             ([delegation] max_concurrent_per_bot); wait for them, stop some, or give fewer tasks.",
            admission.per_bot
        )));
    }
    let on_node = count(
        "SELECT COALESCE(SUM(running), 0) FROM running_subagents",
        &[],
    )?;
    if on_node.saturating_add(n) > admission.per_node {
        return Ok(Admitted::No(format!(
            "{on_node} subagent(s) are running on this node and {n} more would pass its limit of {} \
             ([delegation] max_concurrent_per_node); wait, or give fewer tasks.",
            admission.per_node
        )));
    }
    create(tx, id, parent, bot, waits, subagents)?;
    count_running(tx, bot, i64::try_from(n).unwrap_or(i64::MAX))?;
    if admission.deadline < chrono::DateTime::<chrono::Utc>::MAX_UTC {
        tx.prepare_cached("UPDATE subagents SET deadline = ?2 WHERE delegation_id = ?1")?
            .execute(params![
                id.to_string(),
                store::timestamp(admission.deadline)
            ])?;
    }
    Ok(Admitted::Yes)
}

/// Adds `delta` to the running subagents of `bot`.
fn count_running(tx: &Transaction<'_>, bot: &str, delta: i64) -> Result<(), StoreError> {
    tx.prepare_cached(
        "INSERT INTO running_subagents (bot_id, running) VALUES (?1, MAX(?2, 0))
         ON CONFLICT (bot_id) DO UPDATE SET running = MAX(running + ?2, 0)",
    )?
    .execute(params![bot, delta])?;
    Ok(())
}

/// Records a new delegation and its subagents, each with its task.
pub fn create(
    tx: &Transaction<'_>,
    id: DelegationId,
    parent: ConversationId,
    bot: &str,
    waits: bool,
    subagents: &[(SubagentId, ConversationId, String, String)],
) -> Result<(), StoreError> {
    let now = store::now();
    tx.prepare_cached(
        "INSERT INTO delegations (id, parent_conversation, bot_id, waits, status, created_at) VALUES (?1, ?2, ?3, ?4, 'running', ?5)",
    )?
    .execute(params![id.to_string(), parent.to_string(), bot, waits as i64, now])?;
    for (position, (sub, conv, goal, context)) in subagents.iter().enumerate() {
        tx.prepare_cached(
            "INSERT INTO subagents (id, delegation_id, conversation_id, position, goal, context, status, created_at)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, 'running', ?7)",
        )?
        .execute(params![sub.to_string(), id.to_string(), conv.to_string(), position as i64, goal, context, now])?;
        event(tx, id, Some(*sub), "task", &format!("{goal}\n\n{context}"))?;
    }
    Ok(())
}

/// Adds an entry to the record.
pub fn event(
    tx: &Transaction<'_>,
    delegation: DelegationId,
    sub: Option<SubagentId>,
    kind: &str,
    text: &str,
) -> Result<(), StoreError> {
    tx.prepare_cached("INSERT INTO delegation_events (delegation_id, subagent_id, kind, text, created_at) VALUES (?1, ?2, ?3, ?4, ?5)")?
        .execute(params![delegation.to_string(), sub.map(|s| s.to_string()), kind, text, store::now()])?;
    Ok(())
}

/// The conversation that started delegation `id`, and its bot's name.
pub fn parent_of(
    conn: &Connection,
    id: DelegationId,
) -> Result<Option<(ConversationId, String)>, StoreError> {
    let found: Option<(String, String)> = conn
        .prepare_cached("SELECT parent_conversation, bot_id FROM delegations WHERE id = ?1")?
        .query_row(params![id.to_string()], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    found
        .map(|(conversation, bot)| Ok((parse(conversation)?, bot)))
        .transpose()
}

/// A subagent row as read, before its ids are parsed.
type RawRow = ([String; 6], Option<String>, String, Option<String>);

fn row(r: &troupe_runtime::rusqlite::Row<'_>) -> troupe_runtime::rusqlite::Result<RawRow> {
    Ok((
        [
            r.get(0)?,
            r.get(1)?,
            r.get(2)?,
            r.get(3)?,
            r.get(4)?,
            r.get(5)?,
        ],
        r.get(6)?,
        r.get(7)?,
        r.get(8)?,
    ))
}

fn decode(r: RawRow) -> Result<SubagentRow, StoreError> {
    let ([id, delegation, conversation, goal, status, result], executor, folder, session) = r;
    Ok(SubagentRow {
        id: parse(id)?,
        delegation: parse(delegation)?,
        conversation: parse(conversation)?,
        goal,
        status,
        result,
        executor,
        folder,
        session,
    })
}

const COLUMNS: &str =
    "id, delegation_id, conversation_id, goal, status, result, executor, folder, session";

/// Marks the subagents of delegation `id` as instances of `executor`, each
/// working in its folder (in the transaction that admitted them); with
/// `report_to`, its report is posted into that house thread by the
/// delegating bot instead of the delegating conversation's mailbox.
pub fn mark_executor(
    tx: &Transaction<'_>,
    id: DelegationId,
    executor: &str,
    folders: &[(SubagentId, String)],
    report_to: Option<troupe_runtime::id::ThreadId>,
) -> Result<(), StoreError> {
    if let Some(thread) = report_to {
        tx.prepare_cached("UPDATE delegations SET report_to = ?2 WHERE id = ?1")?
            .execute(params![id.to_string(), thread.to_string()])?;
    }
    for (sub, folder) in folders {
        tx.prepare_cached(
            "UPDATE subagents SET executor = ?3, folder = ?4 WHERE id = ?1 AND delegation_id = ?2",
        )?
        .execute(params![sub.to_string(), id.to_string(), executor, folder])?;
    }
    Ok(())
}

/// The executor instance `id`, whoever started it.
pub fn instance(conn: &Connection, id: &str) -> Result<Option<SubagentRow>, StoreError> {
    let r = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM subagents WHERE id = ?1 AND executor IS NOT NULL"
        ))?
        .query_row(params![id], row)
        .optional()?;
    r.map(decode).transpose()
}

/// An executor instance on the workbench, with whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Instance {
    /// The row.
    pub row: SubagentRow,
    /// The conversation that started it.
    pub parent: ConversationId,
    /// The bot that started it.
    pub bot: String,
    /// When it started (RFC 3339).
    pub created_at: String,
    /// When it ended, if it did.
    pub ended_at: Option<String>,
    /// Tokens its model calls used.
    pub tokens: i64,
}

impl Instance {
    /// The instance as the CLI's `--json` and the server show it.
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "id": self.row.id.to_string(),
            "executor": self.row.executor,
            "status": self.row.status,
            "folder": self.row.folder,
            "goal": self.row.goal,
            "result": self.row.result,
            "session": self.row.session,
            "delegation": self.row.delegation.to_string(),
            "whose": if self.bot == super::executors::USER { "user" } else { self.bot.as_str() },
            "conversation": self.parent.to_string(),
            "started_at": self.created_at,
            "ended_at": self.ended_at,
            "elapsed": super::executors::elapsed(&self.created_at, self.ended_at.as_deref()),
            "tokens": self.tokens,
        })
    }
}

/// Executor instances, newest first: the running ones and, unless
/// `running_only`, the latest `limit` ended ones too.
pub fn instances(
    conn: &Connection,
    running_only: bool,
    limit: usize,
) -> Result<Vec<Instance>, StoreError> {
    let columns = COLUMNS
        .split(", ")
        .map(|c| format!("s.{c}"))
        .collect::<Vec<_>>()
        .join(", ");
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {columns}, d.parent_conversation, d.bot_id, s.created_at, s.ended_at, s.tokens
         FROM subagents s JOIN delegations d ON d.id = s.delegation_id
         WHERE s.executor IS NOT NULL AND (?1 = 0 OR s.status = 'running')
         ORDER BY s.status = 'running' DESC, s.created_at DESC, s.position LIMIT ?2"
    ))?;
    let rows = stmt
        .query_map(params![running_only as i64, limit as i64], |r| {
            Ok((
                row(r)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
                r.get::<_, String>(11)?,
                r.get::<_, Option<String>>(12)?,
                r.get::<_, i64>(13)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(r, parent, bot, created_at, ended_at, tokens)| {
            Ok(Instance {
                row: decode(r)?,
                parent: parse(parent)?,
                bot,
                created_at,
                ended_at,
                tokens,
            })
        })
        .collect()
}

/// How many executor instances run whose report goes to a house thread
/// (`delegate_task`): a process that started them waits for them.
pub fn running_for_threads(conn: &Connection) -> Result<usize, StoreError> {
    let n: i64 = conn
        .prepare_cached(
            "SELECT COUNT(*) FROM subagents s JOIN delegations d ON d.id = s.delegation_id
             WHERE s.status = 'running' AND d.report_to IS NOT NULL",
        )?
        .query_row([], |r| r.get(0))?;
    Ok(usize::try_from(n).unwrap_or(0))
}

/// The events of instance (or subagent) `sub`, oldest first, from `after`
/// (a sequence number) on, at most `limit`.
pub fn events_of(
    conn: &Connection,
    sub: SubagentId,
    after: i64,
    limit: usize,
) -> Result<Vec<(i64, String, String, String)>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, kind, text, created_at FROM delegation_events WHERE subagent_id = ?1 AND seq > ?2
         ORDER BY seq LIMIT ?3",
    )?;
    let rows = stmt
        .query_map(params![sub.to_string(), after, limit as i64], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(rows)
}

/// The subagent whose conversation is `conversation`.
pub fn by_conversation(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<Option<SubagentRow>, StoreError> {
    let r = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM subagents WHERE conversation_id = ?1"
        ))?
        .query_row(params![conversation.to_string()], row)
        .optional()?;
    r.map(decode).transpose()
}

/// The subagent `id`, if it belongs to a delegation of `parent`.
pub fn of_parent(
    conn: &Connection,
    parent: ConversationId,
    id: &str,
) -> Result<Option<SubagentRow>, StoreError> {
    let r = conn
        .prepare_cached(&format!(
            "SELECT {COLUMNS} FROM subagents WHERE id = ?1 AND delegation_id IN
             (SELECT id FROM delegations WHERE parent_conversation = ?2)"
        ))?
        .query_row(params![id, parent.to_string()], row)
        .optional()?;
    r.map(decode).transpose()
}

/// Every subagent of `parent`'s delegations, newest delegation first.
pub fn list(conn: &Connection, parent: ConversationId) -> Result<Vec<SubagentRow>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT {COLUMNS} FROM subagents WHERE delegation_id IN (SELECT id FROM delegations WHERE parent_conversation = ?1)
         ORDER BY created_at DESC, position"
    ))?;
    let rows = stmt
        .query_map(params![parent.to_string()], row)?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter().map(decode).collect()
}

/// A subagent still marked running, as found at start-up.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unfinished {
    /// The subagent.
    pub sub: SubagentRow,
    /// Its task's context.
    pub context: String,
    /// The conversation that delegated.
    pub parent: ConversationId,
    /// The delegating agent's name.
    pub agent: String,
    /// Whether its conversation is mid-turn (it resumes by itself).
    pub open: bool,
    /// Whether its conversation has any message (false: it never started).
    pub started: bool,
    /// When it times out, if a deadline was stored.
    pub deadline: Option<chrono::DateTime<chrono::Utc>>,
}

/// Subagents still marked running.
pub fn running(conn: &Connection) -> Result<Vec<Unfinished>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT s.id, s.delegation_id, s.conversation_id, s.goal, s.status, s.result,
                s.executor, s.folder, s.session, s.context,
                d.parent_conversation, d.bot_id,
                EXISTS (SELECT 1 FROM kv WHERE key = 'open_turn:' || s.conversation_id),
                EXISTS (SELECT 1 FROM messages WHERE conversation_id = s.conversation_id),
                s.deadline
         FROM subagents s JOIN delegations d ON d.id = s.delegation_id WHERE s.status = 'running'",
    )?;
    let rows = stmt
        .query_map([], |r| {
            Ok((
                row(r)?,
                r.get::<_, String>(9)?,
                r.get::<_, String>(10)?,
                r.get::<_, String>(11)?,
                r.get::<_, bool>(12)?,
                r.get::<_, bool>(13)?,
                r.get::<_, Option<String>>(14)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    rows.into_iter()
        .map(|(r, context, parent, agent, open, started, deadline)| {
            Ok(Unfinished {
                sub: decode(r)?,
                context,
                parent: parse(parent)?,
                agent,
                open,
                started,
                deadline: deadline
                    .and_then(|d| chrono::DateTime::parse_from_rfc3339(&d).ok())
                    .map(|d| d.with_timezone(&chrono::Utc)),
            })
        })
        .collect()
}

/// What ending a subagent led to.
#[derive(Debug, Clone, PartialEq)]
pub struct Ended {
    /// The delegation.
    pub delegation: DelegationId,
    /// The report, when this was the last subagent to end.
    pub report: Option<String>,
    /// The notice for the parent, already in its mailbox (None when the parent waits).
    pub notice: Option<Envelope>,
}

/// Records a subagent's end state; when it was the last, records the
/// delegation as reported and, unless the parent waits, puts the report in
/// the parent's mailbox — all in the caller's transaction, so the parent is
/// told exactly once. `None` when the end was recorded before.
pub fn end(
    tx: &Transaction<'_>,
    conversation: ConversationId,
    status: &str,
    result: &str,
    notice: impl FnOnce(ConversationId, String) -> Envelope,
) -> Result<Option<Ended>, StoreError> {
    let changed = tx
        .prepare_cached("UPDATE subagents SET status = ?2, result = ?3, ended_at = ?4 WHERE conversation_id = ?1 AND status = 'running'")?
        .execute(params![conversation.to_string(), status, result, store::now()])?;
    if changed == 0 {
        return Ok(None);
    }
    let Some(sub) = by_conversation(tx, conversation)? else {
        return Ok(None);
    };
    let bot: String = tx
        .prepare_cached("SELECT bot_id FROM delegations WHERE id = ?1")?
        .query_row(params![sub.delegation.to_string()], |r| r.get(0))?;
    count_running(tx, &bot, -1)?;
    event(
        tx,
        sub.delegation,
        Some(sub.id),
        "final",
        &format!("[{status}] {result}"),
    )?;
    let remaining: i64 = tx
        .prepare_cached(
            "SELECT COUNT(*) FROM subagents WHERE delegation_id = ?1 AND status = 'running'",
        )?
        .query_row(params![sub.delegation.to_string()], |r| r.get(0))?;
    if remaining > 0 {
        return Ok(Some(Ended {
            delegation: sub.delegation,
            report: None,
            notice: None,
        }));
    }
    let closed = tx
        .prepare_cached("UPDATE delegations SET status = 'reported', ended_at = ?2 WHERE id = ?1 AND status = 'running'")?
        .execute(params![sub.delegation.to_string(), store::now()])?;
    if closed == 0 {
        return Ok(Some(Ended {
            delegation: sub.delegation,
            report: None,
            notice: None,
        }));
    }
    let (parent, waits, report_to): (String, bool, Option<String>) = tx
        .prepare_cached(
            "SELECT parent_conversation, waits, report_to FROM delegations WHERE id = ?1",
        )?
        .query_row(params![sub.delegation.to_string()], |r| {
            Ok((r.get(0)?, r.get(1)?, r.get(2)?))
        })?;
    let mut stmt = tx.prepare_cached(
        "SELECT id, goal, status, result, executor FROM subagents WHERE delegation_id = ?1 ORDER BY position",
    )?;
    let rows = stmt
        .query_map(params![sub.delegation.to_string()], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, Option<String>>(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let what = match rows.first().and_then(|r| r.4.as_deref()) {
        Some(executor) => format!("{executor} instance(s)"),
        None => "subagent(s)".to_string(),
    };
    let mut report = format!(
        "All {} {what} of delegation {} have ended.\n",
        rows.len(),
        sub.delegation
    );
    for (i, (id, goal, status, result, executor)) in rows.iter().enumerate() {
        let resume = match (executor, status.as_str()) {
            (Some(_), "stopped" | "failed" | "timed_out") => {
                " — `delegate action: resume` with this id continues its session"
            }
            _ => "",
        };
        report.push_str(&format!(
            "\n## {}. {goal}\n[{status}] ({id}){resume}\n{}\n",
            i + 1,
            result.trim()
        ));
    }
    let notice = match (waits, report_to) {
        (true, _) => None,
        (false, Some(thread)) => {
            let envelope = thread_report(parse(parent)?, parse(thread)?, &bot, report.clone());
            mailbox::enqueue(tx, &envelope)?;
            Some(envelope)
        }
        (false, None) => {
            let envelope = notice(parse(parent)?, report.clone());
            mailbox::enqueue(tx, &envelope)?;
            Some(envelope)
        }
    };
    Ok(Some(Ended {
        delegation: sub.delegation,
        report: Some(report),
        notice,
    }))
}

/// A report posted into house thread `thread` by `bot` (a bot's post: it
/// wakes no one unless it mentions them).
fn thread_report(
    from: ConversationId,
    thread: troupe_runtime::id::ThreadId,
    bot: &str,
    text: String,
) -> Envelope {
    use troupe_runtime::protocol::house::{MemberKind, Post};
    use troupe_runtime::protocol::{Address, Payload};
    Envelope {
        id: troupe_runtime::id::MsgId::new(),
        from: Address::Conversation(from),
        to: Address::Thread(thread),
        body: Payload::Post(Post {
            author: bot.to_string(),
            author_kind: MemberKind::Bot,
            text,
            round: None,
            depth: 1,
            via: None,
            answers_offer: false,
            failed: None,
            attachments: Vec::new(),
        }),
        sent_at: chrono::Utc::now(),
    }
}

#[cfg(test)]
#[path = "record_tests.rs"]
mod tests;
