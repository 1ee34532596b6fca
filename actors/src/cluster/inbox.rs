//! A node's inbox: the one actor of a node that other nodes call.
//!
//! It is in the cluster's process group, so ractor_cluster announces it to
//! every peer, and its message type is the only one of troupe that crosses
//! nodes: a call carrying a wire frame (`troupe_runtime::protocol::wire`)
//! and answered with one. A delivery is committed in this node's store
//! (and noted received, so a retry is not applied twice) before the
//! acknowledgement goes back; only then is it handed to its actor.

use std::sync::Arc;
use std::time::Instant;

use ractor::message::{BoxedDowncastErr, SerializedMessage};
use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use troupe_runtime::protocol::wire::{
    self, kind, Ack, Delivery, Hello, HelloRequest, HostedBot, HouseCreate, Houses, Refusal,
};
use troupe_runtime::store::cluster as table;

use super::Shared;

/// The process group of every node's inbox in `cluster`.
pub fn group(cluster: &str) -> String {
    format!("troupe.cluster.{cluster}")
}

/// The inbox's one message: a frame from another node, answered with one.
#[derive(Debug)]
pub enum InboxMsg {
    /// A wire frame and where its answer goes.
    Call(Vec<u8>, RpcReplyPort<Vec<u8>>),
}

const CALL: &str = "call";

// Crosses nodes: ractor_cluster serializes it as a call whose arguments and
// reply are wire frames (bytes), so it has no format of its own to version.
impl ractor::Message for InboxMsg {
    fn serializable() -> bool {
        true
    }

    fn serialize(self) -> Result<SerializedMessage, BoxedDowncastErr> {
        match self {
            InboxMsg::Call(frame, reply) => Ok(SerializedMessage::Call {
                variant: CALL.to_string(),
                args: frame,
                reply,
                metadata: None,
            }),
        }
    }

    fn deserialize(bytes: SerializedMessage) -> Result<Self, BoxedDowncastErr> {
        match bytes {
            SerializedMessage::Call {
                variant,
                args,
                reply,
                ..
            } if variant == CALL => Ok(InboxMsg::Call(args, reply)),
            SerializedMessage::Call { .. }
            | SerializedMessage::Cast { .. }
            | SerializedMessage::CallReply(..) => Err(BoxedDowncastErr),
        }
    }
}

/// The inbox actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Inbox;

impl Actor for Inbox {
    type Msg = InboxMsg;
    type State = Arc<Shared>;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        ractor::pg::join(group(&shared.options.cluster), vec![myself.get_cell()]);
        Ok(shared)
    }

    async fn handle(
        &self,
        _myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        shared: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            InboxMsg::Call(frame, reply) => {
                // Off the actor: a delivery waits on the store.
                let shared = Arc::clone(shared);
                tokio::spawn(async move {
                    let answer = answer(&shared, &frame).await;
                    let _ = reply.send(answer);
                });
            }
        }
        Ok(())
    }
}

/// The name this node's inbox is registered under.
pub(crate) fn name(node: &str) -> String {
    format!("troupe.inbox.{node}")
}

pub(super) fn refuse(id: &str, reason: String) -> Vec<u8> {
    tracing::warn!(%reason, "a frame from another node was refused");
    wire::encode(kind::REFUSED, id, &Refusal { reason }).unwrap_or_default()
}

/// An answer of `kind`, or the refusal saying why there is none.
fn answered<B: serde::Serialize>(id: &str, kind: &str, body: Result<B, String>) -> Vec<u8> {
    match body {
        Ok(body) => wire::encode(kind, id, &body).unwrap_or_else(|e| refuse(id, e.to_string())),
        Err(why) => refuse(id, why),
    }
}

