//! The post office: hands over durable messages that wait unconsumed.
//!
//! A durable message is committed before its sender hears of it, then
//! handed to its receiver. When handing it over fails (the receiver was
//! stopping, restarting past its limit, the node was busy), the message is
//! still in the mailbox — and without this actor it would wait there until
//! the next start. The post office is a child of the node's supervisor:
//! every `redeliver_after` it hands over again whatever has waited longer
//! than that. Handing over twice is harmless: a receiver applies a message
//! once, by its id, in the transaction that consumes it.

use std::sync::Weak;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use troupe_runtime::store::mailbox;

use super::{Node, NodeContext};

/// The post office's messages.
#[derive(Debug)]
pub enum PostOfficeMsg {
    /// Look for messages that waited too long, and hand them over.
    Sweep,
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for PostOfficeMsg {}

/// The post office actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct PostOffice;

/// What it is started with and keeps.
pub struct PostOfficeState {
    node: Weak<NodeContext>,
    every: Duration,
}

impl Actor for PostOffice {
    type Msg = PostOfficeMsg;
    type State = PostOfficeState;
    type Arguments = (Weak<NodeContext>, Duration);

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        (node, every): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        myself.send_after(every, || PostOfficeMsg::Sweep);
        Ok(PostOfficeState { node, every })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            PostOfficeMsg::Sweep => {
                let Some(ctx) = state.node.upgrade() else {
                    return Ok(());
                };
                let node = Node::from_context(ctx);
                let every = state.every;
                // Off the actor: a sweep reads the store and routes.
                tokio::spawn(async move {
                    if let Err(e) = sweep(&node, every).await {
                        tracing::warn!(error = %e, "the post office could not sweep the mailbox");
                    }
                });
                myself.send_after(every, || PostOfficeMsg::Sweep);
            }
        }
        Ok(())
    }
}

/// Hands over every message that waited unconsumed longer than `age`;
/// returns how many.
pub async fn sweep(node: &Node, age: Duration) -> Result<usize, super::NodeError> {
    let cutoff = chrono::Utc::now()
        - chrono::Duration::from_std(age).unwrap_or_else(|_| chrono::Duration::zero());
    let waiting = node.store().read(mailbox::pending_all).await?;
    let mut handed = 0;
    for envelope in waiting.into_iter().filter(|e| e.sent_at <= cutoff) {
        match node.route(envelope).await {
            Ok(()) => handed += 1,
            Err(e) => tracing::debug!(error = %e, "a waiting message could not be handed over yet"),
        }
    }
    Ok(handed)
}
