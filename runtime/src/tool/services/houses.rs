//! The handle through which the house tools reach the node's threads.
//!
//! The house tools live in `troupe-tools`, below the actors: they check
//! their arguments and hand the request to the [`HouseServices`] the node
//! sets, once, in its [`super::NodeServices`]. Defined here, beside the
//! tool context that holds it, so the context names it without a loop
//! between modules; [`crate::house`] names it too.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::protocol::house::{Attachment, ThreadFilter};
use crate::protocol::ToolResult;
use crate::tool::ToolContext;

/// What the house tools ask of the actors; the node implements it and
/// puts it into every conversation's services.
#[async_trait::async_trait]
pub trait HouseServices: Send + Sync {
    /// `read_thread`.
    async fn read_thread(
        &self,
        ctx: &ToolContext,
        thread: Option<&str>,
        offset: Option<usize>,
        limit: Option<usize>,
    ) -> ToolResult;
    /// `ask_thread`.
    async fn ask_thread(
        &self,
        ctx: &ToolContext,
        thread: Option<&str>,
        question: &str,
    ) -> ToolResult;
    /// `search_threads`.
    async fn search_threads(&self, ctx: &ToolContext, query: &str, limit: usize) -> ToolResult;
    /// `list_threads`.
    async fn list_threads(&self, ctx: &ToolContext, filter: ThreadFilter) -> ToolResult;
    /// `list_thread_participants`.
    async fn list_participants(&self, ctx: &ToolContext, thread: Option<&str>) -> ToolResult;
    /// `post_to_thread`.
    async fn post_to_thread(&self, ctx: &ToolContext, thread: &str, text: &str) -> ToolResult;
    /// Posts `attachment` as a message of the caller's bot into its own
    /// thread (`send_gif`); `text` is what the result tells the model.
    async fn post_attachment(
        &self,
        ctx: &ToolContext,
        attachment: Attachment,
        text: String,
    ) -> ToolResult;
    /// `create_thread`.
    async fn create_thread(&self, ctx: &ToolContext, name: &str, tags: Vec<String>) -> ToolResult;
    /// `archive_thread` (this thread).
    async fn archive_thread(&self, ctx: &ToolContext) -> ToolResult;
    /// `add_thread_participant` / `remove_thread_participant`.
    async fn set_participant(
        &self,
        ctx: &ToolContext,
        thread: Option<&str>,
        agent: &str,
        present: bool,
    ) -> ToolResult;
    /// `list_house_members`.
    async fn list_members(&self, ctx: &ToolContext) -> ToolResult;
    /// `create_agent`.
    async fn create_agent(&self, ctx: &ToolContext, draft: AgentDraft) -> ToolResult;
    /// `update_self`.
    async fn update_self(&self, ctx: &ToolContext, update: SelfUpdate) -> ToolResult;
}

/// A bot `create_agent` makes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentDraft {
    /// Its name (its handle in the house).
    pub name: String,
    /// One line: its role.
    pub description: Option<String>,
    /// Its standing instructions.
    pub system_prompt: Option<String>,
    /// Its model.
    pub model: Option<String>,
    /// Its listen mode in this house (`all`, `mentions`, `off`).
    pub trigger: Option<String>,
}

/// What `update_self` changes.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SelfUpdate {
    /// A new name.
    pub name: Option<String>,
    /// A new one-line description.
    pub description: Option<String>,
    /// New standing instructions.
    pub system_prompt: Option<String>,
}

/// The node's [`HouseServices`], as tools find it in their services.
#[derive(Clone)]
pub struct Houses(pub Arc<dyn HouseServices>);

impl Houses {
    /// The house services of `ctx`, or the error result a tool returns
    /// outside a house.
    pub fn of(ctx: &ToolContext) -> Result<Arc<Houses>, ToolResult> {
        ctx.services.houses().ok_or_else(|| {
            ToolResult::error(
                "this conversation is not in a house; the house tools work in a house thread.",
            )
        })
    }
}
