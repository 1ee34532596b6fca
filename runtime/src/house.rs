//! The house: a tenant of people and bots talking in threads.
//!
//! This module holds what every layer shares — the records of houses,
//! members, threads and their messages, the two durable messages of a
//! thread ([`Post`] into it, [`Offer`] of a turn out of it), the [`Seat`]
//! a bot's conversation in a thread carries, and [`HouseServices`], the
//! handle through which the house tools reach the actors. The tables live
//! in [`crate::store::house`]; the thread actors and their directors in the
//! actors crate.

use std::fmt;
use std::sync::Arc;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::id::{BotId, HouseId, MsgId, ThreadId};
use crate::protocol::ToolResult;
use crate::tool::ToolContext;

/// The house every home has: the owner and their bots. A home written
/// before houses existed becomes this house when its store migrates.
pub const DEFAULT_HOUSE: &str = "home";

/// The human member every home starts with.
pub const OWNER: &str = "owner";

/// How a link to a thread starts (`troupe://thread/thread_…`).
pub const THREAD_LINK: &str = "troupe://thread/";

/// A house.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct House {
    /// Its id.
    pub id: HouseId,
    /// Its unique name.
    pub name: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
}

/// Whether a member is a person or a bot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MemberKind {
    /// A person.
    Human,
    /// A bot.
    Bot,
}

impl MemberKind {
    /// As stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Human => "human",
            Self::Bot => "bot",
        }
    }

    /// The kind stored as `text`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "human" => Some(Self::Human),
            "bot" => Some(Self::Bot),
            _ => None,
        }
    }
}

/// When a bot member is offered a turn in the threads it is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum ListenMode {
    /// On every human message (unless the message names other bots).
    All,
    /// Only when @mentioned.
    #[default]
    Mentions,
    /// Never.
    Off,
}

impl ListenMode {
    /// As stored and printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::All => "all",
            Self::Mentions => "mentions",
            Self::Off => "off",
        }
    }

    /// The mode named `text`.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "all" => Some(Self::All),
            "mentions" => Some(Self::Mentions),
            "off" => Some(Self::Off),
            _ => None,
        }
    }
}

impl fmt::Display for ListenMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A member of a house.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Unique in its house, case-insensitively; what `@mentions` name.
    pub handle: String,
    /// Person or bot.
    pub kind: MemberKind,
    /// A person's display name (a bot's is its handle).
    pub display_name: String,
    /// A bot's listen mode (`None` for a person).
    pub listen: Option<ListenMode>,
    /// A bot's id.
    pub bot: Option<BotId>,
}

/// A thread, as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadInfo {
    /// Its id.
    pub id: ThreadId,
    /// Its house.
    pub house: HouseId,
    /// Its name, unique in its house; `None` for an unnamed thread.
    pub name: Option<String>,
    /// Its tags.
    pub tags: Vec<String>,
    /// Pinned to the top of lists.
    pub pinned: bool,
    /// Archived: off the house list, history kept.
    pub archived: bool,
    /// Who made it.
    pub created_by: String,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// Its latest message (or its creation).
    pub last_activity: DateTime<Utc>,
    /// How many messages it holds.
    pub messages: u64,
    /// Its participants' handles, in the order they joined.
    pub participants: Vec<String>,
}

impl ThreadInfo {
    /// Its name, or its id when it has none.
    pub fn label(&self) -> String {
        self.name.clone().unwrap_or_else(|| self.id.to_string())
    }

    /// A link that finds it again, whatever it is named later.
    pub fn link(&self) -> String {
        format!("{THREAD_LINK}{}", self.id)
    }
}

/// One message of a thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadMessage {
    /// Its place in the house's messages (increasing).
    pub seq: i64,
    /// Its id (the post's delivery id).
    pub id: MsgId,
    /// Who wrote it.
    pub author: String,
    /// A person or a bot.
    pub author_kind: MemberKind,
    /// The thread a bot posted it from, when it came from another thread.
    pub via: Option<ThreadId>,
    /// The text.
    pub text: String,
    /// What it carries beside its text (a GIF a bot posted).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
    /// When it was posted.
    pub created_at: DateTime<Utc>,
}

