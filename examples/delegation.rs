//! Delegation: the main agent hands three tasks to subagents that run in
//! parallel, and gets their reports back together in one message.
//!
//! The model is a function of the request (`ScriptedProvider::from_fn`): a
//! subagent's first user message starts with "Your task: ", so it answers its
//! goal; the main agent calls `delegate` when asked, and answers once the
//! "[notice: delegation]" message with the reports arrives. The example
//! subscribes to every conversation's events with `RuntimeBuilder::event_bus`
//! and waits for the delegation notice, then for the main agent's answer.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example delegation
//! ```

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe::actors::events::NodeEvent;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::{AgentEvent, Runtime};

/// The text of the first (or last) user message of a request.
fn user_message(request: &ModelRequest, last: bool) -> String {
    let mut users = request.messages.iter().filter_map(|m| match m {
        Message::User { content } => Some(content.clone()),
        _ => None,
    });
    let found = if last {
        users.next_back()
    } else {
        users.next()
    };
    found.unwrap_or_default()
}

/// One model for the main agent and its subagents, answering by the request.
fn model() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request| {
        // A subagent: do the task.
        if let Some(goal) = user_message(request, false).strip_prefix("Your task: ") {
            let goal = goal.lines().next().unwrap_or_default();
            return Turn::text(format!("{goal}: checked, nothing wrong found."));
        }
        // The main agent, after its delegate call returned: wait for the reports.
        if let Some(Message::Tool { name, .. }) = request.messages.last() {
            return Turn::text(format!(
                "{name} started; I will report when the subagents are done."
            ));
        }
        // The main agent, once the reports are in.
        if user_message(request, true).starts_with("[notice: delegation]") {
            return Turn::text("All three parts are checked: nothing wrong anywhere.");
        }
        // The main agent, asked to do the work: split it.
        let tasks: Vec<_> = ["the parser", "the scheduler", "the store"]
            .iter()
            .map(|part| json!({"goal": format!("Review {part}"), "context": "A code review."}))
            .collect();
        Turn::tool_call("delegate", json!({ "tasks": tasks }))
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let (bus, mut events) = tokio::sync::broadcast::channel::<NodeEvent>(1024);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model()))
        .event_bus(bus)
        .build()
        .await?;

    let bot = runtime.bot("assistant").await?;
    let first = bot
        .send("Review the parser, the scheduler and the store.")
        .await?;
    let report = first.result().await?;
    println!("first turn: {}", report.text);

    // The subagents run on; their reports come back as one notice, which
    // starts a new turn of the main agent.
    let wait = async {
        let mut notice = None;
        loop {
            let NodeEvent {
                conversation,
                event,
                ..
            } = events.recv().await?;
            if conversation != bot.conversation() {
                continue;
            }
            match event {
                AgentEvent::Notice { topic, text } if topic == "delegation" => notice = Some(text),
                AgentEvent::TurnFinished { text, .. } if notice.is_some() => {
                    return anyhow::Ok((notice.unwrap_or_default(), text));
                }
                _ => {}
            }
        }
    };
    let (notice, answer) = tokio::time::timeout(Duration::from_secs(10), wait).await??;
    println!("\ndelegation report:\n{notice}");
    println!("\nfinal answer: {answer}");

    runtime.shutdown().await;
    Ok(())
}
