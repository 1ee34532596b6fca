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
use troupe_runtime::house::HouseScope;
use troupe_runtime::id::{BotId, ConversationId, HouseId, MsgId};
use troupe_runtime::protocol::{Address, Envelope, Payload, ToolResult};
use troupe_runtime::rusqlite::{self, OptionalExtension};
use troupe_runtime::tool::ToolContext;

use crate::bot::BotRecord;
use crate::node::{Node, NodeError, Opening};

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

/// Sends `message` from the conversation of `ctx` to the bot `target`:
/// into its own conversation, or — from a conversation working for a
/// house — into its conversation for that house, and only to a bot of it.
/// A `target` naming an actor kind offered to bots reaches its actor (from
/// a house, under that house's keys: `crate::kinds::houses`).
pub async fn send(
    node: &Node,
    guard: &LoopGuard,
    ctx: &ToolContext,
    target: &str,
    message: &str,
) -> ToolResult {
    let scope = HouseScope::of(ctx);
    let members = match scope {
        None => None,
        Some(scope) => match house_bots(node, scope.house).await {
            Ok(bots) => Some(bots),
            Err(e) => return ToolResult::error(format!("message_agent failed: {e}")),
        },
    };
    // A house's bots reach the kinds offered to bots too, each house its
    // own keys unless the program shares them (`kinds::houses`).
    let house = match scope {
        Some(scope) if !scope.home => match house_name(node, scope.house).await {
            Ok(name) => Some(name),
            Err(e) => return ToolResult::error(format!("message_agent failed: {e}")),
        },
        Some(_) | None => None,
    };
    let found = node
        .bot(target)
        .ok()
        .filter(|b| members.as_ref().is_none_or(|m| m.contains(&b.id)));
    let bot = match found {
        Some(bot) => bot,
        None => {
            // A bot on another node of the cluster (not from a house: a
            // house's bots are those of its node).
            let remote = node.remote().filter(|_| scope.is_none());
            if let Some(id) = remote.and_then(|r| r.bot(target)) {
                if let Err(why) = guard.admit(&ctx.agent, target, Instant::now()) {
                    return ToolResult::error(why);
                }
                return commit_and_hand_over(node, ctx, Address::Bot(id), target, message).await;
            }
            if let Some(to) = node.kinds().target(target, house.as_deref()) {
                if let Err(why) = guard.admit(&ctx.agent, target, Instant::now()) {
                    return ToolResult::error(why);
                }
                return commit_and_hand_over(node, ctx, to, target, message).await;
            }
            let roster: Vec<String> = node
                .bots()
                .into_iter()
                .filter(|b| members.as_ref().is_none_or(|m| m.contains(&b.id)))
                .map(|b| b.spec.name.clone())
                .filter(|n| *n != ctx.agent)
                .chain(node.kinds().offered().into_iter().map(|(name, _)| name))
                .collect();
            let whose = if members.is_some() {
                " in this house"
            } else {
                ""
            };
            return ToolResult::error(format!(
                "there is no agent named `{target}`{whose}. The agents you can message are: {}.",
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
    let to = match scope {
        None => Address::Bot(bot.id),
        Some(scope) => match house_conversation(node, &bot, scope.house).await {
            Ok(id) => Address::Conversation(id),
            Err(e) => {
                return ToolResult::error(format!(
                    "the message could not be delivered to `{target}`: {e}"
                ))
            }
        },
    };
    commit_and_hand_over(node, ctx, to, target, message).await
}

/// Commits `message` for `to`, then hands it over; the answer says how far
/// it got.
async fn commit_and_hand_over(
    node: &Node,
    ctx: &ToolContext,
    to: Address,
    target: &str,
    message: &str,
) -> ToolResult {
    let envelope = Envelope {
        id: MsgId::new(),
        from: Address::Conversation(ctx.conversation),
        to,
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

/// The bots of `house`.
async fn house_bots(node: &Node, house: HouseId) -> Result<Vec<BotId>, NodeError> {
    let members = node
        .store()
        .read(move |c| troupe_runtime::store::house::members(c, house))
        .await?;
    Ok(members.into_iter().filter_map(|m| m.bot).collect())
}

/// The name of `house`.
async fn house_name(node: &Node, house: HouseId) -> Result<String, NodeError> {
    node.store()
        .read(move |c| troupe_runtime::store::house::house(c, house))
        .await?
        .map(|h| h.name)
        .ok_or_else(|| NodeError::Refused(format!("house {house} is gone")))
}

/// What the row of a bot's conversation for a house is stored as.
pub const HOUSE_KIND: &str = "house";

/// `bot`'s conversation for `house`, where messages from that house's
/// conversations arrive: the latest one, or a new one. It carries the
/// house, so it sees that house's data only, like its sender.
async fn house_conversation(
    node: &Node,
    bot: &BotRecord,
    house: HouseId,
) -> Result<ConversationId, NodeError> {
    let (bot_id, key) = (bot.id.to_string(), house.to_string());
    let found = node
        .store()
        .read(move |c| {
            Ok(c.prepare_cached(
                "SELECT c.id FROM conversations c JOIN openings o ON o.conversation_id = c.id
                 WHERE c.bot_id = ?1 AND c.kind = ?2 AND json_extract(o.spec, '$.house') = ?3
                 ORDER BY c.created_at DESC LIMIT 1",
            )?
            .query_row(rusqlite::params![bot_id, HOUSE_KIND, key], |r| {
                r.get::<_, String>(0)
            })
            .optional()?)
        })
        .await?;
    if let Some(id) = found.and_then(|id| id.parse().ok()) {
        return Ok(id);
    }
    let id = ConversationId::new();
    node.open(Opening {
        id,
        house: Some(house),
        label: Some(HOUSE_KIND),
        title: "messages from the house".into(),
        ..Opening::new(bot.clone())
    })
    .await?;
    Ok(id)
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
