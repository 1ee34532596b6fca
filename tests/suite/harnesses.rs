//! Claude Code and Codex as executors, end to end with the real harnesses
//! (installed by `scripts/test` into `tests/executors`), driven offline by
//! a script's `executors` section through troupe's model relay — Anthropic
//! messages for Claude Code, the Responses API for Codex — in the real
//! sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::ScriptedProvider;
use troupe::runtime::sandbox::Sandbox;
use troupe::{AgentEvent, Runtime};

use super::support::{on_bus, WAIT};

fn modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/executors/node_modules")
}

/// A temp home with `harness` installed from the test copy and a project
/// folder beside it; `None` (after saying why) where it or a sandbox is
/// missing, unless the run requires them.
struct Bench {
    dir: tempfile::TempDir,
}

impl Bench {
    fn new(test: &str, harness: &str) -> Option<Self> {
        Sandbox::detect_or_skip(test)?;
        let package = troupe::runtime::executors::harness(harness).unwrap();
        if !modules().join(package.entry).is_file() {
            assert!(
                std::env::var_os("TROUPE_TEST_REQUIRE_EXECUTORS").is_none(),
                "{test}: {harness} is required (TROUPE_TEST_REQUIRE_EXECUTORS) but tests/executors \
                 does not hold it"
            );
            eprintln!("skipping {test}: {harness} is not installed in tests/executors");
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proj")).unwrap();
        let home = troupe::runtime::home::Home::new(dir.path().join("home"));
        troupe::runtime::executors::install_from(&home, harness, &modules()).unwrap();
        Some(Self { dir })
    }

    fn proj(&self) -> PathBuf {
        std::fs::canonicalize(self.dir.path().join("proj")).unwrap()
    }

    async fn runtime(
        &self,
        script: serde_json::Value,
    ) -> (
        Runtime,
        tokio::sync::broadcast::Receiver<troupe::actors::events::NodeEvent>,
    ) {
        let model = Arc::new(ScriptedProvider::parse(&script.to_string(), "test script").unwrap());
        let (bus, events) = tokio::sync::broadcast::channel(4096);
        let runtime = Runtime::builder()
            .home(self.dir.path().join("home"))
            .cwd(self.dir.path())
            .provider(model)
            .set("trust.mode", "auto")
            .event_bus(bus)
            .build()
            .await
            .unwrap();
        (runtime, events)
    }
}

async fn report(
    events: &mut tokio::sync::broadcast::Receiver<troupe::actors::events::NodeEvent>,
) -> String {
    let wait = on_bus(events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "delegation" => Some(text.clone()),
        _ => None,
    });
    tokio::time::timeout(WAIT * 3, wait).await.unwrap()
}

/// `delegate` with `args`, as the assistant's conversation.
async fn delegate(
    runtime: &Runtime,
    args: serde_json::Value,
) -> troupe::runtime::protocol::ToolResult {
    let bot = runtime.bot("assistant").await.unwrap();
    let node = runtime.node();
    let mut ctx = troupe::ToolContext::standalone(node.home().clone(), node.settings().cwd.clone());
    ctx.agent = bot.spec().name.clone();
    ctx.conversation = bot.conversation();
    let request = match troupe::tools::delegate::request(serde_json::from_value(args).unwrap()) {
        Ok(r) => r,
        Err(e) => return e,
    };
    node.delegations().unwrap().handle(&ctx, request).await
}

