//! The house tools: reading threads, speaking and shaping them, members and
//! self (`read_thread`, `ask_thread`, `search_threads`, `list_threads`,
//! `list_thread_participants`, `post_to_thread`, `create_thread`,
//! `archive_thread`, `add_thread_participant`, `remove_thread_participant`,
//! `create_agent`, `list_house_members`, `update_self`).
//!
//! They are offered to a conversation that sits in a house thread (its
//! services hold a [`Seat`]); `update_self` to a bot whose definition allows
//! it. Each checks its arguments and hands the request to the node's
//! [`HouseServices`], which scopes it to the caller's house.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_runtime::house::{
    AgentDraft, Houses, Seat, SelfUpdate, SelfUpdateAllowed, ThreadFilter,
};
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{parse_args, schema_for, Tool, ToolContext, ToolSpec};

/// The longest post, in characters.
pub const MAX_POST_CHARS: usize = 16_000;

/// Defines one house tool: its params type, spec and what a call does with
/// the house services `$h`, the context `$ctx` and the parsed params `$p`.
macro_rules! house_tool {
    (
        $(#[$doc:meta])* $ty:ident, $name:literal, $params:ty, $description:expr,
        offered: $offered:expr, spec: |$s:ident| $spec:expr,
        |$h:ident, $ctx:ident, $p:ident| $body:expr
    ) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $ty {
            spec: ToolSpec,
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $ty {
            /// The tool.
            pub fn new() -> Self {
                let $s = ToolSpec::new($name, $description, schema_for::<$params>());
                Self { spec: $spec }
            }
        }

        #[async_trait::async_trait]
        impl Tool for $ty {
            fn spec(&self) -> &ToolSpec {
                &self.spec
            }

            fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
                let offered: fn(&ToolContext) -> bool = $offered;
                offered(ctx).then(|| self.spec.clone())
            }

            async fn call(&self, args: serde_json::Value, $ctx: &ToolContext) -> ToolResult {
                let $p: $params = match parse_args($name, args) {
                    Ok(p) => p,
                    Err(e) => return e,
                };
                let $h = match Houses::of($ctx) {
                    Ok(h) => h,
                    Err(e) => return e,
                };
                $body
            }
        }
    };
}

fn in_house(ctx: &ToolContext) -> bool {
    Seat::of(ctx).is_some()
}

/// Arguments of `read_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The thread: its id, name or link; this thread when left out.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// Skip this many of the newest messages (to page back).
    pub offset: Option<usize>,
    /// At most this many messages (default 30, at most 200).
    pub limit: Option<usize>,
}

house_tool!(
    /// `read_thread`: a thread's messages verbatim, oldest first, no model call.
    ReadThread, "read_thread", ReadParams,
    "Show a thread's recent messages verbatim, oldest first, with who wrote each. `ref`: a thread id, \
     name or link (this thread when left out); `offset` skips the newest N to page back; `limit` at most \
     200 (default 30). Makes no model call. You already see your own thread's new messages; use this for \
     another thread or to page back.",
    offered: in_house, spec: |s| s.read_only(),
    |h, ctx, p| h.0.read_thread(ctx, p.reference.as_deref(), p.offset, p.limit).await
);

/// Arguments of `ask_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskParams {
    /// The thread: its id, name or link; this thread when left out.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// The one question to answer from the thread.
    pub question: String,
}

house_tool!(
    /// `ask_thread`: one question answered from a whole thread.
    AskThread, "ask_thread", AskParams,
    "Answer one question by reading a whole thread, later corrections included (one model call). Posts \
     nothing: to ask the people in a thread, use post_to_thread. `ref`: a thread id, name or link (this \
     thread when left out).",
    offered: in_house, spec: |s| s.read_only(),
    |h, ctx, p| h.0.ask_thread(ctx, p.reference.as_deref(), &p.question).await
);

/// Arguments of `search_threads`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// Words to find (all must appear; case and accents ignored).
    pub query: String,
    /// At most this many hits (default 10, at most 50).
    pub limit: Option<usize>,
}

