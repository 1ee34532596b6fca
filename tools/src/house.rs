//! The house tools: reading threads, speaking and shaping them, members and
//! self, one file each (`read_thread`, `ask_thread`, `search_threads`,
//! `list_threads`, `list_thread_participants`, `post_to_thread`,
//! `create_thread`, `archive_thread`, `add_thread_participant`,
//! `remove_thread_participant`, `create_agent`, `list_house_members`,
//! `update_self`).
//!
//! They are offered to a conversation that sits in a house thread (its
//! services hold a [`Seat`]: [`in_thread`]); `update_self` to a bot whose
//! definition allows it ([`may_update_self`]). Each is an async function
//! made a tool by `#[tool]`: it checks its arguments and hands the request
//! to the node's [`Houses`](troupe_runtime::house::Houses), which scopes it
//! to the caller's house.

pub mod add_thread_participant;
pub mod archive_thread;
pub mod ask_thread;
pub mod create_agent;
pub mod create_thread;
pub mod list_house_members;
pub mod list_thread_participants;
pub mod list_threads;
pub mod post_to_thread;
pub mod read_thread;
pub mod remove_thread_participant;
pub mod search_threads;
pub mod update_self;

use std::sync::Arc;

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_runtime::house::Seat;
use troupe_runtime::tool::{Tool, ToolContext};

/// The longest post, in characters.
pub const MAX_POST_CHARS: usize = 16_000;

/// Whether the conversation sits in a house thread (has a seat there).
pub fn in_thread(ctx: &ToolContext) -> bool {
    Seat::of(ctx).is_some()
}

/// Whether the conversation's bot may rewrite its own record.
pub fn may_update_self(ctx: &ToolContext) -> bool {
    ctx.services.self_update_allowed()
}

/// Arguments of `archive_thread`: none.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// Arguments of `add_thread_participant` and `remove_thread_participant`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ParticipantParams {
    /// The thread: its id, name or link; this thread when left out.
    pub thread: Option<String>,
    /// The member's handle.
    pub agent: String,
}

/// Every house tool, in the table's order.
pub fn all() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read_thread::read_thread::tool()),
        Arc::new(ask_thread::ask_thread::tool()),
        Arc::new(search_threads::search_threads::tool()),
        Arc::new(list_threads::list_threads::tool()),
        Arc::new(list_thread_participants::list_thread_participants::tool()),
        Arc::new(post_to_thread::post_to_thread::tool()),
        Arc::new(create_thread::create_thread::tool()),
        Arc::new(archive_thread::archive_thread::tool()),
        Arc::new(add_thread_participant::add_thread_participant::tool()),
        Arc::new(remove_thread_participant::remove_thread_participant::tool()),
        Arc::new(create_agent::create_agent::tool()),
        Arc::new(list_house_members::list_house_members::tool()),
        Arc::new(update_self::update_self::tool()),
    ]
}
