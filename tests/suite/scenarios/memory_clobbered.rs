//! **Memory clobbered.** Two bots write to the user's profile (one shared
//! file) while a background review of a third conversation adds to it and
//! tries to replace an entry. Every add lands, nothing is lost to a
//! read-modify-write race, and the review's replace waits as a proposal for
//! the user instead of overwriting. (Concurrent edits of one file, in one
//! process and across processes, are `troupe-tools`' `file_lock_tests`; the
//! review's gate is `review::a_review_keeps_facts_and_proposes_what_it_would_take_away`.)

use std::collections::BTreeSet;
use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ModelRequest, ScriptedCall, ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::{AgentEvent, BotSpec};

use crate::suite::support::*;

const FACTS: usize = 4;

fn memory_add(content: String) -> Turn {
    Turn::tool_call(
        "memory",
        json!({"target": "user", "action": "add", "content": content}),
    )
}

/// `scout` and `clerk` each add [`FACTS`] entries, one call at a time; the
/// review of the main agent's conversation adds one and replaces another.
fn model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let answered = req
            .messages
            .iter()
            .filter(|m| matches!(m, Message::Tool { .. }))
            .count();
        if req.system.contains("# Background review") {
            if answered > 0 {
                return Turn::text("Reviewed.");
            }
            return Turn {
                tool_calls: vec![ScriptedCall {
                    name: "memory".into(),
                    arguments: json!({"target": "user", "operations": [
                        {"action": "add", "content": "Works in Rust"},
                        {"action": "replace", "old_text": "coffee", "content": "Prefers tea"},
                    ]}),
                    id: None,
                }],
                ..Turn::default()
            };
        }
        let first = req.messages.first().map(Message::text).unwrap_or("");
        for bot in ["scout", "clerk"] {
            if first.starts_with(&format!("{bot}, remember")) {
                if answered < FACTS {
                    return memory_add(format!("{bot} fact {answered}"));
                }
                return Turn::text("Saved.");
            }
        }
        Turn::text("Tea from now on, noted.")
    }))
}

#[tokio::test]
async fn two_bots_and_a_review_writing_one_profile_lose_nothing_and_overwrite_nothing() {
    let home = TestHome::new();
    let profile = home.path().join("memory/USER.md");
    std::fs::create_dir_all(profile.parent().unwrap()).unwrap();
    std::fs::write(&profile, "Prefers coffee\n").unwrap();
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(model())
        .set("review.every_n_turns", "1")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let main = runtime.bot("assistant").await.unwrap();
    let scout = runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Finds things."))
        .await
        .unwrap();
    let clerk = runtime
        .spawn_bot(BotSpec::new("clerk", "Clerk", "Files things."))
        .await
        .unwrap();
    let mains = [
        main.conversation(),
        scout.conversation(),
        clerk.conversation(),
    ];

    // All three at once.
    let turns = [
        main.send("I switched from coffee to tea. I work in Rust.")
            .await
            .unwrap(),
        scout.send("scout, remember these").await.unwrap(),
        clerk.send("clerk, remember these").await.unwrap(),
    ];
    for turn in turns {
        let report = turn.result().await.unwrap();
        assert!(!report.text.is_empty(), "{report:?}");
    }
    // Each conversation's review ends (those of the bots that saved
    // memory themselves find it not due).
    let mut reviews = BTreeSet::new();
    while reviews.len() < 3 {
        let review = on_bus(&mut events, |e| {
            (!mains.contains(&e.conversation) && matches!(e.event, AgentEvent::TurnFinished { .. }))
                .then_some(e.conversation)
        })
        .await;
        reviews.insert(review);
    }

    let text = std::fs::read_to_string(&profile).unwrap();
    let entries: BTreeSet<&str> = text.trim_end().split("\n§\n").collect();
    let mut expected: BTreeSet<String> = ["Prefers coffee", "Works in Rust"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for bot in ["scout", "clerk"] {
        for n in 0..FACTS {
            expected.insert(format!("{bot} fact {n}"));
        }
    }
    let expected: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    assert_eq!(entries, expected, "{text}");

    let pending = runtime.proposals(true).await.unwrap();
    assert_eq!(pending.len(), 1, "{pending:?}");
    assert_eq!(
        pending[0].summary,
        "user memory: replace the entry containing \"coffee\" with \"Prefers tea\""
    );
    runtime.shutdown().await;
}
