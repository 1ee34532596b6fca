//! What happens while nobody talks to a conversation: it passivates and
//! comes back from the store, and a background command's end reaches it.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe::actors::events::NodeEvent;
use troupe::runtime::id::ConversationId;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::AgentEvent;

use super::support::{self, TestHome, WAIT};

/// Waits for the first bus event of `conversation` that `pick` accepts.
async fn on_bus<T>(
    bus: &mut tokio::sync::broadcast::Receiver<NodeEvent>,
    conversation: ConversationId,
    mut pick: impl FnMut(&AgentEvent) -> Option<T>,
) -> T {
    support::on_bus(bus, |e| {
        if e.conversation == conversation {
            pick(&e.event)
        } else {
            None
        }
    })
    .await
}

#[tokio::test]
async fn an_idle_conversation_passivates_and_comes_back_with_its_history() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let remembered = req.messages.iter().any(|m| m.text().contains("tangerine"));
        match req.last_user_text() {
            t if t.contains("which word") && remembered => Turn::text("It was tangerine."),
            t if t.contains("which word") => Turn::text("I do not know."),
            _ => Turn::text("Noted."),
        }
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let runtime = home
        .builder(model)
        .event_bus(bus)
        .settings(|s| s.passivate_after = Some(Duration::from_millis(30)))
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let conversation = bot.conversation();
    support::ask(&bot, "remember the word tangerine").await;
    on_bus(&mut events, conversation, |e| {
        matches!(e, AgentEvent::Passivated).then_some(())
    })
    .await;
    assert_eq!(runtime.node().live_conversations(), 0);

    let report = support::ask(&bot, "which word did I give you?").await;
    assert_eq!(report.text, "It was tangerine.");
    assert_eq!(runtime.node().live_conversations(), 1);
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_background_command_tells_its_conversation_when_it_ends() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let last = req.last_user_text();
        if last.starts_with("[notice: command]") {
            return Turn::text(if last.contains("marker-41") {
                "The command printed its marker."
            } else {
                "The command ended without its marker."
            });
        }
        if req.last_tool_result().is_some() {
            return Turn::text("Started it.");
        }
        Turn::tool_call(
            "run_command",
            json!({"command": "echo marker-41", "background": true, "notify_on_complete": true}),
        )
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    // Sandboxed commands cannot see troupe's home, so they are refused a
    // working folder inside it: they work in a folder of their own.
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
    let first = support::ask(&bot, "run it in the background").await;
    assert_eq!(first.text, "Started it.");
    let said = on_bus(&mut events, conversation, |e| match e {
        AgentEvent::TurnFinished { text, .. } if text.starts_with("The command") => {
            Some(text.clone())
        }
        _ => None,
    })
    .await;
    assert_eq!(said, "The command printed its marker.");
    runtime.shutdown().await;
}

#[tokio::test]
async fn messages_racing_a_passivation_are_all_answered() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let users = req
            .messages
            .iter()
            .filter(|m| matches!(m, troupe::runtime::protocol::Message::User { .. }))
            .count();
        Turn::text(format!("message {users}"))
    }));
    let runtime = home
        .builder(model)
        // Idle checks right after every turn: each next message races one.
        .settings(|s| s.passivate_after = Some(Duration::ZERO))
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    for n in 1..=40 {
        let report = tokio::time::timeout(WAIT, async {
            support::ask(&bot, format!("hello {n}")).await
        })
        .await
        .expect("every message is answered");
        assert_eq!(
            report.text,
            format!("message {n}"),
            "history kept across passivations"
        );
    }
    runtime.shutdown().await;
}

#[tokio::test]
async fn any_conversation_stops_a_background_command_by_its_id() {
    let home = TestHome::new();
    let command: Arc<parking_lot::Mutex<String>> = Arc::default();
    let wanted = Arc::clone(&command);
    let model = Arc::new(ScriptedProvider::from_fn(move |req: &ModelRequest| {
        if let Some((_, result)) = req.last_tool_result() {
            return Turn::text(result.text.clone());
        }
        if req.last_user_text() == "start" {
            return Turn::tool_call(
                "run_command",
                json!({"command": "sleep 30", "background": true}),
            );
        }
        Turn::tool_call("run_command", json!({"stop": wanted.lock().clone()}))
    }));
    // Sandboxed commands cannot see troupe's home, so they are refused a
    // working folder inside it: they work in a folder of their own.
    let work = tempfile::tempdir().unwrap();
    let runtime = home.builder(model).cwd(work.path()).build().await.unwrap();
    let first = runtime.bot("assistant").await.unwrap();
    let started = support::ask(&first, "start").await;
    let at = started
        .text
        .find("cmd_")
        .unwrap_or_else(|| panic!("the start names the command: {}", started.text));
    let id: String = started.text[at..]
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    *command.lock() = id.clone();

    // Another conversation stops it by its id.
    let second = first.new_conversation().await.unwrap();
    assert_ne!(second.conversation(), first.conversation());
    let stopped = support::ask(&second, "stop it").await;
    assert!(
        stopped.text.starts_with(&format!("Stopped `{id}`")),
        "{}",
        stopped.text
    );
    runtime.shutdown().await;
}
