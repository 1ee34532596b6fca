//! **Compaction amnesia.** A long task with a plan, a loaded skill and files
//! read is compacted again and again, the process stops, and it goes on in
//! a new one, where it is compacted once more. At every step the model
//! still has in front of it the plan with its open items, the skill's
//! instructions, and the latest results (verbatim, or in the summary the
//! model was given them to write), each carried state once. (A plan alone across one
//! compaction and a restart: `carried::the_plan_survives_a_compaction_and_a_new_process`;
//! the tail kept verbatim: `turn_loop::a_long_history_is_compacted_with_the_tail_kept_verbatim`.)

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::AgentEvent;

use super::is_turn;
use crate::suite::support::*;

const SKILL_BODY: &str = "Boil the water, then steep four minutes.";

fn last_user(req: &ModelRequest) -> &str {
    req.messages
        .iter()
        .rev()
        .find(|m| matches!(m, Message::User { .. }))
        .map(Message::text)
        .unwrap_or("")
}

/// The task, step by step, whatever was compacted.
fn model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let first = req.messages.first().map(Message::text).unwrap_or("");
        if first.starts_with("Summarize this part") {
            // A summary keeps the figures it was shown, as a model would.
            let mut summary = String::from("We are writing the tea report for Ada.");
            if first.contains("total 42") {
                summary.push_str(" The figures add up to total 42.");
            }
            return Turn::text(summary);
        }
        // A compaction puts the plan back as a call of its own at the end:
        // that is no answer to a call of this step.
        let carried = matches!(
            req.messages.last(),
            Some(Message::Tool { call_id, .. }) if call_id.starts_with("carried_")
        );
        if let Some((name, result)) = req.last_tool_result().filter(|_| !carried) {
            return match name {
                // `plan` is deferred: found first.
                "use_skill" => Turn::tool_call("tool_search", json!({"query": "plan"})),
                "tool_search" => Turn::tool_call(
                    "plan",
                    json!({"todos": [
                        {"id": "1", "content": "Draft the report", "status": "completed"},
                        {"id": "2", "content": "Check the figures", "status": "in_progress"},
                        {"id": "3", "content": "Send it to Ada", "status": "pending"},
                    ]}),
                ),
                "plan" => Turn::tool_call("read_file", json!({"path": "notes.txt"})),
                "read_file" if result.text.contains("total 42") => Turn::text("Figures read."),
                _ => Turn::text("Plan made."),
            };
        }
        match last_user(req) {
            "Start the report." => Turn::tool_call("use_skill", json!({"name": "brew"})),
            "Check the figures." => Turn::tool_call("read_file", json!({"path": "figures.txt"})),
            _ => Turn::text("Noted."),
        }
    }))
}

/// What the model must see in `req`: the plan's open items, the skill, the
/// figures read last.
fn assert_remembers(req: &ModelRequest, when: &str) {
    let all: String = req
        .messages
        .iter()
        .map(Message::text)
        .collect::<Vec<_>>()
        .join("\n");
    for needed in [
        "[>] 2: Check the figures",
        "[ ] 3: Send it to Ada",
        SKILL_BODY,
        "total 42",
    ] {
        assert!(all.contains(needed), "{when}: {needed:?} is gone:\n{all}");
    }
    // Each carried tool's state comes back once, not once per compaction.
    for tool in ["plan", "use_skill"] {
        let carried = req
            .messages
            .iter()
            .filter(|m| {
                matches!(m, Message::Tool { call_id, name, .. }
                    if call_id.starts_with("carried_") && name == tool)
            })
            .count();
        assert!(carried <= 1, "{when}: `{tool}` carried {carried} times");
    }
    check_invariants(std::slice::from_ref(req));
}

/// The latest request of the conversation's own steps.
fn last_turn(model: &ScriptedProvider) -> ModelRequest {
    model.requests().into_iter().rfind(is_turn).unwrap()
}

async fn compacted(bot: &troupe::Bot, text: String) {
    let mut turn = bot.send(text).await.unwrap();
    wait_for(&mut turn, |e| {
        matches!(e, AgentEvent::Compacted { .. }).then_some(())
    })
    .await;
    assert_eq!(turn.result().await.unwrap().text, "Noted.");
}

#[tokio::test]
async fn plan_skill_and_last_results_survive_two_compactions_and_a_restart() {
    let home = TestHome::new();
    let skill = home.path().join("skills/brew");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        format!("---\nname: brew\ndescription: Makes tea\n---\n{SKILL_BODY}\n"),
    )
    .unwrap();
    std::fs::write(home.path().join("notes.txt"), "Ada wants it by Friday.\n").unwrap();
    std::fs::write(
        home.path().join("figures.txt"),
        "cups: 40\nspilt: 2\ntotal 42\n",
    )
    .unwrap();
    let build = |model| {
        home.builder(model)
            .set("compaction.threshold", "0.01")
            .set("compaction.keep_recent_messages", "4")
            .build()
    };
    let long = |n: usize| format!("Some context {n}: {}", "words ".repeat(1200));

    let model = model();
    let runtime = build(Arc::clone(&model)).await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    assert_eq!(ask(&bot, "Start the report.").await.text, "Plan made.");
    compacted(&bot, long(1)).await;
    assert_eq!(ask(&bot, "Check the figures.").await.text, "Figures read.");
    compacted(&bot, long(2)).await;
    assert_remembers(&last_turn(&model), "after the second compaction");
    runtime.shutdown().await;
    drop(runtime);

    // A new process: first as it was stored, then compacted once more.
    let model = self::model();
    let runtime = build(Arc::clone(&model)).await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    assert_eq!(ask(&bot, "Where are we?").await.text, "Noted.");
    let first = model.requests().into_iter().find(is_turn).unwrap();
    assert_remembers(&first, "after the restart");
    compacted(&bot, long(3)).await;
    assert_remembers(&last_turn(&model), "after a compaction in the new process");
    runtime.shutdown().await;
}