house_tool!(
    /// `search_threads`: ranked keyword hits across the house's threads.
    SearchThreads, "search_threads", SearchParams,
    "Search the messages of this house's threads (archived ones too) for words; returns ranked hits with \
     the thread, author and a snippet. `limit` at most 50 (default 10).",
    offered: in_house, spec: |s| s.read_only(),
    |h, ctx, p| {
        if p.query.trim().is_empty() {
            return ToolResult::error("the query is empty: give the words to find.");
        }
        h.0.search_threads(ctx, &p.query, p.limit.unwrap_or(10)).await
    }
);

/// Arguments of `list_threads`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only named threads.
    pub named_only: Option<bool>,
    /// Only pinned threads.
    pub pinned_only: Option<bool>,
    /// Only threads you take part in.
    pub mine: Option<bool>,
    /// At most this many (default 20, at most 100).
    pub limit: Option<usize>,
}

house_tool!(
    /// `list_threads`: the house's threads, most recently active first.
    ListThreads, "list_threads", ListParams,
    "List this house's threads, most recently active first (pinned on top), with up to 12 participant \
     handles each (+N beyond) and whether you are in each. `named_only`, `pinned_only`, `mine` (only \
     yours) filter; `limit` at most 100 (default 20).",
    offered: in_house, spec: |s| s.read_only(),
    |h, ctx, p| {
        let filter = ThreadFilter {
            named_only: p.named_only.unwrap_or(false),
            pinned_only: p.pinned_only.unwrap_or(false),
            participant: p.mine.unwrap_or(false).then(String::new),
            include_archived: false,
            limit: p.limit.unwrap_or(20),
        };
        h.0.list_threads(ctx, filter).await
    }
);

/// Arguments of `list_thread_participants`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParticipantsParams {
    /// The thread: its id, name or link; this thread when left out.
    pub thread: Option<String>,
}

house_tool!(
    /// `list_thread_participants`: who is in a thread.
    ListThreadParticipants, "list_thread_participants", ParticipantsParams,
    "List who is in a thread — people and bots, with the bots' listen modes. `thread`: an id, name or \
     link (this thread when left out).",
    offered: in_house, spec: |s| s.read_only(),
    |h, ctx, p| h.0.list_participants(ctx, p.thread.as_deref()).await
);

/// Arguments of `post_to_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostParams {
    /// The other thread: its id, name or link.
    pub thread: String,
    /// The message, at most 16,000 characters; @mention a member to ask them.
    pub text: String,
}

house_tool!(
    /// `post_to_thread`: a message into another thread, as yourself.
    PostToThread, "post_to_thread", PostParams,
    "Post a message into a different thread of this house, as yourself; its director then decides who \
     answers there (an @mention asks a member; it does not oblige a bot). Your answer in this thread is \
     posted here anyway — do not use this for this thread. `text` at most 16,000 characters.",
    offered: in_house, spec: |s| s,
    |h, ctx, p| {
        let chars = p.text.chars().count();
        if chars > MAX_POST_CHARS {
            return ToolResult::error(format!(
                "the post is {chars} characters; the limit is {MAX_POST_CHARS}. Shorten it."
            ));
        }
        h.0.post_to_thread(ctx, &p.thread, &p.text).await
    }
);

/// Arguments of `create_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateParams {
    /// Its name, unique in the house: letters, digits, `-`, `_`, `.`.
    pub name: String,
    /// Tags (same characters as names).
    pub tags: Option<Vec<String>>,
}

house_tool!(
    /// `create_thread`: a new named thread in the house.
    CreateThread, "create_thread", CreateParams,
    "Open a new named thread in this house, with you as its first participant; returns its id and a \
     link. `name`: unique in the house, letters, digits, `-`, `_`, `.`; `tags` optional.",
    offered: in_house, spec: |s| s,
    |h, ctx, p| h.0.create_thread(ctx, &p.name, p.tags.unwrap_or_default()).await
);

/// Arguments of `archive_thread`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

house_tool!(
    /// `archive_thread`: archives this thread.
    ArchiveThread, "archive_thread", NoParams,
    "Archive this thread: it leaves the house's thread list and keeps its history; it can be unarchived.",
    offered: in_house, spec: |s| s,
    |h, ctx, _p| h.0.archive_thread(ctx).await
);

/// Arguments of `add_thread_participant` and `remove_thread_participant`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParticipantParams {
    /// The thread: its id, name or link; this thread when left out.
    pub thread: Option<String>,
    /// The member's handle.
    pub agent: String,
}

