//! Finding and reading the delegation record: the SQL behind `delegation_search`.
//!
//! The record (tables `delegations`, `subagents`, `delegation_events`) is
//! what each `delegate` call did: its subagents' goals and results and the
//! entries in between (tasks, steers, answers, final texts, changed files).
//! Entries are searched with FTS5 (`delegation_fts`, accents and case
//! ignored, every word required) and read back in `seq` order; a subagent's
//! own conversation is read with [`super::read_messages`].

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::fts_query;
use crate::id::BotId;
use crate::store::error::StoreError;
use crate::store::{parse_time, timestamp};

/// Which delegations a search or a listing considers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DelegationFilter {
    /// Only this bot's delegations; `None`: every agent's.
    pub bot: Option<BotId>,
    /// Only delegations with a subagent whose folder contains this text.
    pub folder: Option<String>,
    /// Only delegations created at or after this time.
    pub after: Option<DateTime<Utc>>,
    /// Only delegations created before this time.
    pub before: Option<DateTime<Utc>>,
    /// Only delegations to this outside executor (`pi`).
    pub executor: Option<String>,
    /// Only delegations made by these conversations (a house's); `None`: any.
    pub parents: Option<Vec<String>>,
    /// Delegations made by these conversations (other houses') left out.
    pub not_parents: Vec<String>,
}

impl DelegationFilter {
    /// Whether a delegation made by `parent` passes the house part of the
    /// filter (a read by id checks it too).
    pub fn admits_parent(&self, parent: &str) -> bool {
        self.parents
            .as_ref()
            .is_none_or(|p| p.iter().any(|c| c == parent))
            && !self.not_parents.iter().any(|c| c == parent)
    }
}

/// One subagent of a delegation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SubagentRow {
    /// Its id (`sub_…`).
    pub id: String,
    /// Its own conversation's id (`conv_…`).
    pub conversation_id: String,
    /// Its place in the delegation.
    pub position: i64,
    /// What it was asked to do.
    pub goal: String,
    /// The folder it worked in.
    pub folder: String,
    /// `running`, `done`, `failed`, `stopped` or `timed_out`.
    pub status: String,
    /// Its final result.
    pub result: String,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When it ended, if it has.
    pub ended_at: Option<DateTime<Utc>>,
    /// The outside executor it is an instance of, if it is one.
    pub executor: Option<String>,
    /// The executor's own session file, once it said.
    pub session: Option<String>,
}

/// A delegation with its subagents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DelegationRow {
    /// Its id (`deleg_…`).
    pub id: String,
    /// The conversation whose `delegate` call made it.
    pub parent_conversation: String,
    /// The bot that delegated.
    pub bot_id: String,
    /// `running` or `reported`.
    pub status: String,
    /// When it started.
    pub created_at: DateTime<Utc>,
    /// When it ended, if it has.
    pub ended_at: Option<DateTime<Utc>>,
    /// Its subagents, in order.
    pub subagents: Vec<SubagentRow>,
}

/// One entry of the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRow {
    /// Its position in the record (what a scroll is anchored on).
    pub seq: i64,
    /// The subagent it concerns, if any.
    pub subagent_id: Option<String>,
    /// `task`, `steer`, `answer`, `final` or `files`.
    pub kind: String,
    /// Its text.
    pub text: String,
    /// When it was recorded.
    pub created_at: DateTime<Utc>,
}

/// A matching entry, its text cut around the matches (in `[` `]`).
#[derive(Debug, Clone, PartialEq)]
pub struct EventHit {
    /// The entry.
    pub event: EventRow,
    /// The text around the matches.
    pub snippet: String,
    /// Its BM25 rank (lower is better).
    pub rank: f64,
}

/// A delegation found by [`find_delegations`].
#[derive(Debug, Clone, PartialEq)]
pub struct FoundDelegation {
    /// The delegation.
    pub delegation: DelegationRow,
    /// How many of its entries match.
    pub matches: usize,
    /// Its best matching entries, best first.
    pub hits: Vec<EventHit>,
}

/// A delegation's best rank, its number of matches and its best hits
/// `(seq, rank, snippet)`.
type HitGroup = (f64, usize, Vec<(i64, f64, String)>);

const FILTER_SQL: &str = "(?2 IS NULL OR d.bot_id = ?2)
       AND (?3 IS NULL OR EXISTS (SELECT 1 FROM subagents s
                                  WHERE s.delegation_id = d.id AND instr(s.folder, ?3) > 0))
       AND (?4 IS NULL OR d.created_at >= ?4)
       AND (?5 IS NULL OR d.created_at < ?5)
       AND (?6 IS NULL OR EXISTS (SELECT 1 FROM subagents s
                                  WHERE s.delegation_id = d.id AND s.executor = ?6))
       AND (?7 IS NULL OR d.parent_conversation IN (SELECT value FROM json_each(?7)))
       AND d.parent_conversation NOT IN (SELECT value FROM json_each(?8))";

