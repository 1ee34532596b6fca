//! Finding and reading past conversations: the SQL behind `conversation_search`.
//!
//! The model recalls past work by asking the store directly, with no model
//! in between: FTS5 over `messages_fts` (every word required, accents and
//! case ignored) finds the matching messages, which are grouped by
//! conversation and ranked (BM25 of a conversation's best message, or its
//! newest or oldest match). Reading back is by the stable message id, so a
//! hit can be scrolled around, and by `seq` pages, so a long conversation is
//! read in parts. Everything here takes a [`Connection`] and runs on a reader.
//!
//! The same shapes over the delegation record live in [`delegations`].

pub mod delegations;

use std::collections::HashMap;

use chrono::{DateTime, Utc};
use rusqlite::{params, Connection, OptionalExtension, Row};

use super::conversations::parse_id;
use super::error::StoreError;
use super::{parse_time, timestamp};
use crate::id::{BotId, ConversationId, MsgId};

/// How found conversations are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Order {
    /// Best BM25 score of a conversation's matching messages first.
    #[default]
    Relevance,
    /// The conversation with the newest match first.
    Newest,
    /// The conversation with the oldest match first.
    Oldest,
}

/// Which messages a search or a listing considers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Filter {
    /// Message roles searched (`user`, `assistant`, `tool`); empty: all.
    pub roles: Vec<String>,
    /// Only messages (or, listing, conversations updated) at or after this time.
    pub after: Option<DateTime<Utc>>,
    /// Only messages (or conversations created) before this time.
    pub before: Option<DateTime<Utc>>,
    /// Conversations left out.
    pub exclude: Vec<ConversationId>,
    /// Only this bot's conversations; `None`: every agent's.
    pub bot: Option<BotId>,
    /// Only these conversations (a house's); `None`: any.
    pub only: Option<Vec<ConversationId>>,
}

impl Filter {
    fn roles_json(&self) -> Option<String> {
        (!self.roles.is_empty()).then(|| json_list(self.roles.iter()))
    }
    fn exclude_json(&self) -> String {
        json_list(self.exclude.iter().map(ToString::to_string))
    }
    fn only_json(&self) -> Option<String> {
        self.only
            .as_ref()
            .map(|only| json_list(only.iter().map(ToString::to_string)))
    }
}

fn json_list<T: ToString>(items: impl Iterator<Item = T>) -> String {
    let items: Vec<String> = items.map(|i| i.to_string()).collect();
    serde_json::Value::from(items).to_string()
}

/// A conversation as listings show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConversationSummary {
    /// Its id.
    pub id: ConversationId,
    /// Its bot.
    pub bot: BotId,
    /// The bot's name, when the bot is in the `bots` table.
    pub bot_name: Option<String>,
    /// What it is (`main`, `subagent`, …).
    pub kind: String,
    /// Its title (may be empty).
    pub title: String,
    /// When it was created.
    pub created_at: DateTime<Utc>,
    /// When a message was last appended.
    pub updated_at: DateTime<Utc>,
    /// How many messages it holds.
    pub messages: i64,
    /// Its first user message, cut to 200 characters.
    pub first_user_message: Option<String>,
}

/// A message as a transcript shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    /// Its position in the store.
    pub seq: i64,
    /// Its stable id (what a scroll is anchored on).
    pub id: MsgId,
    /// The conversation it is in.
    pub conversation: ConversationId,
    /// `user`, `assistant` or `tool`.
    pub role: String,
    /// Its text (a tool message: the result's text).
    pub text: String,
    /// The tool calls of an assistant message (`name {arguments}`, one per
    /// line), or the tool's name for a tool message; empty otherwise.
    pub tools: String,
    /// When it was appended.
    pub created_at: DateTime<Utc>,
}

/// A matching message, with its text cut around the matches.
#[derive(Debug, Clone, PartialEq)]
pub struct Hit {
    /// Its position in the store.
    pub seq: i64,
    /// Its stable id.
    pub id: MsgId,
    /// Its role.
    pub role: String,
    /// The text around the matches, each match in `[` `]`.
    pub snippet: String,
    /// Its BM25 rank (lower is better; 0 when not ranked by relevance).
    pub rank: f64,
    /// When it was appended.
    pub created_at: DateTime<Utc>,
}

/// A conversation found by [`find_conversations`].
#[derive(Debug, Clone, PartialEq)]
pub struct Found {
    /// The conversation.
    pub conversation: ConversationSummary,
    /// How many of its messages match.
    pub matches: usize,
    /// Its best matches, in the search's order.
    pub hits: Vec<Hit>,
}

