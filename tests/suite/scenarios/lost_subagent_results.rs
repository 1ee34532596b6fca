//! **Lost subagent results.** A parent delegates three tasks; while two of
//! its subagents are still working, the parent's own history is compacted
//! under a long message. When they finish, their reports reach the parent
//! once, in the order the tasks were given, and the parent's next turns see
//! them next to the summary. (The process killed while subagents finish is
//! `agents::a_crash_mid_delegation_still_reports_every_child_exactly_once`.)

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::runtime::store::conversations;
use troupe::AgentEvent;

use crate::suite::support::*;

fn first_user(req: &ModelRequest) -> &str {
    req.messages
        .iter()
        .find(|m| matches!(m, Message::User { .. }))
        .map(Message::text)
        .unwrap_or("")
}

fn last_user(req: &ModelRequest) -> &str {
    req.messages
        .iter()
        .rev()
        .find(|m| matches!(m, Message::User { .. }))
        .map(Message::text)
        .unwrap_or("")
}

/// Summaries, subagents that `hold` when their goal says so, and a parent
/// that delegates, then answers what it is told.
fn model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let first = first_user(req);
        if first.starts_with("Summarize this part") {
            return Turn::text("The user asked to split the survey into three tasks.");
        }
        if let Some(goal) = first.strip_prefix("Your task: ") {
            let goal = goal.lines().next().unwrap_or_default().to_string();
            if req.last_tool_result().is_some() {
                return Turn::text(format!("{goal}: finished after hold"));
            }
            if goal.starts_with("hold") {
                return Turn::tool_call("hold", json!({}));
            }
            return Turn::text(format!("{goal}: done"));
        }
        if req.last_tool_result().is_some() {
            return Turn::text("Delegated.");
        }
        let last = last_user(req);
        if last.starts_with("[notice: delegation]") {
            return Turn::text("All three reported.");
        }
        if last.starts_with("Some context") || last.starts_with("What did") {
            return Turn::text("Noted.");
        }
        Turn::tool_call(
            "delegate",
            json!({"tasks": [
                {"goal": "north0 count the birds"},
                {"goal": "hold1 measure the trees"},
                {"goal": "hold2 sample the pond"},
            ]}),
        )
    }))
}

#[tokio::test]
async fn reports_reach_a_compacted_parent_once_in_order_and_its_next_turn_sees_them() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let model = model();
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(hold.clone())
        .set("compaction.threshold", "0.01")
        .set("compaction.keep_recent_messages", "2")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let parent = bot.conversation();
    assert_eq!(ask(&bot, "Survey the park.").await.text, "Delegated.");
    tokio::time::timeout(WAIT, async {
        while *hold.calls.lock() < 2 {
            hold.entered.notified().await;
        }
    })
    .await
    .expect("both held subagents are inside their tool");

    // The parent's history is compacted while its subagents work.
    let mut turn = bot
        .send(format!("Some context: {}", "words ".repeat(1200)))
        .await
        .unwrap();
    wait_for(&mut turn, |e| {
        matches!(e, AgentEvent::Compacted { .. }).then_some(())
    })
    .await;
    assert_eq!(turn.result().await.unwrap().text, "Noted.");

    hold.release.notify_one();
    hold.release.notify_one();
    let report = on_bus(&mut events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "delegation" => {
            Some((e.conversation, text.clone()))
        }
        _ => None,
    })
    .await;
    assert_eq!(report.0, parent);
    let text = report.1;
    let at = |s: &str| {
        text.find(s)
            .unwrap_or_else(|| panic!("{s:?} is not in the report: {text}"))
    };
    assert!(
        at("north0 count the birds: done") < at("hold1 measure the trees: finished after hold")
            && at("hold1 measure the trees: finished after hold")
                < at("hold2 sample the pond: finished after hold"),
        "the reports are in the tasks' order: {text}"
    );
    on_bus(&mut events, |e| {
        (e.conversation == parent && matches!(e.event, AgentEvent::TurnFinished { .. }))
            .then_some(())
    })
    .await;

    // The turn on the notice saw the summary and the report.
    let on_notice = model
        .requests()
        .into_iter()
        .find(|r| last_user(r).starts_with("[notice: delegation]"))
        .expect("the parent's model was called on the report");
    let texts: Vec<&str> = on_notice.messages.iter().map(Message::text).collect();
    assert!(
        texts[0].starts_with("[Summary of the earlier part of this conversation]"),
        "{texts:?}"
    );
    // And the next turn still does, exactly once.
    assert_eq!(ask(&bot, "What did they find?").await.text, "Noted.");
    let next = model.requests().into_iter().rfind(super::is_turn).unwrap();
    let seen = next
        .messages
        .iter()
        .filter(|m| {
            m.text()
                .contains("hold2 sample the pond: finished after hold")
        })
        .count();
    assert_eq!(seen, 1, "{:?}", next.messages);
    check_invariants(&[next]);

    let stored = runtime
        .node()
        .store()
        .read(move |c| conversations::load_messages(c, parent))
        .await
        .unwrap()
        .into_iter()
        .filter(|m| m.message.text().starts_with("[notice: delegation]"))
        .count();
    assert_eq!(stored, 1, "the parent is told exactly once");
    runtime.shutdown().await;
}
