//! **A runaway loop.** Models that never stop by themselves: one repeats a
//! failing call, one makes a new failing call every step, two bots keep
//! messaging each other through `message_agent` from turn to turn, and two
//! bots in a house thread keep mentioning each other. Each is stopped by
//! its guard within the documented bound, counted in model calls, and the
//! reason reaches whoever is watching: the turn's outcome, the refused
//! tool's result, the thread's `held` event. (The pieces' older tests are
//! listed in docs/scenarios.md.)

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;
use troupe::actors::events::NodeEvent;
use troupe::runtime::id::ConversationId;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::runtime::protocol::Message;
use troupe::runtime::store::mailbox;
use troupe::{AgentEvent, BotSpec, HouseRules, ThreadEvent, TurnOutcome};

use crate::suite::support::*;

async fn outcome_of(model: Arc<ScriptedProvider>, settings: &[(&str, &str)]) -> TurnOutcome {
    let home = TestHome::new();
    let mut builder = home.builder(model).tool(Weather::new());
    for (k, v) in settings {
        builder = builder.set(*k, *v);
    }
    let runtime = builder.build().await.unwrap();
    let report = ask(&runtime.bot("assistant").await.unwrap(), "go").await;
    runtime.shutdown().await;
    report.outcome
}

#[tokio::test]
async fn a_model_that_never_stops_is_stopped_by_its_guard() {
    // The same failing call for ever: three calls, then the guard.
    let model = Arc::new(ScriptedProvider::from_fn(|_: &ModelRequest| {
        Turn::tool_call("lookup_weather", json!({}))
    }));
    let outcome = outcome_of(Arc::clone(&model), &[]).await;
    assert_eq!(
        outcome,
        TurnOutcome::Guard {
            reason:
                "the same call to `lookup_weather` failed 3 times in a row with the same arguments"
                    .into()
        }
    );
    assert_eq!(model.calls(), 3);

    // A new failing call every step: the step cap, exactly.
    let model = Arc::new(ScriptedProvider::from_fn(|request: &ModelRequest| {
        Turn::tool_call("lookup_weather", json!({"town": request.messages.len()}))
    }));
    let outcome = outcome_of(Arc::clone(&model), &[("agent.max_steps_per_turn", "6")]).await;
    match &outcome {
        TurnOutcome::Guard { reason } => assert!(reason.contains('6'), "{reason}"),
        other => panic!("not stopped by the step cap: {other:?}"),
    }
    let turn_calls = model
        .requests()
        .iter()
        .filter(|r| super::is_turn(r))
        .count();
    assert_eq!(turn_calls, 6);
}

/// Whose conversation a request is: the scout's instructions begin so.
fn is_scout(request: &ModelRequest) -> bool {
    request.system.starts_with("You are scout")
}