/// Turns plain words into an FTS5 query: every word required, each taken as
/// text (quotes doubled), so FTS5 operators in the input mean nothing.
/// `None` when there is no word.
pub fn fts_query(words: &str) -> Option<String> {
    let quoted: Vec<String> = words
        .split_whitespace()
        .map(|w| format!("\"{}\"", w.replace('"', "\"\"")))
        .collect();
    (!quoted.is_empty()).then(|| quoted.join(" "))
}

/// The matches of a search, best first (relevance) or newest first, cut to
/// `?7` candidates inside FTS5 before the join: a common word matches tens
/// of thousands of messages, and joining each costs more than ranking it.
const HITS_SQL: &str = "SELECT m.seq, m.conversation_id, f.rank, m.created_at, f.n
     FROM (SELECT rowid, rank, count(*) OVER () AS n FROM
             (SELECT rowid, {rank} AS rank FROM messages_fts
              WHERE messages_fts MATCH ?1 AND rowid >= ?8
              ORDER BY {order} LIMIT ?7)) AS f
     JOIN messages m ON m.seq = f.rowid
     WHERE (?2 IS NULL OR m.role IN (SELECT value FROM json_each(?2)))
       AND (?3 IS NULL OR m.created_at >= ?3)
       AND (?4 IS NULL OR m.created_at < ?4)
       AND m.conversation_id NOT IN (SELECT value FROM json_each(?5))
       AND (?6 IS NULL OR m.conversation_id IN (SELECT id FROM conversations WHERE bot_id = ?6))
       AND (?9 IS NULL OR m.conversation_id IN (SELECT value FROM json_each(?9)))";

/// Candidates taken from the index first; when they do not yield enough
/// conversations (filters left too few), the search runs again uncut.
const CANDIDATES: i64 = 2_000;

/// The most matches ranked by relevance: past it, only the newest this many
/// are ranked. BM25 costs a few microseconds per match (a length lookup),
/// so a word in a tenth of a million messages would take a tenth of a
/// second; for so common a query, recent matches are the likelier answer.
const RANKED: i64 = 5_000;

struct Group {
    conversation: String,
    best: f64,
    /// `(created_at, seq)` of its newest and oldest match.
    newest: (String, i64),
    oldest: (String, i64),
    count: usize,
    /// `(rank, seq)` of its best matches so far.
    top: Vec<(f64, i64)>,
}

impl Group {
    fn score(&self) -> f64 {
        self.best * (1.0 + 0.2 * (self.count as f64).ln())
    }
}

/// Finds the conversations whose messages contain every word of `query`,
/// `limit` of them in `order`, each with its `hits_each` best matches.
///
/// An empty query finds nothing.
pub fn find_conversations(
    conn: &Connection,
    query: &str,
    filter: &Filter,
    order: Order,
    limit: usize,
    hits_each: usize,
) -> Result<Vec<Found>, StoreError> {
    let Some(fts) = fts_query(query) else {
        return Ok(Vec::new());
    };
    let floor = match order {
        Order::Relevance => rank_floor(conn, &fts)?,
        Order::Newest | Order::Oldest => i64::MIN,
    };
    let (mut groups, candidates) =
        collect_hits(conn, &fts, filter, order, hits_each, CANDIDATES, floor)?;
    // Too few conversations, and the cuts may have left some out: the
    // candidates filled the cut, or the filters dropped them all.
    if groups.len() < limit && candidates.is_none_or(|n| n >= CANDIDATES) {
        groups = collect_hits(conn, &fts, filter, order, hits_each, -1, i64::MIN)?.0;
    }
    let mut groups: Vec<Group> = groups.into_values().collect();
    match order {
        // A conversation scores as its best message (BM25: lower is
        // better), strengthened a little by every other match it holds.
        Order::Relevance => groups.sort_by(|a, b| {
            a.score()
                .total_cmp(&b.score())
                .then(b.newest.cmp(&a.newest))
        }),
        Order::Newest => groups.sort_by(|a, b| b.newest.cmp(&a.newest)),
        Order::Oldest => groups.sort_by(|a, b| a.oldest.cmp(&b.oldest)),
    }
    groups.truncate(limit);
    let mut found = Vec::with_capacity(groups.len());
    for group in groups {
        let Some(conversation) = summary(conn, &group.conversation)? else {
            continue;
        };
        let mut hits = Vec::with_capacity(group.top.len());
        for (key, seq) in group.top {
            let rank = if order == Order::Relevance { key } else { 0.0 };
            if let Some(hit) = hit(conn, &fts, seq, rank)? {
                hits.push(hit);
            }
        }
        found.push(Found {
            conversation,
            matches: group.count,
            hits,
        });
    }
    Ok(found)
}