house_tool!(
    /// `add_thread_participant`.
    AddThreadParticipant, "add_thread_participant", ParticipantParams,
    "Add a member of this house to a thread's participants, so it can be offered turns there. `thread`: \
     an id, name or link (this thread when left out); `agent`: the member's handle.",
    offered: in_house, spec: |s| s,
    |h, ctx, p| h.0.set_participant(ctx, p.thread.as_deref(), &p.agent, true).await
);

house_tool!(
    /// `remove_thread_participant`.
    RemoveThreadParticipant, "remove_thread_participant", ParticipantParams,
    "Remove a member from a thread's participants, so it is no longer offered turns there. `thread`: an \
     id, name or link (this thread when left out); `agent`: the member's handle.",
    offered: in_house, spec: |s| s,
    |h, ctx, p| h.0.set_participant(ctx, p.thread.as_deref(), &p.agent, false).await
);

/// Arguments of `create_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateAgentParams {
    /// Its name and handle: lowercase letters, digits, `-`, `_`.
    pub name: String,
    /// One line: its role.
    pub description: Option<String>,
    /// Its standing instructions.
    pub system_prompt: Option<String>,
    /// Its model (`provider:model`); the home's default when left out.
    pub model: Option<String>,
    /// When it is offered turns: `all`, `mentions` (default) or `off`.
    pub trigger: Option<String>,
}

house_tool!(
    /// `create_agent`: a new bot, made a member of this house.
    CreateAgent, "create_agent", CreateAgentParams,
    "Create a new bot and add it to this house as a member. `name`: lowercase letters, digits, `-`, `_`; \
     `trigger`: when it is offered turns — `all`, `mentions` (default) or `off`.",
    offered: in_house, spec: |s| s,
    |h, ctx, p| {
        h.0.create_agent(
            ctx,
            AgentDraft {
                name: p.name,
                description: p.description,
                system_prompt: p.system_prompt,
                model: p.model,
                trigger: p.trigger,
            },
        )
        .await
    }
);

house_tool!(
    /// `list_house_members`: people and bots of the house.
    ListHouseMembers, "list_house_members", NoParams,
    "List everyone in this house — people and bots — with their handles and the bots' listen modes.",
    offered: in_house, spec: |s| s.read_only(),
    |h, ctx, _p| h.0.list_members(ctx).await
);

/// Arguments of `update_self`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateSelfParams {
    /// Your new display name.
    pub name: Option<String>,
    /// Your new one-line description.
    pub description: Option<String>,
    /// Your new standing instructions (replace the old ones).
    pub system_prompt: Option<String>,
}

house_tool!(
    /// `update_self`: rewrites the calling bot's own record.
    UpdateSelf, "update_self", UpdateSelfParams,
    "Rewrite your own record: display `name`, one-line `description`, and `system_prompt` (your standing \
     instructions, applied from your next turn). Your handle stays.",
    offered: |ctx| ctx.services.get::<SelfUpdateAllowed>().is_some(), spec: |s| s,
    |h, ctx, p| {
        if p.name.is_none() && p.description.is_none() && p.system_prompt.is_none() {
            return ToolResult::error("nothing to change: give `name`, `description` or `system_prompt`.");
        }
        h.0.update_self(
            ctx,
            SelfUpdate {
                name: p.name,
                description: p.description,
                system_prompt: p.system_prompt,
            },
        )
        .await
    }
);

/// Every house tool, in the table's order.
pub fn all() -> Vec<std::sync::Arc<dyn Tool>> {
    vec![
        std::sync::Arc::new(ReadThread::new()),
        std::sync::Arc::new(AskThread::new()),
        std::sync::Arc::new(SearchThreads::new()),
        std::sync::Arc::new(ListThreads::new()),
        std::sync::Arc::new(ListThreadParticipants::new()),
        std::sync::Arc::new(PostToThread::new()),
        std::sync::Arc::new(CreateThread::new()),
        std::sync::Arc::new(ArchiveThread::new()),
        std::sync::Arc::new(AddThreadParticipant::new()),
        std::sync::Arc::new(RemoveThreadParticipant::new()),
        std::sync::Arc::new(CreateAgent::new()),
        std::sync::Arc::new(ListHouseMembers::new()),
        std::sync::Arc::new(UpdateSelf::new()),
    ]
}
