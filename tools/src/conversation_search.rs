//! `conversation_search`: finds and reads past conversations, with no model
//! in between.
//!
//! An agent's memory of what was said lives in the store; this tool is how
//! it recalls it. The arguments pick one of four shapes: `query` discovers
//! (FTS5, every word required, accents ignored: the best conversation in
//! full, the others by their matching messages), `conversation_id` with
//! `around_message_id` scrolls, `conversation_id` alone reads a whole
//! conversation in pages, and nothing browses the latest conversations. A bot
//! sees only its own conversations; the main agent sees every agent's.
//! Every message shows its stable id, so a hit can be scrolled around.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::search::{self, ConversationSummary, Filter, Found, Line, Order};
use troupe_runtime::tool::ToolContext;

use crate::recall::{self, bounded, short_time, Indexing, Visible};

/// The tool's name.
pub const NAME: &str = "conversation_search";
/// Conversations found or listed, by default.
pub const DEFAULT_LIMIT: u32 = 3;
/// The most conversations found or listed.
pub const MAX_LIMIT: u32 = 10;
/// Messages each side of a scroll's anchor, by default.
pub const DEFAULT_WINDOW: u32 = 5;
/// The most messages each side of a scroll's anchor.
pub const MAX_WINDOW: u32 = 20;
/// The most characters of one message shown.
pub const MESSAGE_CHARS: usize = 4_000;
/// The most characters of messages in one result.
pub const RESULT_CHARS: usize = 40_000;
/// The most messages of one conversation read in one call.
const PAGE_MESSAGES: usize = 200;
/// Matching messages shown per conversation found.
const HITS_EACH: usize = 3;

/// How found conversations are ordered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Sort {
    /// Best match first (default).
    #[default]
    Relevance,
    /// Newest match first.
    Newest,
    /// Oldest match first.
    Oldest,
}

/// How much of each found conversation is shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Detail {
    /// The best conversation in full, the others by their matches (default).
    #[default]
    Adaptive,
    /// Every conversation found in full, within the size cap.
    Full,
}

/// Arguments of `conversation_search`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Words to find (all required, accents and case ignored). Omit to browse or read.
    pub query: Option<String>,
    /// A conversation to read (alone) or scroll (with `around_message_id`).
    pub conversation_id: Option<String>,
    /// A message id (`msg_…`) to scroll around, in `conversation_id`.
    pub around_message_id: Option<String>,
    /// Messages each side when scrolling, 1-20 (default 5).
    pub window: Option<u32>,
    /// Conversations to find or list, 1-10 (default 3).
    pub limit: Option<u32>,
    /// `relevance` (default), `newest` or `oldest`.
    pub sort: Option<Sort>,
    /// `adaptive` (default: best in full, others by match) or `full`.
    pub detail: Option<Detail>,
    /// Only after this: an ISO date (`2026-03-01`, `2026-03-01T14:00:00Z`) or an age (`7d`, `24h`, `2w`).
    pub after: Option<String>,
    /// Only before this: an ISO date or an age (`7d`, `24h`, `2w`).
    pub before: Option<String>,
    /// Conversations to leave out of a search or a listing.
    pub exclude_conversation_ids: Option<Vec<String>>,
    /// Roles to search and show, comma separated (default `user,assistant`; add `tool` for tool output).
    pub role_filter: Option<String>,
    /// When reading a conversation: messages to skip (to read the next page).
    pub offset: Option<u32>,
}

/// Find and read past conversations (full-text, every word required, accents ignored). `query`:
/// the best conversation in full and the others by their matching messages (`limit` 1-10,
/// `sort`, `detail`, `after`/`before` as an ISO date or 7d/24h/2w, `exclude_conversation_ids`).
/// `conversation_id` + `around_message_id`: the messages around one (`window` each side, at
/// most 20). `conversation_id` alone: read it whole, in pages (`offset`). No arguments: the
/// latest conversations. `role_filter` is user,assistant by default; add tool to search tool
/// output.
#[tool(read_only, deferred, pages_own_output)]
pub async fn conversation_search(params: Params, ctx: &ToolContext) -> ToolResult {
    let request = match Request::from_params(params, ctx, Utc::now()) {
        Ok(r) => r,
        Err(text) => return ToolResult::error(text),
    };
    // Every message committed so far is found, even the ones the
    // writer has not indexed yet.
    recall::read(ctx, NAME, Indexing::CatchUp, move |conn| {
        Ok(request.run(conn))
    })
    .await
}

/// What a call asks for, checked.
enum Shape {
    Discover {
        query: String,
        order: Order,
        detail: Detail,
        limit: usize,
    },
    Scroll {
        conversation: ConversationId,
        around: MsgId,
        window: usize,
    },
    Read {
        conversation: ConversationId,
        offset: usize,
    },
    Browse {
        limit: usize,
    },
}

