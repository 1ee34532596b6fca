//! Many agents: delegation, message_agent, bot_create, ask_user and the
//! gate's approvals, end to end over a scripted model.

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::{AgentEvent, BotSpec, TurnOutcome};

use super::support::*;

fn last_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

fn last_is_tool(req: &ModelRequest) -> Option<(String, ToolResult)> {
    match req.messages.last() {
        Some(Message::Tool { name, result, .. }) => Some((name.clone(), result.clone())),
        _ => None,
    }
}

fn first_user(req: &ModelRequest) -> String {
    req.messages
        .iter()
        .find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

/// A model that delegates `tasks` when asked to, and whose subagents answer
/// by their goal: `fail` fails, `hold` calls the `hold` tool, others finish.
fn delegating_model(tasks: Vec<&'static str>) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(move |req: &ModelRequest| {
        let first = first_user(req);
        if let Some(goal) = first.strip_prefix("Your task: ") {
            let goal = goal.lines().next().unwrap_or_default().to_string();
            if let Some((name, _)) = last_is_tool(req).filter(|(n, _)| n != "no_such_tool") {
                return Turn::text(format!("{goal}: finished after {name}"));
            }
            if goal.starts_with("fail") {
                // The same failing call again and again: a guard ends the turn.
                return Turn::tool_call("no_such_tool", json!({}));
            }
            if goal.starts_with("hold") {
                return Turn::tool_call("hold", json!({}));
            }
            return Turn::text(format!("{goal}: done"));
        }
        let last = last_user(req);
        if last.starts_with("[notice: delegation]") && last_is_tool(req).is_none() {
            return Turn::text("All subagents reported.");
        }
        if let Some((name, _)) = last_is_tool(req) {
            return Turn::text(format!("{name} returned"));
        }
        let tasks: Vec<_> = tasks
            .iter()
            .map(|g| json!({"goal": g, "context": "test"}))
            .collect();
        Turn::tool_call("delegate", json!({"tasks": tasks}))
    }))
}

async fn wait_notice(
    events: &mut tokio::sync::broadcast::Receiver<troupe::actors::events::NodeEvent>,
    topic: &str,
) -> (troupe::runtime::id::ConversationId, String) {
    on_bus(events, |e| match &e.event {
        AgentEvent::Notice { topic: t, text } if t == topic => Some((e.conversation, text.clone())),
        _ => None,
    })
    .await
}

#[tokio::test]
async fn ten_subagents_report_together_in_one_message() {
    let home = TestHome::new();
    let goals = vec![
        "g0", "g1", "g2", "g3", "g4", "g5", "g6", "g7", "g8", "fail9",
    ];
    let model = delegating_model(goals);
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(Arc::clone(&model))
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "split the work").await;
    assert!(report.text.contains("delegate returned"), "{report:?}");
    let (conversation, text) = wait_notice(&mut events, "delegation").await;
    assert_eq!(conversation, bot.conversation());
    assert!(
        text.starts_with("All 10 subagent(s) of delegation"),
        "{text}"
    );
    for i in 0..9 {
        assert!(
            text.contains("[done]") && text.contains(&format!("g{i}: done")),
            "{text}"
        );
    }
    assert!(text.contains("## 10. fail9\n[failed]"), "{text}");
    // Subagents never see the tools the table withholds from them.
    let sub_request = model
        .requests()
        .into_iter()
        .find(|r| first_user(r).starts_with("Your task: g0"))
        .unwrap();
    let names: Vec<_> = sub_request.tools.iter().map(|t| t.name.as_str()).collect();
    for withheld in [
        "delegate",
        "memory",
        "ask_user",
        "message_agent",
        "cronjob_manage",
        "bot_create",
    ] {
        assert!(
            !names.contains(&withheld),
            "{withheld} offered to a subagent: {names:?}"
        );
    }
    assert!(names.contains(&"read_file"));
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_subagent_past_its_timeout_reports_what_it_had() {
    let home = TestHome::new();
    let model = delegating_model(vec!["g0", "hold1"]);
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(model)
        .tool(Gate::new("hold"))
        .set("delegation.child_timeout_secs", "1")
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    runtime
        .bot("assistant")
        .await
        .unwrap()
        .send("go")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    let (_, text) = wait_notice(&mut events, "delegation").await;
    assert!(text.contains("## 2. hold1\n[timed_out]"), "{text}");
    assert!(text.contains("## 1. g0\n[done]"), "{text}");
}

