//! A gateway: this node's sender to one peer node.
//!
//! It sends what waits in the outbox for its peer (oldest first, a batch
//! at a time, the batch's calls in flight together), and drops a message
//! from the outbox only when the peer acknowledged it — which the peer does
//! after committing it. Whatever fails (the peer is down, a call times
//! out, the peer refused) is sent again after a backoff that doubles up to
//! [`MAX_BACKOFF`]. A gateway holds no message in memory that the outbox
//! does not hold: killing it, or the node, loses nothing.

use std::sync::Weak;
use std::time::Duration;

use ractor::{Actor, ActorProcessingErr, ActorRef};
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::wire::{self, kind, Ack, Delivery, Refusal};
use troupe_runtime::store::cluster as table;

use super::inbox::InboxMsg;
use super::Shared;

/// How many messages a gateway sends at a time.
pub const BATCH: usize = 512;
/// The first wait before sending again after a failure.
pub const MIN_BACKOFF: Duration = Duration::from_millis(100);
/// The longest wait before sending again.
pub const MAX_BACKOFF: Duration = Duration::from_secs(5);
/// How long the peer has to acknowledge one message.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(10);

/// A gateway's messages.
#[derive(Debug)]
pub enum GatewayMsg {
    /// The peer's inbox is reachable (a session with it is up).
    Connected(ActorRef<InboxMsg>),
    /// The session with the peer is down.
    Disconnected,
    /// Send what waits in the outbox.
    Flush,
    /// A batch ended: how many were acknowledged, or why it stopped.
    Sent(Result<usize, String>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for GatewayMsg {}

/// The gateway actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Gateway;

/// A gateway's state.
pub struct GatewayState {
    shared: Weak<Shared>,
    peer: String,
    remote: Option<ActorRef<InboxMsg>>,
    sending: bool,
    again: bool,
    backoff: Duration,
}

impl Actor for Gateway {
    type Msg = GatewayMsg;
    type State = GatewayState;
    type Arguments = (Weak<Shared>, String);

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        (shared, peer): Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let remote = shared.upgrade().and_then(|s| {
            // Each incarnation is the one its peer's messages go to.
            s.gateways.insert(peer.clone(), myself.clone());
            s.inboxes.get(&peer).map(|r| r.clone())
        });
        // What waited for the last incarnation is sent.
        let _ = myself.cast(GatewayMsg::Flush);
        Ok(GatewayState {
            shared,
            peer,
            remote,
            sending: false,
            again: false,
            backoff: MIN_BACKOFF,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            GatewayMsg::Connected(remote) => {
                state.remote = Some(remote);
                state.backoff = MIN_BACKOFF;
                flush(&myself, state);
            }
            GatewayMsg::Disconnected => state.remote = None,
            GatewayMsg::Flush => flush(&myself, state),
            GatewayMsg::Sent(result) => {
                state.sending = false;
                match result {
                    Ok(n) => {
                        state.backoff = MIN_BACKOFF;
                        if n > 0 || std::mem::take(&mut state.again) {
                            flush(&myself, state);
                        }
                    }
                    Err(why) => {
                        tracing::debug!(peer = %state.peer, %why, backoff = ?state.backoff, "messages to a peer wait");
                        myself.send_after(state.backoff, || GatewayMsg::Flush);
                        state.backoff = (state.backoff * 2).min(MAX_BACKOFF);
                    }
                }
            }
        }
        Ok(())
    }
}

fn flush(myself: &ActorRef<GatewayMsg>, state: &mut GatewayState) {
    if state.sending {
        state.again = true;
        return;
    }
    let (Some(remote), Some(shared)) = (state.remote.clone(), state.shared.upgrade()) else {
        return;
    };
    state.sending = true;
    let peer = state.peer.clone();
    let me = myself.clone();
    tokio::spawn(async move {
        let result = send_batch(&shared, &remote, &peer).await;
        let _ = me.cast(GatewayMsg::Sent(result));
    });
}

/// Sends up to [`BATCH`] waiting messages to `peer`; drops the
/// acknowledged ones from the outbox.
async fn send_batch(
    shared: &Shared,
    remote: &ActorRef<InboxMsg>,
    peer: &str,
) -> Result<usize, String> {
    let node = shared.node().ok_or("the node is stopping")?;
    let p = peer.to_string();
    let waiting = node
        .store()
        .read(move |c| table::outbox(c, &p, BATCH))
        .await
        .map_err(|e| e.to_string())?;
    if waiting.is_empty() {
        return Ok(0);
    }
    let from_node = shared.options.node.clone();
    let calls = waiting.into_iter().map(|envelope| {
        let from_node = from_node.clone();
        async move {
            let id = envelope.id;
            let frame = wire::encode(
                kind::ENVELOPE,
                &id.to_string(),
                &Delivery {
                    from_node,
                    envelope,
                },
            )
            .map_err(|e| e.to_string())?;
            send_one(remote, frame).await.map(|()| id)
        }
    });
    let results = futures::future::join_all(calls).await;
    let mut acked: Vec<MsgId> = Vec::new();
    let mut failure = None;
    for r in results {
        match r {
            Ok(id) => acked.push(id),
            Err(e) => failure = Some(e),
        }
    }
    let n = acked.len();
    if n > 0 {
        node.store()
            .write(move |tx| table::acked(tx, &acked))
            .await
            .map_err(|e| e.to_string())?;
        shared.acked.send_modify(|total| *total += n as u64);
    }
    match failure {
        Some(e) => Err(e),
        None => Ok(n),
    }
}

/// Waits until the peer acknowledged every one of `ids` (sent from the
/// outbox, `acks` subscribed before they were), at most [`CALL_TIMEOUT`],
/// and not past the cluster's stop. Each acknowledgement looks again at
/// those still waiting only.
pub(crate) async fn acknowledged(
    shared: &Shared,
    node: &crate::node::Node,
    acks: &mut tokio::sync::watch::Receiver<u64>,
    ids: Vec<MsgId>,
) -> Result<(), String> {
    let sent = ids.len();
    let waiting = async {
        let mut left = ids;
        while !left.is_empty() {
            left = node
                .store()
                .read(move |c| table::unacked(c, &left))
                .await
                .map_err(|e| e.to_string())?;
            if !left.is_empty() {
                acks.changed().await.map_err(|_| "the node is stopping")?;
            }
        }
        Ok(())
    };
    let waiting = async {
        tokio::select! {
            done = waiting => done,
            () = shared.stopping.cancelled() => Err("the cluster is stopping".to_string()),
        }
    };
    tokio::time::timeout(CALL_TIMEOUT, waiting)
        .await
        .map_err(|_| {
            format!(
                "not all {sent} were acknowledged within {}s",
                CALL_TIMEOUT.as_secs()
            )
        })?
}

/// One frame to the peer's inbox, and its acknowledgement.
async fn send_one(remote: &ActorRef<InboxMsg>, frame: Vec<u8>) -> Result<(), String> {
    let answer = remote
        .call(|reply| InboxMsg::Call(frame, reply), Some(CALL_TIMEOUT))
        .await
        .map_err(|e| format!("the peer could not be reached: {e}"))?;
    let answer = match answer {
        ractor::rpc::CallResult::Success(bytes) => bytes,
        ractor::rpc::CallResult::Timeout => return Err("the peer did not answer in time".into()),
        ractor::rpc::CallResult::SenderError => return Err("the peer dropped the call".into()),
    };
    match wire::head(&answer).map_err(|e| e.to_string())?.0.as_str() {
        kind::ACK => wire::decode::<Ack>(&answer, kind::ACK)
            .map(|_| ())
            .map_err(|e| e.to_string()),
        kind::REFUSED => {
            let why = wire::decode::<Refusal>(&answer, kind::REFUSED)
                .map(|f| f.body.reason)
                .unwrap_or_else(|e| e.to_string());
            Err(format!("the peer refused it: {why}"))
        }
        other => Err(format!("the peer answered with a frame of kind `{other}`")),
    }
}
