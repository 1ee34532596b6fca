//! A routine: the main agent schedules a prompt to run every weekday morning.
//!
//! `cronjob_manage` is a deferred tool: the model sees its name in
//! `tool_search`'s description, loads it with `tool_search`, and calls it from
//! the next step on. The scripted model does exactly that, then repeats what
//! the tool answered. The example prints every tool call and its result, and
//! the routines the tool lists afterwards.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example routine
//! ```

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::{AgentEvent, Runtime};

/// Loads `cronjob_manage`, creates the routine, lists the routines, answers.
fn model() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request| match request.messages.last() {
        Some(Message::Tool { name, .. }) if name == "tool_search" => Turn::tool_call(
            "cronjob_manage",
            json!({
                "action": "create",
                "name": "morning-news",
                "prompt": "Summarize the three most important tech news of the day in five lines.",
                "schedule": "weekdays at 9am",
            }),
        ),
        Some(Message::Tool { name, .. }) if name == "cronjob_manage" && !listed(request) => {
            Turn::tool_call("cronjob_manage", json!({"action": "list"}))
        }
        Some(Message::Tool { result, .. }) => {
            Turn::text(format!("Done. The routine tool said: {}", result.text))
        }
        _ => Turn::tool_call("tool_search", json!({"query": "cronjob_manage"})),
    })
}

/// Whether the model already asked for the list.
fn listed(request: &troupe::runtime::model::ModelRequest) -> bool {
    request.messages.iter().any(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls
            .iter()
            .any(|c| c.name == "cronjob_manage" && c.arguments["action"] == "list"),
        _ => false,
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model()))
        .build()
        .await?;

    let bot = runtime.bot("assistant").await?;
    let mut turn = bot
        .send("Every weekday at 9, summarize the tech news for me.")
        .await?;
    while let Some(event) = turn.next_event().await {
        match event {
            AgentEvent::ToolCallStarted { call } => println!("→ {} {}", call.name, call.arguments),
            AgentEvent::ToolCallFinished { name, result, .. } => {
                let mark = if result.is_error() { "error" } else { "ok" };
                println!("← {name} ({mark}): {}", result.text);
            }
            AgentEvent::TurnFinished { .. } => break,
            _ => {}
        }
    }
    let report = turn.result().await?;
    println!("outcome: {:?}", report.outcome);
    println!("answer: {}", report.text);

    runtime.shutdown().await;
    Ok(())
}