#[tokio::test]
async fn delegation_limits_refuse_with_clear_errors() {
    let home = TestHome::new();
    let model = delegating_model(vec!["a", "b", "c"]);
    let runtime = home
        .builder(Arc::clone(&model))
        .set("delegation.max_concurrent_per_bot", "2")
        .build()
        .await
        .unwrap();
    runtime
        .bot("assistant")
        .await
        .unwrap()
        .send("go")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    let result = model
        .requests()
        .iter()
        .find_map(|r| {
            last_is_tool(r)
                .filter(|(n, _)| n == "delegate")
                .map(|(_, r)| r)
        })
        .unwrap();
    assert!(result.is_error());
    assert!(
        result
            .text
            .contains("would pass its limit of 2 ([delegation] max_concurrent_per_bot)"),
        "{}",
        result.text
    );
}

#[test]
fn a_crash_mid_delegation_still_reports_every_child_exactly_once() {
    let home = TestHome::new();
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let hold = Gate::new("hold");
    let parent = first.block_on(async {
        let runtime = home
            .builder(delegating_model(vec!["hold0", "hold1", "g2"]))
            .tool(hold.clone())
            .build()
            .await
            .unwrap();
        let bot = runtime.bot("assistant").await.unwrap();
        ask(&bot, "go").await;
        // Crash only once both held subagents are inside their tool: one still
        // choosing it would choose it again after the restart and hold there.
        tokio::time::timeout(WAIT, async {
            while *hold.calls.lock() < 2 {
                hold.entered.notified().await;
            }
        })
        .await
        .unwrap();
        bot.conversation()
    });
    first.shutdown_background();
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let (bus, mut events) = tokio::sync::broadcast::channel(4096);
        let runtime = home
            .builder(delegating_model(vec![]))
            .tool(Gate::new("hold"))
            .event_bus(bus)
            .build()
            .await
            .unwrap();
        let (conversation, text) = wait_notice(&mut events, "delegation").await;
        assert_eq!(conversation, parent);
        assert!(text.starts_with("All 3 subagent(s)"), "{text}");
        assert!(text.contains("## 3. g2\n[done]"), "{text}");
        // Wait for the parent's turn on the notice to end, then count notices in its history.
        tokio::time::timeout(WAIT, async {
            loop {
                let e = events.recv().await.unwrap();
                if e.conversation == parent && matches!(e.event, AgentEvent::TurnFinished { .. }) {
                    break;
                }
            }
        })
        .await
        .unwrap();
        let conv = parent;
        let notices = runtime
            .node()
            .store()
            .read(move |c| troupe::runtime::store::conversations::load_messages(c, conv))
            .await
            .unwrap()
            .into_iter()
            .filter(|m| m.message.text().starts_with("[notice: delegation]"))
            .count();
        assert_eq!(notices, 1, "the parent is told exactly once");
        runtime.shutdown().await;
    });
}

fn two_bots_model() -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let first = first_user(req);
        let last = last_user(req);
        if first.starts_with("[message from assistant")
            || last.starts_with("[message from assistant")
        {
            if last.contains("please fail") || last_is_tool(req).is_some() {
                return Turn::tool_call("no_such_tool", json!({}));
            }
            return Turn::text("pong from scout");
        }
        if last.starts_with("[notice: reply]") && last_is_tool(req).is_none() {
            return Turn::text("Got the reply.");
        }
        if last_is_tool(req).is_some() {
            return Turn::text("sent");
        }
        let body = if last.contains("fail") {
            "please fail"
        } else {
            "ping"
        };
        Turn::tool_call("message_agent", json!({"target": "scout", "message": body}))
    }))
}

