use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;

use super::*;
use crate::home::Home;
use crate::protocol::{ToolResult, ToolStatus};
use crate::tool::{ToolContext, ToolSpec};

/// A tool whose behaviour the test picks.
struct TestTool {
    spec: ToolSpec,
    behaviour: Behaviour,
    log: Arc<Mutex<Vec<String>>>,
}

#[derive(Clone)]
enum Behaviour {
    Echo,
    Panic,
    Hang,
    Big(usize),
    Barrier(Arc<tokio::sync::Barrier>),
}

#[async_trait::async_trait]
impl Tool for TestTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: serde_json::Value, _ctx: &ToolContext) -> ToolResult {
        self.log.lock().push(format!("start {}", self.spec.name));
        let result = match &self.behaviour {
            Behaviour::Echo => ToolResult::ok(args.to_string()),
            Behaviour::Panic => panic!("boom"),
            Behaviour::Hang => {
                std::future::pending::<()>().await;
                ToolResult::ok("never")
            }
            Behaviour::Big(n) => ToolResult::ok("x".repeat(*n)),
            Behaviour::Barrier(b) => {
                b.wait().await;
                ToolResult::ok("met")
            }
        };
        self.log.lock().push(format!("end {}", self.spec.name));
        result
    }
}

fn params() -> serde_json::Value {
    json!({"type": "object", "additionalProperties": false, "properties": {"x": {"type": "integer"}}})
}

struct Fixture {
    dispatcher: Dispatcher,
    visible: HashSet<String>,
    ctx: ToolContext,
    log: Arc<Mutex<Vec<String>>>,
    _home: tempfile::TempDir,
}

fn fixture(tools: Vec<(ToolSpec, Behaviour)>, gate: Arc<dyn CallGate>) -> Fixture {
    let log = Arc::new(Mutex::new(Vec::new()));
    let mut registry = Registry::new();
    for (spec, behaviour) in tools {
        registry
            .register(Arc::new(TestTool {
                spec,
                behaviour,
                log: Arc::clone(&log),
            }))
            .unwrap();
    }
    let visible = registry
        .iter()
        .filter(|t| t.spec().exposure == Exposure::AlwaysOn)
        .map(|t| t.spec().name.clone())
        .collect();
    let home = tempfile::tempdir().unwrap();
    let ctx = ToolContext::standalone(Home::new(home.path()), home.path().to_path_buf());
    let settings = DispatchSettings {
        default_timeout: Duration::from_millis(300),
        spill_limit_chars: 100,
    };
    Fixture {
        dispatcher: Dispatcher::new(Arc::new(registry), gate, settings),
        visible,
        ctx,
        log,
        _home: home,
    }
}

fn call(name: &str, args: serde_json::Value) -> ToolCall {
    ToolCall {
        id: format!("call_{name}"),
        name: name.into(),
        arguments: args,
    }
}

async fn run(f: &Fixture, calls: &[ToolCall]) -> Vec<ToolResult> {
    f.dispatcher
        .run_step(calls.to_vec(), &f.visible, &f.ctx, &|_| {}, &|_| {})
        .await
        .into_iter()
        .map(|o| o.result)
        .collect()
}

#[tokio::test]
async fn unknown_tools_and_unloaded_deferred_tools_are_explained() {
    let f = fixture(
        vec![
            (ToolSpec::new("echo", "e", params()), Behaviour::Echo),
            (
                ToolSpec::new("later", "l", params()).deferred(),
                Behaviour::Echo,
            ),
        ],
        Arc::new(OpenGate),
    );
    let results = run(&f, &[call("nope", json!({})), call("later", json!({}))]).await;
    assert_eq!(
        results[0],
        ToolResult::error("unknown tool `nope`. The tools you can call are: echo.")
    );
    assert!(
        results[1]
            .text
            .contains("call `tool_search` with its name first"),
        "{}",
        results[1].text
    );
}

#[tokio::test]
async fn arguments_that_fail_the_schema_come_back_as_errors() {
    let f = fixture(
        vec![(ToolSpec::new("echo", "e", params()), Behaviour::Echo)],
        Arc::new(OpenGate),
    );
    let results = run(
        &f,
        &[
            call("echo", json!({"x": "1", "y": 2})),
            call("echo", json!(null)),
        ],
    )
    .await;
    assert_eq!(
        results[0].text,
        "invalid arguments for `echo`: `x` must be integer, not a string; unknown argument `y` (accepted: x). Call it again with arguments that match its schema."
    );
    assert_eq!(
        results[1],
        ToolResult::ok("{}"),
        "null arguments are an empty object"
    );
    assert!(f.log.lock().len() == 2, "only the valid call ran");
}

