//! A routine: the main agent schedules a prompt for every weekday at 9, and
//! the scheduler fires it.
//!
//! `cronjob_manage` is a deferred tool: the model sees its name in
//! `tool_search`'s description, loads it with `tool_search`, and calls it from
//! the next step on. The scripted model does exactly that. The runtime runs
//! the scheduler (`RuntimeBuilder::scheduler(true)`) on a virtual clock
//! (`RuntimeBuilder::clock`), so the example moves time forward an hour and
//! asks the scheduler to look (`tick`) instead of waiting until 9 o'clock.
//! The routine's run is a conversation of its own; its end is printed.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example routine
//! ```

use std::sync::Arc;
use std::time::Duration;

use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::json;
use troupe::actors::routine::VirtualClock;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::{AgentEvent, Runtime};

/// Loads `cronjob_manage`, creates the routine, and answers the routine's
/// runs and notices.
fn model() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request| {
        let latest = request.messages.last().map(Message::text).unwrap_or("");
        match request.messages.last() {
            Some(Message::Tool { name, .. }) if name == "tool_search" => Turn::tool_call(
                "cronjob_manage",
                json!({
                    "action": "create",
                    "name": "morning-news",
                    "prompt": "Summarize the three most important tech news of the day in five lines.",
                    "schedule": "weekdays at 9am",
                }),
            ),
            Some(Message::Tool { result, .. }) => {
                Turn::text(format!("Done. The routine tool said: {}", result.text))
            }
            // A run of the routine: its prompt arrives as "[routine `morning-news` ...".
            _ if latest.starts_with("[routine `") => {
                Turn::text("1. A new Rust release. 2. A chip launch. 3. An outage post-mortem.")
            }
            // The owner is told how the run went.
            _ if latest.starts_with("[notice: routine]") => Turn::text("Noted."),
            _ => Turn::tool_call("tool_search", json!({"query": "cronjob_manage"})),
        }
    })
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    // Monday 2 March 2026, 08:00 UTC.
    let start = Utc
        .with_ymd_and_hms(2026, 3, 2, 8, 0, 0)
        .single()
        .ok_or_else(|| anyhow::anyhow!("a valid date"))?;
    let clock = Arc::new(VirtualClock::new(start));
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model()))
        .clock(clock.clone())
        .scheduler(true)
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
                let first = result.text.lines().next().unwrap_or_default();
                println!("← {name} ({mark}): {first}");
            }
            _ => {}
        }
    }
    let report = turn.result().await?;
    println!("answer: {}\n", report.text);

    // An hour later it is 9 o'clock: the routine is due.
    let scheduler = runtime
        .scheduler()
        .ok_or_else(|| anyhow::anyhow!("the scheduler runs: .scheduler(true)"))?;
    let mut ends = scheduler.subscribe();
    clock.advance(TimeDelta::hours(1));
    let due = scheduler.tick().await?;
    for claim in &due.claims {
        println!("fired `{}` for {}", claim.name, claim.scheduled_for);
    }
    if due.claims.is_empty() {
        println!("nothing was due");
    } else {
        let end = tokio::time::timeout(Duration::from_secs(10), ends.recv()).await??;
        println!(
            "run of `{}` ended {:?}: {}",
            end.name, end.status, end.summary
        );
    }

    runtime.shutdown().await;
    Ok(())
}