/// The instance id a `delegate` call started.
fn started(result: &troupe::runtime::protocol::ToolResult) -> String {
    assert!(!result.is_error(), "{result:?}");
    result.data["instances"][0]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Waits until instance `id`'s record has an event starting with `prefix`.
async fn recorded(runtime: &Runtime, id: &str, prefix: &str) {
    super::executors::recorded_within(runtime, id, prefix, WAIT * 2).await
}

async fn instances(runtime: &Runtime) -> Vec<troupe::actors::delegation::record::Instance> {
    runtime
        .node()
        .store()
        .read(|c| troupe::actors::delegation::record::instances(c, false, 10))
        .await
        .unwrap()
}

/// A command that waits for `file` in the folder.
fn wait_for(file: &str) -> String {
    format!("while [ ! -f {file} ]; do sleep 0.05; done; echo {file}-seen")
}

#[tokio::test]
async fn claude_code_is_steered_edits_a_file_and_reports_once() {
    let Some(bench) = Bench::new(
        "claude_code_is_steered_edits_a_file_and_reports_once",
        "claude-code",
    ) else {
        return;
    };
    let proj = bench.proj();
    let hello = proj.join("hello.txt");
    let (runtime, mut events) = bench
        .runtime(json!({
            "turns": [{"text": "heard the report"}],
            "executors": {"claude-code": {"turns": [
                {"tool_calls": [{"name": "Bash", "arguments": {"command": wait_for("go"),
                  "description": "wait for go"}}], "expect": "Write hello.txt"},
                {"tool_calls": [{"name": "Write", "arguments": {"file_path": hello,
                  "content": "hi-from-claude"}}], "expect": "also say thanks"},
                {"text": "Wrote hello.txt. Thanks!", "expect": "hello.txt"}
            ]}}
        }))
        .await;
    let id = started(
        &delegate(
            &runtime,
            json!({"executor": "claude-code", "tasks": [{"goal": "Write hello.txt", "folder": proj}]}),
        )
        .await,
    );
    recorded(&runtime, &id, "Bash while [ ! -f go ]").await;
    let steered = delegate(
        &runtime,
        json!({"action": "steer", "subagent_id": id, "message": "also say thanks"}),
    )
    .await;
    assert!(!steered.is_error(), "{steered:?}");
    std::fs::write(proj.join("go"), "").unwrap();
    let text = report(&mut events).await;
    assert!(
        text.contains("[done]") && text.contains("Wrote hello.txt. Thanks!"),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&hello).unwrap(), "hi-from-claude");
    let rows = instances(&runtime).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].row.status, "done");
    assert!(rows[0].row.session.is_some(), "{rows:?}");
    // Reported once: no second report comes while the parent answers.
    let bot = runtime.bot("assistant").await.unwrap();
    let conversation = bot.conversation();
    tokio::time::timeout(WAIT, async {
        loop {
            let n = runtime
                .node()
                .store()
                .read(move |c| {
                    Ok(
                        troupe::runtime::store::conversations::load_messages(c, conversation)?
                            .into_iter()
                            .filter(|m| m.message.text().starts_with("[notice: delegation]"))
                            .count(),
                    )
                })
                .await
                .unwrap();
            assert!(n <= 1, "reported {n} times");
            if n == 1 {
                return;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    runtime.shutdown().await;
}

#[tokio::test]
async fn claude_code_is_stopped_mid_command() {
    let Some(bench) = Bench::new("claude_code_is_stopped_mid_command", "claude-code") else {
        return;
    };
    let proj = bench.proj();
    let (runtime, mut events) = bench
        .runtime(json!({
            "turns": [{"text": "heard the report"}],
            "executors": {"claude-code": {"turns": [
                {"text": "Waiting.", "tool_calls": [{"name": "Bash", "arguments": {
                  "command": wait_for("never"), "description": "wait"}}]},
                {"text": "went on after the stop", "expect": "never happens"}
            ]}}
        }))
        .await;
    let id = started(
        &delegate(
            &runtime,
            json!({"executor": "claude-code", "tasks": [{"goal": "wait", "folder": proj}]}),
        )
        .await,
    );
    recorded(&runtime, &id, "Bash while [ ! -f never ]").await;
    let stopped = delegate(&runtime, json!({"action": "stop", "subagent_id": id})).await;
    assert!(!stopped.is_error(), "{stopped:?}");
    let text = report(&mut events).await;
    assert!(
        text.contains("[stopped]") && text.contains("Waiting."),
        "{text}"
    );
    assert_eq!(instances(&runtime).await[0].row.status, "stopped");
    runtime.shutdown().await;
}

#[tokio::test]
async fn codex_edits_a_file_then_is_resumed_in_the_same_session() {
    let Some(bench) = Bench::new(
        "codex_edits_a_file_then_is_resumed_in_the_same_session",
        "codex",
    ) else {
        return;
    };
    let proj = bench.proj();
    let (runtime, mut events) = bench
        .runtime(json!({
            "turns": [{"text": "heard the first report"}, {"text": "heard the second report"}],
            "executors": {"codex": {"turns": [
                {"tool_calls": [{"name": "exec_command", "arguments": {
                  "cmd": "printf hi-from-codex > hello.txt"}}], "expect": "Write hello.txt"},
                {"text": "Wrote hello.txt.", "expect": "Process exited with code 0"},
                {"text": "Resumed: hello.txt is there.", "expect": "check it"}
            ]}}
        }))
        .await;
    let id = started(
        &delegate(
            &runtime,
            json!({"executor": "codex", "tasks": [{"goal": "Write hello.txt", "folder": proj}]}),
        )
        .await,
    );
    let text = report(&mut events).await;
    assert!(
        text.contains("[done]") && text.contains("Wrote hello.txt."),
        "{text}"
    );
    let sub = instances(&runtime).await[0].row.id;
    let record = runtime
        .node()
        .store()
        .read(move |c| troupe::actors::delegation::record::events_of(c, sub, 0, 100))
        .await
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(proj.join("hello.txt"))
            .ok()
            .as_deref(),
        Some("hi-from-codex"),
        "{record:?}"
    );
    // Codex takes no steer while it works: it says how to go on instead.
    let steer = delegate(
        &runtime,
        json!({"action": "steer", "subagent_id": id, "message": "x"}),
    )
    .await;
    assert!(steer.is_error(), "{steer:?}");
    let resumed = delegate(
        &runtime,
        json!({"action": "resume", "subagent_id": id, "message": "check it"}),
    )
    .await;
    assert!(!resumed.is_error(), "{resumed:?}");
    let text = report(&mut events).await;
    assert!(text.contains("Resumed: hello.txt is there."), "{text}");
    let rows = instances(&runtime).await;
    assert_eq!(rows.len(), 2);
    assert!(rows[0].row.session.is_some());
    assert_eq!(rows[0].row.session, rows[1].row.session, "{rows:?}");
    runtime.shutdown().await;
}

/// Waits for the next approval request on the bus: its id, call and reason.
async fn approval_asked(
    events: &mut tokio::sync::broadcast::Receiver<troupe::actors::events::NodeEvent>,
) -> (String, troupe::runtime::protocol::ToolCall, String) {
    let wait = on_bus(events, |e| match &e.event {
        AgentEvent::ApprovalRequested {
            request_id,
            call,
            reason,
        } => Some((request_id.clone(), call.clone(), reason.clone())),
        _ => None,
    });
    tokio::time::timeout(WAIT * 3, wait).await.unwrap()
}

#[tokio::test]
async fn claude_code_asks_the_user_through_troupe_before_a_write_outside_its_folder() {
    let Some(bench) = Bench::new(
        "claude_code_asks_the_user_through_troupe_before_a_write_outside_its_folder",
        "claude-code",
    ) else {
        return;
    };
    let proj = bench.proj();
    // Outside the task's folder, yet writable in its sandbox: its account's
    // folder. In `acceptEdits` Claude Code writes in its folder unasked and
    // asks before writing anywhere else.
    let account = std::fs::canonicalize(bench.dir.path().join("home"))
        .unwrap()
        .join("executors/claude-code/sessions");
    let (yes, no) = (account.join("allowed.txt"), account.join("denied.txt"));
    let (runtime, mut events) = bench
        .runtime(json!({
            "turns": [{"text": "heard the report"}],
            "executors": {"claude-code": {"turns": [
                {"tool_calls": [{"name": "Write", "arguments": {"file_path": yes,
                  "content": "allowed"}}]},
                {"tool_calls": [{"name": "Write", "arguments": {"file_path": no,
                  "content": "denied"}}], "expect": "File created successfully"},
                {"text": "One written, one refused.", "expect": "it did not run"}
            ]}}
        }))
        .await;
    started(
        &delegate(
            &runtime,
            json!({"executor": "claude-code", "tasks": [{"goal": "Write notes", "folder": proj}]}),
        )
        .await,
    );
    let (request, call, reason) = approval_asked(&mut events).await;
    assert_eq!(call.name, "claude-code:Write");
    assert_eq!(call.arguments["file_path"], json!(yes), "{call:?}");
    assert!(reason.contains("asks to run its tool Write"), "{reason}");
    assert!(runtime.node().answer(&request, Some(json!("yes"))));
    let (request, call, _) = approval_asked(&mut events).await;
    assert_eq!(call.arguments["file_path"], json!(no), "{call:?}");
    assert!(runtime.node().answer(&request, Some(json!("no"))));
    let text = report(&mut events).await;
    assert!(
        text.contains("[done]") && text.contains("One written, one refused."),
        "{text}"
    );
    assert_eq!(std::fs::read_to_string(&yes).unwrap(), "allowed");
    assert!(!no.exists());
    let sub = instances(&runtime).await[0].row.id;
    let record = runtime
        .node()
        .store()
        .read(move |c| troupe::actors::delegation::record::events_of(c, sub, 0, 100))
        .await
        .unwrap();
    let notes: Vec<String> = record
        .iter()
        .map(|(_, _, text, _)| text.clone())
        .filter(|t| t.starts_with("permission: Write"))
        .collect();
    assert_eq!(notes.len(), 2, "{record:?}");
    assert!(notes[0].ends_with("allowed by the user"), "{notes:?}");
    assert!(notes[1].contains("denied"), "{notes:?}");
    runtime.shutdown().await;
}