#[tokio::test]
async fn a_panicking_tool_is_an_error_result_and_the_next_call_runs() {
    let f = fixture(
        vec![
            (ToolSpec::new("bad", "b", params()), Behaviour::Panic),
            (ToolSpec::new("echo", "e", params()), Behaviour::Echo),
        ],
        Arc::new(OpenGate),
    );
    let results = run(&f, &[call("bad", json!({})), call("echo", json!({"x": 1}))]).await;
    assert_eq!(results[0].status, ToolStatus::Error);
    assert!(
        results[0].text.contains("crashed (boom)"),
        "{}",
        results[0].text
    );
    assert_eq!(results[1], ToolResult::ok(r#"{"x":1}"#));
}

#[tokio::test]
async fn a_hanging_tool_is_cut_off_at_its_timeout() {
    let f = fixture(
        vec![(ToolSpec::new("hang", "h", params()), Behaviour::Hang)],
        Arc::new(OpenGate),
    );
    let results = run(&f, &[call("hang", json!({}))]).await;
    assert_eq!(
        results[0],
        ToolResult::error("the tool `hang` did not finish within 0.3 s and was stopped.")
    );
}

#[tokio::test]
async fn read_only_calls_of_one_step_run_together() {
    // Each waits for the other at a barrier: run one after another they would
    // never meet and both would time out.
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let f = fixture(
        vec![
            (
                ToolSpec::new("a", "a", params()).read_only(),
                Behaviour::Barrier(Arc::clone(&barrier)),
            ),
            (
                ToolSpec::new("b", "b", params()).read_only(),
                Behaviour::Barrier(barrier),
            ),
        ],
        Arc::new(OpenGate),
    );
    let results = run(&f, &[call("a", json!({})), call("b", json!({}))]).await;
    assert_eq!(results, vec![ToolResult::ok("met"), ToolResult::ok("met")]);
}

#[tokio::test]
async fn a_read_only_call_never_runs_before_an_earlier_writing_call() {
    // `r1` and `r2` stand after `w`: they start only once `w` has ended
    // (a listing after a delete sees the delete), and `r0` before `w` ends
    // before `w` starts. Results keep the calls' order.
    let f = fixture(
        vec![
            (
                ToolSpec::new("r0", "r", params()).read_only(),
                Behaviour::Echo,
            ),
            (ToolSpec::new("w", "w", params()), Behaviour::Echo),
            (
                ToolSpec::new("r1", "r", params()).read_only(),
                Behaviour::Echo,
            ),
            (
                ToolSpec::new("r2", "r", params()).read_only(),
                Behaviour::Echo,
            ),
        ],
        Arc::new(OpenGate),
    );
    let results = run(
        &f,
        &[
            call("r0", json!({"x": 0})),
            call("w", json!({"x": 1})),
            call("r1", json!({"x": 2})),
            call("r2", json!({"x": 3})),
        ],
    )
    .await;
    let texts: Vec<&str> = results.iter().map(|r| r.text.as_str()).collect();
    assert_eq!(
        texts,
        [r#"{"x":0}"#, r#"{"x":1}"#, r#"{"x":2}"#, r#"{"x":3}"#]
    );
    let log = f.log.lock().clone();
    let at = |entry: &str| log.iter().position(|l| l == entry).unwrap();
    assert!(at("end r0") < at("start w"), "{log:?}");
    assert!(at("end w") < at("start r1"), "{log:?}");
    assert!(at("end w") < at("start r2"), "{log:?}");
}

#[tokio::test]
async fn other_calls_run_one_after_another_in_order() {
    let f = fixture(
        vec![
            (ToolSpec::new("w1", "w", params()), Behaviour::Echo),
            (ToolSpec::new("w2", "w", params()), Behaviour::Echo),
        ],
        Arc::new(OpenGate),
    );
    run(
        &f,
        &[
            call("w2", json!({})),
            call("w1", json!({})),
            call("w2", json!({})),
        ],
    )
    .await;
    assert_eq!(
        *f.log.lock(),
        vec!["start w2", "end w2", "start w1", "end w1", "start w2", "end w2"]
    );
}

#[tokio::test]
async fn oversized_results_are_spilled_whole() {
    let f = fixture(
        vec![
            (ToolSpec::new("big", "b", params()), Behaviour::Big(1000)),
            (
                ToolSpec::new("pager", "p", params()).pages_own_output(),
                Behaviour::Big(1000),
            ),
        ],
        Arc::new(OpenGate),
    );
    let results = run(&f, &[call("big", json!({})), call("pager", json!({}))]).await;
    let path = results[0].data["spill_path"].as_str().unwrap();
    assert_eq!(std::fs::read_to_string(path).unwrap(), "x".repeat(1000));
    assert!(results[0].text.starts_with(&"x".repeat(100)));
    assert!(
        results[0]
            .text
            .contains("[output cut: 1000 characters, 1 lines in all;"),
        "{}",
        results[0].text
    );
    assert_eq!(
        results[1].text.len(),
        1000,
        "tools that page their own output are not spilled"
    );
}

struct DenyAll;

#[async_trait::async_trait]
impl CallGate for DenyAll {
    async fn admit(&self, spec: &ToolSpec, _call: &ToolCall, _ctx: &ToolContext) -> Admission {
        Admission::Deny(format!("`{}` is blocked by the test gate", spec.name))
    }
}

#[tokio::test]
async fn the_gate_sees_every_call_before_it_runs() {
    let f = fixture(
        vec![(ToolSpec::new("echo", "e", params()), Behaviour::Echo)],
        Arc::new(DenyAll),
    );
    let results = run(&f, &[call("echo", json!({}))]).await;
    assert_eq!(
        results[0],
        ToolResult::error("`echo` is blocked by the test gate")
    );
    assert!(f.log.lock().is_empty());
}

#[tokio::test]
async fn stopping_the_turn_stops_a_running_call() {
    let f = fixture(
        vec![(
            ToolSpec::new("hang", "h", params()).timeout(Duration::from_secs(60)),
            Behaviour::Hang,
        )],
        Arc::new(OpenGate),
    );
    let cancel = f.ctx.cancel.clone();
    let calls = [call("hang", json!({}))];
    let (results, ()) = tokio::join!(run(&f, &calls), async move { cancel.cancel() });
    assert_eq!(
        results[0],
        ToolResult::error("the call to `hang` was stopped because the turn was stopped.")
    );
}
