//! `delegation_search`: recalls what delegations did, from their record.
//!
//! A delegation's subagents work in conversations of their own; what the
//! delegator needs later is the record (goals, tasks, steers, answers,
//! final texts, changed files), not their every step. This tool reads that
//! record with no model in between, in the same four shapes as
//! `conversation_search`: `query` discovers (FTS5 over the entries: the best
//! delegation with every entry, the others with their matching entries),
//! `instance_id` reads one delegation or subagent (with the start and the end
//! of each subagent's own conversation), `instance_id` with `around` scrolls
//! its entries, and nothing browses the latest delegations. `include_tools`
//! adds the subagents' tool calls and results to a read or a scroll.

use chrono::{DateTime, Utc};
use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::id::{ConversationId, DelegationId, SubagentId};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::search::delegations::{
    self, DelegationFilter, DelegationRow, EventRow, FoundDelegation,
};
use troupe_runtime::store::search::{self, Line};
use troupe_runtime::store::StoreError;
use troupe_runtime::tool::ToolContext;

use crate::recall::{self, bounded, short_time, Indexing, Visible};

mod session;

/// The tool's name.
pub const NAME: &str = "delegation_search";
/// Messages shown from each end of a subagent's conversation in a read.
const CONVERSATION_ENDS: usize = 3;
/// The most characters of one entry or message shown.
const ENTRY_CHARS: usize = 2_000;
/// Matching entries shown per delegation found.
const HITS_EACH: usize = 3;

/// Arguments of `delegation_search`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Words to find in the record (all required, accents ignored). Omit to browse or read.
    pub query: Option<String>,
    /// A delegation (`deleg_…`) or subagent (`sub_…`) id to read, or to scroll with `around`.
    pub instance_id: Option<String>,
    /// An entry number (`#seq` in a result) to scroll around, with `instance_id`.
    pub around: Option<i64>,
    /// Entries each side when scrolling, 1-20 (default 5).
    pub window: Option<u32>,
    /// Delegations to find or list, 1-10 (default 3).
    pub limit: Option<u32>,
    /// Only delegations with a subagent whose folder contains this text.
    pub folder: Option<String>,
    /// Only delegations to this outside executor (`pi`).
    pub executor: Option<String>,
    /// Only delegations started after this: an ISO date or an age (`7d`, `24h`, `2w`).
    pub after: Option<String>,
    /// Only delegations started before this: an ISO date or an age.
    pub before: Option<String>,
    /// In a read or a scroll, also show the subagents' tool calls and results.
    #[serde(default)]
    pub include_tools: bool,
}

/// Recall what delegations did, from their record (goals, tasks, steers, answers, final texts,
/// changed files). `query`: the best delegation with every entry and the others with their
/// matching entries (`limit` 1-10). `instance_id` (a delegation or subagent id): read its
/// record and the start and end of each subagent's conversation. `instance_id` + `around` (an
/// entry's #number): the entries around it (`window` each side, at most 20). No arguments: the
/// latest delegations. Filters: `executor` (pi), `folder` (part of the path), `after`/`before`
/// (ISO date or 7d/24h/2w). An executor instance's read shows the start and end of the
/// harness's own session instead of a conversation. `include_tools`: the subagents' tool calls
/// and results too.
#[tool(read_only, deferred, pages_own_output)]
pub async fn delegation_search(params: Params, ctx: &ToolContext) -> ToolResult {
    let request = match Request::from_params(params, ctx, Utc::now()) {
        Ok(r) => r,
        Err(text) => return ToolResult::error(text),
    };
    // Entries reach the full-text index when the writer catches up: a
    // search makes them all searchable first; a read goes by `seq`.
    let indexing = match request.shape {
        Shape::Discover { .. } => Indexing::CatchUp,
        _ => Indexing::AsIs,
    };
    recall::read(ctx, NAME, indexing, move |conn| request.run(conn)).await
}

enum Shape {
    Discover {
        query: String,
        limit: usize,
    },
    Read {
        id: String,
    },
    Scroll {
        id: String,
        around: i64,
        window: usize,
    },
    Browse {
        limit: usize,
    },
}

struct Request {
    shape: Shape,
    filter: DelegationFilter,
    include_tools: bool,
    /// The house the conversation works for.
    house: Option<troupe_runtime::house::HouseScope>,
}

fn check_instance(text: &str) -> Result<String, String> {
    let id = text.trim();
    if id.parse::<DelegationId>().is_ok() || id.parse::<SubagentId>().is_ok() {
        Ok(id.to_string())
    } else {
        Err(format!(
            "`{text}` is not a delegation or subagent id: give one as shown in a result \
             (`deleg_…` or `sub_…`)."
        ))
    }
}

