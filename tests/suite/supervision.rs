//! The actor tree in production: conversations are restarted by their
//! supervisor, resume their turn, and rebuild how they were opened; the
//! recovery policy resumes only open turns.

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::json;
use troupe::actors::budget::Limits;
use troupe::actors::delegation::record;
use troupe::actors::node::{Opening, StoredBudget};
use troupe::actors::toolset::Narrowing;
use troupe::runtime::home::MAIN_AGENT;
use troupe::runtime::id::{ConversationId, DelegationId, SubagentId};
use troupe::runtime::model::{Fault, ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::{ActorKind, Message};
use troupe::{AgentEvent, TurnOutcome};

use super::support::*;

fn tool_names(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

#[tokio::test]
async fn a_model_step_that_panics_is_restarted_and_its_caller_gets_the_answer() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::fault(Fault::Panic),
        Turn::text("recovered after the crash"),
    ]);
    let runtime = home.builder(model.clone()).build().await.unwrap();
    let bot = runtime.bot(MAIN_AGENT).await.unwrap();
    let mut turn = bot.send("hello").await.unwrap();
    let restarts = wait_for(&mut turn, |e| match e {
        AgentEvent::ActorRestarted { restarts, .. } => Some(*restarts),
        _ => None,
    })
    .await;
    assert_eq!(restarts, 1);
    let report = turn.result().await.unwrap();
    assert_eq!(report.outcome, TurnOutcome::Finished);
    assert_eq!(report.text, "recovered after the crash");
    assert_eq!(model.calls(), 2);

    let id = bot.conversation().to_string();
    let tree = runtime.tree().await;
    let live: Vec<_> = tree.iter().filter(|a| a.id == id).collect();
    assert_eq!(live.len(), 1, "one live actor for the id: {tree:?}");
    assert_eq!(live[0].restarts, 1);
    assert_eq!(live[0].parent.as_deref(), Some("conversations"));
    // The resumed turn answered the one user message once.
    let requests = model.requests();
    assert_eq!(requests[1].messages.as_slice(), &[Message::user("hello")]);
    runtime.shutdown().await;
}

#[tokio::test]
async fn past_the_restart_limit_the_caller_gets_crashed_and_the_next_message_starts_afresh() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::fault(Fault::Panic),
        Turn::fault(Fault::Panic),
        Turn::fault(Fault::Panic),
        Turn::fault(Fault::Panic),
        Turn::text("a fresh start"),
    ]);
    let runtime = home.builder(model.clone()).build().await.unwrap();
    let bot = runtime.bot(MAIN_AGENT).await.unwrap();
    let report = ask(&bot, "hello").await;
    match &report.outcome {
        TurnOutcome::Crashed { error, restarts } => {
            assert_eq!(*restarts, 3);
            assert!(error.contains("restart limit of 3"), "{error}");
        }
        other => panic!("expected Crashed, got {other:?}"),
    }
    assert_eq!(model.calls(), 4);

    let report = ask(&bot, "again").await;
    assert_eq!(report.outcome, TurnOutcome::Finished);
    assert_eq!(report.text, "a fresh start");
    assert_eq!(model.calls(), 5, "the crashed turn was not resumed");
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_model_error_fails_the_turn_without_a_restart() {
    let home = TestHome::new();
    let model = script(vec![Turn::fault(Fault::Error)]);
    let runtime = home.builder(model.clone()).build().await.unwrap();
    let bot = runtime.bot(MAIN_AGENT).await.unwrap();
    let report = ask(&bot, "hello").await;
    match &report.outcome {
        TurnOutcome::Failed { error } => assert!(error.contains("scripted fault"), "{error}"),
        other => panic!("expected Failed, got {other:?}"),
    }
    assert_eq!(
        runtime.node().conversations().restarts(&bot.conversation()),
        0
    );
    runtime.shutdown().await;
}

