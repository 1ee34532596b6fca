//! What the tools that recall from the store share
//! (`conversation_search`, `delegation_search`): time bounds read the same
//! way, limits checked the same way, the conversations a house's
//! conversation may see, and one read of the store.
//!
//! Each tool keeps its own shapes (find, read, scroll, browse) and its own
//! output: those are what the model learns, and they differ.

use chrono::{DateTime, NaiveDate, NaiveDateTime, Utc};
use troupe_runtime::house::HouseScope;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::StoreError;
use troupe_runtime::tool::ToolContext;

/// Parses a time bound: an ISO date or date-time (UTC unless it says
/// otherwise), or an age before `now` (`7d`, `24h`, `2w`, `30m`).
pub(crate) fn parse_when(
    name: &str,
    text: &str,
    now: DateTime<Utc>,
) -> Result<DateTime<Utc>, String> {
    let text = text.trim();
    let bad = || {
        format!(
            "`{name}` is not a date or an age: `{text}`. Give an ISO date (2026-03-01, \
             2026-03-01T14:00:00Z) or an age such as 7d, 24h, 2w or 30m."
        )
    };
    if let Some((number, unit)) = text
        .char_indices()
        .find(|(_, c)| !c.is_ascii_digit())
        .map(|(i, _)| text.split_at(i))
    {
        let age = match (number.parse::<i64>(), unit) {
            (Ok(n), "m" | "min") => Some(chrono::Duration::try_minutes(n)),
            (Ok(n), "h") => Some(chrono::Duration::try_hours(n)),
            (Ok(n), "d") => Some(chrono::Duration::try_days(n)),
            (Ok(n), "w") => Some(chrono::Duration::try_weeks(n)),
            _ => None,
        };
        if let Some(age) = age {
            return age.and_then(|a| now.checked_sub_signed(a)).ok_or_else(bad);
        }
    }
    if let Ok(t) = DateTime::parse_from_rfc3339(text) {
        return Ok(t.with_timezone(&Utc));
    }
    for format in [
        "%Y-%m-%dT%H:%M:%S",
        "%Y-%m-%d %H:%M:%S",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(t) = NaiveDateTime::parse_from_str(text, format) {
            return Ok(t.and_utc());
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .and_then(|d| d.and_hms_opt(0, 0, 0))
        .map(|t| t.and_utc())
        .ok_or_else(bad)
}

/// Checks `limit`-like numbers: 1 to `max`, `default` when absent.
pub(crate) fn bounded(
    name: &str,
    value: Option<u32>,
    default: u32,
    max: u32,
) -> Result<usize, String> {
    match value.unwrap_or(default) {
        v if (1..=max).contains(&v) => Ok(v as usize),
        v => Err(format!("`{name}` must be between 1 and {max}, not {v}.")),
    }
}

/// A time range: after this, before that, each bound optional.
pub(crate) type Range = (Option<DateTime<Utc>>, Option<DateTime<Utc>>);

/// Both bounds of a time range (`after`, `before`), each parsed by
/// [`parse_when`] when given.
pub(crate) fn range(
    after: Option<&str>,
    before: Option<&str>,
    now: DateTime<Utc>,
) -> Result<Range, String> {
    let after = after.map(|t| parse_when("after", t, now)).transpose()?;
    let before = before.map(|t| parse_when("before", t, now)).transpose()?;
    Ok((after, before))
}

/// A time as results show it.
pub(crate) fn short_time(t: DateTime<Utc>) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// The conversations a house's conversation may recall.
pub(crate) enum Visible {
    /// Only these: the house's own (outside the home's own house).
    Only(Vec<ConversationId>),
    /// All but these: other houses' (in the home's own house, which also
    /// sees what was made outside any house).
    AllBut(Vec<ConversationId>),
}

impl Visible {
    /// What `scope`'s conversations may recall.
    pub(crate) fn from(conn: &rusqlite::Connection, scope: HouseScope) -> Result<Self, StoreError> {
        Ok(if scope.home {
            Visible::AllBut(troupe_runtime::store::house::seated_elsewhere(
                conn,
                scope.house,
            )?)
        } else {
            Visible::Only(troupe_runtime::store::house::conversations_of(
                conn,
                scope.house,
            )?)
        })
    }
}

/// Whether a read waits for the search index to hold every committed
/// message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Indexing {
    /// Index what the writer has not yet, then read.
    CatchUp,
    /// Read what is indexed.
    AsIs,
}

/// Runs `run` on a reader of the conversation's store, for the tool
/// `name`: its answer, its refusal (`Err(text)`) as an error result, or a
/// store failure said as `NAME failed: …`.
pub(crate) async fn read<F>(ctx: &ToolContext, name: &str, indexing: Indexing, run: F) -> ToolResult
where
    F: FnOnce(&rusqlite::Connection) -> Result<Result<ToolResult, String>, StoreError>
        + Send
        + 'static,
{
    let Some(store) = ctx.services.store() else {
        return ToolResult::error(format!(
            "{name} has no store in this conversation; it cannot search here."
        ));
    };
    if indexing == Indexing::CatchUp {
        if let Err(e) = store.catch_up().await {
            return ToolResult::error(format!("{name} failed: {e}"));
        }
    }
    match store.read(run).await {
        Ok(Ok(result)) => result,
        Ok(Err(text)) => ToolResult::error(text),
        Err(e) => ToolResult::error(format!("{name} failed: {e}")),
    }
}
