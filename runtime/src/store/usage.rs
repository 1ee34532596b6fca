//! Token usage and cost, summed per conversation, day and model.
//!
//! Totals for a day, a bot or a conversation are a small `SUM` over one
//! row per conversation, day and model (`usage`), not a scan of every call.
//! A model call is recorded apart, in `usage_pending` (an append at the
//! end of one table, where adding it to its row was an upsert into four):
//! the writer folds what waits there into `usage` off a burst's path, with
//! the other deferred work ([`super::catch_up`]). Every read sums both
//! (`usage_all`), so a call counts from its commit.

use rusqlite::{params, Connection, Transaction};

use super::error::StoreError;
use crate::id::{BotId, ConversationId};
use crate::protocol::Usage;

/// Usage summed over some calls.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UsageTotal {
    /// Model calls.
    pub calls: u64,
    /// Tokens.
    pub usage: Usage,
    /// Cost in US dollars.
    pub cost_usd: f64,
}

/// Adds one model call's usage, dated `at` (UTC day), in the caller's transaction.
pub fn add(
    tx: &Transaction<'_>,
    conversation: ConversationId,
    bot: BotId,
    model: &str,
    usage: &Usage,
    cost_usd: f64,
    at: chrono::DateTime<chrono::Utc>,
) -> Result<(), StoreError> {
    PreparedUsage::new(conversation, bot, model, usage, cost_usd, at).add(tx)
}

/// A model call's usage made ready to add: its ids and day printed by the
/// caller, so the store's one writer thread only runs the insert (as
/// [`super::conversations::PreparedMessage`] does for messages).
#[derive(Debug, Clone, PartialEq)]
pub struct PreparedUsage {
    conversation: String,
    bot: String,
    day: String,
    model: String,
    tokens: [i64; 4],
    cost_usd: f64,
}

impl PreparedUsage {
    /// One call's usage, dated `at` (UTC day).
    pub fn new(
        conversation: ConversationId,
        bot: BotId,
        model: &str,
        usage: &Usage,
        cost_usd: f64,
        at: chrono::DateTime<chrono::Utc>,
    ) -> Self {
        use chrono::Datelike;
        let n = |v: u64| i64::try_from(v).unwrap_or(i64::MAX);
        let date = at.date_naive();
        Self {
            conversation: conversation.to_string(),
            bot: bot.to_string(),
            day: format!("{:04}-{:02}-{:02}", date.year(), date.month(), date.day()),
            model: model.to_string(),
            tokens: [
                n(usage.input_tokens),
                n(usage.output_tokens),
                n(usage.cache_read_tokens),
                n(usage.cache_write_tokens),
            ],
            cost_usd,
        }
    }

    /// Records it, to be folded into its conversation's row for its day
    /// and model ([`FOLD`]).
    pub fn add(&self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        tx.prepare_cached(
            "INSERT INTO usage_pending (conversation_id, bot_id, day, model, input_tokens,
                                        output_tokens, cache_read_tokens, cache_write_tokens, cost_usd)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )?
        .execute(params![
            self.conversation,
            self.bot,
            self.day,
            self.model,
            self.tokens[0],
            self.tokens[1],
            self.tokens[2],
            self.tokens[3],
            self.cost_usd,
        ])?;
        Ok(())
    }
}

/// The calls recorded apart, and the view every read sums: the folded rows
/// and the calls not folded yet, one row each.
pub const USAGE_PENDING: &str = r#"
CREATE TABLE usage_pending (
    seq                INTEGER PRIMARY KEY,
    conversation_id    TEXT NOT NULL,
    bot_id             TEXT NOT NULL,
    day                TEXT NOT NULL,
    model              TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL,
    output_tokens      INTEGER NOT NULL,
    cache_read_tokens  INTEGER NOT NULL,
    cache_write_tokens INTEGER NOT NULL,
    cost_usd           REAL NOT NULL
);
CREATE VIEW usage_all AS
    SELECT conversation_id, bot_id, day, model, calls, input_tokens, output_tokens,
           cache_read_tokens, cache_write_tokens, cost_usd FROM usage
    UNION ALL
    SELECT conversation_id, bot_id, day, model, 1, input_tokens, output_tokens,
           cache_read_tokens, cache_write_tokens, cost_usd FROM usage_pending;
"#;

