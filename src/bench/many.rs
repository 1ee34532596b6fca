//! The many-agents workloads: parents delegating to subagents, and
//! `message_agent` deliveries between bots.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_actors::events::NodeEvent;
use troupe_actors::toolset::Narrowing;
use troupe_runtime::id::MsgId;
use troupe_runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe_runtime::protocol::{Address, AgentEvent, Envelope, Message, Payload};

use super::{peak_rss_bytes, percentiles, rss_bytes};
use crate::{BotSpec, Runtime};

/// Parents delegate `children` tasks each; subagents answer at once.
fn delegating(children: usize) -> ScriptedProvider {
    ScriptedProvider::from_fn(move |req: &ModelRequest| {
        if req.first_user_text().starts_with("Your task: ") {
            return Turn::text("done");
        }
        match req.messages.last() {
            Some(Message::Tool { .. }) => Turn::text("waiting"),
            Some(Message::User { content }) if content.starts_with("[notice: delegation]") => {
                Turn::text("reported")
            }
            _ => {
                let tasks: Vec<_> = (0..children)
                    .map(|i| json!({"goal": format!("task {i}")}))
                    .collect();
                Turn::tool_call("delegate", json!({ "tasks": tasks }))
            }
        }
    })
    .recording(false)
}

/// `parents` conversations each delegating `children` subagents, all at once:
/// the time until every parent has read its report.
pub async fn delegation(parents: usize, children: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let (bus, mut events) = tokio::sync::broadcast::channel::<NodeEvent>(1 << 20);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(delegating(children)))
        .event_bus(bus)
        .set(
            "delegation.max_concurrent_per_bot",
            (parents * children).to_string(),
        )
        .set(
            "delegation.max_concurrent_per_node",
            (parents * children).to_string(),
        )
        .build()
        .await?;
    let node = runtime.node().clone();
    let rss_before = rss_bytes();
    let mut ids = HashSet::new();
    for _ in 0..parents {
        ids.insert(
            node.new_conversation("assistant", Narrowing::default())
                .await?,
        );
    }
    let started = Instant::now();
    for id in &ids {
        node.send(*id, "split the work").await?;
    }
    let mut reported = 0;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while reported < parents {
        let event = tokio::time::timeout_at(deadline, events.recv()).await??;
        if let AgentEvent::TurnFinished { text, .. } = &event.event {
            if text == "reported" && ids.contains(&event.conversation) {
                reported += 1;
            }
        }
    }
    let wall = started.elapsed();
    let added = rss_bytes().saturating_sub(rss_before);
    runtime.shutdown().await;
    Ok(json!({
        "workload": "delegation", "parents": parents, "children_each": children,
        "wall_ms": (wall.as_secs_f64() * 1000.0).round(),
        "rss_added_mib": added as f64 / (1u64 << 20) as f64,
        "peak_rss_mib": peak_rss_bytes() / (1 << 20),
    }))
}

/// `n` durable messages to a bot, one at a time: from the send (committed)
/// to the target's turn starting on it.
pub async fn message(n: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let (bus, mut events) = tokio::sync::broadcast::channel::<NodeEvent>(1 << 16);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(
            ScriptedProvider::from_fn(|_| Turn::text("ok")).recording(false),
        ))
        .event_bus(bus)
        // The background review is separate work; this measures delivery.
        .set("review.enabled", "false")
        .build()
        .await?;
    let scout = runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Receives messages."))
        .await?;
    let main = runtime.bot("assistant").await?;
    let bot_id = runtime.node().bot("scout")?.id;
    let mut samples = Vec::with_capacity(n);
    for i in 0..n {
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Conversation(main.conversation()),
            to: Address::Bot(bot_id),
            body: Payload::Text {
                sender: "assistant".into(),
                text: format!("message {i}"),
                expects_reply: false,
            },
            sent_at: chrono::Utc::now(),
        };
        let t = Instant::now();
        runtime.node().deliver(envelope).await?;
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), events.recv()).await??;
            if e.conversation == scout.conversation()
                && matches!(e.event, AgentEvent::TurnStarted { .. })
            {
                break;
            }
        }
        samples.push(t.elapsed());
        loop {
            let e = tokio::time::timeout(Duration::from_secs(10), events.recv()).await??;
            if e.conversation == scout.conversation()
                && matches!(e.event, AgentEvent::TurnFinished { .. })
            {
                break;
            }
        }
    }
    runtime.shutdown().await;
    Ok(json!({"workload": "message", "messages": n, "delivery": percentiles(samples)}))
}
