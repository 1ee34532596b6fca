//! The wire types of houses: the records of houses, members, threads and
//! their messages, and the two durable messages of a thread — a [`Post`]
//! into it and an [`Offer`] of a turn out of it. They cross actor and
//! process boundaries (the store, the server's JSON, envelopes), so they
//! live with the protocol and name nothing but ids. What the house tools
//! reach the actors through is in [`crate::house`].

use std::fmt;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::id::{BotId, HouseId, MsgId, ThreadId};

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
/// envelope to [`Address::Thread`](super::Address::Thread)).
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