/// Runs the hits query over at most `candidates` matches (all when
/// negative) and groups them by conversation; also how many candidates the
/// index gave, when any passed the filters.
fn collect_hits(
    conn: &Connection,
    fts: &str,
    filter: &Filter,
    order: Order,
    hits_each: usize,
    candidates: i64,
    floor: i64,
) -> Result<(HashMap<String, Group>, Option<i64>), StoreError> {
    let (rank, order_sql) = match order {
        Order::Relevance => ("rank", "rank"),
        Order::Newest => ("0.0", "rowid DESC"),
        Order::Oldest => ("0.0", "rowid ASC"),
    };
    let sql = HITS_SQL
        .replace("{rank}", rank)
        .replace("{order}", order_sql);
    let mut stmt = conn.prepare_cached(&sql)?;
    let mut rows = stmt.query(params![
        fts,
        filter.roles_json(),
        filter.after.map(timestamp),
        filter.before.map(timestamp),
        filter.exclude_json(),
        filter.bot.map(|b| b.to_string()),
        candidates,
        floor,
        filter.only_json(),
    ])?;
    let mut groups: HashMap<String, Group> = HashMap::new();
    let mut candidates = None;
    while let Some(row) = rows.next()? {
        candidates = Some(row.get::<_, i64>(4)?);
        let seq: i64 = row.get(0)?;
        let rank: f64 = row.get(2)?;
        // Within a conversation, the order of its hits: rank, or seq.
        let key = match order {
            Order::Relevance => rank,
            Order::Newest => -(seq as f64),
            Order::Oldest => seq as f64,
        };
        let text = |i: usize| row.get_ref(i)?.as_str().map_err(rusqlite::Error::from);
        let (conversation, at) = (text(1)?, text(3)?);
        let group = match groups.get_mut(conversation) {
            Some(g) => g,
            None => groups.entry(conversation.to_string()).or_insert(Group {
                conversation: conversation.to_string(),
                best: f64::INFINITY,
                newest: (at.to_string(), seq),
                oldest: (at.to_string(), seq),
                count: 0,
                top: Vec::with_capacity(hits_each + 1),
            }),
        };
        group.count += 1;
        group.best = group.best.min(rank);
        if (at, seq) > (group.newest.0.as_str(), group.newest.1) {
            group.newest = (at.to_string(), seq);
        }
        if (at, seq) < (group.oldest.0.as_str(), group.oldest.1) {
            group.oldest = (at.to_string(), seq);
        }
        if hits_each > 0 {
            let at = group.top.partition_point(|(k, _)| *k <= key);
            if at < hits_each {
                group.top.insert(at, (key, seq));
                group.top.truncate(hits_each);
            }
        }
    }
    Ok((groups, candidates))
}

/// The lowest `seq` ranked by relevance: that of the newest [`RANKED`]th
/// match, or none (`i64::MIN`) when there are fewer.
fn rank_floor(conn: &Connection, fts: &str) -> Result<i64, StoreError> {
    let floor = conn
        .prepare_cached(
            "SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?1
             ORDER BY rowid DESC LIMIT 1 OFFSET ?2",
        )?
        .query_row(params![fts, RANKED - 1], |r| r.get(0))
        .optional()?;
    Ok(floor.unwrap_or(i64::MIN))
}

/// One matching message with its snippet.
fn hit(conn: &Connection, fts: &str, seq: i64, rank: f64) -> Result<Option<Hit>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT m.id, m.role, snippet(messages_fts, 0, '[', ']', '…', 24), m.created_at
         FROM messages_fts f JOIN messages m ON m.seq = f.rowid
         WHERE messages_fts MATCH ?1 AND f.rowid = ?2",
    )?;
    let raw = stmt
        .query_row(params![fts, seq], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
            ))
        })
        .optional()?;
    raw.map(|(id, role, snippet, at)| {
        Ok(Hit {
            seq,
            id: parse_id(&id)?,
            role,
            snippet,
            rank,
            created_at: parse_time(&at)?,
        })
    })
    .transpose()
}

const SUMMARY_SQL: &str =
    "SELECT c.id, c.bot_id, b.name, c.kind, c.title, c.created_at, c.updated_at,
        (SELECT count(*) FROM messages m WHERE m.conversation_id = c.id),
        (SELECT substr(m.text, 1, 200) FROM messages m
         WHERE m.conversation_id = c.id AND m.role = 'user' ORDER BY m.seq LIMIT 1)
     FROM conversations c LEFT JOIN bots b ON b.id = c.bot_id";