/// An image a message carries (`send_gif`'s GIF): shown by the page, given
/// as a link by the CLI and in the bots' transcripts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// What it is: `image`.
    pub kind: String,
    /// The image's address.
    pub url: String,
    /// A smaller rendition, for previews.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preview: Option<String>,
    /// Its width in pixels, when the service said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub width: Option<u32>,
    /// Its height in pixels, when the service said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub height: Option<u32>,
    /// Its size in bytes, when the service said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<u64>,
    /// Its title or description (the image's alternative text).
    pub title: String,
    /// Who provides it, as they ask to be credited ("Powered by GIPHY").
    pub attribution: String,
    /// Its page on the service, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub page: Option<String>,
}

impl Attachment {
    /// One line for a transcript: `[image: title <url>, via …]`.
    pub fn render(&self) -> String {
        format!(
            "[image: {} <{}>, {}]",
            self.title, self.url, self.attribution
        )
    }
}

/// A search hit among a house's thread messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadHit {
    /// The thread.
    pub thread: ThreadId,
    /// Its name.
    pub thread_name: Option<String>,
    /// The message's place.
    pub seq: i64,
    /// Its author.
    pub author: String,
    /// The matching part, terms in `[brackets]`.
    pub snippet: String,
    /// When it was posted.
    pub created_at: DateTime<Utc>,
}

/// A message for a thread's director to take (the body of a durable
/// envelope to [`crate::protocol::Address::Thread`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Post {
    /// The author's handle.
    pub author: String,
    /// A person or a bot.
    pub author_kind: MemberKind,
    /// The text; empty when a bot offered a turn said nothing.
    pub text: String,
    /// The round it belongs to, when it answers an offer.
    #[serde(default)]
    pub round: Option<MsgId>,
    /// How many bot turns led to it since the person's message.
    #[serde(default)]
    pub depth: u32,
    /// The thread a bot posted it from (`post_to_thread`).
    #[serde(default)]
    pub via: Option<ThreadId>,
    /// It answers an offer: the offer is settled whether or not it says something.
    #[serde(default)]
    pub answers_offer: bool,
    /// Why the bot's turn on the offer did not finish (a failed model
    /// call, a model that cannot be used, a budget, a guard), when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
    /// What the message carries beside its text (`send_gif`'s GIF).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub attachments: Vec<Attachment>,
}

/// A turn offered to a bot in a thread: the messages it has not seen, for
/// its conversation there, whose answer goes back to the thread as a [`Post`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offer {
    /// The house.
    pub house: HouseId,
    /// The thread.
    pub thread: ThreadId,
    /// The thread's name, for the bot's eyes.
    pub thread_name: Option<String>,
    /// The round: the id of the message that started it.
    pub round: MsgId,
    /// How many bot turns led to this one.
    pub depth: u32,
    /// The bot it is offered to.
    pub bot: String,
    /// The new messages, oldest first.
    pub messages: Vec<ThreadMessage>,
}

impl Offer {
    /// The text the bot's conversation receives.
    pub fn render(&self) -> String {
        let name = self
            .thread_name
            .clone()
            .unwrap_or_else(|| self.thread.to_string());
        let mut text = format!(
            "[thread `{name}`: new messages; your reply is posted there as `{}`. \
             Answer with an empty message to stay silent.]",
            self.bot
        );
        for m in &self.messages {
            text.push('\n');
            text.push_str(&render_line(m));
        }
        text
    }
}

/// One message as a line of a transcript: `[handle] text`, with where a
/// cross-thread post came from.
pub fn render_line(m: &ThreadMessage) -> String {
    let via = m
        .via
        .map(|t| format!(" (posted from {t})"))
        .unwrap_or_default();
    let mut line = format!("[{}{via}] {}", m.author, m.text);
    for a in &m.attachments {
        if !line.ends_with(' ') {
            line.push(' ');
        }
        line.push_str(&a.render());
    }
    line
}

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

/// Arguments of `list_threads`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadFilter {
    /// Only named threads.
    pub named_only: bool,
    /// Only pinned threads.
    pub pinned_only: bool,
    /// Only threads this handle is in.
    pub participant: Option<String>,
    /// Archived ones too.
    pub include_archived: bool,
    /// At most this many.
    pub limit: usize,
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
