//! The director: who is offered a turn when a message lands in a thread.
//!
//! The rules (written for users in `docs/house.md`):
//!
//! 1. A person's message that @mentions bots of the house offers a turn to
//!    each mentioned bot whose listen mode is not `off` (a mentioned bot
//!    that was not in the thread joins it). A person's message that
//!    mentions no bot offers a turn to every participant bot listening to
//!    `all`.
//! 2. A bot's message (its answer in the thread, or a post from another
//!    thread) offers a turn only to participant bots it @mentions whose
//!    listen mode is not `off` — a mention asks, it does not summon — and
//!    only while the chain of bot turns since the person's message is
//!    shorter than `max_chain`. The pair loop guard of `message_agent`
//!    applies to each bot-to-bot offer.
//! 3. A round — a person's message and every bot turn that follows from it
//!    — offers at most `max_turns_per_round` turns. The author of a message
//!    is never offered a turn on it. Offered bots answer in parallel.

use std::collections::HashMap;
use std::time::Instant;

use serde::{Deserialize, Serialize};
use troupe_runtime::house::mentions;
use troupe_runtime::protocol::house::{ListenMode, Member, MemberKind, Post};

use crate::messaging::LoopGuard;

/// A house's turn-taking rules, stored with the house.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Rules {
    /// At most this many bot turns per round (a person's message and what follows).
    pub max_turns_per_round: u32,
    /// At most this many bot turns in a chain of bots answering bots.
    pub max_chain: u32,
    /// At most this many unseen thread messages shown in an offer.
    pub context_messages: u32,
}

impl Default for Rules {
    fn default() -> Self {
        Self {
            max_turns_per_round: 3,
            max_chain: 3,
            context_messages: 30,
        }
    }
}

/// Who is offered a turn on a new message.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Decision {
    /// The bots offered a turn, in the order they are offered.
    pub offered: Vec<String>,
    /// Bots a person mentioned that join the thread.
    pub joining: Vec<String>,
    /// Why someone mentioned was not offered a turn (for the log and tests).
    pub declined: Vec<(String, String)>,
}

/// Decides who is offered a turn on `post` in a thread whose participants
/// are `participants`, given the house's `members`, the `rules`, how many
/// turns the round has offered already, and the pair `guard`.
pub fn decide(
    post: &Post,
    participants: &[String],
    members: &[Member],
    rules: &Rules,
    offered_in_round: u32,
    guard: &LoopGuard,
) -> Decision {
    let mut decision = Decision::default();
    let by_handle: HashMap<String, &Member> = members
        .iter()
        .map(|m| (m.handle.to_lowercase(), m))
        .collect();
    let is_participant = |handle: &str| participants.iter().any(|p| p.eq_ignore_ascii_case(handle));
    let author = post.author.to_lowercase();
    let listening = |m: &Member| m.kind == MemberKind::Bot && m.listen != Some(ListenMode::Off);
    let mentioned: Vec<&Member> = mentions(&post.text)
        .into_iter()
        .filter(|h| *h != author)
        .filter_map(|h| by_handle.get(&h).copied())
        .filter(|m| m.kind == MemberKind::Bot)
        .collect();
    let mut candidates: Vec<String> = Vec::new();
    match post.author_kind {
        MemberKind::Human => {
            if mentioned.is_empty() {
                for m in members {
                    if m.kind == MemberKind::Bot
                        && m.listen == Some(ListenMode::All)
                        && is_participant(&m.handle)
                    {
                        candidates.push(m.handle.clone());
                    }
                }
            } else {
                for m in mentioned {
                    if !listening(m) {
                        decision
                            .declined
                            .push((m.handle.clone(), "its listen mode is off".into()));
                        continue;
                    }
                    if !is_participant(&m.handle) {
                        decision.joining.push(m.handle.clone());
                    }
                    candidates.push(m.handle.clone());
                }
            }
        }
        MemberKind::Bot => {
            if post.depth >= rules.max_chain {
                for m in mentioned {
                    decision.declined.push((
                        m.handle.clone(),
                        format!("the chain of bot turns reached {}", rules.max_chain),
                    ));
                }
            } else {
                for m in mentioned {
                    if !listening(m) {
                        decision
                            .declined
                            .push((m.handle.clone(), "its listen mode is off".into()));
                    } else if !is_participant(&m.handle) {
                        decision
                            .declined
                            .push((m.handle.clone(), "it is not in this thread".into()));
                    } else if let Err(why) = guard.admit(&post.author, &m.handle, Instant::now()) {
                        decision.declined.push((m.handle.clone(), why));
                    } else {
                        candidates.push(m.handle.clone());
                    }
                }
            }
        }
    }
    let room = rules.max_turns_per_round.saturating_sub(offered_in_round) as usize;
    for (i, handle) in candidates.into_iter().enumerate() {
        if i < room {
            decision.offered.push(handle);
        } else {
            decision.declined.push((
                handle,
                format!(
                    "the round reached its cap of {} bot turns",
                    rules.max_turns_per_round
                ),
            ));
        }
    }
    decision
}

#[cfg(test)]
#[path = "director_tests.rs"]
mod tests;