fn raw_summary(r: &Row<'_>) -> rusqlite::Result<RawSummary> {
    Ok(RawSummary {
        id: r.get(0)?,
        bot: r.get(1)?,
        bot_name: r.get(2)?,
        kind: r.get(3)?,
        title: r.get(4)?,
        created: r.get(5)?,
        updated: r.get(6)?,
        messages: r.get(7)?,
        first: r.get(8)?,
    })
}

struct RawSummary {
    id: String,
    bot: String,
    bot_name: Option<String>,
    kind: String,
    title: String,
    created: String,
    updated: String,
    messages: i64,
    first: Option<String>,
}

impl RawSummary {
    fn parse(self) -> Result<ConversationSummary, StoreError> {
        Ok(ConversationSummary {
            id: parse_id(&self.id)?,
            bot: parse_id(&self.bot)?,
            bot_name: self.bot_name,
            kind: self.kind,
            title: self.title,
            created_at: parse_time(&self.created)?,
            updated_at: parse_time(&self.updated)?,
            messages: self.messages,
            first_user_message: self.first,
        })
    }
}

fn summary(conn: &Connection, id: &str) -> Result<Option<ConversationSummary>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("{SUMMARY_SQL} WHERE c.id = ?1"))?;
    let raw = stmt.query_row([id], raw_summary).optional()?;
    raw.map(RawSummary::parse).transpose()
}

/// One conversation as listings show it, if it exists.
pub fn conversation_summary(
    conn: &Connection,
    id: ConversationId,
) -> Result<Option<ConversationSummary>, StoreError> {
    summary(conn, &id.to_string())
}

/// The most recently updated conversations, newest first. `filter.after`
/// bounds the last update, `filter.before` the creation; roles are ignored.
pub fn latest_conversations(
    conn: &Connection,
    filter: &Filter,
    limit: usize,
) -> Result<Vec<ConversationSummary>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SUMMARY_SQL}
         WHERE (?1 IS NULL OR c.bot_id = ?1)
           AND (?2 IS NULL OR c.updated_at >= ?2)
           AND (?3 IS NULL OR c.created_at < ?3)
           AND c.id NOT IN (SELECT value FROM json_each(?4))
           AND (?6 IS NULL OR c.id IN (SELECT value FROM json_each(?6)))
         ORDER BY c.updated_at DESC, c.id DESC LIMIT ?5"
    ))?;
    let rows = stmt.query_map(
        params![
            filter.bot.map(|b| b.to_string()),
            filter.after.map(timestamp),
            filter.before.map(timestamp),
            filter.exclude_json(),
            i64::try_from(limit).unwrap_or(i64::MAX),
            filter.only_json(),
        ],
        raw_summary,
    )?;
    rows.map(|r| r.map_err(StoreError::from).and_then(RawSummary::parse))
        .collect()
}

const LINE_SQL: &str = "SELECT m.seq, m.id, m.conversation_id, m.role, m.text,
        CASE m.role
          WHEN 'tool' THEN coalesce(json_extract(m.body, '$.name'), '')
          WHEN 'assistant' THEN coalesce((SELECT group_concat(
                json_extract(t.value, '$.name') || ' ' || coalesce(json_extract(t.value, '$.arguments'), '{}'),
                char(10)) FROM json_each(m.body, '$.tool_calls') t), '')
          ELSE '' END,
        m.created_at
     FROM messages m";

struct RawLine {
    seq: i64,
    id: String,
    conversation: String,
    role: String,
    text: String,
    tools: String,
    at: String,
}

fn raw_line(r: &Row<'_>) -> rusqlite::Result<RawLine> {
    Ok(RawLine {
        seq: r.get(0)?,
        id: r.get(1)?,
        conversation: r.get(2)?,
        role: r.get(3)?,
        text: r.get(4)?,
        tools: r.get(5)?,
        at: r.get(6)?,
    })
}

impl RawLine {
    fn parse(self) -> Result<Line, StoreError> {
        Ok(Line {
            seq: self.seq,
            id: parse_id(&self.id)?,
            conversation: parse_id(&self.conversation)?,
            role: self.role,
            text: self.text,
            tools: self.tools,
            created_at: parse_time(&self.at)?,
        })
    }
}

fn collect_lines(
    stmt: &mut rusqlite::CachedStatement<'_>,
    params: impl rusqlite::Params,
) -> Result<Vec<Line>, StoreError> {
    let rows = stmt.query_map(params, raw_line)?;
    rows.map(|r| r.map_err(StoreError::from).and_then(RawLine::parse))
        .collect()
}