struct Request {
    shape: Shape,
    filter: Filter,
    /// The house the conversation works for: the conversations of other
    /// houses are left out, and outside the home's own house, all but that
    /// house's.
    house: Option<troupe_runtime::house::HouseScope>,
    /// Those conversations, once looked up.
    elsewhere: Vec<ConversationId>,
}

fn parse_conversation(text: &str) -> Result<ConversationId, String> {
    text.trim().parse().map_err(|_| {
        format!("`{text}` is not a conversation id: give one as shown in a result (`conv_` and 32 hex digits).")
    })
}

impl Request {
    fn from_params(p: Params, ctx: &ToolContext, now: DateTime<Utc>) -> Result<Self, String> {
        let roles = match p.role_filter.as_deref() {
            None => vec!["user".to_string(), "assistant".to_string()],
            Some(list) => {
                let roles: Vec<String> = list
                    .split(',')
                    .map(|r| r.trim().to_ascii_lowercase())
                    .filter(|r| !r.is_empty())
                    .collect();
                if let Some(bad) = roles
                    .iter()
                    .find(|r| !["user", "assistant", "tool"].contains(&r.as_str()))
                {
                    return Err(format!(
                        "`role_filter` has an unknown role `{bad}`: use user, assistant and tool, comma separated."
                    ));
                }
                if roles.is_empty() {
                    return Err(
                        "`role_filter` is empty: give roles such as `user,assistant`.".into(),
                    );
                }
                roles
            }
        };
        let (after, before) = recall::range(p.after.as_deref(), p.before.as_deref(), now)?;
        if let (Some(a), Some(b)) = (after, before) {
            if a >= b {
                return Err(
                    "`after` is not before `before`: nothing can match; widen the range.".into(),
                );
            }
        }
        let exclude = p
            .exclude_conversation_ids
            .unwrap_or_default()
            .iter()
            .map(|id| parse_conversation(id))
            .collect::<Result<Vec<_>, _>>()?;
        let limit = bounded("limit", p.limit, DEFAULT_LIMIT, MAX_LIMIT)?;
        let window = bounded("window", p.window, DEFAULT_WINDOW, MAX_WINDOW)
            .map_err(|e| format!("{e} Messages each side of `around_message_id`."))?;
        let query = p.query.filter(|q| !q.trim().is_empty());
        let shape = match (query, p.conversation_id, p.around_message_id) {
            (Some(_), Some(_), _) => {
                return Err("give `query` to search, or `conversation_id` to read one conversation, not both.".into())
            }
            (_, None, Some(_)) => {
                return Err("`around_message_id` needs `conversation_id`: give the conversation the message is in \
                            (a search result shows both)."
                    .into())
            }
            (Some(query), None, None) => Shape::Discover {
                query,
                order: match p.sort.unwrap_or_default() {
                    Sort::Relevance => Order::Relevance,
                    Sort::Newest => Order::Newest,
                    Sort::Oldest => Order::Oldest,
                },
                detail: p.detail.unwrap_or_default(),
                limit,
            },
            (None, Some(conv), Some(around)) => Shape::Scroll {
                conversation: parse_conversation(&conv)?,
                around: around.trim().parse().map_err(|_| {
                    format!("`{around}` is not a message id: give one as shown in a result (`msg_` and 32 hex digits).")
                })?,
                window,
            },
            (None, Some(conv), None) => Shape::Read {
                conversation: parse_conversation(&conv)?,
                offset: p.offset.unwrap_or(0) as usize,
            },
            (None, None, None) => Shape::Browse { limit },
        };
        let bot = (ctx.agent != MAIN_AGENT).then_some(ctx.bot);
        Ok(Self {
            shape,
            filter: Filter {
                roles,
                after,
                before,
                exclude,
                bot,
                only: None,
            },
            house: troupe_runtime::house::HouseScope::of(ctx),
            elsewhere: Vec::new(),
        })
    }

