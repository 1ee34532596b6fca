//! One tool name, two meanings: a tool that is another in some
//! conversations.
//!
//! `read_file`, `write_file` and `run_command` mean this machine's files and
//! shell to the home's own conversations, and the house's files and the
//! thread's environment to a house's. Each meaning is a tool of its own,
//! written like any other (`#[troupe::tool]`, with its own params and
//! schema); [`FnTool::instead_where`](super::FnTool::instead_where) joins
//! them under one name, and the conversation's context decides which one it
//! is offered and which one runs its calls.

use super::{Tool, ToolContext, ToolSpec};
use crate::protocol::ToolResult;

/// Decides which conversations get the other meaning.
pub type Scope = fn(&ToolContext) -> bool;

/// `usual`, except in the conversations `scope` accepts, where it is
/// `other`: made by [`FnTool::instead_where`](super::FnTool::instead_where).
///
/// Its [`Tool::spec`] (what the registry lists and orders by) is
/// `usual`'s; what a conversation is offered, and what runs its calls, is
/// the one its scope picks. What a tool carries through a compaction is
/// `usual`'s.
pub struct Scoped<A, B> {
    usual: A,
    scope: Scope,
    other: B,
}

impl<A: Tool, B: Tool> Scoped<A, B> {
    /// `usual`, or `other` where `scope` holds. Both have one name.
    pub fn new(usual: A, scope: Scope, other: B) -> Self {
        debug_assert_eq!(usual.spec().name, other.spec().name);
        Self {
            usual,
            scope,
            other,
        }
    }
}

impl<A, B> std::fmt::Debug for Scoped<A, B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scoped").finish_non_exhaustive()
    }
}

#[async_trait::async_trait]
impl<A: Tool, B: Tool> Tool for Scoped<A, B> {
    fn spec(&self) -> &ToolSpec {
        self.usual.spec()
    }

    fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
        self.offered(ctx).map(std::borrow::Cow::into_owned)
    }

    fn offered(&self, ctx: &ToolContext) -> Option<std::borrow::Cow<'_, ToolSpec>> {
        if (self.scope)(ctx) {
            self.other.offered(ctx)
        } else {
            self.usual.offered(ctx)
        }
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        if (self.scope)(ctx) {
            self.other.call(args, ctx).await
        } else {
            self.usual.call(args, ctx).await
        }
    }

    fn carried(&self, ctx: &ToolContext) -> Option<String> {
        self.usual.carried(ctx)
    }

    fn carried_call(&self, ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        self.usual.carried_call(ctx)
    }

    fn restore(&self, ctx: &ToolContext, args: &serde_json::Value, result: &ToolResult) {
        self.usual.restore(ctx, args, result);
    }
}