/// Up to `limit` messages of a conversation with a role in `roles` (all when
/// empty), in order, skipping the first `offset` of them.
pub fn read_messages(
    conn: &Connection,
    conversation: ConversationId,
    roles: &[String],
    offset: usize,
    limit: usize,
) -> Result<Vec<Line>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{LINE_SQL} WHERE m.conversation_id = ?1
           AND (?3 IS NULL OR m.role IN (SELECT value FROM json_each(?3)))
         ORDER BY m.seq LIMIT ?4 OFFSET ?2"
    ))?;
    let roles = (!roles.is_empty()).then(|| json_list(roles.iter()));
    collect_lines(
        &mut stmt,
        params![
            conversation.to_string(),
            i64::try_from(offset).unwrap_or(i64::MAX),
            roles,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
    )
}

/// The last `limit` messages of a conversation with a role in `roles` (all
/// when empty), in order.
pub fn last_messages(
    conn: &Connection,
    conversation: ConversationId,
    roles: &[String],
    limit: usize,
) -> Result<Vec<Line>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{LINE_SQL} WHERE m.conversation_id = ?1
           AND (?2 IS NULL OR m.role IN (SELECT value FROM json_each(?2)))
         ORDER BY m.seq DESC LIMIT ?3"
    ))?;
    let roles = (!roles.is_empty()).then(|| json_list(roles.iter()));
    let mut lines = collect_lines(
        &mut stmt,
        params![
            conversation.to_string(),
            roles,
            i64::try_from(limit).unwrap_or(i64::MAX)
        ],
    )?;
    lines.reverse();
    Ok(lines)
}

/// How many messages of a conversation have a role in `roles` (all when empty).
pub fn count_messages(
    conn: &Connection,
    conversation: ConversationId,
    roles: &[String],
) -> Result<i64, StoreError> {
    let roles = (!roles.is_empty()).then(|| json_list(roles.iter()));
    let n = conn
        .prepare_cached(
            "SELECT count(*) FROM messages m WHERE m.conversation_id = ?1
               AND (?2 IS NULL OR m.role IN (SELECT value FROM json_each(?2)))",
        )?
        .query_row(params![conversation.to_string(), roles], |r| r.get(0))?;
    Ok(n)
}

/// The messages around one: up to `window` before and after it with a role
/// in `roles` (all when empty), and the message itself whatever its role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Around {
    /// The messages before, in order.
    pub before: Vec<Line>,
    /// The message scrolled to.
    pub anchor: Line,
    /// The messages after, in order.
    pub after: Vec<Line>,
    /// Whether there are more before the first shown.
    pub more_before: bool,
    /// Whether there are more after the last shown.
    pub more_after: bool,
}

/// The messages around `message` in `conversation`; `None` when that
/// conversation has no such message.
pub fn messages_around(
    conn: &Connection,
    conversation: ConversationId,
    message: MsgId,
    window: usize,
    roles: &[String],
) -> Result<Option<Around>, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{LINE_SQL} WHERE m.id = ?1 AND m.conversation_id = ?2"
    ))?;
    let Some(anchor) = collect_lines(
        &mut stmt,
        params![message.to_string(), conversation.to_string()],
    )?
    .into_iter()
    .next() else {
        return Ok(None);
    };
    let roles_json = (!roles.is_empty()).then(|| json_list(roles.iter()));
    let side = |op: &str, dir: &str| -> Result<Vec<Line>, StoreError> {
        let mut stmt = conn.prepare_cached(&format!(
            "{LINE_SQL} WHERE m.conversation_id = ?1 AND m.seq {op} ?2
               AND (?3 IS NULL OR m.role IN (SELECT value FROM json_each(?3)))
             ORDER BY m.seq {dir} LIMIT ?4"
        ))?;
        collect_lines(
            &mut stmt,
            params![
                conversation.to_string(),
                anchor.seq,
                roles_json,
                i64::try_from(window + 1).unwrap_or(i64::MAX)
            ],
        )
    };
    let mut before = side("<", "DESC")?;
    let more_before = before.len() > window;
    before.truncate(window);
    before.reverse();
    let mut after = side(">", "ASC")?;
    let more_after = after.len() > window;
    after.truncate(window);
    Ok(Some(Around {
        before,
        anchor,
        after,
        more_before,
        more_after,
    }))
}

#[cfg(test)]
#[path = "search_tests.rs"]
mod tests;
