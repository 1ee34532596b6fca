//! The turn loop end to end, over the scripted model: steps, tools, guards,
//! budgets, spill, deferred tools, stop and steer, a panicking tool,
//! compaction and resuming after a crash.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::runtime::model::Turn;
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::runtime::tool::{Tool, ToolContext, ToolSpec};
use troupe::{AgentEvent, Runtime, TurnOutcome};

use super::support::*;

fn last_tool_result(messages: &[Message]) -> ToolResult {
    messages
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Tool { result, .. } => Some(result.clone()),
            _ => None,
        })
        .expect("a tool result")
}

#[tokio::test]
async fn a_turn_calls_a_tool_and_answers() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call("lookup_weather", json!({"city": "Paris"})),
        Turn::text("It is sunny in Paris.").expecting("sunny, 21C"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(Weather::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let mut turn = bot.send("Weather in Paris?").await.unwrap();
    let started = wait_for(&mut turn, |e| match e {
        AgentEvent::ToolCallStarted { call } => Some(call.name.clone()),
        _ => None,
    })
    .await;
    assert_eq!(started, "lookup_weather");
    let report = turn.result().await.unwrap();
    assert_eq!(report.outcome, TurnOutcome::Finished);
    assert_eq!(report.text, "It is sunny in Paris.");
    assert_eq!(report.steps, 2);
    let requests = model.requests();
    assert_eq!(requests.len(), 2);
    check_invariants(&requests);
    assert!(requests[0].tools.iter().any(|t| t.name == "lookup_weather"));
    assert_eq!(
        requests[0].tools, requests[1].tools,
        "the same tools, in the same order"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn unknown_tools_and_bad_arguments_go_back_to_the_model() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call("no_such_tool", json!({})),
        Turn::tool_call("lookup_weather", json!({"town": "Paris"}))
            .expecting("unknown tool `no_such_tool`"),
        Turn::text("Sorry.").expecting("missing required argument `city`"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(Weather::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "go").await;
    assert_eq!(report.outcome, TurnOutcome::Finished, "{report:?}");
    let requests = model.requests();
    check_invariants(&requests);
    assert!(last_tool_result(&requests[2].messages)
        .text
        .contains("unknown argument `town`"));
}

#[tokio::test]
async fn a_panicking_tool_is_reported_and_the_conversation_lives_on() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call("explode", json!({})),
        Turn::text("It broke.").expecting("crashed (the tool blew up)"),
        Turn::text("Still here."),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(Panics::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "try it").await;
    assert_eq!(report.text, "It broke.");
    let again = ask(&bot, "are you alive?").await;
    assert_eq!(again.text, "Still here.");
}

#[tokio::test]
async fn the_step_cap_ends_the_turn_with_a_guard_status() {
    let home = TestHome::new();
    let call = || Turn::tool_call("lookup_weather", json!({"city": "Paris"}));
    let model = script(vec![call(), call(), call()]);
    let runtime = home
        .builder(model)
        .tool(Weather::new())
        .set("agent.max_steps_per_turn", "2")
        .build()
        .await
        .unwrap();
    let report = runtime
        .bot("assistant")
        .await
        .unwrap()
        .send("loop")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(
        report.outcome,
        TurnOutcome::Guard {
            reason:
                "the turn reached its cap of 2 model calls; send another message to let it go on"
                    .into()
        }
    );
}

#[tokio::test]
async fn the_same_failing_call_repeated_halts_the_turn() {
    let home = TestHome::new();
    let bad = || Turn::tool_call("lookup_weather", json!({}));
    let model = script(vec![bad(), bad(), bad(), Turn::text("never")]);
    let runtime = home
        .builder(model)
        .tool(Weather::new())
        .build()
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
    assert_eq!(
        report.outcome,
        TurnOutcome::Guard {
            reason:
                "the same call to `lookup_weather` failed 3 times in a row with the same arguments"
                    .into()
        }
    );
}

#[tokio::test]
async fn a_budget_stops_the_work_and_names_itself() {
    let home = TestHome::new();
    let call = || Turn::tool_call("lookup_weather", json!({"city": "Paris"}));
    let model = script(vec![call(), call(), Turn::text("done")]);
    let runtime = home
        .builder(model)
        .tool(Weather::new())
        .set("budgets.per_turn.tool_calls", "1")
        .build()
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
    assert_eq!(
        report.outcome,
        TurnOutcome::Budget {
            budget: "turn.tool_calls".into(),
            detail: "1 of 1 tool calls made".into()
        }
    );
}

struct Big {
    spec: ToolSpec,
}

#[async_trait::async_trait]
impl Tool for Big {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _args: serde_json::Value, _ctx: &ToolContext) -> ToolResult {
        ToolResult::ok((0..5000).map(|i| format!("line {i}\n")).collect::<String>())
    }
}

#[tokio::test]
async fn an_oversized_result_is_spilled_and_the_model_gets_its_head_and_path() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call("big", json!({})),
        Turn::text("ok").expecting("the whole output is in"),
    ]);
    let schema = json!({"type": "object", "additionalProperties": false, "properties": {}});
    let big = Arc::new(Big {
        spec: ToolSpec::new("big", "Big output.", schema),
    });
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(big)
        .set("agent.spill_limit_chars", "1000")
        .build()
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
    assert_eq!(report.outcome, TurnOutcome::Finished, "{report:?}");
    let result = last_tool_result(&model.requests()[1].messages);
    let path = result.data["spill_path"].as_str().unwrap();
    assert!(
        path.starts_with(home.path().join("spill").to_str().unwrap()),
        "{path}"
    );
    assert_eq!(std::fs::read_to_string(path).unwrap().lines().count(), 5000);
    assert!(result.text.starts_with("line 0\nline 1\n"));
    assert!(result.text.len() < 1300);
}