#[tokio::test]
async fn message_agent_delivers_and_the_reply_comes_back_as_a_notice() {
    let home = TestHome::new();
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(two_bots_model())
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Answers pings."))
        .await
        .unwrap();
    let main = runtime.bot("assistant").await.unwrap();
    let report = ask(&main, "ping the scout").await;
    assert_eq!(report.text, "sent");
    let (conversation, text) = wait_notice(&mut events, "reply").await;
    assert_eq!(conversation, main.conversation());
    assert_eq!(text, "`scout` replied:\npong from scout");
    ask(&main, "now make it fail").await;
    let (_, text) = wait_notice(&mut events, "reply").await;
    assert!(
        text.starts_with("`scout` could not answer your message (halted by a guard: the same call to `no_such_tool`"),
        "{text}"
    );
}

#[tokio::test]
async fn the_loop_guard_stops_a_ping_pong() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::from_fn(
        |req: &ModelRequest| match last_is_tool(req) {
            Some((_, result)) if result.is_error() => {
                Turn::text(format!("refused: {}", result.text))
            }
            _ => Turn::tool_call(
                "message_agent",
                json!({"target": "scout", "message": "again"}),
            ),
        },
    ));
    let runtime = home
        .builder(model)
        .set("messaging.loop_max_exchanges", "2")
        .set("agent.max_steps_per_turn", "10")
        .build()
        .await
        .unwrap();
    runtime
        .spawn_bot(BotSpec::new("scout", "Scout", "Answers pings."))
        .await
        .unwrap();
    let report = runtime
        .bot("assistant")
        .await
        .unwrap()
        .send("go")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    assert!(
        report
            .text
            .starts_with("refused: `assistant` and `scout` have exchanged 2 messages"),
        "{report:?}"
    );
}

#[tokio::test]
async fn bot_create_checks_the_definition() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call("tool_search", json!({"query": "bot_create"})),
        Turn::tool_call(
            "bot_create",
            json!({"name": "Bad Name", "title": "T", "description": "d"}),
        ),
        Turn::tool_call(
            "bot_create",
            json!({"name": "scout", "title": "Scout", "description": "Finds things."}),
        )
        .expecting("is not a valid bot name"),
        Turn::text("made").expecting("Created the bot `scout`"),
    ]);
    let runtime = home.builder(model).build().await.unwrap();
    let report = runtime
        .bot("assistant")
        .await
        .unwrap()
        .send("make a bot")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(report.text, "made", "{report:?}");
    assert_eq!(runtime.node().bot("scout").unwrap().spec.title, "Scout");
}

#[tokio::test]
async fn ask_user_waits_for_the_answer_through_the_channel() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call(
            "ask_user",
            json!({"questions": [{"question": "Tea or coffee?", "choices": ["tea", "coffee"]}]}),
        ),
        Turn::text("tea it is").expecting("The user answered"),
        Turn::tool_call("ask_user", json!({"questions": [{"question": "Sure?"}]})),
        Turn::text("ok").expecting("cancelled"),
    ]);
    let runtime = home.builder(model).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    for answer in [Some(json!({"answers": ["tea"]})), None] {
        let mut turn = bot.send("ask me").await.unwrap();
        let (id, questions) = wait_for(&mut turn, |e| match e {
            AgentEvent::QuestionAsked {
                request_id,
                questions,
            } => Some((request_id.clone(), questions.clone())),
            _ => None,
        })
        .await;
        assert!(
            questions.to_string().contains("Other") || answer.is_none(),
            "{questions}"
        );
        assert!(runtime.node().answer(&id, answer));
        assert_eq!(turn.result().await.unwrap().outcome, TurnOutcome::Finished);
    }
}

#[tokio::test]
async fn a_risky_command_waits_for_the_users_approval() {
    let home = TestHome::new();
    // A working folder of its own: commands run in a sandbox where troupe's
    // home, and a working folder inside it, are read-only.
    let work = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(work.path().join("build")).unwrap();
    let model = script(vec![
        Turn::tool_call(
            "run_command",
            json!({"command": "rm -rf ./build && echo removed"}),
        ),
        Turn::text("done").expecting("removed"),
        Turn::tool_call("run_command", json!({"command": "rm -rf ./other"})),
        Turn::text("ok").expecting("the user refused it"),
    ]);
    let runtime = home.builder(model).cwd(work.path()).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    for answer in ["once", "deny"] {
        let mut turn = bot.send("clean up").await.unwrap();
        let id = wait_for(&mut turn, |e| match e {
            AgentEvent::ApprovalRequested { request_id, .. } => Some(request_id.clone()),
            _ => None,
        })
        .await;
        assert!(runtime.node().answer(&id, Some(json!(answer))));
        let report = turn.result().await.unwrap();
        assert_eq!(report.outcome, TurnOutcome::Finished, "{report:?}");
    }
    assert!(!work.path().join("build").exists());
}

