//! A carried tool's state outlives a compaction durably: the plan's open
//! items are still the plan's in a new process after a compaction
//! summarized its last result away.

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::Turn;
use troupe::AgentEvent;

use super::support::{ask, script, wait_for, TestHome};

#[tokio::test]
async fn the_plan_survives_a_compaction_and_a_new_process() {
    let home = TestHome::new();
    let todos = json!({"todos": [
        {"id": "1", "content": "Draft the report", "status": "completed"},
        {"id": "2", "content": "Check the figures", "status": "in_progress"},
        {"id": "3", "content": "Send it to Ada", "status": "pending"},
    ]});
    let model = script(vec![
        Turn::tool_call("tool_search", json!({"query": "plan"})),
        Turn::tool_call("plan", todos),
        Turn::text("Plan made."),
        Turn::text("We are writing a report; the plan was made.").expecting("Summarize this part"),
        Turn::text("Noted."),
    ]);
    let build = |model| {
        home.builder(model)
            .set("compaction.threshold", "0.01")
            .set("compaction.keep_recent_messages", "2")
    };
    let runtime = build(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "Plan the report.").await;
    let mut turn = bot
        .send(format!("Some context: {}", "words ".repeat(1200)))
        .await
        .unwrap();
    wait_for(&mut turn, |e| {
        matches!(e, AgentEvent::Compacted { .. }).then_some(())
    })
    .await;
    assert_eq!(turn.result().await.unwrap().text, "Noted.");
    // The request after the compaction: the summary, the kept tail, then a
    // re-read of the plan with its open items.
    let after = model.requests().last().unwrap().clone();
    let (name, result) = after.last_tool_result().unwrap();
    assert_eq!(name, "plan");
    assert!(
        result.text.contains("[>] 2: Check the figures")
            && result.text.contains("[ ] 3: Send it to Ada"),
        "{}",
        result.text
    );
    runtime.shutdown().await;

    // A new process: the plan is rebuilt from the stored history.
    let again = script(vec![
        Turn::tool_call("tool_search", json!({"query": "plan"})),
        Turn::tool_call("plan", json!({})),
        Turn::text("Still checking the figures.").expecting("Check the figures"),
    ]);
    let runtime = home.builder(Arc::clone(&again)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "Where are we?").await;
    assert_eq!(report.text, "Still checking the figures.", "{report:?}");
    let read = again.requests().last().unwrap().clone();
    let (_, result) = read.last_tool_result().unwrap();
    assert!(
        !result.text.contains("The plan is empty"),
        "{}",
        result.text
    );
    assert!(
        result.text.contains("1 in progress, 1 pending"),
        "{}",
        result.text
    );
    runtime.shutdown().await;
}