/// A subagent opened with a tool ceiling and a delegation budget of two
/// tool calls, as `delegate` opens one.
async fn open_subagent(runtime: &troupe::Runtime, parent: ConversationId) -> ConversationId {
    let node = runtime.node();
    let bot = node.bot(MAIN_AGENT).unwrap();
    let (delegation, sub) = (DelegationId::new(), ConversationId::new());
    let rows = vec![(SubagentId::new(), sub, "look".to_string(), String::new())];
    node.store()
        .write(move |tx| record::create(tx, delegation, parent, MAIN_AGENT, false, &rows))
        .await
        .unwrap();
    let ceiling: HashSet<String> = ["read_file", "find_files"].map(String::from).into();
    let limits = Limits {
        tool_calls: Some(2),
        ..Limits::default()
    };
    node.open(Opening {
        id: sub,
        kind: ActorKind::Subagent,
        narrowing: Narrowing {
            only: None,
            parent: Some(Arc::new(ceiling)),
        },
        parent: Some(parent),
        budget: Some(troupe::actors::budget::Scope::root("delegation", limits)),
        stored_budget: Some(StoredBudget {
            scope: "delegation".into(),
            limits,
            delegation: Some(delegation),
        }),
        fresh: true,
        ..Opening::new(bot)
    })
    .await
    .unwrap();
    sub
}

#[tokio::test]
async fn a_subagent_keeps_its_tool_ceiling_and_spent_budget_across_passivation_and_a_crash() {
    let home = TestHome::new();
    std::fs::write(home.path().join("notes.txt"), "some notes").unwrap();
    let read = || Turn::tool_call("read_file", json!({"path": "notes.txt"}));
    // Answers by what it is asked: the parent hears of its delegation too.
    let model = Arc::new(ScriptedProvider::from_fn(move |request| {
        match request.messages.last() {
            Some(Message::Tool { name, .. }) if name == "read_file" => Turn::text("read once"),
            Some(m) if m.text() == "first" => read(),
            Some(m) if m.text() == "second" => Turn::text("still here"),
            _ => Turn::text("noted"),
        }
    }));
    let runtime = home.builder(model.clone()).build().await.unwrap();
    let parent = runtime.bot(MAIN_AGENT).await.unwrap().conversation();
    let sub = open_subagent(&runtime, parent).await;

    let mut bus = runtime.node().subscribe();
    let (_events, done) = runtime.node().send(sub, "first").await.unwrap();
    assert_eq!(done.await.unwrap().outcome, TurnOutcome::Finished);
    // A subagent's actor stops when its turn ends (passivated), and is
    // activated again from the store.
    on_bus(&mut bus, |e| {
        (e.conversation == sub && e.event == AgentEvent::Passivated).then_some(())
    })
    .await;
    let (_events, done) = runtime.node().send(sub, "second").await.unwrap();
    let report = done.await.unwrap();
    assert_eq!(report.text, "still here", "{report:?}");
    let ceiling = ["find_files", "read_file"];
    for request in model
        .requests()
        .iter()
        .filter(|r| r.messages[0].text() == "first")
    {
        let mut names = tool_names(request);
        names.sort();
        assert!(
            names.iter().all(|n| ceiling.contains(&n.as_str())),
            "a tool beyond the ceiling was offered: {names:?}"
        );
    }
    runtime.shutdown().await;

    // A new process: the opening is read back from the store. One tool
    // call of two was spent; the next (refused: beyond the ceiling) spends
    // the rest, and the turn ends on the delegation's budget.
    let model = Arc::new(ScriptedProvider::from_fn(move |request| {
        if request.messages[0].text() != "first" {
            // The parent, resuming a turn the shutdown cut short.
            return Turn::text("noted");
        }
        match request.messages.last() {
            Some(Message::Tool { name, .. }) if name == "write_file" => read(),
            Some(Message::Tool { .. }) => Turn::text("never asked"),
            _ => Turn::tool_call("write_file", json!({"path": "x.txt", "content": "no"})),
        }
    }));
    let runtime = home.builder(model.clone()).build().await.unwrap();
    let (_events, done) = runtime.node().send(sub, "third").await.unwrap();
    let report = done.await.unwrap();
    match &report.outcome {
        TurnOutcome::Budget { budget, .. } => assert_eq!(budget, "delegation.tool_calls"),
        other => panic!("expected the delegation's budget to end the turn, got {other:?}"),
    }
    assert!(!home.path().join("x.txt").exists(), "write_file ran");
    // The refused call counts against the budget too: one model call of
    // the subagent's (the parent may resume its own turn meanwhile).
    let requests: Vec<_> = model
        .requests()
        .into_iter()
        .filter(|r| r.messages[0].text() == "first")
        .collect();
    assert_eq!(requests.len(), 1);
    let stored = runtime
        .node()
        .store()
        .read(move |c| troupe::runtime::store::conversations::load_messages(c, sub))
        .await
        .unwrap();
    let refused = stored.iter().rev().find_map(|m| match &m.message {
        Message::Tool { name, result, .. } if name == "write_file" => Some(result.clone()),
        _ => None,
    });
    assert!(
        refused.is_some_and(|r| r.is_error()),
        "write_file was not refused"
    );
    let mut names = tool_names(&requests[0]);
    names.sort();
    assert_eq!(names, ceiling);
    runtime.shutdown().await;
}

