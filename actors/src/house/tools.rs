//! The node's [`HouseServices`]: what the house tools do, scoped to the
//! house of the calling conversation's [`Seat`].
//!
//! Every lookup goes through the seat's house, so a thread, member or
//! message of another house is "not found" — never shown, never written.
//! Results carry only confirmed effects and public fields in `data`.

use std::sync::Arc;

use serde_json::json;
use troupe_runtime::house::{AgentDraft, HouseServices, Seat, SelfUpdate};
use troupe_runtime::model::ModelRequest;
use troupe_runtime::protocol::house::{render_line, Attachment, ThreadFilter, ThreadInfo};
use troupe_runtime::protocol::{Message, ToolResult};
use troupe_runtime::store::house as table;
use troupe_runtime::tool::ToolContext;

mod members;
mod posts;

use super::api::{HouseRef, ThreadRef};
use crate::node::{Node, WeakNode};

/// Handles shown per thread by `list_threads` before `+N`.
const HANDLES_SHOWN: usize = 12;

/// The desk where the house tools are served, within the caller's house:
/// the node's [`HouseServices`].
pub struct HouseDesk {
    node: WeakNode,
}

impl HouseDesk {
    /// The services of `node`.
    pub fn new(node: &Node) -> Arc<Self> {
        Arc::new(Self {
            node: node.downgrade(),
        })
    }

    /// The node and the caller's seat, or the error result to return.
    fn scope(&self, ctx: &ToolContext) -> Result<(Node, Seat), ToolResult> {
        let node = self
            .node
            .upgrade()
            .ok_or_else(|| ToolResult::error("the node is shutting down."))?;
        let seat = Seat::of(ctx).ok_or_else(|| {
            ToolResult::error(
                "this conversation is not in a house thread; the house tools work there.",
            )
        })?;
        Ok((node, seat))
    }

    async fn house(&self, ctx: &ToolContext) -> Result<(HouseRef, Seat), ToolResult> {
        let (node, seat) = self.scope(ctx)?;
        let house = node
            .store()
            .read(move |c| table::house(c, seat.house))
            .await
            .map_err(|e| ToolResult::error(e.to_string()))?
            .ok_or_else(|| ToolResult::error("this conversation's house is gone."))?;
        let house = node.house(&house.name).await.map_err(err)?;
        Ok((house, seat))
    }

    /// The thread `reference` names in the caller's house, or its own.
    async fn thread(
        &self,
        ctx: &ToolContext,
        reference: Option<&str>,
    ) -> Result<(HouseRef, Seat, ThreadRef), ToolResult> {
        let (house, seat) = self.house(ctx).await?;
        let thread = match reference.map(str::trim).filter(|r| !r.is_empty()) {
            Some(r) => house.thread(r).await.map_err(|_| {
                ToolResult::error(format!(
                    "there is no thread `{r}` in this house; list_threads shows them (a thread id, a name or a link)."
                ))
            })?,
            None => house.thread(&seat.thread.to_string()).await.map_err(err)?,
        };
        Ok((house, seat, thread))
    }
}

fn err(e: impl std::fmt::Display) -> ToolResult {
    ToolResult::error(e.to_string())
}

fn thread_data(t: &ThreadInfo) -> serde_json::Value {
    json!({"thread_id": t.id.to_string(), "name": t.name, "link": t.link()})
}

