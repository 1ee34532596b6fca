//! The background review: after a turn it keeps what is worth keeping
//! through a gate that lets only the review tools through; there a memory
//! replace or remove becomes a proposal the user approves, from the API and
//! from `troupe proposals`.

use std::process::Command;
use std::sync::Arc;

use serde_json::json;
use troupe::actors::events::NodeEvent;
use troupe::runtime::id::ConversationId;
use troupe::runtime::model::{ModelRequest, ScriptedCall, ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::runtime::store::{conversations, usage};
use troupe::AgentEvent;

use super::support::{ask, on_bus, TestHome};

fn is_review(req: &ModelRequest) -> bool {
    req.system.contains("# Background review")
}

fn call(name: &str, arguments: serde_json::Value) -> ScriptedCall {
    ScriptedCall {
        name: name.into(),
        arguments,
        id: None,
    }
}

/// The conversation answers in text, saving to memory first when
/// `saves_memory`; its review saves a fact, proposes a change, and tries
/// a tool it may not use.
fn model(saves_memory: bool) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(move |req: &ModelRequest| {
        let answered = req.last_tool_result().is_some();
        if is_review(req) {
            if answered {
                return Turn::text("Kept that the user works in Rust; proposed tea.");
            }
            return Turn {
                tool_calls: vec![
                    call(
                        "memory",
                        json!({"target": "user", "operations": [
                            {"action": "add", "content": "Works in Rust"},
                            {"action": "replace", "old_text": "coffee", "content": "Prefers tea"},
                        ]}),
                    ),
                    call("run_command", json!({"command": "echo escaped"})),
                ],
                ..Turn::default()
            };
        }
        if saves_memory && !answered {
            return Turn::tool_call(
                "memory",
                json!({"target": "memory", "action": "add", "content": "Uses nextest"}),
            );
        }
        Turn::text("Tea from now on, noted.")
    }))
}

/// Waits for the end of a review's turn: one on a conversation other than `main`.
async fn review_finished(
    bus: &mut tokio::sync::broadcast::Receiver<NodeEvent>,
    main: ConversationId,
) -> ConversationId {
    on_bus(bus, |e| {
        (e.conversation != main && matches!(e.event, AgentEvent::TurnFinished { .. }))
            .then_some(e.conversation)
    })
    .await
}

#[tokio::test]
async fn a_review_keeps_facts_and_proposes_what_it_would_take_away() {
    let home = TestHome::new();
    let profile = home.path().join("memory").join("USER.md");
    std::fs::create_dir_all(profile.parent().unwrap()).unwrap();
    std::fs::write(&profile, "Prefers coffee\n").unwrap();
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let runtime = home
        .builder(model(false))
        .set("review.every_n_turns", "1")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "I switched from coffee to tea. I work in Rust.").await;
    assert_eq!(report.text, "Tea from now on, noted.");
    let review = review_finished(&mut events, bot.conversation()).await;

    // The add landed; the replace waits for the user.
    assert_eq!(
        std::fs::read_to_string(&profile).unwrap(),
        "Prefers coffee\n§\nWorks in Rust\n"
    );
    let pending = runtime.proposals(true).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(
        pending[0].summary,
        "user memory: replace the entry containing \"coffee\" with \"Prefers tea\""
    );

    // The review's gate refused the command; the review is a child of the
    // conversation and never its latest.
    let store = runtime.node().store().clone();
    let history = store
        .read(move |c| conversations::load_messages(c, review))
        .await
        .unwrap();
    let refused = history
        .iter()
        .find_map(|m| match &m.message {
            Message::Tool { name, result, .. } if name == "run_command" => Some(result.clone()),
            _ => None,
        })
        .expect("the command got a result");
    assert!(refused.is_error());
    assert!(
        refused
            .text
            .starts_with("a background review may call only use_skill, read_file, find_files, skill_manage, memory; `run_command` did not run"),
        "{}",
        refused.text
    );
    let row = store
        .read(move |c| conversations::get_conversation(c, review))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.kind, "review");
    assert_eq!(row.parent, Some(bot.conversation()));
    assert_eq!(
        runtime.bot("assistant").await.unwrap().conversation(),
        bot.conversation()
    );

    // Its model calls are counted with the bot's: one for the turn, two for the review.
    let days = store.read(usage::by_bot_and_day).await.unwrap();
    let calls: i64 = days.iter().map(|d| d.total.calls as i64).sum();
    assert_eq!(calls, 3);

    runtime.shutdown().await;
    drop(runtime);

    // The user decides from the command line.
    let troupe = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_troupe"))
            .arg("--home")
            .arg(home.path())
            .args(args)
            .env_remove("TROUPE_HOME")
            .output()
            .unwrap()
    };
    let listed = troupe(&["proposals"]);
    let out = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{out}");
    assert!(
        out.contains("#1    pending   assistant    user memory: replace"),
        "{out}"
    );
    let approved = troupe(&["proposals", "approve", "1"]);
    assert!(
        approved.status.success(),
        "{}",
        String::from_utf8_lossy(&approved.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&profile).unwrap(),
        "Prefers tea\n§\nWorks in Rust\n"
    );
    let again = troupe(&["proposals", "approve", "1"]);
    assert!(!again.status.success());
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("proposal #1 was approved already"),
        "{}",
        String::from_utf8_lossy(&again.stderr)
    );
    let none = troupe(&["proposals"]);
    assert!(String::from_utf8_lossy(&none.stdout).starts_with("no pending proposals"));
}