#[tokio::test]
async fn recovery_resumes_open_turns_only_and_only_in_a_recovering_node() {
    let home = TestHome::new();
    let gate = Gate::new("wait_here");
    let model = script(vec![
        Turn::tool_call("wait_here", json!({})),
        Turn::fault(Fault::Error),
    ]);
    let runtime = home
        .builder(model.clone())
        .tool(gate.clone())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot(MAIN_AGENT).await.unwrap();
    let open = bot.conversation();
    let _turn = bot.send("wait").await.unwrap();
    tokio::time::timeout(WAIT, gate.entered.notified())
        .await
        .unwrap();
    // A second conversation whose turn closed as failed: its history ends
    // in the user's message, and it must not be answered again.
    let closed = bot.new_conversation().await.unwrap();
    let report = ask(&closed, "fail").await;
    assert!(matches!(report.outcome, TurnOutcome::Failed { .. }));
    // The process stops mid-turn: the first turn stays open in the store.
    runtime.shutdown().await;

    // A node that does not recover (`troupe run`) leaves it alone.
    let idle = script(vec![]);
    let runtime = home
        .builder(idle.clone())
        .tool(gate.clone())
        .recover(false)
        .build()
        .await
        .unwrap();
    runtime.node().status(closed.conversation()).await.unwrap();
    assert_eq!(idle.calls(), 0);
    runtime.shutdown().await;

    // A recovering node resumes it, and the model finishes the turn.
    let model = script(vec![Turn::text("resumed")]);
    let runtime = home
        .builder(model.clone())
        .tool(gate.clone())
        .build()
        .await
        .unwrap();
    let mut bus = runtime.node().subscribe();
    let status = runtime.node().status(open).await.unwrap();
    if status.busy {
        on_bus(&mut bus, |e| {
            (e.conversation == open && matches!(e.event, AgentEvent::TurnFinished { .. }))
                .then_some(())
        })
        .await;
    }
    assert_eq!(model.calls(), 1);
    // The call the shutdown cut short has its result (stopped, or
    // "outcome unknown" had the process died), and the turn goes on.
    let last = model.requests()[0].messages.last().cloned().unwrap();
    assert!(
        matches!(&last, Message::Tool { name, result, .. } if name == "wait_here" && result.is_error()),
        "{last:?}"
    );
    // A turn closed as failed is not resumed by activating it.
    runtime.node().status(closed.conversation()).await.unwrap();
    assert_eq!(model.calls(), 1);
    runtime.shutdown().await;
}

fn last_user(request: &ModelRequest) -> String {
    request
        .messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[tokio::test]
async fn a_message_agent_receiver_that_crashes_mid_turn_still_replies_once() {
    let home = TestHome::new();
    let crashed = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let once = Arc::clone(&crashed);
    let model = Arc::new(ScriptedProvider::from_fn(move |request| {
        let last = last_user(request);
        if last.starts_with("[message from assistant") {
            if !once.swap(true, std::sync::atomic::Ordering::SeqCst) {
                return Turn::fault(Fault::Panic);
            }
            return Turn::text("pong after a crash");
        }
        if last.starts_with("[notice: reply]") {
            return Turn::text("got it");
        }
        match request.messages.last() {
            Some(Message::Tool { .. }) => Turn::text("sent"),
            _ => Turn::tool_call(
                "message_agent",
                json!({"target": "scout", "message": "ping"}),
            ),
        }
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home.builder(model).event_bus(bus).build().await.unwrap();
    runtime
        .spawn_bot(troupe::BotSpec::new("scout", "Scout", "Answers pings."))
        .await
        .unwrap();
    let main = runtime.bot(MAIN_AGENT).await.unwrap();
    assert_eq!(ask(&main, "ping the scout").await.text, "sent");
    let main_id = main.conversation();
    let text = on_bus(&mut events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "reply" && e.conversation == main_id => {
            Some(text.clone())
        }
        _ => None,
    })
    .await;
    assert_eq!(text, "`scout` replied:\npong after a crash");
    on_bus(&mut events, |e| {
        (e.conversation == main_id && matches!(e.event, AgentEvent::TurnFinished { .. }))
            .then_some(())
    })
    .await;
    assert!(crashed.load(std::sync::atomic::Ordering::SeqCst));
    let stored = runtime
        .node()
        .store()
        .read(move |c| troupe::runtime::store::conversations::load_messages(c, main_id))
        .await
        .unwrap();
    let replies = stored
        .iter()
        .filter(|m| m.message.text().starts_with("[notice: reply]"))
        .count();
    assert_eq!(replies, 1, "exactly one reply");
    runtime.shutdown().await;
}

/// A model whose subagents hold on the `hold` tool until stopped.
fn holding_model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|request| {
        let first = request
            .messages
            .iter()
            .find_map(|m| match m {
                Message::User { content } => Some(content.clone()),
                _ => None,
            })
            .unwrap_or_default();
        if first.starts_with("Your task:") {
            return Turn::tool_call("hold", json!({}));
        }
        if last_user(request).starts_with("[notice: delegation]") {
            return Turn::text("reported");
        }
        match request.messages.last() {
            Some(Message::Tool { .. }) => Turn::text("started"),
            _ => Turn::tool_call(
                "delegate",
                json!({"tasks": [{"goal": "hold on", "context": "test"}]}),
            ),
        }
    }))
}

