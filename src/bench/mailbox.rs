//! W1: round trips between two agents, through the actor mailbox alone and
//! through the durable path (the message committed before it is
//! acknowledged, consumed in the transaction that answers it).

use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use serde_json::json;
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_runtime::store::{mailbox, Store};

use super::percentiles;

/// B's messages: a ping to answer.
// An envelope goes by value, as actors pass it: boxing it here would add an
// allocation per message to what is measured.
#[allow(clippy::large_enum_variant)]
enum Echo {
    Ping(u64, RpcReplyPort<u64>),
    Mail(Envelope, RpcReplyPort<Result<Envelope, String>>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for Echo {}

struct EchoActor;

impl Actor for EchoActor {
    type Msg = Echo;
    type State = Option<Store>;
    type Arguments = Option<Store>;

    async fn pre_start(
        &self,
        _: ActorRef<Echo>,
        store: Option<Store>,
    ) -> Result<Self::State, ActorProcessingErr> {
        Ok(store)
    }

    async fn handle(
        &self,
        _: ActorRef<Echo>,
        msg: Echo,
        store: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            Echo::Ping(n, reply) => {
                let _ = reply.send(n + 1);
            }
            Echo::Mail(envelope, reply) => {
                let Some(store) = store.clone() else {
                    let _ = reply.send(Err("no store".into()));
                    return Ok(());
                };
                let answer = Envelope {
                    id: MsgId::new(),
                    from: envelope.to.clone(),
                    to: envelope.from.clone(),
                    body: Payload::Text {
                        sender: "b".into(),
                        text: "pong".into(),
                        expects_reply: false,
                    },
                    sent_at: chrono::Utc::now(),
                };
                let a = answer.clone();
                // Consume the ping and enqueue the reply in one transaction.
                let done = store
                    .write(move |tx| {
                        mailbox::consume(tx, envelope.id)?;
                        mailbox::enqueue(tx, &a)?;
                        Ok(())
                    })
                    .await;
                let _ = reply.send(done.map(|()| answer).map_err(|e| e.to_string()));
            }
        }
        Ok(())
    }
}

/// Through the mailbox alone. A is the benchmark's task (a task of the
/// runtime, see [`super::run`]), B an actor: two agents on the same workers.
pub async fn in_memory(n: usize) -> anyhow::Result<serde_json::Value> {
    let (b, handle) = Actor::spawn(None, EchoActor, None).await?;
    let mut samples = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n as u64 {
        let t = Instant::now();
        let answer = ractor::call!(b, Echo::Ping, i)?;
        samples.push(t.elapsed());
        anyhow::ensure!(answer == i + 1, "wrong answer");
    }
    let wall = started.elapsed();
    b.stop(None);
    handle.await?;
    Ok(json!({
        "workload": "w1", "path": "mailbox", "round_trips": n,
        "round_trips_per_s": (n as f64 / wall.as_secs_f64()).round(),
        "round_trip": percentiles(samples),
    }))
}

/// Through the durable path.
pub async fn durable(n: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let store = Store::open(&home.path().join("troupe.db"))?;
    let (b, handle) = Actor::spawn(None, EchoActor, Some(store.clone())).await?;
    let (a_addr, b_addr) = (
        Address::Conversation(ConversationId::new()),
        Address::Conversation(ConversationId::new()),
    );
    let mut samples: Vec<Duration> = Vec::with_capacity(n);
    let started = Instant::now();
    for i in 0..n {
        let t = Instant::now();
        let ping = Envelope {
            id: MsgId::new(),
            from: a_addr.clone(),
            to: b_addr.clone(),
            body: Payload::Text {
                sender: "a".into(),
                text: format!("ping {i}"),
                expects_reply: true,
            },
            sent_at: chrono::Utc::now(),
        };
        store.send(ping.clone()).await?;
        let answer = ractor::call!(b, Echo::Mail, ping)?.map_err(|e| anyhow::anyhow!(e))?;
        store
            .write(move |tx| mailbox::consume(tx, answer.id).map(|_| ()))
            .await?;
        samples.push(t.elapsed());
    }
    let wall = started.elapsed();
    b.stop(None);
    handle.await?;
    Ok(json!({
        "workload": "w1", "path": "durable", "round_trips": n,
        "round_trips_per_s": (n as f64 / wall.as_secs_f64()).round(),
        "round_trip": percentiles(samples),
    }))
}
