//! `message_agent`: durable sends between agents, their replies, and the
//! loop guard that keeps two bots from messaging each other forever.
//!
//! A message is committed to the store before the sender gets its delivery
//! id, then delivered into the target bot's own conversation. When the
//! target's turn on it ends, its answer — or why it failed — goes back to the
//! sender's conversation as a durable notice ([`reply`]), enqueued in the
//! same commit that closes the answering turn.

pub use crate::node::reply;

pub use reply::{describe, reply};

use std::collections::{HashMap, VecDeque};
use std::time::{Duration, Instant};

use parking_lot::Mutex;
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload, ToolResult};
use troupe_runtime::tool::ToolContext;

use crate::node::Node;

/// The loop guard: at most `max` exchanges between a pair of agents within
/// `window`, then the pair waits `cooldown`.
#[derive(Debug)]
pub struct LoopGuard {
    max: u32,
    window: Duration,
    cooldown: Duration,
    pairs: Mutex<HashMap<(String, String), Pair>>,
}

#[derive(Debug, Default)]
struct Pair {
    sent: VecDeque<Instant>,
    cooling_until: Option<Instant>,
}

impl LoopGuard {
    /// A guard with these limits.
    pub fn new(max: u32, window: Duration, cooldown: Duration) -> Self {
        Self {
            max: max.max(1),
            window,
            cooldown,
            pairs: Mutex::new(HashMap::new()),
        }
    }

    /// Records an exchange from `from` to `to` at `now`, or says why not.
    pub fn admit(&self, from: &str, to: &str, now: Instant) -> Result<(), String> {
        // Both directions count as one pair's exchanges.
        let key = if from <= to {
            (from.to_string(), to.to_string())
        } else {
            (to.to_string(), from.to_string())
        };
        let mut pairs = self.pairs.lock();
        let pair = pairs.entry(key).or_default();
        if let Some(until) = pair.cooling_until {
            if now < until {
                return Err(format!(
                    "`{from}` and `{to}` have exchanged {} messages within {} s; they must pause for another {} s \
                     (the loop guard keeps bots from messaging each other forever). Finish the work yourself or ask the user.",
                    self.max,
                    self.window.as_secs(),
                    (until - now).as_secs().max(1)
                ));
            }
            pair.cooling_until = None;
            pair.sent.clear();
        }
        while pair
            .sent
            .front()
            .is_some_and(|t| now.duration_since(*t) > self.window)
        {
            pair.sent.pop_front();
        }
        if pair.sent.len() as u32 >= self.max {
            pair.cooling_until = Some(now + self.cooldown);
            return Err(format!(
                "`{from}` and `{to}` have exchanged {} messages within {} s; they must pause for {} s \
                 (the loop guard keeps bots from messaging each other forever). Finish the work yourself or ask the user.",
                self.max,
                self.window.as_secs(),
                self.cooldown.as_secs()
            ));
        }
        pair.sent.push_back(now);
        Ok(())
    }
}

/// Sends `message` from the conversation of `ctx` to the bot `target`.
pub async fn send(
    node: &Node,
    guard: &LoopGuard,
    ctx: &ToolContext,
    target: &str,
    message: &str,
) -> ToolResult {
    let bot = match node.bot(target) {
        Ok(bot) => bot,
        Err(_) => {
            let roster: Vec<String> = node
                .bots()
                .into_iter()
                .map(|b| b.spec.name)
                .filter(|n| *n != ctx.agent)
                .collect();
            return ToolResult::error(format!(
                "there is no agent named `{target}`. The agents you can message are: {}.",
                if roster.is_empty() {
                    "none".to_string()
                } else {
                    roster.join(", ")
                }
            ));
        }
    };
    if let Err(why) = guard.admit(&ctx.agent, target, Instant::now()) {
        return ToolResult::error(why);
    }
    let envelope = Envelope {
        id: MsgId::new(),
        from: Address::Conversation(ctx.conversation),
        to: Address::Bot(bot.id),
        body: Payload::Text {
            sender: ctx.agent.clone(),
            text: message.to_string(),
            expects_reply: true,
        },
        sent_at: chrono::Utc::now(),
    };
    let id = match node.store().send(envelope.clone()).await {
        Ok(id) => id,
        Err(e) => {
            return ToolResult::error(format!(
                "the message could not be delivered to `{target}`: {e}"
            ))
        }
    };
    let data = serde_json::json!({"delivery_id": id.to_string(), "target": target});
    match node.route(envelope).await {
        Ok(()) => ToolResult::ok_with(
            format!("Delivered to `{target}` (delivery id {id}). Its reply will arrive later as a notice in this conversation."),
            data,
        ),
        // Committed: it is delivered when the target next runs. Saying
        // "could not be delivered" would invite a second send.
        Err(e) => ToolResult::ok_with(
            format!(
                "Committed to `{target}`'s mailbox (delivery id {id}), but it could not be handed over now ({e}); \
                 it will be delivered when `{target}` next runs, and its reply will arrive as a notice. Do not send it again."
            ),
            data,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_guard_caps_a_pair_then_cools_down() {
        let guard = LoopGuard::new(3, Duration::from_secs(60), Duration::from_secs(120));
        let t0 = Instant::now();
        assert!(guard.admit("a", "b", t0).is_ok());
        assert!(
            guard.admit("b", "a", t0).is_ok(),
            "both directions count together"
        );
        assert!(guard.admit("a", "b", t0).is_ok());
        let refused = guard.admit("b", "a", t0).unwrap_err();
        assert!(refused.contains("must pause for 120 s"), "{refused}");
        assert!(
            guard.admit("a", "c", t0).is_ok(),
            "other pairs are not affected"
        );
        assert!(
            guard.admit("a", "b", t0 + Duration::from_secs(60)).is_err(),
            "still cooling"
        );
        assert!(
            guard.admit("a", "b", t0 + Duration::from_secs(121)).is_ok(),
            "after the cooldown"
        );
    }
}