impl Request {
    fn from_params(p: Params, ctx: &ToolContext, now: DateTime<Utc>) -> Result<Self, String> {
        let (after, before) = recall::range(p.after.as_deref(), p.before.as_deref(), now)?;
        let limit = bounded("limit", p.limit, 3, 10)?;
        let window = bounded("window", p.window, 5, 20)
            .map_err(|e| format!("{e} Entries each side of `around`."))?;
        let query = p.query.filter(|q| !q.trim().is_empty());
        let shape =
            match (query, p.instance_id, p.around) {
                (Some(_), Some(_), _) => return Err(
                    "give `query` to search, or `instance_id` to read one delegation, not both."
                        .into(),
                ),
                (_, None, Some(_)) => {
                    return Err(
                        "`around` needs `instance_id`: give the delegation or subagent the entry \
                            belongs to (a result shows both)."
                            .into(),
                    )
                }
                (Some(query), None, None) => Shape::Discover { query, limit },
                (None, Some(id), None) => Shape::Read {
                    id: check_instance(&id)?,
                },
                (None, Some(id), Some(around)) => Shape::Scroll {
                    id: check_instance(&id)?,
                    around,
                    window,
                },
                (None, None, None) => Shape::Browse { limit },
            };
        Ok(Self {
            shape,
            filter: DelegationFilter {
                bot: (ctx.agent != MAIN_AGENT).then_some(ctx.bot),
                folder: p.folder.filter(|f| !f.trim().is_empty()),
                after,
                before,
                executor: p
                    .executor
                    .map(|e| e.trim().to_string())
                    .filter(|e| !e.is_empty()),
                parents: None,
                not_parents: Vec::new(),
            },
            include_tools: p.include_tools,
            house: troupe_runtime::house::HouseScope::of(ctx),
        })
    }

    fn run(
        mut self,
        conn: &rusqlite::Connection,
    ) -> Result<Result<ToolResult, String>, StoreError> {
        // A house's conversation sees the delegations its house's
        // conversations made; the home's own house all but other houses'.
        if let Some(scope) = self.house {
            let ids = |v: Vec<troupe_runtime::id::ConversationId>| {
                v.into_iter().map(|c| c.to_string()).collect::<Vec<_>>()
            };
            match Visible::from(conn, scope)? {
                Visible::AllBut(elsewhere) => self.filter.not_parents = ids(elsewhere),
                Visible::Only(only) => self.filter.parents = Some(ids(only)),
            }
        }
        match &self.shape {
            Shape::Discover { query, limit } => {
                let found =
                    delegations::find_delegations(conn, query, &self.filter, *limit, HITS_EACH)?;
                self.discovery(conn, query, &found).map(Ok)
            }
            Shape::Browse { limit } => {
                let list = delegations::latest_delegations(conn, &self.filter, *limit)?;
                let mut text = if list.is_empty() {
                    "No delegations match.".to_string()
                } else {
                    format!("The {} latest delegations, newest first:\n", list.len())
                };
                for d in &list {
                    text.push_str(&header(d));
                }
                let data = serde_json::json!({
                    "shape": "browse",
                    "delegations": list.iter().map(delegation_json).collect::<Vec<_>>(),
                });
                Ok(Ok(ToolResult::ok_with(text.trim_end(), data)))
            }
            Shape::Read { id } => {
                let (delegation, subagent) = match self.resolve(conn, id)? {
                    Ok(found) => found,
                    Err(text) => return Ok(Err(text)),
                };
                let events = delegations::events(conn, &delegation.id, subagent.as_deref())?;
                let mut text = header(&delegation);
                text.push_str("\nRecord:\n");
                entries(&mut text, &events);
                let roles = self.roles();
                for sub in &delegation.subagents {
                    if subagent.as_deref().is_some_and(|s| s != sub.id) {
                        continue;
                    }
                    if let Some(executor) = &sub.executor {
                        match &sub.session {
                            Some(file) if file.ends_with(".jsonl") => {
                                text.push_str(&format!(
                                    "\n{} {executor} session {file}:\n",
                                    sub.id
                                ));
                                text.push_str(&session::ends(
                                    std::path::Path::new(file),
                                    CONVERSATION_ENDS,
                                    self.include_tools,
                                    ENTRY_CHARS,
                                ));
                            }
                            Some(id) => text.push_str(&format!(
                                "\n{} {executor} session {id}: kept in its environment's workspace \
                                 (/workspace/.troupe/{executor}/sessions)\n",
                                sub.id
                            )),
                            None => text.push_str(&format!(
                                "\n{} {executor}: it never said where its session is kept\n",
                                sub.id
                            )),
                        }
                        continue;
                    }
                    let Ok(conv) = sub.conversation_id.parse::<ConversationId>() else {
                        continue;
                    };
                    let total = search::count_messages(conn, conv, &roles)?;
                    text.push_str(&format!(
                        "\n{} conversation {conv} ({total} messages):\n",
                        sub.id
                    ));
                    let first = search::read_messages(conn, conv, &roles, 0, CONVERSATION_ENDS)?;
                    messages(&mut text, &first, self.include_tools);
                    let shown = first.len() as i64;
                    if total > shown {
                        let last = search::last_messages(conn, conv, &roles, CONVERSATION_ENDS)?;
                        let last: Vec<Line> = last
                            .into_iter()
                            .filter(|l| !first.iter().any(|f| f.seq == l.seq))
                            .collect();
                        let skipped = total - shown - last.len() as i64;
                        if skipped > 0 {
                            text.push_str(&format!(
                                "… {skipped} messages; read them with conversation_search conversation_id={conv}\n"
                            ));
                        }
                        messages(&mut text, &last, self.include_tools);
                    }
                    if total == 0 {
                        text.push_str("(no messages stored)\n");
                    }
                }
                let data = serde_json::json!({
                    "shape": "read",
                    "delegation": delegation_json(&delegation),
                    "subagent": subagent,
                    "entries": events.iter().map(event_json).collect::<Vec<_>>(),
                });
                Ok(Ok(ToolResult::ok_with(text.trim_end(), data)))
            }
            Shape::Scroll { id, around, window } => {
                let (delegation, subagent) = match self.resolve(conn, id)? {
                    Ok(found) => found,
                    Err(text) => return Ok(Err(text)),
                };
                let Some((events, more_before, more_after)) = delegations::events_around(
                    conn,
                    &delegation.id,
                    subagent.as_deref(),
                    *around,
                    *window,
                )?
                else {
                    return Ok(Err(format!(
                        "{id} has no entry #{around}: take the entry number from a result about {id}."
                    )));
                };
                let mut text = header(&delegation);
                if more_before {
                    text.push_str("[earlier entries above]\n");
                }
                entries(&mut text, &events);
                if more_after {
                    text.push_str("[later entries below]\n");
                }
                if self.include_tools {
                    self.tools_between(conn, &mut text, &delegation, subagent.as_deref(), &events)?;
                }
                let data = serde_json::json!({
                    "shape": "scroll",
                    "delegation": delegation_json(&delegation),
                    "entries": events.iter().map(event_json).collect::<Vec<_>>(),
                    "more_before": more_before,
                    "more_after": more_after,
                });
                Ok(Ok(ToolResult::ok_with(text.trim_end(), data)))
            }
        }
    }