    fn run(mut self, conn: &rusqlite::Connection) -> Result<ToolResult, String> {
        if let Some(scope) = self.house {
            let failed = |e| format!("conversation_search failed: {e}");
            match Visible::from(conn, scope).map_err(failed)? {
                Visible::AllBut(elsewhere) => {
                    self.filter.exclude.extend(elsewhere.iter().copied());
                    self.elsewhere = elsewhere;
                }
                Visible::Only(only) => self.filter.only = Some(only),
            }
        }
        let failed =
            |e: troupe_runtime::store::StoreError| format!("conversation_search failed: {e}");
        match self.shape {
            Shape::Discover {
                ref query,
                order,
                detail,
                limit,
            } => {
                let found =
                    search::find_conversations(conn, query, &self.filter, order, limit, HITS_EACH)
                        .map_err(failed)?;
                self.discovery(conn, query, detail, found).map_err(failed)
            }
            Shape::Scroll {
                conversation,
                around,
                window,
            } => {
                let summary = self.visible(conn, conversation)?;
                let Some(around) =
                    search::messages_around(conn, conversation, around, window, &self.filter.roles)
                        .map_err(failed)?
                else {
                    return Err(format!(
                        "conversation {conversation} has no message {around}: take both ids from the same result."
                    ));
                };
                Ok(scroll(&summary, &around))
            }
            Shape::Read {
                conversation,
                offset,
            } => {
                let summary = self.visible(conn, conversation)?;
                let total = search::count_messages(conn, conversation, &self.filter.roles)
                    .map_err(failed)?;
                let lines = search::read_messages(
                    conn,
                    conversation,
                    &self.filter.roles,
                    offset,
                    PAGE_MESSAGES,
                )
                .map_err(failed)?;
                let mut text = header(&summary);
                let shown = transcript(&mut text, &lines, RESULT_CHARS, &[]);
                let next = offset + shown;
                if (next as i64) < total {
                    text.push_str(&format!(
                        "\n[messages {}-{next} of {total}: call again with conversation_id={conversation} offset={next} to read on]",
                        offset + 1
                    ));
                } else if shown == 0 {
                    text.push_str("\n(no messages with these roles here)");
                }
                let data = serde_json::json!({
                    "shape": "read",
                    "conversation": summary_json(&summary),
                    "messages": lines_json(&lines[..shown]),
                    "offset": offset,
                    "total": total,
                    "next_offset": ((next as i64) < total).then_some(next),
                });
                Ok(ToolResult::ok_with(text.trim_end(), data))
            }
            Shape::Browse { limit } => {
                let list =
                    search::latest_conversations(conn, &self.filter, limit).map_err(failed)?;
                let mut text = if list.is_empty() {
                    "No conversations yet.".to_string()
                } else {
                    format!("The {} latest conversations, newest first:\n", list.len())
                };
                for s in &list {
                    text.push_str(&format!("- {}", header(s)));
                    if let Some(first) = &s.first_user_message {
                        text.push_str(&format!("  first: {}\n", cut(first, 200)));
                    }
                }
                let data = serde_json::json!({
                    "shape": "browse",
                    "conversations": list.iter().map(summary_json).collect::<Vec<_>>(),
                });
                Ok(ToolResult::ok_with(text.trim_end(), data))
            }
        }
    }

    /// The conversation, if it exists and this agent may read it.
    fn visible(
        &self,
        conn: &rusqlite::Connection,
        id: ConversationId,
    ) -> Result<ConversationSummary, String> {
        let summary = search::conversation_summary(conn, id)
            .map_err(|e| format!("conversation_search failed: {e}"))?;
        match summary {
            Some(s)
                if self.filter.bot.is_none_or(|bot| bot == s.bot)
                    && !self.elsewhere.contains(&id)
                    && self.filter.only.as_ref().is_none_or(|o| o.contains(&id)) =>
            {
                Ok(s)
            }
            _ => Err(format!(
                "there is no conversation {id} among yours: search or browse to find its id."
            )),
        }
    }