#[async_trait::async_trait]
impl HouseServices for HouseDesk {
    async fn read_thread(
        &self,
        ctx: &ToolContext,
        thread: Option<&str>,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> ToolResult {
        let (_, _, t) = match self.thread(ctx, thread).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let (offset, limit) = (offset.unwrap_or(0), limit.unwrap_or(30).clamp(1, 200));
        let messages = match t.read(offset, limit).await {
            Ok(m) => m,
            Err(e) => return err(e),
        };
        let total = t.info.messages as usize;
        if messages.is_empty() {
            return ToolResult::ok_with(
                format!(
                    "Thread `{}` has {total} messages; none before the newest {offset}.",
                    t.info.label()
                ),
                json!({"thread_id": t.info.id.to_string(), "total": total, "messages": []}),
            );
        }
        let first = total.saturating_sub(offset + messages.len()) + 1;
        let mut text = format!(
            "Thread `{}`: messages {first}–{} of {total}, oldest first.",
            t.info.label(),
            first + messages.len() - 1
        );
        for m in &messages {
            text.push('\n');
            text.push_str(&render_line(m));
        }
        if first > 1 {
            text.push_str(&format!(
                "\n(Earlier messages: read_thread with offset {}.)",
                offset + messages.len()
            ));
        }
        let data = json!({
            "thread_id": t.info.id.to_string(),
            "total": total,
            "messages": messages.iter().map(|m| json!({
                "author": m.author, "author_kind": m.author_kind, "text": m.text,
                "created_at": m.created_at, "via": m.via.map(|v| v.to_string()),
            })).collect::<Vec<_>>(),
        });
        ToolResult::ok_with(text, data)
    }

    async fn ask_thread(
        &self,
        ctx: &ToolContext,
        thread: Option<&str>,
        question: &str,
    ) -> ToolResult {
        if question.trim().is_empty() {
            return ToolResult::error("the question is empty.");
        }
        let (house, _, t) = match self.thread(ctx, thread).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let node = match self.scope(ctx) {
            Ok((n, _)) => n,
            Err(e) => return e,
        };
        // The whole thread, newest kept when it would not fit the window.
        let budget = (ctx.context_window as usize).saturating_mul(3).max(8_000);
        let all = match t.read(0, 100_000).await {
            Ok(m) => m,
            Err(e) => return err(e),
        };
        let mut lines: Vec<String> = Vec::new();
        let mut used = 0;
        for m in all.iter().rev() {
            let line = render_line(m);
            used += line.len() + 1;
            if used > budget {
                break;
            }
            lines.push(line);
        }
        lines.reverse();
        let cut = all.len() - lines.len();
        let bot = match node.bot(&ctx.agent) {
            Ok(b) => b,
            Err(e) => return err(e),
        };
        let model = match node.resolve_model_for(&bot.spec.name, &bot.spec.model) {
            Ok(m) => m,
            Err(e) => return err(e),
        };
        let request = ModelRequest {
            model: model.model.clone(),
            system: "You answer one question about a conversation thread, from its transcript only. \
                     Later messages correct earlier ones. Quote who said what when it matters. If the \
                     thread does not say, answer that it does not."
                .into(),
            messages: vec![Message::user(format!(
                "Thread `{}` of house `{}`{}:\n\n{}\n\nQuestion: {question}",
                t.info.label(),
                house.house.name,
                if cut > 0 {
                    format!(" (its {cut} oldest messages left out for length)")
                } else {
                    String::new()
                },
                lines.join("\n")
            ))]
            .into(),
            tools: Vec::new().into(),
            max_tokens: Some(1_500),
            temperature: None,
        };
        let answer = tokio::select! {
            a = crate::node::conversation::step::collect_text(&model, request) => a,
            () = ctx.cancel.cancelled() => return ToolResult::error("stopped."),
        };
        match answer {
            Ok(a) if !a.trim().is_empty() => ToolResult::ok_with(
                a.trim().to_string(),
                json!({"thread_id": t.info.id.to_string(), "messages_read": lines.len()}),
            ),
            Ok(_) => ToolResult::error("the model gave no answer; try again or use read_thread."),
            Err(e) => ToolResult::error(format!(
                "the model call failed ({e}); read the thread with read_thread instead."
            )),
        }
    }

    async fn search_threads(&self, ctx: &ToolContext, query: &str, limit: usize) -> ToolResult {
        let (house, _) = match self.house(ctx).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let hits = match house.search(query, limit.clamp(1, 50)).await {
            Ok(h) => h,
            Err(e) => return err(e),
        };
        if hits.is_empty() {
            return ToolResult::ok_with(
                format!("No messages in this house's threads match `{query}`."),
                json!({"hits": []}),
            );
        }
        let mut text = format!("{} matches for `{query}`, best first:", hits.len());
        for (i, h) in hits.iter().enumerate() {
            text.push_str(&format!(
                "\n{}. thread `{}` ({}) — {} at {}: {}",
                i + 1,
                h.thread_name
                    .clone()
                    .unwrap_or_else(|| h.thread.to_string()),
                h.thread,
                h.author,
                h.created_at.format("%Y-%m-%d %H:%M"),
                h.snippet
            ));
        }
        ToolResult::ok_with(text, json!({"hits": hits}))
    }

    async fn list_threads(&self, ctx: &ToolContext, mut filter: ThreadFilter) -> ToolResult {
        let (house, seat) = match self.house(ctx).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let me = ctx.agent.clone();
        if filter.participant.is_some() {
            filter.participant = Some(me.clone());
        }
        filter.limit = if filter.limit == 0 {
            20
        } else {
            filter.limit.min(100)
        };
        let threads = match house.threads(filter).await {
            Ok(t) => t,
            Err(e) => return err(e),
        };
        if threads.is_empty() {
            return ToolResult::ok_with("No threads match.", json!({"threads": []}));
        }
        let mut text = format!("{} threads, most recently active first:", threads.len());
        let mut data = Vec::new();
        for t in &threads {
            let shown: Vec<&str> = t
                .participants
                .iter()
                .take(HANDLES_SHOWN)
                .map(String::as_str)
                .collect();
            let more = t.participants.len().saturating_sub(HANDLES_SHOWN);
            let inside = t.participants.iter().any(|p| p.eq_ignore_ascii_case(&me));
            text.push_str(&format!(
                "\n- `{}` ({}){}{} — {} messages, active {}; {}{}; {}",
                t.label(),
                t.id,
                if t.pinned { " pinned" } else { "" },
                if t.id == seat.thread {
                    " (this thread)"
                } else {
                    ""
                },
                t.messages,
                t.last_activity.format("%Y-%m-%d %H:%M"),
                if shown.is_empty() {
                    "no participants".to_string()
                } else {
                    shown.join(", ")
                },
                if more > 0 {
                    format!(" +{more}")
                } else {
                    String::new()
                },
                if inside {
                    "you are in it"
                } else {
                    "you are not in it"
                }
            ));
            data.push(json!({
                "thread_id": t.id.to_string(), "name": t.name, "tags": t.tags, "pinned": t.pinned,
                "messages": t.messages, "last_activity": t.last_activity,
                "participants": shown, "more_participants": more, "you_participate": inside,
            }));
        }
        ToolResult::ok_with(text, json!({"threads": data}))
    }

    async fn list_participants(&self, ctx: &ToolContext, thread: Option<&str>) -> ToolResult {
        let (house, _, t) = match self.thread(ctx, thread).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let members = match house.members().await {
            Ok(m) => m,
            Err(e) => return err(e),
        };
        let mut text = format!(
            "Thread `{}` has {} participants:",
            t.info.label(),
            t.info.participants.len()
        );
        let mut data = Vec::new();
        for handle in &t.info.participants {
            let m = members
                .iter()
                .find(|m| m.handle.eq_ignore_ascii_case(handle));
            let kind = m.map_or("former member", |m| m.kind.as_str());
            let listen = m.and_then(|m| m.listen);
            text.push_str(&format!(
                "\n- {handle} ({kind}{})",
                listen
                    .map(|l| format!(", listens to {l}"))
                    .unwrap_or_default()
            ));
            data.push(json!({"handle": handle, "kind": kind, "listen": listen}));
        }
        ToolResult::ok_with(
            text,
            json!({"thread_id": t.info.id.to_string(), "participants": data}),
        )
    }

    async fn post_to_thread(&self, ctx: &ToolContext, thread: &str, text: &str) -> ToolResult {
        self.post_elsewhere(ctx, thread, text).await
    }

    async fn post_attachment(
        &self,
        ctx: &ToolContext,
        attachment: Attachment,
        text: String,
    ) -> ToolResult {
        self.post_here(ctx, attachment, text).await
    }

    async fn create_thread(&self, ctx: &ToolContext, name: &str, tags: Vec<String>) -> ToolResult {
        let (house, _) = match self.house(ctx).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let t = match house
            .create_thread(
                Some(name.trim()),
                &[],
                &ctx.agent,
                std::slice::from_ref(&ctx.agent),
            )
            .await
        {
            Ok(t) => t,
            Err(e) => return err(e),
        };
        let mut data = thread_data(&t.info);
        if !tags.is_empty() {
            // The thread exists from here on: a refused tag still leaves it linkable.
            if let Some(bad) = tags
                .iter()
                .find_map(|tag| troupe_runtime::house::check_name("tag", tag).err())
            {
                return ToolResult::error_with(
                    format!(
                        "Created thread `{name}` ({}), but its tags were refused: {bad} It has no tags.",
                        t.info.id
                    ),
                    data,
                );
            }
            let (id, tags_json) = (
                t.info.id.to_string(),
                serde_json::to_string(&tags).unwrap_or_default(),
            );
            let node = match self.scope(ctx) {
                Ok((n, _)) => n,
                Err(e) => return e,
            };
            if let Err(e) = node
                .store()
                .write(move |tx| {
                    tx.execute(
                        "UPDATE threads SET tags = ?2 WHERE id = ?1",
                        troupe_runtime::rusqlite::params![id, tags_json],
                    )?;
                    Ok(())
                })
                .await
            {
                return ToolResult::error_with(
                    format!(
                        "Created thread `{name}` ({}), but its tags could not be saved: {e}",
                        t.info.id
                    ),
                    data,
                );
            }
            data["tags"] = json!(tags);
        }
        ToolResult::ok_with(
            format!(
                "Created thread `{name}` ({}) in house `{}`; you are its first participant. Link: {}",
                t.info.id,
                house.house.name,
                t.info.link()
            ),
            data,
        )
    }

    async fn archive_thread(&self, ctx: &ToolContext) -> ToolResult {
        let (_, _, t) = match self.thread(ctx, None).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        match t.set_archived_by(true, Some(ctx.conversation)).await {
            Ok(true) => ToolResult::ok_with(
                format!(
                    "Archived thread `{}`: it is off the house list, its history is kept, and it can be unarchived. \
                     Its round is over: your answer stays in your conversation and is not posted there.",
                    t.info.label()
                ),
                thread_data(&t.info),
            ),
            Ok(false) => ToolResult::error(format!("thread `{}` is archived already.", t.info.label())),
            Err(e) => err(e),
        }
    }

    async fn set_participant(
        &self,
        ctx: &ToolContext,
        thread: Option<&str>,
        agent: &str,
        present: bool,
    ) -> ToolResult {
        let (house, _, t) = match self.thread(ctx, thread).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        let members = match house.members().await {
            Ok(m) => m,
            Err(e) => return err(e),
        };
        let Some(member) = members
            .iter()
            .find(|m| m.handle.eq_ignore_ascii_case(agent.trim()))
        else {
            return ToolResult::error(format!(
                "`{agent}` is not a member of this house; list_house_members shows who is."
            ));
        };
        let handle = member.handle.clone();
        let result = if present {
            t.add_participant(&handle).await
        } else {
            t.remove_participant(&handle).await
        };
        let data = json!({"thread_id": t.info.id.to_string(), "handle": handle});
        match (result, present) {
            (Ok(true), true) => ToolResult::ok_with(
                format!(
                    "Added `{handle}` to thread `{}`; it can be offered turns there.",
                    t.info.label()
                ),
                data,
            ),
            (Ok(true), false) => ToolResult::ok_with(
                format!("Removed `{handle}` from thread `{}`.", t.info.label()),
                data,
            ),
            (Ok(false), true) => ToolResult::error(format!(
                "`{handle}` is in thread `{}` already.",
                t.info.label()
            )),
            (Ok(false), false) => {
                ToolResult::error(format!("`{handle}` is not in thread `{}`.", t.info.label()))
            }
            (Err(e), _) => err(e),
        }
    }

    async fn list_members(&self, ctx: &ToolContext) -> ToolResult {
        self.list_house_members(ctx).await
    }

    async fn create_agent(&self, ctx: &ToolContext, draft: AgentDraft) -> ToolResult {
        self.add_house_bot(ctx, draft).await
    }

    async fn update_self(&self, ctx: &ToolContext, update: SelfUpdate) -> ToolResult {
        self.update_own_record(ctx, update).await
    }
}