/// Folds the calls with `?1 < seq <= ?2` into their rows and takes them
/// out of `usage_pending` (the statements [`super::catch_up`] runs; the
/// calls fold from the oldest, so those left are always the newest).
pub(crate) const FOLD: &[&str] = &[
    // WHERE before ON CONFLICT: SQLite's parser needs it there to tell
    // the upsert from a join.
    "INSERT INTO usage (conversation_id, bot_id, day, model, calls, input_tokens, output_tokens,
                        cache_read_tokens, cache_write_tokens, cost_usd)
     SELECT conversation_id, min(bot_id), day, model, count(*), sum(input_tokens),
            sum(output_tokens), sum(cache_read_tokens), sum(cache_write_tokens), sum(cost_usd)
     FROM usage_pending WHERE seq > ?1 AND seq <= ?2 GROUP BY conversation_id, day, model
     ON CONFLICT (conversation_id, day, model) DO UPDATE SET
        calls = calls + excluded.calls,
        input_tokens = input_tokens + excluded.input_tokens,
        output_tokens = output_tokens + excluded.output_tokens,
        cache_read_tokens = cache_read_tokens + excluded.cache_read_tokens,
        cache_write_tokens = cache_write_tokens + excluded.cache_write_tokens,
        cost_usd = cost_usd + excluded.cost_usd",
    "DELETE FROM usage_pending WHERE seq > ?1 AND seq <= ?2",
];

/// What one conversation used, all days and models together.
pub fn for_conversation(
    conn: &Connection,
    conversation: ConversationId,
) -> Result<UsageTotal, StoreError> {
    total(conn, "conversation_id = ?1", &conversation.to_string())
}

/// What one bot used on `day` (`YYYY-MM-DD`, UTC), all conversations together.
pub fn for_bot_on(conn: &Connection, bot: BotId, day: &str) -> Result<UsageTotal, StoreError> {
    let mut stmt = conn.prepare_cached(&format!(
        "{SUM} FROM usage_all WHERE bot_id = ?1 AND day = ?2"
    ))?;
    Ok(stmt.query_row(params![bot.to_string(), day], read_total)?)
}

/// What everything used on `day` (`YYYY-MM-DD`, UTC).
pub fn for_day(conn: &Connection, day: &str) -> Result<UsageTotal, StoreError> {
    total(conn, "day = ?1", day)
}

const SUM: &str = "SELECT COALESCE(SUM(calls), 0), COALESCE(SUM(input_tokens), 0),
    COALESCE(SUM(output_tokens), 0), COALESCE(SUM(cache_read_tokens), 0),
    COALESCE(SUM(cache_write_tokens), 0), COALESCE(SUM(cost_usd), 0.0)";

fn total(conn: &Connection, filter: &str, value: &str) -> Result<UsageTotal, StoreError> {
    let mut stmt = conn.prepare_cached(&format!("{SUM} FROM usage_all WHERE {filter}"))?;
    Ok(stmt.query_row([value], read_total)?)
}

fn read_total(r: &rusqlite::Row<'_>) -> rusqlite::Result<UsageTotal> {
    let n =
        |i: usize| -> rusqlite::Result<u64> { Ok(u64::try_from(r.get::<_, i64>(i)?).unwrap_or(0)) };
    Ok(UsageTotal {
        calls: n(0)?,
        usage: Usage {
            input_tokens: n(1)?,
            output_tokens: n(2)?,
            cache_read_tokens: n(3)?,
            cache_write_tokens: n(4)?,
        },
        cost_usd: r.get(5)?,
    })
}
/// One bot's usage on one day.
#[derive(Debug, Clone, PartialEq)]
pub struct DailyUsage {
    /// The day, `YYYY-MM-DD` (UTC).
    pub day: String,
    /// The bot.
    pub bot: BotId,
    /// What it used.
    pub total: UsageTotal,
}

/// Usage summed by bot and day, the latest day first.
pub fn by_bot_and_day(conn: &Connection) -> Result<Vec<DailyUsage>, StoreError> {
    let mut stmt = conn.prepare_cached(
        "SELECT day, bot_id, SUM(calls), SUM(input_tokens), SUM(output_tokens), SUM(cache_read_tokens),
                SUM(cache_write_tokens), SUM(cost_usd)
         FROM usage_all GROUP BY day, bot_id ORDER BY day DESC, bot_id",
    )?;
    let rows = stmt.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            r.get::<_, String>(1)?,
            [
                r.get::<_, i64>(2)?,
                r.get::<_, i64>(3)?,
                r.get::<_, i64>(4)?,
                r.get::<_, i64>(5)?,
                r.get::<_, i64>(6)?,
            ],
            r.get::<_, f64>(7)?,
        ))
    })?;
    let mut out = Vec::new();
    for row in rows {
        let (day, bot, n, cost_usd) = row?;
        let bot = bot.parse::<BotId>().map_err(|e| StoreError::Codec {
            what: "bot id",
            detail: e.to_string(),
        })?;
        let u = |v: i64| u64::try_from(v).unwrap_or(0);
        out.push(DailyUsage {
            day,
            bot,
            total: UsageTotal {
                calls: u(n[0]),
                usage: Usage {
                    input_tokens: u(n[1]),
                    output_tokens: u(n[2]),
                    cache_read_tokens: u(n[3]),
                    cache_write_tokens: u(n[4]),
                },
                cost_usd,
            },
        });
    }
    Ok(out)
}
