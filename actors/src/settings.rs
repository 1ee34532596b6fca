//! What the actors need to know from the configuration, in one place.
//!
//! It also holds the one check of a user message's size: a message is
//! stored whole and sent to the model with every later request, so a 10 MB
//! paste would weigh on the conversation forever. It is refused where user
//! text enters ([`Node::send`](crate::node::Node::send) and `steer`), before
//! anything is stored.

use std::path::PathBuf;
use std::time::Duration;

use crate::budget::Limits;

/// The default of [`Settings::max_user_message_bytes`]: 256 KiB.
pub const DEFAULT_MAX_USER_MESSAGE_BYTES: usize = 256 * 1024;

/// A user message larger than [`Settings::max_user_message_bytes`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the message is {size} bytes, over the limit of {limit} bytes ([limits] \
     max_user_message_bytes); nothing was stored. Shorten it, or put the text in a file and ask \
     the agent to read it, or raise the limit (`--set limits.max_user_message_bytes=N`)"
)]
pub struct MessageTooLarge {
    /// The message's size, in bytes.
    pub size: usize,
    /// The limit, in bytes.
    pub limit: usize,
}

/// The actors' settings, taken from `config.toml` (or set in code).
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// The model spec bots use when their definition names none.
    pub default_model: String,
    /// The folder relative paths resolve against.
    pub cwd: PathBuf,
    /// The user's own home folder: what `~` means in a path
    /// ([`troupe_runtime::home::Home::user_home`] by default).
    pub user_home: PathBuf,
    /// The user's time zone (IANA name).
    pub timezone: String,
    /// Model calls per turn.
    pub max_steps: u32,
    /// Identical failing calls before the turn halts.
    pub repeat_limit: u32,
    /// A tool call's default timeout.
    pub tool_timeout: Duration,
    /// Results longer than this are spilled to a file.
    pub spill_limit_chars: usize,
    /// Share of the context window at which the history is compacted.
    pub compaction_threshold: f64,
    /// Messages kept verbatim by a compaction.
    pub keep_recent: usize,
    /// Budgets of one turn.
    pub turn_budget: Limits,
    /// Budgets of one bot, per day.
    pub bot_budget: Limits,
    /// Budgets of one delegation subtree.
    pub delegation_budget: Limits,
    /// Whether every message is committed to the store (off only for
    /// measuring the runtime without it).
    pub durable: bool,
    /// Subagents running at once per bot.
    pub max_subagents_per_bot: usize,
    /// Subagents running at once on this node.
    pub max_subagents_per_node: usize,
    /// How long one subagent may run.
    pub subagent_timeout: Duration,
    /// How deep delegations may nest (1: subagents do not delegate).
    pub max_delegation_depth: u32,
    /// Exchanges between a pair of agents within `loop_window` before a cooldown.
    pub loop_max_exchanges: u32,
    /// The window of the loop guard.
    pub loop_window: Duration,
    /// How long a pair of agents that hit the cap must wait.
    pub loop_cooldown: Duration,
    /// How long `ask_user` and approvals wait for an answer.
    pub ask_timeout: Duration,
    /// Turns of a conversation between two background reviews (0: none).
    pub review_every_n_turns: u32,
    /// How long a conversation sits idle before its actor stops (it comes
    /// back from the store on its next message); never when `None`, and
    /// never when nothing is durable.
    pub passivate_after: Option<Duration>,
    /// The largest user message, in bytes ([`Settings::check_user_message`]).
    pub max_user_message_bytes: usize,
    /// How long a durable message may wait unconsumed before the post
    /// office hands it over again (it was committed, but handing it over
    /// failed or its receiver stopped first); never when `None`.
    pub redeliver_after: Option<Duration>,
    /// The size limit and quota of house files (`[files]`).
    pub files: troupe_runtime::store::house_files::FileLimits,
    /// The limits and lifetime of house environments (`[environments]`).
    pub environments: troupe_runtime::environment::EnvironmentSettings,
    /// The outside executors' accounts (`[executors.NAME.accounts.ACCOUNT]`),
    /// read with the rest of `config.toml` when the node starts, so a
    /// `delegate` does not read the file again; an edit takes effect at the
    /// next start, as every other setting's does.
    pub executors: troupe_runtime::config::Executors,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            default_model: "openai:gpt-4o-mini".into(),
            cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
            user_home: troupe_runtime::home::Home::user_home(),
            timezone: "UTC".into(),
            max_steps: 50,
            repeat_limit: 3,
            tool_timeout: Duration::from_secs(120),
            spill_limit_chars: 30_000,
            compaction_threshold: 0.8,
            keep_recent: 12,
            turn_budget: Limits::default(),
            bot_budget: Limits::default(),
            delegation_budget: Limits::default(),
            durable: true,
            max_subagents_per_bot: 10,
            max_subagents_per_node: 64,
            subagent_timeout: Duration::from_secs(600),
            max_delegation_depth: 1,
            loop_max_exchanges: 10,
            loop_window: Duration::from_secs(600),
            loop_cooldown: Duration::from_secs(600),
            ask_timeout: Duration::from_secs(600),
            review_every_n_turns: 0,
            passivate_after: None,
            max_user_message_bytes: DEFAULT_MAX_USER_MESSAGE_BYTES,
            redeliver_after: Some(Duration::from_secs(60)),
            files: troupe_runtime::store::house_files::FileLimits::default(),
            environments: troupe_runtime::environment::EnvironmentSettings::default(),
            executors: troupe_runtime::config::Executors::default(),
        }
    }
}

impl Settings {
    /// Refuses a user message over [`Settings::max_user_message_bytes`].
    ///
    /// # Errors
    ///
    /// [`MessageTooLarge`] with the size and the limit.
    pub fn check_user_message(&self, text: &str) -> Result<(), MessageTooLarge> {
        if text.len() > self.max_user_message_bytes {
            return Err(MessageTooLarge {
                size: text.len(),
                limit: self.max_user_message_bytes,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_message_over_the_limit_names_its_size_the_limit_and_the_setting() {
        let settings = Settings {
            max_user_message_bytes: 4,
            ..Settings::default()
        };
        assert_eq!(settings.check_user_message("four"), Ok(()));
        let err = settings.check_user_message("fives").unwrap_err();
        assert_eq!(err, MessageTooLarge { size: 5, limit: 4 });
        let text = err.to_string();
        assert!(text.starts_with("the message is 5 bytes, over the limit of 4 bytes ([limits] max_user_message_bytes)"), "{text}");
    }
}
