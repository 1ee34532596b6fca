//! A program's actor kinds across the nodes (docs/cluster.md, "Your own
//! actors on other nodes").
//!
//! Each node tells its peers the kinds its program registered — in its
//! `hello`, and in a `kinds` frame whenever it registers another while
//! they are connected — and keeps what they told it in its store. A
//! durable send to an actor whose kind this node does not register goes,
//! through the outbox, to the node that does (of several, the one
//! rendezvous hashing of `kind/key` picks: [`super::directory`]); one of a
//! kind registered here stays here.

use std::sync::Arc;

use troupe_runtime::protocol::wire::{self, kind, Ack, Kinds};
use troupe_runtime::protocol::Address;
use troupe_runtime::store::mailbox;

use super::houses::call;
use super::inbox::refuse;
use super::Shared;

/// The kinds this node's program registered, by name.
pub(crate) fn local(shared: &Shared) -> Vec<String> {
    shared.node().map(|n| n.kinds().names()).unwrap_or_default()
}

/// Whether this node's program registered `kind`.
pub(crate) fn is_local(shared: &Shared, kind: &str) -> bool {
    shared.node().is_some_and(|n| n.kinds().contains(kind))
}

/// Tells every connected peer the kinds registered here now (off the
/// caller's task; a peer not told learns them at its next `hello`).
pub(crate) fn announce(shared: &Arc<Shared>) {
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        let body = Kinds {
            node: shared.options.node.clone(),
            kinds: local(&shared),
        };
        for (peer, inbox) in shared.connected() {
            if let Err(e) = call::<_, Ack>(&inbox, kind::KINDS, &body, kind::ACK).await {
                tracing::debug!(%peer, error = %e, "a peer was not told our actor kinds");
            }
        }
    });
}

/// A peer's `kinds` frame: kept, then what waited here for those kinds
/// goes to it.
pub(crate) async fn told(shared: &Arc<Shared>, frame: &[u8], id: &str) -> Vec<u8> {
    let told: Kinds = match wire::decode(frame, kind::KINDS) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let Some(node) = shared.node() else {
        return refuse(id, "this node is stopping; send it again".into());
    };
    if let Err(e) = shared
        .directory
        .set_kinds(node.store(), &told.node, &told.kinds)
        .await
    {
        return refuse(
            id,
            format!("this node could not keep them ({e}); send them again"),
        );
    }
    hand_over_waiting(shared, told.kinds);
    wire::encode(kind::ACK, id, &Ack { first: true }).unwrap_or_default()
}

/// Durable messages committed here for actors of `kinds` that no node
/// was known to host when they were sent: handed over again now that a
/// peer registered them (off the caller's task; the post office would in
/// time).
pub(crate) fn hand_over_waiting(shared: &Arc<Shared>, kinds: Vec<String>) {
    let Some(node) = shared.node() else { return };
    let kinds: Vec<String> = kinds.into_iter().filter(|k| !is_local(shared, k)).collect();
    if kinds.is_empty() {
        return;
    }
    tokio::spawn(async move {
        for kind in kinds {
            let prefix = Address::Actor {
                kind: kind.clone(),
                key: String::new(),
            }
            .to_string();
            let waiting = node
                .store()
                .read(move |c| mailbox::pending_prefixed(c, &prefix, usize::MAX))
                .await
                .unwrap_or_default();
            for envelope in waiting {
                if let Err(e) = node.route(envelope).await {
                    tracing::debug!(error = %e, "a message for another node's actor waits");
                }
            }
        }
    });
}