fn filter_params(filter: &DelegationFilter) -> [Option<String>; 7] {
    let list = |items: &[String]| serde_json::Value::from(items.to_vec()).to_string();
    [
        filter.bot.map(|b| b.to_string()),
        filter.folder.clone().filter(|f| !f.is_empty()),
        filter.after.map(timestamp),
        filter.before.map(timestamp),
        filter.executor.clone().filter(|e| !e.is_empty()),
        filter.parents.as_deref().map(list),
        Some(list(&filter.not_parents)),
    ]
}

/// Finds the delegations whose record contains every word of `query`,
/// best first, each with its `hits_each` best matching entries.
pub fn find_delegations(
    conn: &Connection,
    query: &str,
    filter: &DelegationFilter,
    limit: usize,
    hits_each: usize,
) -> Result<Vec<FoundDelegation>, StoreError> {
    let Some(fts) = fts_query(query) else {
        return Ok(Vec::new());
    };
    let [bot, folder, after, before, executor, parents, not_parents] = filter_params(filter);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT e.seq, e.delegation_id, f.rank, snippet(delegation_fts, 0, '[', ']', '…', 24)
         FROM delegation_fts f
         JOIN delegation_events e ON e.seq = f.rowid
         JOIN delegations d ON d.id = e.delegation_id
         WHERE delegation_fts MATCH ?1 AND {FILTER_SQL}
         ORDER BY f.rank"
    ))?;
    let mut rows = stmt.query(params![
        fts,
        bot,
        folder,
        after,
        before,
        executor,
        parents,
        not_parents
    ])?;
    // Hits come best first, so each delegation's first hit is its best.
    let mut groups: HashMap<String, HitGroup> = HashMap::new();
    while let Some(row) = rows.next()? {
        let seq: i64 = row.get(0)?;
        let delegation: String = row.get(1)?;
        let rank: f64 = row.get(2)?;
        let group = groups
            .entry(delegation)
            .or_insert_with(|| (rank, 0, Vec::new()));
        group.1 += 1;
        if group.2.len() < hits_each {
            group.2.push((seq, rank, row.get(3)?));
        }
    }
    // Scored as in conversation search: the best entry (BM25, lower is
    // better), strengthened a little by every other match.
    let score = |(best, count, _): &HitGroup| best * (1.0 + 0.2 * (*count as f64).ln());
    let mut order: Vec<(String, f64)> = groups
        .iter()
        .map(|(id, g)| (id.clone(), score(g)))
        .collect();
    order.sort_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)));
    let mut found = Vec::new();
    for (id, _) in order.into_iter().take(limit) {
        let Some((_, matches, hits)) = groups.remove(&id) else {
            continue;
        };
        let Some(delegation) = delegation(conn, &id)? else {
            continue;
        };
        let mut event_hits = Vec::with_capacity(hits.len());
        for (seq, rank, snippet) in hits {
            if let Some(event) = event(conn, seq)? {
                event_hits.push(EventHit {
                    event,
                    snippet,
                    rank,
                });
            }
        }
        found.push(FoundDelegation {
            delegation,
            matches,
            hits: event_hits,
        });
    }
    Ok(found)
}

/// The most recent delegations, newest first.
pub fn latest_delegations(
    conn: &Connection,
    filter: &DelegationFilter,
    limit: usize,
) -> Result<Vec<DelegationRow>, StoreError> {
    let [bot, folder, after, before, executor, parents, not_parents] = filter_params(filter);
    let mut stmt = conn.prepare_cached(&format!(
        "SELECT d.id FROM delegations d WHERE {FILTER_SQL}
         ORDER BY d.created_at DESC, d.id DESC LIMIT ?9"
    ))?;
    let ids = stmt
        .query_map(
            params![
                // ?1 is the search's query; a listing has none.
                Option::<String>::None,
                bot,
                folder,
                after,
                before,
                executor,
                parents,
                not_parents,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            |r| r.get::<_, String>(0),
        )?
        .collect::<rusqlite::Result<Vec<String>>>()?;
    let mut out = Vec::with_capacity(ids.len());
    for id in ids {
        if let Some(row) = delegation(conn, &id)? {
            out.push(row);
        }
    }
    Ok(out)
}

/// A delegation by its id, with its subagents.
pub fn delegation(conn: &Connection, id: &str) -> Result<Option<DelegationRow>, StoreError> {
    let raw = conn
        .prepare_cached(
            "SELECT id, parent_conversation, bot_id, status, created_at, ended_at
             FROM delegations WHERE id = ?1",
        )?
        .query_row([id], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
                r.get::<_, Option<String>>(5)?,
            ))
        })
        .optional()?;
    let Some((id, parent_conversation, bot_id, status, created, ended)) = raw else {
        return Ok(None);
    };
    let mut stmt = conn.prepare_cached(
        "SELECT id, conversation_id, position, goal, folder, status, result, created_at, ended_at,
                executor, session
         FROM subagents WHERE delegation_id = ?1 ORDER BY position",
    )?;
    let subagents = stmt
        .query_map([&id], raw_subagent)?
        .map(|r| r.map_err(StoreError::from).and_then(RawSubagent::parse))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(DelegationRow {
        id,
        parent_conversation,
        bot_id,
        status,
        created_at: parse_time(&created)?,
        ended_at: ended.as_deref().map(parse_time).transpose()?,
        subagents,
    }))
}