    fn discovery(
        &self,
        conn: &rusqlite::Connection,
        query: &str,
        detail: Detail,
        found: Vec<Found>,
    ) -> Result<ToolResult, troupe_runtime::store::StoreError> {
        if found.is_empty() {
            let text = format!(
                "No conversation has every word of \"{query}\" (roles: {}). Try fewer or other words, \
                 a wider date range, or add `tool` to role_filter.",
                self.filter.roles.join(",")
            );
            return Ok(ToolResult::ok_with(
                text,
                serde_json::json!({"shape": "discovery", "conversations": []}),
            ));
        }
        let full_count = match detail {
            Detail::Adaptive => 1,
            Detail::Full => found.len(),
        };
        let budget = RESULT_CHARS / full_count;
        let mut text = format!("{} conversation(s) match \"{query}\":\n", found.len());
        let mut items = Vec::new();
        for (i, f) in found.iter().enumerate() {
            text.push_str(&format!("\n## {}. {}", i + 1, header(&f.conversation)));
            text.push_str(&format!("{} matching message(s)\n", f.matches));
            let mut item = summary_json(&f.conversation);
            item["matches"] = f.matches.into();
            item["hits"] = f
                .hits
                .iter()
                .map(|h| {
                    serde_json::json!({"id": h.id.to_string(), "role": h.role, "created_at": h.created_at.to_rfc3339(), "snippet": h.snippet})
                })
                .collect();
            if i < full_count {
                let lines = search::read_messages(
                    conn,
                    f.conversation.id,
                    &self.filter.roles,
                    0,
                    PAGE_MESSAGES,
                )?;
                let marked: Vec<MsgId> = f.hits.iter().map(|h| h.id).collect();
                let shown = transcript(&mut text, &lines, budget, &marked);
                let total = search::count_messages(conn, f.conversation.id, &self.filter.roles)?;
                if (shown as i64) < total {
                    text.push_str(&format!(
                        "[{shown} of {total} messages shown: read on with conversation_id={} offset={shown}]\n",
                        f.conversation.id
                    ));
                }
                item["messages"] = lines_json(&lines[..shown]);
            } else {
                for h in &f.hits {
                    text.push_str(&format!(
                        "- [{} · {} · {}] {}\n",
                        h.id,
                        h.role,
                        short_time(h.created_at),
                        h.snippet.replace('\n', " ")
                    ));
                }
            }
            items.push(item);
        }
        text.push_str(
            "\nScroll around a message with conversation_id + around_message_id; read one whole with conversation_id.",
        );
        Ok(ToolResult::ok_with(
            text,
            serde_json::json!({"shape": "discovery", "conversations": items}),
        ))
    }
}

fn scroll(summary: &ConversationSummary, around: &search::Around) -> ToolResult {
    let mut text = header(summary);
    if around.more_before {
        text.push_str("[earlier messages above]\n");
    }
    let mut lines: Vec<Line> = around.before.clone();
    lines.push(around.anchor.clone());
    lines.extend(around.after.iter().cloned());
    let shown = transcript(&mut text, &lines, RESULT_CHARS, &[around.anchor.id]);
    if around.more_after || shown < lines.len() {
        text.push_str("[later messages below]\n");
    }
    let data = serde_json::json!({
        "shape": "scroll",
        "conversation": summary_json(summary),
        "anchor": around.anchor.id.to_string(),
        "messages": lines_json(&lines[..shown]),
        "more_before": around.more_before,
        "more_after": around.more_after || shown < lines.len(),
    });
    ToolResult::ok_with(text.trim_end(), data)
}

/// A conversation's one-line header.
fn header(s: &ConversationSummary) -> String {
    let title = if s.title.is_empty() {
        "(untitled)"
    } else {
        &s.title
    };
    let bot = s.bot_name.clone().unwrap_or_else(|| s.bot.to_string());
    format!(
        "{} — {title} · {} · {bot} · updated {} · {} messages\n",
        s.id,
        s.kind,
        short_time(s.updated_at),
        s.messages
    )
}

/// Appends messages as transcript lines within `budget` characters, those
/// in `marked` (the matches) flagged with `»`; how many fit.
fn transcript(text: &mut String, lines: &[Line], budget: usize, marked: &[MsgId]) -> usize {
    let mut used = 0;
    for (i, line) in lines.iter().enumerate() {
        let mut body = cut(&line.text, MESSAGE_CHARS);
        if !line.tools.is_empty() {
            let label = if line.role == "tool" {
                "result of"
            } else {
                "calls"
            };
            let tools = cut(&line.tools, 500);
            body = if body.is_empty() {
                format!("({label} {tools})")
            } else {
                format!("{body}\n({label} {tools})")
            };
        }
        let mark = if marked.contains(&line.id) { "» " } else { "" };
        let entry = format!(
            "{mark}[{} · {} · {}] {}\n",
            line.id,
            line.role,
            short_time(line.created_at),
            body
        );
        if i > 0 && used + entry.len() > budget {
            return i;
        }
        used += entry.len();
        text.push_str(&entry);
    }
    lines.len()
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!(
            "{} …[{} more characters]",
            &text[..at],
            text[at..].chars().count()
        ),
    }
}

fn summary_json(s: &ConversationSummary) -> serde_json::Value {
    serde_json::json!({
        "id": s.id.to_string(),
        "bot": s.bot.to_string(),
        "bot_name": s.bot_name,
        "kind": s.kind,
        "title": s.title,
        "created_at": s.created_at.to_rfc3339(),
        "updated_at": s.updated_at.to_rfc3339(),
        "message_count": s.messages,
        "first_user_message": s.first_user_message,
    })
}

fn lines_json(lines: &[Line]) -> serde_json::Value {
    lines
        .iter()
        .map(|l| serde_json::json!({"id": l.id.to_string(), "role": l.role, "created_at": l.created_at.to_rfc3339()}))
        .collect()
}

#[cfg(test)]
#[path = "conversation_search_tests.rs"]
mod tests;