#[tokio::test]
async fn memory_is_not_due_when_the_conversation_saved_to_it() {
    let home = TestHome::new();
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let runtime = home
        .builder(model(true))
        .set("review.every_n_turns", "1")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "remember we use nextest").await;
    let review = review_finished(&mut events, bot.conversation()).await;
    let store = runtime.node().store().clone();
    let history = store
        .read(move |c| conversations::load_messages(c, review))
        .await
        .unwrap();
    let memory = history
        .iter()
        .find_map(|m| match &m.message {
            Message::Tool { name, result, .. } if name == "memory" => Some(result.clone()),
            _ => None,
        })
        .expect("the review's memory call got a result");
    assert!(memory.is_error());
    assert!(
        memory.text.contains("the memory is not due"),
        "{}",
        memory.text
    );
    assert!(!home.path().join("memory").join("USER.md").exists());
    assert!(runtime.proposals(false).await.unwrap().is_empty());
    runtime.shutdown().await;
}

#[tokio::test]
async fn reviews_follow_their_cadence_across_processes() {
    let home = TestHome::new();
    let start = |bus| {
        home.builder(model(false))
            .set("review.every_n_turns", "3")
            .event_bus(bus)
            .build()
    };
    // Two turns in one process, then it stops.
    let (bus, _) = tokio::sync::broadcast::channel(1024);
    let first = start(bus).await.unwrap();
    let bot = first.bot("assistant").await.unwrap();
    for _ in 0..2 {
        ask(&bot, "hi").await;
    }
    first.shutdown().await;
    drop(first);
    // The third turn, in the next process, makes the review due.
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let second = start(bus).await.unwrap();
    let bot = second.bot("assistant").await.unwrap();
    for _ in 0..2 {
        ask(&bot, "hi").await;
    }
    review_finished(&mut events, bot.conversation()).await;
    second.shutdown().await;
    let rows = second
        .node()
        .store()
        .read(|c| conversations::list_conversations(c, None, 100))
        .await
        .unwrap();
    let reviews = rows.iter().filter(|r| r.kind == "review").count();
    assert_eq!(
        reviews, 1,
        "one review after the third turn, none after the others"
    );
}

#[tokio::test]
async fn a_review_runs_once_a_restart_closes_it_and_reopening_it_is_refused() {
    let home = TestHome::new();
    let start = |bus| {
        home.builder(model(false))
            .set("review.every_n_turns", "1")
            .event_bus(bus)
            .build()
    };
    let (bus, mut events) = tokio::sync::broadcast::channel(1024);
    let first = start(bus).await.unwrap();
    let bot = first.bot("assistant").await.unwrap();
    ask(&bot, "hi").await;
    let review = review_finished(&mut events, bot.conversation()).await;
    first.shutdown().await;
    drop(first);
    // As if the process had died in the middle of the review's turn.
    let key = format!("open_turn:{review}");
    let mark = key.clone();
    let store = troupe::runtime::store::Store::open(&home.path().join("troupe.db")).unwrap();
    store
        .write(move |tx| {
            tx.execute(
                "INSERT OR REPLACE INTO kv (key, value) VALUES (?1, '{}')",
                [&mark],
            )?;
            Ok(())
        })
        .await
        .unwrap();
    drop(store);

    let (bus, _events) = tokio::sync::broadcast::channel(1024);
    let second = start(bus).await.unwrap();
    let still_open: Option<String> = second
        .node()
        .store()
        .read(move |c| {
            use troupe::runtime::rusqlite::OptionalExtension;
            Ok(
                c.query_row("SELECT value FROM kv WHERE key = ?1", [&key], |r| r.get(0))
                    .optional()?,
            )
        })
        .await
        .unwrap();
    assert_eq!(
        still_open, None,
        "the review's open turn was closed, not resumed"
    );
    let refused = match second.node().send(review, "again").await {
        Err(e) => e.to_string(),
        Ok(_) => panic!("a review's conversation was opened again"),
    };
    assert!(
        refused.contains("runs once"),
        "the refusal says why: {refused}"
    );
    second.shutdown().await;
}