    fn roles(&self) -> Vec<String> {
        let mut roles = vec!["user".to_string(), "assistant".to_string()];
        if self.include_tools {
            roles.push("tool".into());
        }
        roles
    }

    /// The delegation `id` names (itself or through one of its subagents),
    /// if it exists and this agent may read it.
    fn resolve(
        &self,
        conn: &rusqlite::Connection,
        id: &str,
    ) -> Result<Result<(DelegationRow, Option<String>), String>, StoreError> {
        let (delegation_id, subagent) = if id.starts_with(SubagentId::PREFIX) {
            match delegations::delegation_of_subagent(conn, id)? {
                Some(d) => (d, Some(id.to_string())),
                None => (String::new(), None),
            }
        } else {
            (id.to_string(), None)
        };
        let row = delegations::delegation(conn, &delegation_id)?;
        Ok(match row {
            Some(d)
                if self.filter.bot.is_none_or(|b| b.to_string() == d.bot_id)
                    && self.filter.admits_parent(&d.parent_conversation) =>
            {
                Ok((d, subagent))
            }
            _ => Err(format!("there is no delegation or subagent {id} among yours: search or browse to find its id.")),
        })
    }

    /// The subagents' tool calls and results made while the shown entries were written.
    fn tools_between(
        &self,
        conn: &rusqlite::Connection,
        text: &mut String,
        delegation: &DelegationRow,
        subagent: Option<&str>,
        events: &[EventRow],
    ) -> Result<(), StoreError> {
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Ok(());
        };
        for sub in &delegation.subagents {
            if subagent.is_some_and(|s| s != sub.id) {
                continue;
            }
            let Ok(conv) = sub.conversation_id.parse::<ConversationId>() else {
                continue;
            };
            let lines =
                search::read_messages(conn, conv, &["assistant".into(), "tool".into()], 0, 10_000)?;
            let shown: Vec<Line> = lines
                .into_iter()
                .filter(|l| {
                    !l.tools.is_empty()
                        && l.created_at >= first.created_at
                        && l.created_at <= last.created_at
                })
                .collect();
            if !shown.is_empty() {
                text.push_str(&format!("\n{} tools in this span:\n", sub.id));
                messages(text, &shown, true);
            }
        }
        Ok(())
    }

    fn discovery(
        &self,
        conn: &rusqlite::Connection,
        query: &str,
        found: &[FoundDelegation],
    ) -> Result<ToolResult, StoreError> {
        if found.is_empty() {
            return Ok(ToolResult::ok_with(
                format!("No delegation's record has every word of \"{query}\". Try fewer or other words or a wider range."),
                serde_json::json!({"shape": "discovery", "delegations": []}),
            ));
        }
        let mut text = format!("{} delegation(s) match \"{query}\":\n", found.len());
        let mut items = Vec::new();
        for (i, f) in found.iter().enumerate() {
            text.push_str(&format!("\n## {}. {}", i + 1, header(&f.delegation)));
            text.push_str(&format!(
                "{} matching entr{}\n",
                f.matches,
                if f.matches == 1 { "y" } else { "ies" }
            ));
            let mut item = delegation_json(&f.delegation);
            item["matches"] = f.matches.into();
            item["hits"] = f.hits.iter().map(|h| event_json(&h.event)).collect();
            if i == 0 {
                let events = delegations::events(conn, &f.delegation.id, None)?;
                entries(&mut text, &events);
                item["entries"] = events.iter().map(event_json).collect();
            } else {
                for h in &f.hits {
                    text.push_str(&format!(
                        "#{} [{}]{} {}\n",
                        h.event.seq,
                        h.event.kind,
                        h.event
                            .subagent_id
                            .as_deref()
                            .map(|s| format!(" ({s})"))
                            .unwrap_or_default(),
                        h.snippet.replace('\n', " ")
                    ));
                }
            }
            items.push(item);
        }
        text.push_str("\nRead one with instance_id; scroll its entries with instance_id + around.");
        Ok(ToolResult::ok_with(
            text,
            serde_json::json!({"shape": "discovery", "delegations": items}),
        ))
    }
}