/// The delegation a subagent belongs to, by the subagent's id.
pub fn delegation_of_subagent(
    conn: &Connection,
    subagent: &str,
) -> Result<Option<String>, StoreError> {
    let id = conn
        .prepare_cached("SELECT delegation_id FROM subagents WHERE id = ?1")?
        .query_row([subagent], |r| r.get(0))
        .optional()?;
    Ok(id)
}

struct RawSubagent {
    id: String,
    conversation_id: String,
    position: i64,
    goal: String,
    folder: String,
    status: String,
    result: String,
    created: String,
    ended: Option<String>,
    executor: Option<String>,
    session: Option<String>,
}

fn raw_subagent(r: &Row<'_>) -> rusqlite::Result<RawSubagent> {
    Ok(RawSubagent {
        id: r.get(0)?,
        conversation_id: r.get(1)?,
        position: r.get(2)?,
        goal: r.get(3)?,
        folder: r.get(4)?,
        status: r.get(5)?,
        result: r.get(6)?,
        created: r.get(7)?,
        ended: r.get(8)?,
        executor: r.get(9)?,
        session: r.get(10)?,
    })
}

impl RawSubagent {
    fn parse(self) -> Result<SubagentRow, StoreError> {
        Ok(SubagentRow {
            id: self.id,
            conversation_id: self.conversation_id,
            position: self.position,
            goal: self.goal,
            folder: self.folder,
            status: self.status,
            result: self.result,
            created_at: parse_time(&self.created)?,
            ended_at: self.ended.as_deref().map(parse_time).transpose()?,
            executor: self.executor,
            session: self.session,
        })
    }
}

const EVENT_SQL: &str = "SELECT seq, subagent_id, kind, text, created_at FROM delegation_events";

fn raw_event(r: &Row<'_>) -> rusqlite::Result<(i64, Option<String>, String, String, String)> {
    Ok((r.get(0)?, r.get(1)?, r.get(2)?, r.get(3)?, r.get(4)?))
}

fn parse_event(
    (seq, subagent_id, kind, text, at): (i64, Option<String>, String, String, String),
) -> Result<EventRow, StoreError> {
    Ok(EventRow {
        seq,
        subagent_id,
        kind,
        text,
        created_at: parse_time(&at)?,
    })
}

fn event(conn: &Connection, seq: i64) -> Result<Option<EventRow>, StoreError> {
    let raw = conn
        .prepare_cached(&format!("{EVENT_SQL} WHERE seq = ?1"))?
        .query_row([seq], raw_event)
        .optional()?;
    raw.map(parse_event).transpose()
}

/// Every entry of a delegation in order; only those of `subagent` (and the
/// delegation-wide ones) when given.
pub fn events(
    conn: &Connection,
    delegation: &str,
    subagent: Option<&str>,
) -> Result<Vec<EventRow>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{EVENT_SQL} WHERE delegation_id = ?1
           AND (?2 IS NULL OR subagent_id IS NULL OR subagent_id = ?2)
         ORDER BY seq"
    ))?;
    let rows = stmt.query_map(params![delegation, subagent], raw_event)?;
    rows.map(|r| r.map_err(StoreError::from).and_then(parse_event))
        .collect()
}

/// The entries around the one numbered `seq`: up to `window` each side,
/// with whether more lie beyond; `None` when the delegation has no such entry.
pub fn events_around(
    conn: &Connection,
    delegation: &str,
    subagent: Option<&str>,
    seq: i64,
    window: usize,
) -> Result<Option<(Vec<EventRow>, bool, bool)>, StoreError> {
    let all = events(conn, delegation, subagent)?;
    let Some(at) = all.iter().position(|e| e.seq == seq) else {
        return Ok(None);
    };
    let start = at.saturating_sub(window);
    let end = (at + window + 1).min(all.len());
    let (more_before, more_after) = (start > 0, end < all.len());
    Ok(Some((all[start..end].to_vec(), more_before, more_after)))
}
