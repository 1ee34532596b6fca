//! A program's own actor kind (`Runtime::register`): what its sends and
//! its activation cost.
//!
//! One kind, a counter whose state is a number. Measured, each one at a
//! time: an in-memory send (`Runtime::send`: the kind's lookup, the
//! router's slot, the mailbox push) and a call's round trip to a live
//! actor; a durable send (`Runtime::send_durable`: committed before it
//! returns); and the activation of a stored actor — `n` keys saved, then
//! passivated, then each called once (its state and waiting messages read
//! in one trip to a reader, its actor spawned, the call answered) against
//! the same call to a live actor.

use std::time::{Duration, Instant};

use serde_json::json;
use troupe_actors::kinds::{ActorError, Context, KindOptions, UserActor};

use super::percentiles;
use crate::Runtime;

/// A counter.
pub(super) struct Counter;

#[async_trait::async_trait]
impl UserActor for Counter {
    type Msg = u64;
    type Reply = u64;
    type State = u64;

    async fn handle(&self, cx: &mut Context<'_, Self>, add: u64) -> Result<u64, ActorError> {
        *cx.state_mut() += add;
        // Saved only when asked with 0 (the activation's set-up).
        if add == 0 {
            cx.save();
        }
        Ok(*cx.state())
    }
}

/// Runs the workload: `n` sends of each kind, `n / 100` stored actors
/// activated (100 to 300).
pub async fn actors(n: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(std::sync::Arc::new(
            troupe_runtime::model::ScriptedProvider::new(vec![]),
        ))
        .set("review.enabled", "false")
        .build()
        .await?;
    let counters = runtime
        .register_with(
            "counter",
            KindOptions::default().idle_after(None),
            |_: &str| Counter,
        )
        .await?;
    let live = counters.address("live");
    runtime.call(&live, 0).await?;

    let mut send = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        runtime.send(&live, 1)?;
        send.push(start.elapsed());
    }
    let counted = runtime.call(&live, 0).await?;
    anyhow::ensure!(
        counted == n as u64,
        "the counter saw {counted} of {n} sends"
    );

    let mut call = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        runtime.call(&live, 1).await?;
        call.push(start.elapsed());
    }

    let mut durable = Vec::with_capacity(n);
    for _ in 0..n {
        let start = Instant::now();
        runtime.send_durable(&live, 1).await?;
        durable.push(start.elapsed());
    }
    // Every durable message applied (the actor takes them in order).
    let total = runtime.call(&live, 0).await?;
    anyhow::ensure!(total == 3 * n as u64, "{total} of {} applied", 3 * n);

    // Each passivation is three events on the bus, read after the last.
    let stored = (n / 100).clamp(100, 300);
    let keys: Vec<_> = (0..stored)
        .map(|i| counters.address(format!("k{i}")))
        .collect();
    for key in &keys {
        runtime.call(key, 0).await?;
    }
    let mut events = runtime.node().subscribe();
    for key in &keys {
        anyhow::ensure!(
            counters.passivate(key.key()).await,
            "{key} did not passivate"
        );
    }
    wait_passivated(&mut events, stored).await?;
    let mut activation = Vec::with_capacity(stored);
    for key in &keys {
        let start = Instant::now();
        runtime.call(key, 0).await?;
        activation.push(start.elapsed());
    }
    runtime.shutdown().await;
    Ok(json!({
        "workload": "actors",
        "n": n,
        "send_in_memory": percentiles(send),
        "call_round_trip": percentiles(call),
        "send_durable": percentiles(durable),
        "stored_activated": stored,
        "activation_with_call": percentiles(activation),
    }))
}

/// Waits for `stored` passivations of the kind's actors on the node's bus.
async fn wait_passivated(
    events: &mut tokio::sync::broadcast::Receiver<troupe_actors::events::NodeEvent>,
    stored: usize,
) -> anyhow::Result<()> {
    let mut seen = 0;
    tokio::time::timeout(Duration::from_secs(60), async {
        while seen < stored {
            match events.recv().await {
                Ok(event) => {
                    if let troupe_runtime::protocol::AgentEvent::ActorStopped { reason, .. } =
                        &event.event
                    {
                        if reason == "passivated" {
                            seen += 1;
                        }
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {
                    anyhow::bail!("the bus dropped events; run with a smaller --n")
                }
                Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                    anyhow::bail!("the bus closed")
                }
            }
        }
        Ok(())
    })
    .await
    .map_err(|_| anyhow::anyhow!("{seen} of {stored} actors passivated within 60 s"))?
}
