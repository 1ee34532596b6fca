//! Work a conversation leaves behind is supervised: a background review, a
//! routine run and a background command are actors under the tree, and a
//! panic in one is handled by its supervisor as docs/runtime-semantics.md
//! says (fault points, `troupe_runtime::fault`, make each panic).

use std::sync::Arc;

use chrono::{TimeDelta, TimeZone, Utc};
use serde_json::json;
use troupe::actors::routine::{table, RunStatus, VirtualClock};
use troupe::runtime::fault;
use troupe::runtime::id::RoutineId;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::tool::{Tool, ToolContext};
use troupe::AgentEvent;

use super::support::{ask, on_bus, TestHome, WAIT};

#[tokio::test]
async fn a_review_that_panics_frees_its_conversation_and_the_next_review_happens() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        if req.system.contains("# Background review") {
            return Turn::text("Nothing to keep.");
        }
        Turn::text("ok")
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let runtime = home
        .builder(model)
        .set("review.every_n_turns", "1")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let tree = runtime.tree().await;
    assert!(tree.iter().any(|a| a.id == "reviewer"), "{tree:?}");
    let bot = runtime.bot("assistant").await.unwrap();
    let main = bot.conversation();
    fault::arm(troupe::actors::review::FAULT, main.to_string());
    ask(&bot, "hi").await;
    let reason = on_bus(&mut events, |e| match &e.event {
        AgentEvent::ActorStopped { kind, reason, .. }
            if kind == "review" && e.conversation == main =>
        {
            Some(reason.clone())
        }
        _ => None,
    })
    .await;
    assert!(reason.contains("fault injected at `review`"), "{reason}");
    // The conversation is not left marked as being reviewed.
    ask(&bot, "hi again").await;
    let said = on_bus(&mut events, |e| match &e.event {
        AgentEvent::TurnFinished { text, .. } if e.conversation != main => Some(text.clone()),
        _ => None,
    })
    .await;
    assert_eq!(said, "Nothing to keep.");
    runtime.shutdown().await;
}

/// A tool context of the main agent's conversation, with the node's services.
fn context(runtime: &troupe::Runtime) -> ToolContext {
    let node = runtime.node();
    let bot = node.bot("assistant").unwrap();
    ToolContext {
        agent: "assistant".into(),
        bot: bot.id,
        kind: bot.spec.kind(),
        services: node.services().fork(),
        ..ToolContext::standalone(node.home().clone(), node.settings().cwd.clone())
    }
}

#[tokio::test]
async fn a_routine_run_that_panics_is_reported_failed_and_the_next_run_happens() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let last = req.last_user_text();
        Turn::text(if last.starts_with("[routine `") {
            "Sunny."
        } else {
            "noted"
        })
    }));
    let clock = Arc::new(VirtualClock::new(
        Utc.with_ymd_and_hms(2026, 3, 2, 8, 0, 0).unwrap(),
    ));
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let runtime = home
        .builder(model)
        .clock(Arc::clone(&clock) as _)
        .scheduler(true)
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let made = troupe::tools::cronjob_manage::cronjob_manage::tool()
        .call(
            json!({"action": "create", "name": "weather", "schedule": "every 30m", "prompt": "say it"}),
            &context(&runtime),
        )
        .await;
    let routine: RoutineId = made.data["id"].as_str().unwrap().parse().unwrap();
    let scheduler = runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    fault::arm(troupe::actors::routine::run::FAULT, routine.to_string());
    clock.advance(TimeDelta::minutes(30));
    assert_eq!(scheduler.tick().await.unwrap().claims.len(), 1);
    let end = tokio::time::timeout(WAIT, ends.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!((end.status, end.notified), (RunStatus::Failed, true));
    assert!(
        end.summary
            .starts_with("the run crashed: failed: fault injected at `routine_run`"),
        "{}",
        end.summary
    );
    let notice = on_bus(&mut events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "routine" => Some(text.clone()),
        _ => None,
    })
    .await;
    assert!(notice.starts_with("Routine `weather` failed"), "{notice}");
    assert!(notice.contains("the run crashed"), "{notice}");

    // The scheduler lives on: the next occurrence runs.
    clock.advance(TimeDelta::minutes(30));
    assert_eq!(scheduler.tick().await.unwrap().claims.len(), 1);
    let end = tokio::time::timeout(WAIT, ends.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (end.status, end.summary.as_str()),
        (RunStatus::Done, "Sunny.")
    );
    let runs = runtime
        .node()
        .store()
        .read(move |c| Ok(table::runs(c, routine, 10).unwrap()))
        .await
        .unwrap();
    let statuses: Vec<_> = runs.iter().map(|r| r.status).collect();
    assert_eq!(statuses, vec![RunStatus::Done, RunStatus::Failed]);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_background_command_whose_actor_panics_still_tells_its_conversation() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let last = req.last_user_text();
        if last.starts_with("[notice: command]") {
            return Turn::text(if last.contains("troupe lost track of it") {
                "Its watcher failed; it was ended."
            } else {
                "It ended normally."
            });
        }
        if req.last_tool_result().is_some() {
            return Turn::text("Started.");
        }
        if last == "serve" {
            return Turn::tool_call(
                "run_command",
                json!({"command": "sleep 30", "background": true}),
            );
        }
        Turn::tool_call(
            "run_command",
            json!({"command": "echo done", "background": true, "notify_on_complete": true}),
        )
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    // Sandboxed commands cannot see troupe's home: a folder of their own.
    let work = tempfile::tempdir().unwrap();
    let runtime = home
        .builder(model)
        .cwd(work.path())
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let conversation = bot.conversation();

    // A running command is in the tree, under its conversation.
    ask(&bot, "serve").await;
    let tree = runtime.tree().await;
    let command = tree
        .iter()
        .find(|a| a.kind == "command")
        .unwrap_or_else(|| panic!("no command in {tree:?}"));
    assert_eq!(command.parent, Some(conversation.to_string()));
    assert!(tree.iter().any(|a| a.id == "commands"), "{tree:?}");

    fault::arm(
        troupe::tools::run_command::background::FAULT,
        conversation.to_string(),
    );
    assert_eq!(ask(&bot, "run it").await.text, "Started.");
    let said = on_bus(&mut events, |e| match &e.event {
        AgentEvent::TurnFinished { text, .. }
            if e.conversation == conversation && text.starts_with("It") =>
        {
            Some(text.clone())
        }
        _ => None,
    })
    .await;
    assert_eq!(said, "Its watcher failed; it was ended.");
    runtime.shutdown().await;
}
