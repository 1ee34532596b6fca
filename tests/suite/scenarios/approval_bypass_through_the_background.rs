//! **Approval bypass through the background.** One action that needs the
//! user's approval (`rm -rf` of a folder) is tried from places the user does
//! not watch: a background command of the main conversation, a subagent,
//! and a routine run. The background command is asked like any other and
//! denied; the subagent and the routine run, where nobody can answer, are
//! refused saying so; none is approved by being out of sight, and every
//! folder is still there. (An untrusted MCP server's tool is asked in
//! `mcp::an_untrusted_server_asks_even_in_auto_mode_but_not_for_read_only_tools`;
//! an executor's harness runs only inside its sandbox,
//! `executors::pi_writes_a_file_in_the_task_folder_and_reports_once`.)

use std::sync::Arc;

use serde_json::json;
use troupe::actors::routine::{RunStatus, VirtualClock};
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::{AgentEvent, TurnOutcome};

use crate::suite::routines::{context, create, next_end, start, tool};
use crate::suite::support::*;

fn rm(folder: &str, background: bool) -> Turn {
    Turn::tool_call(
        "run_command",
        json!({"command": format!("rm -rf ./{folder} && echo removed"), "background": background}),
    )
}

/// Each kind of run removes its own folder, then says what it was told.
fn model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let first = req.messages.first().map(Message::text).unwrap_or("");
        let last = req.messages.last().map(Message::text).unwrap_or("");
        if let Some((name, result)) = req.last_tool_result() {
            return Turn::text(format!("{name}: {}", result.text));
        }
        if first.starts_with("Your task: ") {
            return rm("by_subagent", false);
        }
        if first.starts_with("[routine `") {
            return rm("by_routine", false);
        }
        if last.starts_with("[notice:") {
            return Turn::text("noted");
        }
        if last.contains("delegate") {
            return Turn::tool_call("delegate", json!({"tasks": [{"goal": "clean up"}]}));
        }
        rm("by_background", true)
    }))
}

#[tokio::test]
async fn background_commands_subagents_and_routine_runs_never_skip_the_approval() {
    let home = TestHome::new();
    let work = tempfile::tempdir().unwrap();
    let folders = ["by_background", "by_subagent", "by_routine"];
    for folder in folders {
        std::fs::create_dir_all(work.path().join(folder)).unwrap();
    }
    let clock = Arc::new(VirtualClock::new(start()));
    let (bus, first_events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(model())
        .cwd(work.path())
        .clock(clock as _)
        .scheduler(true)
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();

    // A background command is asked like a foreground one.
    let mut turn = bot.send("clean up in the background").await.unwrap();
    let id = wait_for(&mut turn, |e| match e {
        AgentEvent::ApprovalRequested { request_id, .. } => Some(request_id.clone()),
        _ => None,
    })
    .await;
    assert!(runtime.node().answer(&id, Some(json!("deny"))));
    let report = turn.result().await.unwrap();
    assert_eq!(report.outcome, TurnOutcome::Finished, "{report:?}");
    assert!(report.text.contains("the user refused it"), "{report:?}");

    // A subagent cannot be asked: it is refused, and says why.
    let mut events = first_events.resubscribe();
    let mut turn = bot.send("delegate the clean-up").await.unwrap();
    let asked = wait_for(&mut turn, |e| match e {
        AgentEvent::ApprovalRequested { .. } => Some(true),
        AgentEvent::TurnFinished { .. } => Some(false),
        _ => None,
    })
    .await;
    assert!(!asked, "the parent was asked for its own delegate call");
    let report = on_bus(&mut events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "delegation" => Some(text.clone()),
        AgentEvent::ApprovalRequested { .. } => panic!("a subagent asked nobody: {e:?}"),
        _ => None,
    })
    .await;
    assert!(
        report.contains("this run is unattended (a routine or a subagent), so it is refused"),
        "{report}"
    );

    // A routine run neither.
    let ctx = context(&runtime, "assistant");
    tool(&ctx, create("tidy", "every day at 18:30", "tidy up")).await;
    let scheduler = runtime.scheduler().unwrap();
    let mut ends = scheduler.subscribe();
    let ran = tool(&ctx, json!({"action": "run", "job_id": "tidy"})).await;
    assert!(!ran.is_error(), "{}", ran.text);
    let end = next_end(&mut ends).await;
    assert_eq!(end.status, RunStatus::Done, "{end:?}");
    assert!(
        end.summary
            .contains("this run is unattended (a routine or a subagent), so it is refused"),
        "{end:?}"
    );

    for folder in folders {
        assert!(work.path().join(folder).exists(), "{folder} was removed");
    }
    runtime.shutdown().await;
}