#[tokio::test]
async fn a_subagents_timeout_fires_after_a_process_restart() {
    let home = TestHome::new();
    let gate = Gate::new("hold");
    let runtime = home
        .builder(holding_model())
        .tool(gate.clone())
        .set("delegation.child_timeout_secs", "2")
        .build()
        .await
        .unwrap();
    let main = runtime.bot(MAIN_AGENT).await.unwrap();
    assert_eq!(ask(&main, "go").await.text, "started");
    tokio::time::timeout(WAIT, gate.entered.notified())
        .await
        .unwrap();
    // The process stops with the subagent mid-turn: it is not recorded as
    // ended, and its deadline is in the store.
    runtime.shutdown().await;

    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(holding_model())
        .tool(Gate::new("hold"))
        .set("delegation.child_timeout_secs", "2")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let main_id = main.conversation();
    let text = on_bus(&mut events, |e| match &e.event {
        AgentEvent::Notice { topic, text }
            if topic == "delegation" && e.conversation == main_id =>
        {
            Some(text.clone())
        }
        _ => None,
    })
    .await;
    assert!(text.contains("## 1. hold on\n[timed_out]"), "{text}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_tree_shows_subagents_under_their_delegation() {
    let home = TestHome::new();
    let gate = Gate::new("hold");
    // Two subagents hold on `hold` until released, then answer.
    let model = Arc::new(ScriptedProvider::from_fn(|request| {
        let task = request.messages.iter().find_map(|m| match m {
            Message::User { content } if content.starts_with("Your task:") => Some(content.clone()),
            _ => None,
        });
        match (task, request.messages.last()) {
            (Some(_), Some(Message::Tool { .. })) => Turn::text("held"),
            (Some(_), _) => Turn::tool_call("hold", json!({})),
            (None, _) if last_user(request).starts_with("[notice: delegation]") => {
                Turn::text("reported")
            }
            (None, Some(Message::Tool { .. })) => Turn::text("started"),
            (None, _) => Turn::tool_call(
                "delegate",
                json!({"tasks": [{"goal": "hold a", "context": "x"}, {"goal": "hold b", "context": "y"}]}),
            ),
        }
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(model)
        .tool(gate.clone())
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let main = runtime.bot(MAIN_AGENT).await.unwrap();
    assert_eq!(ask(&main, "go").await.text, "started");
    // Both subagents hold (two calls may leave one permit: count them).
    tokio::time::timeout(WAIT, async {
        while *gate.calls.lock() < 2 {
            let pause = std::time::Duration::from_millis(20);
            let _ = tokio::time::timeout(pause, gate.entered.notified()).await;
        }
    })
    .await
    .unwrap();

    // The events: the delegation under `delegations`, each subagent under it.
    let mut delegation = None;
    let mut subagents = Vec::new();
    while delegation.is_none() || subagents.len() < 2 {
        let (kind, id, parent) = on_bus(&mut events, |e| match &e.event {
            AgentEvent::ActorStarted { kind, id, parent } => {
                Some((kind.clone(), id.clone(), parent.clone()))
            }
            _ => None,
        })
        .await;
        match kind.as_str() {
            "delegation" => {
                assert_eq!(parent.as_deref(), Some("delegations"));
                delegation = Some(id);
            }
            "subagent" => subagents.push((id, parent)),
            _ => {}
        }
    }
    let delegation = delegation.unwrap();
    for (id, parent) in &subagents {
        assert_eq!(parent.as_ref(), Some(&delegation), "subagent {id}");
    }

    // The tree: delegations ─ the delegation ─ its two subagents.
    let tree = runtime.tree().await;
    let find = |id: &str| tree.iter().find(|a| a.id == id);
    assert_eq!(
        find("delegations").and_then(|a| a.parent.as_deref()),
        Some("node")
    );
    let node = find(&delegation).expect("the delegation is live");
    assert_eq!(node.kind, "delegation");
    assert_eq!(node.parent.as_deref(), Some("delegations"));
    let mut under: Vec<&str> = tree
        .iter()
        .filter(|a| a.parent.as_deref() == Some(delegation.as_str()))
        .map(|a| a.id.as_str())
        .collect();
    under.sort_unstable();
    let mut expected: Vec<&str> = subagents.iter().map(|(id, _)| id.as_str()).collect();
    expected.sort_unstable();
    assert_eq!(under, expected, "{tree:?}");
    assert!(tree
        .iter()
        .filter(|a| a.parent.as_deref() == Some(delegation.as_str()))
        .all(|a| a.kind == "subagent"));

    // Stopping the delegating conversation stops both; the delegation
    // reports once and stops.
    let main_id = main.conversation();
    runtime.node().stop(main_id).await.unwrap();
    let (mut report, mut stopped) = (None, None);
    while report.is_none() || stopped.is_none() {
        on_bus(&mut events, |e| match &e.event {
            AgentEvent::Notice { topic, text }
                if topic == "delegation" && e.conversation == main_id =>
            {
                report = Some(text.clone());
                Some(())
            }
            AgentEvent::ActorStopped { kind, id, .. } if kind == "delegation" => {
                stopped = Some(id.clone());
                Some(())
            }
            _ => None,
        })
        .await;
    }
    let report = report.unwrap();
    assert_eq!(report.matches("[stopped]").count(), 2, "{report}");
    let stopped = stopped.unwrap();
    assert_eq!(stopped, delegation);
    runtime.shutdown().await;
}

#[test]
fn ps_shows_the_tree_at_rest_and_a_run_that_crashed_and_recovered() {
    use super::cli::{text, troupe, write_script};
    let home = TestHome::new();
    let out = troupe(&home, &["ps", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let actors: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let kinds: Vec<&str> = actors.iter().map(|a| a["kind"].as_str().unwrap()).collect();
    let mut expected = vec![
        "node",
        "conversations",
        "threads",
        "environments",
        "post_office",
        "delegations",
        "commands",
        "reviewer",
    ];
    // The Browser actor, where a browser is installed (`browser_exec`).
    if troupe::tools::browser::chrome::find(None).is_ok() {
        expected.push("browser");
    }
    assert_eq!(kinds, expected, "{actors:?}");

    let model = write_script(
        &home,
        "crash.json",
        json!([{"fail": "panic"}, {"text": "recovered after the crash"}]),
    );
    let out = troupe(&home, &["run", "--json", "--model", &model, "hello"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let restarted = events
        .iter()
        .find(|e| e["event"] == "actor_restarted")
        .expect("an actor_restarted event");
    assert_eq!(restarted["kind"], "conversation");
    assert_eq!(restarted["restarts"], 1);
    assert_eq!(events.last().unwrap()["text"], "recovered after the crash");
}

#[tokio::test]
async fn the_post_office_hands_over_a_message_committed_but_never_handed_over() {
    let home = TestHome::new();
    let model = script(vec![Turn::text("noted")]);
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(model.clone())
        .settings(|s| s.redeliver_after = Some(std::time::Duration::from_millis(50)))
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let main = runtime.bot(MAIN_AGENT).await.unwrap();
    let to = main.conversation();
    // Committed, as a sender's send is, but never handed over.
    let envelope = troupe::runtime::protocol::Envelope {
        id: troupe::runtime::id::MsgId::new(),
        from: troupe::runtime::protocol::Address::Service("test".into()),
        to: troupe::runtime::protocol::Address::Conversation(to),
        body: troupe::runtime::protocol::Payload::Notice {
            topic: "waiting".into(),
            text: "left in the mailbox".into(),
            data: serde_json::Value::Null,
        },
        sent_at: chrono::Utc::now(),
    };
    runtime.node().store().send(envelope).await.unwrap();
    let text = on_bus(&mut events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "waiting" && e.conversation == to => {
            Some(text.clone())
        }
        _ => None,
    })
    .await;
    assert_eq!(text, "left in the mailbox");
    runtime.shutdown().await;
}