#[tokio::test]
async fn two_bots_messaging_each_other_stop_at_the_pair_guard_and_fall_quiet() {
    // Each bot answers anything — a message, a reply, a refusal's text
    // aside — by messaging the other again.
    let model = Arc::new(ScriptedProvider::from_fn(|request: &ModelRequest| {
        if let Some(Message::Tool { result, .. }) = request.messages.last() {
            if result.is_error() {
                return Turn::text(format!("stopped: {}", result.text));
            }
            return Turn::text("sent");
        }
        let other = if is_scout(request) {
            "assistant"
        } else {
            "scout"
        };
        Turn::tool_call(
            "message_agent",
            json!({"target": other, "message": "your turn"}),
        )
    }));
    let home = TestHome::new();
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(Arc::clone(&model))
        .event_bus(bus)
        .set("messaging.loop_max_exchanges", "2")
        .set("router.idle_secs", "1")
        .build()
        .await
        .unwrap();
    runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Answers pings."))
        .await
        .unwrap();
    let assistant = runtime.bot("assistant").await.unwrap();
    let scout = runtime.bot("scout").await.unwrap();
    ask(&assistant, "start a conversation with scout").await;

    // The loop falls quiet by itself: both conversations idle, nothing
    // waiting in the mailbox.
    let watched = [assistant.conversation(), scout.conversation()];
    let mut idle: HashMap<ConversationId, bool> = HashMap::new();
    loop {
        let quiet = watched.iter().all(|c| idle.get(c) == Some(&true));
        let store = runtime.node().store().clone();
        let waiting = store.read(mailbox::pending_count).await.unwrap();
        if quiet && waiting == 0 {
            break;
        }
        on_bus(&mut events, |e: &NodeEvent| {
            if !watched.contains(&e.conversation) {
                return None;
            }
            match e.event {
                AgentEvent::TurnStarted { .. } => idle.insert(e.conversation, false),
                AgentEvent::Passivated => idle.insert(e.conversation, true),
                _ => return None,
            };
            Some(())
        })
        .await;
    }

    // Two messages went through the pair; every later one was refused,
    // and the refusal, naming the pair, reached the model that tried.
    let requests = model.requests();
    let results: Vec<(bool, String)> = requests
        .iter()
        .filter_map(|r| match r.messages.last() {
            Some(Message::Tool { name, result, .. }) if name == "message_agent" => {
                Some((result.is_error(), result.text.clone()))
            }
            _ => None,
        })
        .collect();
    let sent = results.iter().filter(|(refused, _)| !refused).count();
    assert_eq!(sent, 2, "{results:#?}");
    let refused: Vec<&String> = results
        .iter()
        .filter(|(refused, _)| *refused)
        .map(|(_, t)| t)
        .collect();
    assert!(!refused.is_empty(), "{results:#?}");
    for text in refused {
        assert!(text.contains("have exchanged 2 messages"), "{text}");
    }
    assert!(requests.len() <= 12, "{} model calls", requests.len());
    runtime.shutdown().await;
}

#[tokio::test]
async fn two_bots_mentioning_each_other_stop_at_the_chain_cap_and_say_so() {
    let ping = |to: &str| {
        (0..5)
            .map(|i| Turn::text(format!("@{to} turn {i}")))
            .collect::<Vec<_>>()
    };
    let model = Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        [("alice", ping("bob")), ("bob", ping("alice"))]
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
    ));
    let home = TestHome::new();
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    acme.add_human("ada", Some("Ada")).await.unwrap();
    for name in ["alice", "bob"] {
        runtime
            .spawn_bot(BotSpec::new(name, name, "A member of the house."))
            .await
            .unwrap();
        acme.add_bot(name, ListenMode::Mentions).await.unwrap();
    }
    acme.set_rules(HouseRules {
        max_turns_per_round: 10,
        max_chain: 3,
        context_messages: 30,
    })
    .await
    .unwrap();
    let people = ["ada", "alice", "bob"].map(String::from);
    let general = acme
        .create_thread(Some("general"), &[], "ada", &people)
        .await
        .unwrap();
    let mut events = general.events();
    let round = general
        .post_and_wait("ada", "@alice start", WAIT)
        .await
        .unwrap();
    let authors: Vec<&str> = round.iter().map(|m| m.author.as_str()).collect();
    assert_eq!(authors, ["alice", "bob", "alice"]);
    // Three bot turns, three model calls, and the thread says why bob
    // was not offered a fourth.
    let calls: usize = ["alice", "bob"]
        .iter()
        .map(|b| model.bot(b).unwrap().calls())
        .sum();
    assert_eq!(calls, 3);
    let held = tokio::time::timeout(WAIT, async {
        while let Some(event) = events.next().await {
            if let ThreadEvent::Held { bot, reason, .. } = event {
                return (bot, reason);
            }
        }
        panic!("the thread's events ended");
    })
    .await
    .expect("a held event");
    assert_eq!(
        held,
        ("bob".into(), "the chain of bot turns reached 3".into())
    );
    runtime.shutdown().await;
}