struct Deferred {
    spec: ToolSpec,
}

#[async_trait::async_trait]
impl Tool for Deferred {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _args: serde_json::Value, _ctx: &ToolContext) -> ToolResult {
        ToolResult::ok("the treasure is under the oak")
    }
}

#[tokio::test]
async fn a_deferred_tool_is_loaded_by_tool_search_and_then_called() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::tool_call("find_treasure", json!({})),
        Turn::tool_call("tool_search", json!({"query": "treasure"}))
            .expecting("call `tool_search` with its name first"),
        Turn::tool_call("find_treasure", json!({})).expecting("find_treasure"),
        Turn::text("Under the oak.").expecting("under the oak"),
    ]);
    let schema = json!({"type": "object", "additionalProperties": false, "properties": {}});
    let tool = Arc::new(Deferred {
        spec: ToolSpec::new("find_treasure", "Finds the hidden treasure.", schema).deferred(),
    });
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(tool)
        .build()
        .await
        .unwrap();
    let report = runtime
        .bot("assistant")
        .await
        .unwrap()
        .send("where?")
        .await
        .unwrap()
        .result()
        .await
        .unwrap();
    assert_eq!(report.text, "Under the oak.", "{report:?}");
    let requests = model.requests();
    check_invariants(&requests);
    let names = |i: usize| {
        requests[i]
            .tools
            .iter()
            .map(|t| t.name.clone())
            .collect::<Vec<_>>()
    };
    assert!(!names(0).contains(&"find_treasure".to_string()));
    assert!(names(0).contains(&"tool_search".to_string()));
    let search = requests[0]
        .tools
        .iter()
        .find(|t| t.name == "tool_search")
        .unwrap();
    assert!(
        search.description.contains("find_treasure"),
        "the search lists deferred tools by name"
    );
    assert!(
        names(2).contains(&"find_treasure".to_string()),
        "loaded from the next call on"
    );
}

