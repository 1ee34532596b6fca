//! Bots: named agents with their own mission, memory, skills and tools.
//!
//! The main agent is the bot named [`MAIN_AGENT`]: it talks with the user,
//! sees every tool the table gives a conversation, and its files are at the
//! top of the home. Every other bot lives under `bots/<name>/`, gets only
//! the tools its definition lists (all when the list is empty) and writes
//! only its own memory and skills.

use serde::{Deserialize, Serialize};
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::id::BotId;
use troupe_runtime::protocol::ActorKind;

/// What defines a bot.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BotSpec {
    /// Lowercase letters, digits, `-` and `_`.
    pub name: String,
    /// A short title (`Research scout`).
    pub title: String,
    /// One line: its role.
    pub description: String,
    /// Its standing rules: the system prompt's core. Composed from the title
    /// and description when empty.
    pub mission: String,
    /// Its model spec; the home's default when empty.
    pub model: String,
    /// The tools it may use; all when empty.
    pub tools: Vec<String>,
    /// Tools it may never use (beats `tools`).
    pub deny_tools: Vec<String>,
    /// Whether it may rewrite its own record with `update_self`.
    pub self_update: bool,
    /// Skills of the library (the main agent's, in the home's `skills/`)
    /// it may load with `use_skill` besides its own, by name.
    pub skills: Vec<String>,
    /// The MCP servers of `mcp.json` it gets (the main agent gets them all;
    /// a server's own `bots` list adds bots too).
    pub mcp_servers: Vec<String>,
}

impl Default for BotSpec {
    fn default() -> Self {
        Self {
            name: MAIN_AGENT.into(),
            title: "Assistant".into(),
            description: "A helpful assistant working on the user's machine.".into(),
            mission: String::new(),
            model: String::new(),
            tools: Vec::new(),
            deny_tools: Vec::new(),
            self_update: false,
            skills: Vec::new(),
            mcp_servers: Vec::new(),
        }
    }
}

/// Why a bot definition is refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BotError {
    /// The name has characters a bot name may not have.
    #[error("`{0}` is not a valid bot name: use 1 to 40 lowercase letters, digits, `-` or `_`, starting with a letter or digit")]
    InvalidName(String),
    /// A required field is empty.
    #[error("a bot needs a {0}")]
    Missing(&'static str),
    /// The description runs over one line.
    #[error("the description must be one line: say the bot's role in a sentence")]
    MultilineDescription,
    /// A listed library skill's name is not a skill name.
    #[error("`{0}` in `skills` is not a skill name: use lowercase letters, digits, `-` or `_`, as the skill's folder in the home's skills/ is named")]
    InvalidSkill(String),
}

impl BotSpec {
    /// A bot called `name` with a title and a one-line description.
    pub fn new(
        name: impl Into<String>,
        title: impl Into<String>,
        description: impl Into<String>,
    ) -> Self {
        Self {
            name: name.into(),
            title: title.into(),
            description: description.into(),
            ..Self::default()
        }
    }

    /// Checks the definition.
    pub fn validate(&self) -> Result<(), BotError> {
        validate_name(&self.name)?;
        if self.title.trim().is_empty() {
            return Err(BotError::Missing("title"));
        }
        if self.description.trim().is_empty() {
            return Err(BotError::Missing("description"));
        }
        if self.description.trim().contains('\n') {
            return Err(BotError::MultilineDescription);
        }
        for skill in &self.skills {
            if troupe_tools::skills::validate_name(skill).is_err() {
                return Err(BotError::InvalidSkill(skill.clone()));
            }
        }
        Ok(())
    }

    /// The mission, composed from the title and description when not given.
    pub fn effective_mission(&self) -> String {
        if !self.mission.trim().is_empty() {
            return self.mission.clone();
        }
        format!(
            "You are {}, {}: {}\nWork carefully, use your tools to check before you answer, and say plainly what you did and what is left.",
            self.name,
            self.title,
            self.description.trim()
        )
    }

    /// The kind of actor this bot's conversations are.
    pub fn kind(&self) -> ActorKind {
        if self.name == MAIN_AGENT {
            ActorKind::Conversation
        } else {
            ActorKind::Bot
        }
    }
}

/// Checks a bot name.
pub fn validate_name(name: &str) -> Result<(), BotError> {
    let ok = !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(BotError::InvalidName(name.to_string()))
    }
}

/// A bot as the node knows it: its id and definition.
///
/// Cheap to clone: every conversation of the bot holds one, and shares its
/// definition with the node's map instead of copying its strings.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BotRecord {
    /// Its id.
    pub id: BotId,
    /// Its definition (`Arc::make_mut` to change a record's own).
    pub spec: std::sync::Arc<BotSpec>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_checked() {
        for good in ["scout", "a1", "web-bot", "x_y", "9lives"] {
            assert_eq!(validate_name(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Scout",
            "has space",
            "-lead",
            "émile",
            "a/b",
            &"x".repeat(41),
        ] {
            assert!(validate_name(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_mission_is_composed_when_left_out() {
        let bot = BotSpec::new("scout", "Research scout", "Finds sources on the web.");
        assert_eq!(bot.validate(), Ok(()));
        assert!(bot
            .effective_mission()
            .starts_with("You are scout, Research scout: Finds sources on the web."));
        let mut multi = bot.clone();
        multi.description = "one\ntwo".into();
        assert_eq!(multi.validate(), Err(BotError::MultilineDescription));
        assert_eq!(
            BotSpec {
                title: " ".into(),
                ..bot
            }
            .validate(),
            Err(BotError::Missing("title"))
        );
    }
}