fn header(d: &DelegationRow) -> String {
    let ended = d
        .ended_at
        .map(|t| format!(" → {}", short_time(t)))
        .unwrap_or_default();
    let mut out = format!(
        "{} · {} · {}{ended} · {} subagent(s)\n",
        d.id,
        d.status,
        short_time(d.created_at),
        d.subagents.len()
    );
    for s in &d.subagents {
        let folder = if s.folder.is_empty() {
            String::new()
        } else {
            format!(" in {}", s.folder)
        };
        out.push_str(&format!(
            "  {} [{}]{folder}: {}\n",
            s.id,
            s.status,
            cut(&s.goal, 300)
        ));
        if !s.result.is_empty() {
            out.push_str(&format!("    result: {}\n", cut(&s.result, 500)));
        }
    }
    out
}

fn entries(text: &mut String, events: &[EventRow]) {
    for e in events {
        let sub = e
            .subagent_id
            .as_deref()
            .map(|s| format!(" ({s})"))
            .unwrap_or_default();
        text.push_str(&format!(
            "#{} [{}]{sub} {} {}\n",
            e.seq,
            e.kind,
            short_time(e.created_at),
            cut(&e.text, ENTRY_CHARS)
        ));
    }
}

/// Appends messages; their tool calls and results only `with_tools`.
fn messages(text: &mut String, lines: &[Line], with_tools: bool) {
    for l in lines {
        let mut body = cut(&l.text, ENTRY_CHARS);
        if !with_tools && body.is_empty() {
            continue;
        }
        if with_tools && !l.tools.is_empty() {
            let label = if l.role == "tool" {
                "result of"
            } else {
                "calls"
            };
            let tools = cut(&l.tools, 500);
            body = if body.is_empty() {
                format!("({label} {tools})")
            } else {
                format!("{body} ({label} {tools})")
            };
        }
        text.push_str(&format!(
            "[{} · {} · {}] {body}\n",
            l.id,
            l.role,
            short_time(l.created_at)
        ));
    }
}

fn cut(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        None => text.to_string(),
        Some((at, _)) => format!("{} …[cut]", &text[..at]),
    }
}

fn delegation_json(d: &DelegationRow) -> serde_json::Value {
    serde_json::json!({
        "id": d.id,
        "status": d.status,
        "parent_conversation": d.parent_conversation,
        "created_at": d.created_at.to_rfc3339(),
        "ended_at": d.ended_at.map(|t| t.to_rfc3339()),
        "subagents": d.subagents.iter().map(|s| serde_json::json!({
            "id": s.id,
            "conversation_id": s.conversation_id,
            "goal": s.goal,
            "folder": s.folder,
            "status": s.status,
        })).collect::<Vec<_>>(),
    })
}

fn event_json(e: &EventRow) -> serde_json::Value {
    serde_json::json!({
        "seq": e.seq,
        "subagent_id": e.subagent_id,
        "kind": e.kind,
        "created_at": e.created_at.to_rfc3339(),
    })
}

#[cfg(test)]
#[path = "delegation_search_tests.rs"]
mod tests;