#[tokio::test]
async fn stopping_a_parent_stops_its_subagents() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(delegating_model(vec!["hold0", "g1"]))
        .tool(hold.clone())
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "go").await;
    tokio::time::timeout(WAIT, hold.entered.notified())
        .await
        .unwrap();
    bot.stop().await.unwrap();
    let (_, text) = wait_notice(&mut events, "delegation").await;
    assert!(text.contains("## 1. hold0\n[stopped]"), "{text}");
    assert!(text.starts_with("All 2 subagent(s)"), "{text}");
}

#[tokio::test]
async fn steer_reaches_a_running_subagent() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let model = Arc::new(ScriptedProvider::from_fn(|req: &ModelRequest| {
        let first = first_user(req);
        if first.starts_with("Your task: ") {
            if req
                .messages
                .iter()
                .any(|m| matches!(m, Message::Tool { .. }))
            {
                // After its tool, the subagent reports the latest user message (the steer).
                return Turn::text(format!("heard: {}", last_user(req)));
            }
            return Turn::tool_call("hold", json!({}));
        }
        match last_is_tool(req) {
            None if last_user(req).starts_with("[notice: delegation]") => Turn::text("reported"),
            None => Turn::tool_call("delegate", json!({"tasks": [{"goal": "hold on"}]})),
            Some((name, result)) if name == "delegate" && result.text.starts_with("Started") => {
                let id = result
                    .text
                    .split_whitespace()
                    .find(|w| w.starts_with("sub_"))
                    .unwrap()
                    .trim_end_matches(':');
                Turn::tool_call(
                    "delegate",
                    json!({"action": "steer", "subagent_id": id, "message": "also check the roof"}),
                )
            }
            Some(_) => Turn::text("steered"),
        }
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = home
        .builder(model)
        .tool(hold.clone())
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "go").await;
    assert_eq!(report.text, "steered", "{report:?}");
    tokio::time::timeout(WAIT, hold.entered.notified())
        .await
        .unwrap();
    hold.release.notify_one();
    let (_, text) = wait_notice(&mut events, "delegation").await;
    assert!(text.contains("heard: also check the roof"), "{text}");
}

#[tokio::test]
async fn a_bot_uses_a_library_skill_its_definition_lists() {
    let home = TestHome::new();
    let skill = home.path().join("skills/brew");
    std::fs::create_dir_all(&skill).unwrap();
    std::fs::write(
        skill.join("SKILL.md"),
        "---\nname: brew\ndescription: Makes tea\n---\nBoil the water, then steep four minutes.\n",
    )
    .unwrap();
    let model = script(vec![
        Turn::tool_call("use_skill", json!({"name": "brew"})),
        Turn::text("Steeping.").expecting("steep four minutes"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let mut spec = BotSpec::new("barista", "Barista", "Makes drinks.");
    spec.skills = vec!["brew".into()];
    let bot = runtime.spawn_bot(spec).await.unwrap();
    let report = ask(&bot, "Tea, please.").await;
    assert_eq!(report.text, "Steeping.", "{report:?}");
    let offered = &model.requests()[0].tools;
    let use_skill = offered.iter().find(|t| t.name == "use_skill").unwrap();
    assert!(
        use_skill.description.contains("- brew: Makes tea"),
        "{}",
        use_skill.description
    );
    let mut bad = BotSpec::new("other", "Other", "Nothing.");
    bad.skills = vec!["../escape".into()];
    let err = runtime.spawn_bot(bad).await.unwrap_err().to_string();
    assert!(
        err.contains("`../escape` in `skills` is not a skill name"),
        "{err}"
    );
    runtime.shutdown().await;
}