/// The answer to one frame from another node.
async fn answer(shared: &Arc<Shared>, frame: &[u8]) -> Vec<u8> {
    let (kind, id) = match wire::head(frame) {
        Ok(head) => head,
        Err(e) => return refuse("", e.to_string()),
    };
    match kind.as_str() {
        kind::HELLO => hello(shared, frame, &id).await,
        kind::ENVELOPE => deliver(shared, frame, &id).await,
        kind::HOUSES => houses(shared, frame, &id).await,
        kind::KINDS => super::kinds::told(shared, frame, &id).await,
        kind::HOUSE_CREATE => match wire::decode::<HouseCreate>(frame, kind::HOUSE_CREATE) {
            Ok(f) => {
                let made = super::houses::made(shared, f.body).await;
                wire::encode(kind::HOUSE_MADE, &id, &made)
                    .unwrap_or_else(|e| refuse(&id, e.to_string()))
            }
            Err(e) => refuse(&id, e.to_string()),
        },
        kind::HTTP => super::bodies::http(shared, frame, &id).await,
        kind::HTTP_OPEN => super::bodies::open(shared, frame, &id).await,
        kind::HTTP_BODY | kind::HTTP_NEXT => super::bodies::piece(shared, frame, &id, &kind).await,
        kind::HOUSE_MOVE_PART => match wire::decode(frame, kind::HOUSE_MOVE_PART) {
            Ok(f) => answered(&id, kind::ACK, super::moves::part(shared, f.body).await),
            Err(e) => refuse(&id, e.to_string()),
        },
        kind::HOUSE_MOVE_COMMIT => match wire::decode(frame, kind::HOUSE_MOVE_COMMIT) {
            Ok(f) => answered(
                &id,
                kind::HOUSE_MOVE_DONE,
                Ok(super::moves::commit(shared, f.body).await),
            ),
            Err(e) => refuse(&id, e.to_string()),
        },
        kind::HOUSE_MOVE_REFUSE => match wire::decode(frame, kind::HOUSE_MOVE_REFUSE) {
            Ok(f) => answered(
                &id,
                kind::HOUSE_MOVE_DONE,
                super::moves::refuse(shared, f.body).await,
            ),
            Err(e) => refuse(&id, e.to_string()),
        },
        kind::STREAM_OPEN => super::streams::open(shared, frame, &id).await,
        kind::STREAM_DATA => super::streams::data(shared, frame, &id).await,
        kind::STREAM_CLOSE => super::streams::close(shared, frame, &id).await,
        other => refuse(
            &id,
            format!("this node does not know frames of kind `{other}`; upgrade it"),
        ),
    }
}

async fn hello(shared: &Shared, frame: &[u8], id: &str) -> Vec<u8> {
    let asked: HelloRequest = match wire::decode(frame, kind::HELLO) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    if asked.cluster != shared.options.cluster {
        return refuse(
            id,
            format!(
                "node `{}` is of cluster `{}`, this one of `{}`",
                asked.node, asked.cluster, shared.options.cluster
            ),
        );
    }
    let bots = shared
        .node()
        .map(|n| {
            n.bots()
                .into_iter()
                .filter(|b| b.spec.name != troupe_runtime::home::MAIN_AGENT)
                .map(|b| HostedBot {
                    name: b.spec.name.clone(),
                    id: b.id,
                    description: b.spec.description.clone(),
                })
                .collect()
        })
        .unwrap_or_default();
    let houses = match super::houses::local(shared).await {
        Ok(h) => h,
        Err(e) => return refuse(id, format!("this node could not read its houses ({e})")),
    };
    let me = Hello {
        cluster: shared.options.cluster.clone(),
        node: shared.options.node.clone(),
        listen: shared.listen.clone(),
        bots,
        houses,
        http: shared.houses.http_url(),
        kinds: super::kinds::local(shared),
    };
    wire::encode(kind::HELLO, id, &me).unwrap_or_else(|e| refuse(id, e.to_string()))
}

async fn houses(shared: &Shared, frame: &[u8], id: &str) -> Vec<u8> {
    let told: Houses = match wire::decode(frame, kind::HOUSES) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let Some(node) = shared.node() else {
        return refuse(id, "this node is stopping; send it again".into());
    };
    match shared
        .directory
        .set_houses(node.store(), &told.node, &told.houses, told.http)
        .await
    {
        Ok(()) => wire::encode(kind::ACK, id, &Ack { first: true }).unwrap_or_default(),
        Err(e) => refuse(
            id,
            format!("this node could not keep them ({e}); send them again"),
        ),
    }
}

async fn deliver(shared: &Shared, frame: &[u8], id: &str) -> Vec<u8> {
    let started = Instant::now();
    let delivery: Delivery = match wire::decode(frame, kind::ENVELOPE) {
        Ok(f) => f.body,
        Err(e) => return refuse(id, e.to_string()),
    };
    let Some(node) = shared.node() else {
        return refuse(id, "this node is stopping; send it again".into());
    };
    let envelope = delivery.envelope;
    let from_node = delivery.from_node;
    let (e, n) = (envelope.clone(), from_node.clone());
    let first = match node
        .store()
        .write(move |tx| table::receive(tx, &e, &n))
        .await
    {
        Ok(first) => first,
        Err(e) => {
            return refuse(
                id,
                format!("this node could not commit it ({e}); send it again"),
            )
        }
    };
    // Where the reply goes, before anything can reply.
    shared
        .directory
        .route(envelope.from.to_string(), from_node.clone());
    let ack = wire::encode(kind::ACK, id, &Ack { first }).unwrap_or_default();
    if first {
        tracing::debug!(id, from = %from_node, took = ?started.elapsed(), "committed a message from another node");
        tokio::spawn(async move {
            if let Err(e) = node.route(envelope).await {
                tracing::debug!(error = %e, "a message from another node waits to be handed over");
            }
        });
    }
    ack
}
