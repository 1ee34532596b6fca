//! The house: a tenant of people and bots talking in threads.
//!
//! This module holds what the house tools share with the actors: the
//! [`Seat`] and [`HouseScope`] a bot's conversation carries in its
//! services, [`HouseServices`] (the handle through which the house tools
//! reach the actors), and the rules of names and `@mentions`. The records
//! and the durable messages of a thread are wire types, in
//! [`crate::protocol::house`]; the tables live in [`crate::store::house`];
//! the thread actors and their directors in the actors crate.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::id::{HouseId, ThreadId};
use crate::protocol::house::{Attachment, ThreadFilter};
use crate::protocol::ToolResult;
use crate::tool::ToolContext;

/// The house every home has: the owner and their bots. A home written
/// before houses existed becomes this house when its store migrates.
pub const DEFAULT_HOUSE: &str = "home";

/// The human member every home starts with.
pub const OWNER: &str = "owner";

/// The house and thread a bot's conversation sits in: put into the
/// conversation's services, it is what offers the house tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Seat {
    /// The house.
    pub house: HouseId,
    /// The thread.
    pub thread: ThreadId,
}

impl Seat {
    /// The seat of the conversation of `ctx`, if it is in a house.
    pub fn of(ctx: &ToolContext) -> Option<Seat> {
        ctx.services.get::<Seat>().map(|s| *s)
    }
}

/// The house a conversation works for: put into the services of every
/// conversation a house bot runs — its seat in a thread, and what that
/// conversation starts (subagents, a message to another bot) — so that the
/// tools reading or writing stored data see that house's only, and the
/// tools touching the machine are not offered.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct HouseScope {
    /// The house.
    pub house: HouseId,
    /// Whether it is the home's own house ([`DEFAULT_HOUSE`]), whose people
    /// own the machine: its scope also sees what was made outside any house
    /// (the owner's conversations, `memory/USER.md`).
    pub home: bool,
}

impl HouseScope {
    /// The house the conversation of `ctx` works for, if any.
    pub fn of(ctx: &ToolContext) -> Option<HouseScope> {
        ctx.services.get::<HouseScope>().map(|s| *s)
    }

    /// Whether the conversation of `ctx` works for a house other than the
    /// home's own (where the home's shared data is not its to see).
    pub fn foreign(ctx: &ToolContext) -> bool {
        Self::of(ctx).is_some_and(|s| !s.home)
    }
}

/// Put into a conversation's services when its bot may rewrite its own
/// record (`update_self`).
#[derive(Debug, Clone, Copy, Default)]
pub struct SelfUpdateAllowed;

/// The `@handles` a text mentions, lower-cased, in order, once each.
pub fn mentions(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    let chars: Vec<char> = text.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let starts = chars[i] == '@' && (i == 0 || !is_handle_char(chars[i - 1]));
        if starts {
            let mut j = i + 1;
            while j < chars.len() && is_handle_char(chars[j]) {
                j += 1;
            }
            // A trailing `.` or `-` ends a sentence, not a handle.
            let mut end = j;
            while end > i + 1 && matches!(chars[end - 1], '.' | '-') {
                end -= 1;
            }
            if end > i + 1 {
                let handle: String = chars[i + 1..end].iter().collect::<String>().to_lowercase();
                if !found.contains(&handle) {
                    found.push(handle);
                }
            }
            i = j;
        } else {
            i += 1;
        }
    }
    found
}

fn is_handle_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Checks a handle or a house or thread name: 1–64 characters, letters,
/// digits, `_`, `-`, `.`, not starting with a symbol.
pub fn check_name(what: &str, name: &str) -> Result<(), String> {
    let ok = !name.is_empty()
        && name.chars().count() <= 64
        && name.chars().all(is_handle_char)
        && name.chars().next().is_some_and(char::is_alphanumeric);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "`{name}` is not a valid {what}: use 1–64 letters, digits, `_`, `-` or `.`, starting with a letter or digit."
        ))
    }
}

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
        ctx.services.get::<Houses>().ok_or_else(|| {
            ToolResult::error(
                "this conversation is not in a house; the house tools work in a house thread.",
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mentions_are_found_once_each_and_lower_cased() {
        assert_eq!(
            mentions("hi @Alice and @bob-2, ask @alice. Mail a@b.c"),
            vec!["alice", "bob-2"]
        );
        assert!(mentions("no mentions @ all").is_empty());
        assert_eq!(mentions("@scout."), vec!["scout"]);
    }

    #[test]
    fn names_are_checked() {
        assert!(check_name("handle", "ada").is_ok());
        assert!(check_name("handle", "launch-plans.v2").is_ok());
        assert!(check_name("handle", "").is_err());
        assert!(check_name("handle", "-x").is_err());
        assert!(check_name("handle", "a b").is_err());
        assert!(check_name("handle", &"a".repeat(65)).is_err());
    }
}