#[tokio::test]
async fn stop_mid_turn_ends_it_and_status_answers_meanwhile() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let model = script(vec![
        Turn::tool_call("hold", json!({})),
        Turn::text("after"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(hold.clone())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let turn = bot.send("wait for it").await.unwrap();
    tokio::time::timeout(WAIT, hold.entered.notified())
        .await
        .unwrap();
    let status = runtime.node().status(bot.conversation()).await.unwrap();
    assert!(status.busy);
    assert_eq!(status.steps, 1);
    bot.stop().await.unwrap();
    let report = tokio::time::timeout(WAIT, turn.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.outcome, TurnOutcome::Stopped);
    assert_eq!(model.requests().len(), 1, "no model call after the stop");
    // The next turn sees the call answered.
    let next = ask(&bot, "again").await;
    assert_eq!(next.text, "after");
    check_invariants(&model.requests());
}

#[tokio::test]
async fn steer_adds_a_message_before_the_next_model_call() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let model = script(vec![
        Turn::tool_call("hold", json!({})),
        Turn::text("Rome too.").expecting("also check Rome"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(hold.clone())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let turn = bot.send("check Paris").await.unwrap();
    tokio::time::timeout(WAIT, hold.entered.notified())
        .await
        .unwrap();
    bot.steer("also check Rome").await.unwrap();
    // The steer is queued in the actor before the release reaches the tool.
    runtime.node().status(bot.conversation()).await.unwrap();
    hold.release.notify_one();
    let report = tokio::time::timeout(WAIT, turn.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.text, "Rome too.", "{report:?}");
}

#[tokio::test]
async fn a_long_history_is_compacted_with_the_tail_kept_verbatim() {
    let home = TestHome::new();
    let long = |tag: &str| format!("{tag}: {}", "words ".repeat(350));
    let model = script(vec![
        Turn::text("a1"),
        Turn::text("a2"),
        Turn::text("The user sent three long notes; nothing is pending.")
            .expecting("Summarize this part"),
        Turn::text("a3"),
        Turn::text("a4"),
    ]);
    let build = |model| {
        home.builder(model)
            .set("compaction.threshold", "0.01")
            .set("compaction.keep_recent_messages", "2")
    };
    let runtime = build(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    for tag in ["one", "two"] {
        ask(&bot, long(tag)).await;
    }
    let mut turn = bot.send(long("three")).await.unwrap();
    let (before, after) = wait_for(&mut turn, |e| match e {
        AgentEvent::Compacted { before, after } => Some((*before, *after)),
        _ => None,
    })
    .await;
    assert_eq!((before, after), (5, 3));
    assert_eq!(turn.result().await.unwrap().text, "a3");
    let requests = model.requests();
    check_invariants(&requests);
    let visible = |i: usize| {
        requests[i]
            .messages
            .iter()
            .map(|m| format!("{}: {:.40}", m.role(), m.text()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        visible(3),
        vec![
            "user: [Summary of the earlier part of this con".to_string(),
            "assistant: a2".to_string(),
            format!("user: {:.40}", long("three")),
        ],
        "the summary, then the tail verbatim"
    );
    runtime.shutdown().await;
    // Reopened, the conversation reads its latest segment.
    let again = script(vec![Turn::text("a4").expecting("four")]);
    let runtime = build(Arc::clone(&again)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "four").await;
    let first = &again.requests()[0].messages[0];
    assert!(first.text().starts_with(
        "[Summary of the earlier part of this conversation]\nThe user sent three long notes"
    ));
    assert_eq!(again.requests()[0].messages.len(), 5);
}

#[test]
fn a_crash_mid_turn_resumes_without_running_a_completed_tool_twice() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let two_calls: Turn = serde_json::from_value(json!({"tool_calls": [
        {"name": "hold", "arguments": {}},
        {"name": "lookup_weather", "arguments": {"city": "Paris"}}
    ]}))
    .unwrap();
    // First life: the turn stops inside `hold`, and the process "crashes":
    // its async runtime is torn down with every task in flight.
    let first = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let conversation = first.block_on(async {
        let model = script(vec![two_calls]);
        let runtime = home
            .builder(model)
            .tool(Weather::new())
            .tool(hold.clone())
            .build()
            .await
            .unwrap();
        let bot = runtime.bot("assistant").await.unwrap();
        let _turn = bot.send("go").await.unwrap();
        tokio::time::timeout(WAIT, hold.entered.notified())
            .await
            .unwrap();
        bot.conversation()
    });
    first.shutdown_background();
    // Second life on the same home: the turn resumes by itself.
    let second = tokio::runtime::Runtime::new().unwrap();
    second.block_on(async {
        let model = script(vec![Turn::text("Recovered.").expecting("sunny, 21C")]);
        let (bus, mut events) = {
            let (tx, rx) = tokio::sync::broadcast::channel(256);
            (tx, rx)
        };
        let hold_again = Gate::new("hold");
        let runtime = home
            .builder(Arc::clone(&model))
            .tool(Weather::new())
            .tool(hold_again.clone())
            .event_bus(bus)
            .build()
            .await
            .unwrap();
        let outcome = tokio::time::timeout(WAIT, async {
            loop {
                let e = events.recv().await.unwrap();
                if let AgentEvent::TurnFinished { outcome, text, .. } = e.event {
                    assert_eq!(e.conversation, conversation);
                    return (outcome, text);
                }
            }
        })
        .await
        .unwrap();
        assert_eq!(outcome, (TurnOutcome::Finished, "Recovered.".to_string()));
        assert_eq!(
            *hold_again.calls.lock(),
            0,
            "the interrupted call was not run again"
        );
        let request = &model.requests()[0];
        check_invariants(&model.requests());
        let results: Vec<ToolResult> = request
            .messages
            .iter()
            .filter_map(|m| match m {
                Message::Tool { result, .. } => Some(result.clone()),
                _ => None,
            })
            .collect();
        assert!(results[0]
            .text
            .starts_with("outcome unknown: troupe stopped while `hold` was running"));
        assert_eq!(
            results[1].text, "sunny, 21C",
            "the read-only call ran again"
        );
        runtime.shutdown().await;
    });
}

#[tokio::test]
async fn past_conversations_are_found_with_conversation_search() {
    let home = TestHome::new();
    let model = script(vec![
        Turn::text("Noted: the café opens at eight."),
        Turn::tool_call("tool_search", json!({"query": "conversation_search"})),
        Turn::tool_call("conversation_search", json!({"query": "cafe opens"})),
        Turn::text("It opens at eight.").expecting("opens at eight"),
    ]);
    let runtime = home.builder(Arc::clone(&model)).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    ask(&bot, "Remember: the café opens at eight.").await;
    let other = bot.new_conversation().await.unwrap();
    let report = ask(&other, "When does the cafe open?").await;
    assert_eq!(report.text, "It opens at eight.", "{report:?}");
}

/// A scripted model whose first call waits until released.
struct SlowFirst {
    inner: Arc<troupe::runtime::model::ScriptedProvider>,
    entered: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
    calls: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl troupe::runtime::model::Provider for SlowFirst {
    fn name(&self) -> &str {
        "slow"
    }

    async fn stream(
        &self,
        request: troupe::runtime::model::ModelRequest,
    ) -> Result<troupe::runtime::model::ModelStream, troupe::runtime::model::ModelError> {
        if self.calls.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 0 {
            self.entered.notify_one();
            self.release.notified().await;
        }
        self.inner.stream(request).await
    }
}

#[tokio::test]
async fn a_steer_during_the_final_answer_starts_the_next_turn() {
    let home = TestHome::new();
    let inner = script(vec![
        Turn::text("first answer"),
        Turn::text("about the roof").expecting("and the roof?"),
    ]);
    let model = Arc::new(SlowFirst {
        inner: Arc::clone(&inner),
        entered: Arc::new(tokio::sync::Notify::new()),
        release: Arc::new(tokio::sync::Notify::new()),
        calls: Default::default(),
    });
    let (bus, mut events) = tokio::sync::broadcast::channel(256);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(model.clone())
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let turn = bot.send("hello").await.unwrap();
    tokio::time::timeout(WAIT, model.entered.notified())
        .await
        .unwrap();
    bot.steer("and the roof?").await.unwrap();
    runtime.node().status(bot.conversation()).await.unwrap();
    model.release.notify_one();
    assert_eq!(turn.result().await.unwrap().text, "first answer");
    let text = tokio::time::timeout(WAIT, async {
        loop {
            if let AgentEvent::TurnFinished { text, .. } = events.recv().await.unwrap().event {
                if text != "first answer" {
                    return text;
                }
            }
        }
    })
    .await
    .unwrap();
    assert_eq!(text, "about the roof");
}
