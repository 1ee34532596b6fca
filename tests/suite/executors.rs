//! Outside executors, end to end with the real pi (installed by
//! `scripts/test` into `tests/executors`), driven offline by a script's
//! `executors` section through troupe's model relay, in the real sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::ScriptedProvider;
use troupe::runtime::sandbox::Sandbox;
use troupe::{AgentEvent, Runtime};

use super::support::{ask, on_bus, WAIT};

/// The pi that `scripts/test` installs.
fn pi_modules() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/executors/node_modules")
}

/// Whether `test` can run: a sandbox, and pi in `tests/executors`
/// (required where `TROUPE_TEST_REQUIRE_EXECUTORS` is set); says why not.
fn ready(test: &str) -> bool {
    if Sandbox::detect_or_skip(test).is_none() {
        return false;
    }
    if !pi_modules().join("@mariozechner/pi-coding-agent").is_dir() {
        assert!(
            std::env::var_os("TROUPE_TEST_REQUIRE_EXECUTORS").is_none(),
            "{test}: pi is required (TROUPE_TEST_REQUIRE_EXECUTORS) but tests/executors is not installed"
        );
        eprintln!(
            "skipping {test}: pi is not installed in tests/executors (scripts/test installs it)"
        );
        return false;
    }
    true
}

/// A temp home with pi installed from the test copy and a project folder
/// beside it; `None` (after saying why) where pi or a sandbox is missing,
/// unless the run requires them.
struct Bench {
    dir: tempfile::TempDir,
}

impl Bench {
    fn new(test: &str) -> Option<Self> {
        if !ready(test) {
            return None;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("proj")).unwrap();
        let home = troupe::runtime::home::Home::new(dir.path().join("home"));
        troupe::runtime::executors::install_from(&home, "pi", &pi_modules()).unwrap();
        Some(Self { dir })
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn proj(&self) -> PathBuf {
        self.dir.path().join("proj")
    }

    fn model(&self, script: serde_json::Value) -> Arc<ScriptedProvider> {
        Arc::new(ScriptedProvider::parse(&script.to_string(), "test script").unwrap())
    }

    fn builder(&self, model: Arc<ScriptedProvider>) -> troupe::RuntimeBuilder {
        Runtime::builder()
            .home(self.home())
            .cwd(self.dir.path())
            .provider(model)
            .set("trust.mode", "auto")
    }
}

async fn wait_report(
    events: &mut tokio::sync::broadcast::Receiver<troupe::actors::events::NodeEvent>,
) -> String {
    on_bus(events, |e| match &e.event {
        AgentEvent::Notice { topic, text } if topic == "delegation" => Some(text.clone()),
        _ => None,
    })
    .await
}

/// `delegate` called with `args` as `bot`'s conversation (its reports go
/// to that conversation's mailbox).
async fn delegate(
    runtime: &Runtime,
    bot: &troupe::Bot,
    args: serde_json::Value,
) -> troupe::runtime::protocol::ToolResult {
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

/// Waits until instance `id`'s record has an event whose text starts with
/// `prefix` (pi's progress, recorded as it arrives).
async fn recorded(runtime: &Runtime, id: &str, prefix: &str) {
    recorded_within(runtime, id, prefix, WAIT).await
}

/// [`recorded`], waiting at most `wait` (a real harness starts slowly):
/// the record is read again each time one of its writes commits
/// (`Delegations::record_changes`), not polled.
pub(super) async fn recorded_within(
    runtime: &Runtime,
    id: &str,
    prefix: &str,
    wait: std::time::Duration,
) {
    let (id, prefix) = (id.to_string(), prefix.to_string());
    // Subscribed before the first read: no commit falls between the two.
    let mut changes = runtime.node().delegations().unwrap().record_changes();
    tokio::time::timeout(wait, async {
        loop {
            let s = id.clone();
            let events = runtime
                .node()
                .store()
                .read(move |c| {
                    let row = troupe::actors::delegation::record::instance(c, &s)?.unwrap();
                    troupe::actors::delegation::record::events_of(c, row.id, 0, 1000)
                })
                .await
                .unwrap();
            if events.iter().any(|e| e.2.starts_with(&prefix)) {
                return;
            }
            changes
                .changed()
                .await
                .expect("the node's delegations outlive its runtime");
        }
    })
    .await
    .unwrap_or_else(|_| panic!("instance {id} never recorded {prefix:?}"));
}

/// How many processes name `text` on their command line.
fn processes_naming(text: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .chars()
                .all(|c| c.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .filter(|c| String::from_utf8_lossy(c).contains(text))
        .count()
}

/// The delegation notices in the conversation's history.
async fn reports(runtime: &Runtime, conversation: troupe::runtime::id::ConversationId) -> usize {
    runtime
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
        .unwrap()
}

#[tokio::test]
async fn pi_writes_a_file_in_the_task_folder_and_reports_once() {
    let Some(bench) = Bench::new("pi_writes_a_file_in_the_task_folder_and_reports_once") else {
        return;
    };
    let proj = bench.proj();
    let model = bench.model(json!({
        "turns": [
            {"tool_calls": [{"name": "delegate", "arguments": {"executor": "pi", "tasks": [
                {"goal": "Write hello.txt containing hi-from-pi", "folder": proj}]}}]},
            {"text": "Delegated to pi.", "expect": "Started 1 pi instance"},
            {"text": "pi reported back.", "expect": "[done]"}
        ],
        "executors": {"pi": {"turns": [
            {"tool_calls": [{"name": "bash", "arguments": {"command": format!(
                "ls -A {home} > home-seen.txt 2>&1; cat {home}/troupe.db >> home-seen.txt 2>&1; \
                 env | grep -c KEY >> home-seen.txt; true",
                home = bench.home().display())}}],
             "expect": "Write hello.txt"},
            {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "hi-from-pi"}}]},
            {"text": "Wrote hello.txt.", "expect": "Successfully wrote"}
        ]}}
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = bench.builder(model).event_bus(bus).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "have pi write the file").await;
    assert_eq!(report.text, "Delegated to pi.", "{report:?}");
    let text = tokio::time::timeout(WAIT * 3, wait_report(&mut events))
        .await
        .unwrap();
    assert!(
        text.contains("[done]") && text.contains("Wrote hello.txt."),
        "{text}"
    );
    assert_eq!(
        std::fs::read_to_string(proj.join("hello.txt")).unwrap(),
        "hi-from-pi"
    );
    // Of troupe's home pi saw only its own files: no database, no config,
    // and no key in its environment.
    let seen = std::fs::read_to_string(proj.join("home-seen.txt")).unwrap();
    assert!(
        !seen.contains("config.toml") && !seen.contains("SQLite"),
        "{seen}"
    );
    assert!(
        seen.contains("executors") && seen.contains("No such file"),
        "{seen}"
    );
    assert!(
        seen.trim_end().ends_with('0'),
        "a key reached pi's environment: {seen}"
    );
    // The record has what pi did, and the instance is on the workbench.
    let instances = runtime
        .node()
        .store()
        .read(|c| troupe::actors::delegation::record::instances(c, false, 10))
        .await
        .unwrap();
    assert_eq!(instances.len(), 1);
    let instance = &instances[0];
    assert_eq!(instance.row.status, "done");
    assert!(
        instance
            .row
            .session
            .as_deref()
            .is_some_and(|s| s.ends_with(".jsonl")),
        "{instance:?}"
    );
    let sub = instance.row.id;
    let events_of = runtime
        .node()
        .store()
        .read(move |c| troupe::actors::delegation::record::events_of(c, sub, 0, 100))
        .await
        .unwrap();
    let kinds: Vec<&str> = events_of.iter().map(|e| e.1.as_str()).collect();
    assert!(
        kinds.contains(&"tool") && kinds.contains(&"message"),
        "{events_of:?}"
    );
    // delegation_search finds it by executor, and a read shows pi's own
    // session, its start and its end.
    let search = |args: serde_json::Value| {
        let node = runtime.node().clone();
        let ctx = troupe::ToolContext::standalone(node.home().clone(), node.settings().cwd.clone());
        ctx.services.node().set_store(node.store().clone());
        async move {
            use troupe::Tool;
            troupe::tools::delegation_search::delegation_search::tool()
                .call(args, &ctx)
                .await
        }
    };
    let found = search(json!({"executor": "pi"})).await;
    assert!(found.text.contains(&sub.to_string()), "{}", found.text);
    let none = search(json!({"executor": "claude"})).await;
    assert!(!none.text.contains(&sub.to_string()), "{}", none.text);
    let read = search(json!({"instance_id": sub.to_string(), "include_tools": true})).await;
    assert!(
        read.text.contains("pi session") && read.text.contains("Wrote hello.txt."),
        "{}",
        read.text
    );
    assert!(read.text.contains("[calls write"), "{}", read.text);
    // Its report reached the parent once (the parent's next turn saw it).
    tokio::time::timeout(WAIT, async {
        while reports(&runtime, bot.conversation()).await == 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .unwrap();
    assert_eq!(reports(&runtime, bot.conversation()).await, 1);
    // Nothing of the home was visible to pi: its sandbox hid it.
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_running_pi_is_steered_then_stopped_and_resumed_in_the_same_session() {
    let Some(bench) =
        Bench::new("a_running_pi_is_steered_then_stopped_and_resumed_in_the_same_session")
    else {
        return;
    };
    let proj = bench.proj();
    // pi's first call runs a command that waits for the file `go`; the
    // steer lands before its next call; the second wait is stopped.
    let wait_for = |file: &str| {
        json!({"tool_calls": [{"name": "bash", "arguments": {
        "command": format!("while [ ! -f {file} ]; do sleep 0.05; done; echo {file}-seen")}}]})
    };
    let model = bench.model(json!({
        "turns": [{"text": "heard the first report"}, {"text": "heard the second report"}],
        "executors": {"pi": {"turns": [
            wait_for("go"),
            {"text": "", "expect": "also write notes", "tool_calls": [{"name": "bash", "arguments": {
                "command": "while true; do sleep 0.05; done"}}]},
            {"text": "Resumed: I remember the go file.", "expect": "carry on"}
        ]}}
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = bench.builder(model).event_bus(bus).build().await.unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let ctx_call = |args: serde_json::Value| delegate(&runtime, &bot, args);
    let started =
        ctx_call(json!({"executor": "pi", "tasks": [{"goal": "wait for go", "folder": proj}]}))
            .await;
    assert!(!started.is_error(), "{started:?}");
    let id = started.data["instances"][0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    recorded(&runtime, &id, "bash while [ ! -f go ]").await;
    let listed = ctx_call(json!({"action": "list"})).await;
    assert!(
        listed.text.contains(&id) && listed.text.contains("[running]"),
        "{}",
        listed.text
    );
    let steered =
        ctx_call(json!({"action": "steer", "subagent_id": id, "message": "also write notes"}))
            .await;
    assert!(!steered.is_error(), "{steered:?}");
    std::fs::write(proj.join("go"), "").unwrap();
    // The steer reached pi's next model call (its `expect` checks it), and
    // pi is in its second, endless command: stop it.
    recorded(&runtime, &id, "bash while true").await;
    let stopped = ctx_call(json!({"action": "stop", "subagent_id": id})).await;
    assert!(!stopped.is_error(), "{stopped:?}");
    let text = tokio::time::timeout(WAIT, wait_report(&mut events))
        .await
        .unwrap();
    assert!(
        text.contains("[stopped]") && text.contains("resume"),
        "{text}"
    );
    // Resumed: a new instance on the same session file.
    let resumed =
        ctx_call(json!({"action": "resume", "subagent_id": id, "message": "carry on"})).await;
    assert!(!resumed.is_error(), "{resumed:?}");
    let text = tokio::time::timeout(WAIT, wait_report(&mut events))
        .await
        .unwrap();
    assert!(text.contains("Resumed: I remember the go file."), "{text}");
    let rows = runtime
        .node()
        .store()
        .read(|c| troupe::actors::delegation::record::instances(c, false, 10))
        .await
        .unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!(rows[0].row.session, rows[1].row.session, "{rows:?}");
    runtime.shutdown().await;
}

#[tokio::test]
async fn troupe_killed_mid_instance_reports_it_interrupted_once_and_never_runs_it_again() {
    let Some(bench) = Bench::new(
        "troupe_killed_mid_instance_reports_it_interrupted_once_and_never_runs_it_again",
    ) else {
        return;
    };
    let proj = bench.proj();
    // pi notes its shell's pid, then waits for a file that never comes.
    let script = bench.dir.path().join("s.json");
    let text = json!({
        "turns": [
            {"tool_calls": [{"name": "delegate", "arguments": {"executor": "pi", "tasks": [
                {"goal": "wait", "folder": proj}]}}]},
            {"text": "Delegated."},
            {"text": "Heard it was interrupted.", "expect": "interrupted"}
        ],
        "executors": {"pi": {"turns": [
            {"tool_calls": [{"name": "bash", "arguments": {
                "command": "echo $$ > pid; while [ ! -f never ]; do sleep 0.05; done"}}]},
            {"text": "ran twice", "expect": "never happens"}
        ]}}
    });
    std::fs::write(&script, text.to_string()).unwrap();
    let spec = format!("script:{}", script.display());
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args([
            "--home",
            bench.home().to_str().unwrap(),
            "run",
            "--model",
            &spec,
            "--auto",
            "go",
        ])
        .current_dir(bench.dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    // pi's command runs: its shell's pid is written.
    let pid_file = proj.join("pid");
    tokio::time::timeout(WAIT * 3, async {
        while !std::fs::read_to_string(&pid_file).is_ok_and(|t| !t.trim().is_empty()) {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("pi never ran its command");
    child.kill().unwrap();
    child.wait().unwrap();
    // The harness's sandbox died with troupe: no process works in the folder.
    let folder = proj.display().to_string();
    tokio::time::timeout(WAIT, async {
        while processes_naming(&folder) > 0 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the harness outlived troupe");
    let output = bench.home().join("executors/pi/instances");
    // Restart on the same home: the instance is reported interrupted, once.
    // (The new process's model answers only the parent's turn on the report.)
    let model = bench.model(json!({
        "turns": [{"text": "Heard it was interrupted.", "expect": "interrupted"}],
        "executors": {"pi": {"turns": []}}
    }));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let runtime = bench
        .builder(model)
        .event_bus(bus)
        .recover(true)
        .build()
        .await
        .unwrap();
    let report = tokio::time::timeout(WAIT, wait_report(&mut events))
        .await
        .unwrap();
    assert!(
        report.contains("[stopped]") && report.contains("interrupted"),
        "{report}"
    );
    assert!(report.contains("resume"), "{report}");
    let rows = runtime
        .node()
        .store()
        .read(|c| troupe::actors::delegation::record::instances(c, false, 10))
        .await
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0].row.status, "stopped");
    // pi started once, and never again after the restart.
    let instance = std::fs::read_dir(&output)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let printed = std::fs::read_to_string(instance.join("output.jsonl")).unwrap();
    assert_eq!(
        printed.matches("\"type\":\"agent_start\"").count(),
        1,
        "{printed}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn delegate_task_runs_pi_in_the_threads_environment_with_progress_in_a_child_thread() {
    if !ready("delegate_task") {
        return;
    }
    let home = super::support::TestHome::new();
    troupe::runtime::executors::install_from(
        &troupe::runtime::home::Home::new(home.path()),
        "pi",
        &pi_modules(),
    )
    .unwrap();
    let task = json!({"task": "Write notes.txt containing env-pi"});
    let model = Arc::new(
        ScriptedProvider::parse(
            &json!({
                "bots": {"alice": {"turns": [
                    {"tool_calls": [{"name": "delegate_task", "arguments": task}]},
                    {"text": "No environment yet.", "expect": "create_environment"},
                    {"tool_calls": [{"name": "create_environment", "arguments": {}}]},
                    {"tool_calls": [{"name": "delegate_task", "arguments": task}]},
                    {"text": "pi is on it.", "expect": "pi started"}
                ]}},
                "executors": {"pi": {"turns": [
                    {"tool_calls": [{"name": "bash", "arguments": {"command":
                        "(echo > /dev/tcp/1.1.1.1/80) 2>&1 | head -c 60; echo; \
                         (echo > /dev/tcp/127.0.0.1/7878) 2>&1 | head -c 60; echo; \
                         (echo > /dev/tcp/127.0.0.1/3129) && echo relay-reached"}}],
                     "expect": "Write notes.txt"},
                    {"tool_calls": [{"name": "write", "arguments": {"path": "notes.txt", "content": "env-pi"}}],
                     "expect": "relay-reached"},
                    {"text": "Wrote notes.txt.", "expect": "Successfully wrote"}
                ]}}
            })
            .to_string(),
            "house script",
        )
        .unwrap(),
    );
    let (runtime, acme, general) = super::environments::house_with(
        &home,
        model,
        // The bots' model is named as a script, which the environment's relay
        // answers in-process (here by the test's provider).
        &[
            ("agent.model", "script:the-test-script"),
            ("environments.memory_mib", "1024"),
            ("environments.processes", "256"),
        ],
    )
    .await;
    let mut events = general.events();
    general
        .post_and_wait("ada", "write the notes", WAIT)
        .await
        .unwrap();
    general
        .post_and_wait("ada", "now with an environment", WAIT)
        .await
        .unwrap();
    // pi's result comes back to this thread when it ends.
    let report = tokio::time::timeout(WAIT * 3, async {
        loop {
            if let Some(troupe::ThreadEvent::Posted(p)) = events.next().await {
                if p.message.text.contains("instance(s) of delegation") {
                    return p.message.text;
                }
            }
        }
    })
    .await
    .expect("pi's report never reached the thread");
    assert!(
        report.contains("[done]") && report.contains("Wrote notes.txt."),
        "{report}"
    );
    let messages = general.read(0, 100).await.unwrap();
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    assert!(texts.contains(&"No environment yet."), "{texts:?}");
    assert!(texts.contains(&"pi is on it."), "{texts:?}");
    // The child thread exists and shows pi's progress.
    let threads = acme
        .threads(troupe::runtime::protocol::house::ThreadFilter {
            limit: 50,
            ..Default::default()
        })
        .await
        .unwrap();
    let child = threads
        .iter()
        .find(|t| t.name.as_deref().is_some_and(|n| n.starts_with("pi-")))
        .expect("a child thread for pi");
    let child = acme.thread(&child.id.to_string()).await.unwrap();
    let progress: Vec<String> = child
        .read(0, 100)
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.text)
        .collect();
    assert!(
        progress[0].contains("Write notes.txt containing env-pi"),
        "{progress:?}"
    );
    assert!(
        progress.iter().any(|t| t == "→ write notes.txt"),
        "{progress:?}"
    );
    assert!(
        progress.iter().any(|t| t == "Wrote notes.txt."),
        "{progress:?}"
    );
    // The file is in the environment's workspace, and pi reached nothing
    // but the relay from there.
    let env = acme.environments().list(false, 10).await.unwrap();
    let workdir = &env[0].workdir;
    assert_eq!(
        std::fs::read_to_string(workdir.join("notes.txt")).unwrap(),
        "env-pi"
    );
    let instances = runtime
        .node()
        .store()
        .read(|c| troupe::actors::delegation::record::instances(c, false, 10))
        .await
        .unwrap();
    let sub = instances[0].row.id;
    let record = runtime
        .node()
        .store()
        .read(move |c| troupe::actors::delegation::record::events_of(c, sub, 0, 100))
        .await
        .unwrap();
    let network = record
        .iter()
        .find(|e| e.2.starts_with("bash returned"))
        .map(|e| e.2.clone())
        .unwrap();
    assert!(network.contains("relay-reached"), "{network}");
    assert!(
        network.matches("Network is unreachable").count()
            + network.matches("Connection refused").count()
            >= 2,
        "{network}"
    );
    runtime.shutdown().await;
}

/// The stand-in for pi (`tests/executors/fake-pi.mjs`) as an installable
/// copy of it, under `dir`.
/// A home in `dir` with the stand-in installed as pi, and a work folder
/// beside it: (home, folder).
pub(super) fn fake_home(dir: &Path) -> (PathBuf, PathBuf) {
    let home = dir.join("home");
    let folder = dir.join("work");
    std::fs::create_dir_all(&folder).unwrap();
    troupe::runtime::executors::install_from(
        &troupe::runtime::home::Home::new(&home),
        "pi",
        &fake_pi(dir),
    )
    .unwrap();
    (home, folder)
}

/// Starts one instance per task in `folder` as the user's own (as `troupe
/// workbench start` does), its report awaited through the waiter.
pub(super) async fn start_users_own(
    node: &troupe::actors::node::Node,
    folder: &Path,
    tasks: &[&str],
) -> troupe::actors::delegation::executors::Started {
    use troupe::actors::delegation::executor::Place;
    use troupe::actors::delegation::executors::{Start, USER};
    node.delegations()
        .unwrap()
        .start_instances(
            node,
            Start {
                executor: "pi".into(),
                owner: USER.into(),
                parent: troupe::runtime::id::ConversationId::new(),
                model: "script:none".into(),
                waits: true,
                tasks: tasks
                    .iter()
                    .map(|t| {
                        (
                            t.to_string(),
                            String::new(),
                            folder.to_path_buf(),
                            Place::Host,
                        )
                    })
                    .collect(),
                report_to: None,
                session: None,
            },
        )
        .await
        .map_err(|e| e.text)
        .unwrap()
}

fn fake_pi(dir: &Path) -> PathBuf {
    let harness = troupe::runtime::executors::harness("pi").unwrap();
    let modules = dir.join("fake/node_modules");
    let entry = modules.join(harness.entry);
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::fs::write(
        modules.join(harness.package).join("package.json"),
        json!({"name": harness.package, "version": harness.version, "type": "module"}).to_string(),
    )
    .unwrap();
    std::fs::write(&entry, include_str!("../executors/fake-pi.mjs")).unwrap();
    modules
}

#[tokio::test]
async fn a_harness_that_exits_floods_prints_garbage_or_hangs_is_reported_with_its_reason() {
    if Sandbox::detect_or_skip("a_harness_that_misbehaves").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (home, folder) = fake_home(dir.path());
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(dir.path())
        .provider(Arc::new(ScriptedProvider::new(Vec::new())))
        .set("delegation.child_timeout_secs", "2")
        .build()
        .await
        .unwrap();
    let node = runtime.node().clone();
    let tasks = ["garbage events 2", "exit 3", "flood", "hang"];
    let started = start_users_own(&node, &folder, &tasks).await;
    let report = tokio::time::timeout(WAIT, started.waiter.unwrap())
        .await
        .unwrap()
        .unwrap();
    let section = |i: usize| report.split("\n## ").nth(i).unwrap().to_string();
    assert!(
        section(1).contains("[done]") && section(1).contains("done 2"),
        "{report}"
    );
    assert!(
        section(2).contains("[failed]")
            && section(2).contains("exited before ending its task (exit 3)"),
        "{report}"
    );
    assert!(
        section(3).contains("[failed]") && section(3).contains("a line over 8 MiB"),
        "{report}"
    );
    assert!(section(4).contains("[timed_out]"), "{report}");
    // The garbage was noted in the record, the flood spilled whole.
    let sub = started.instances[0];
    let notes = node
        .store()
        .read(move |c| troupe::actors::delegation::record::events_of(c, sub, 0, 100))
        .await
        .unwrap();
    assert!(
        notes
            .iter()
            .any(|e| e.1 == "note" && e.2.contains("not a record: this is not json")),
        "{notes:?}"
    );
    let flood =
        troupe::actors::delegation::executor::output_file(node.home(), "pi", started.instances[2]);
    assert!(std::fs::metadata(flood).unwrap().len() > 8 * 1024 * 1024);
    runtime.shutdown().await;
}

/// The harnesses are started while the admission commits; one refused
/// (here: past the owner's limit) leaves nothing behind: no process of
/// them, no instance folder, nothing in the record; an admitted one still
/// runs its task.
#[tokio::test]
async fn a_refused_admission_kills_the_harnesses_started_ahead_and_records_nothing() {
    use troupe::actors::delegation::executor::Place;
    use troupe::actors::delegation::executors::{Start, USER};
    if Sandbox::detect_or_skip("a_refused_admission").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (home, folder) = fake_home(dir.path());
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(dir.path())
        .provider(Arc::new(ScriptedProvider::new(Vec::new())))
        .set("delegation.max_concurrent_per_bot", "1")
        .build()
        .await
        .unwrap();
    let node = runtime.node().clone();
    let tasks = |n: usize| Start {
        executor: "pi".into(),
        owner: USER.into(),
        parent: troupe::runtime::id::ConversationId::new(),
        model: "script:none".into(),
        waits: true,
        tasks: (0..n)
            .map(|_| {
                (
                    "events 1".to_string(),
                    String::new(),
                    folder.clone(),
                    Place::Host,
                )
            })
            .collect(),
        report_to: None,
        session: None,
    };
    // The store's write lock held elsewhere: the admission waits to commit
    // while both harnesses start (bubblewrap hides the home, so its
    // command line names it; pi's arguments name its sessions there).
    let mut lock = troupe::runtime::rusqlite::Connection::open(node.home().database()).unwrap();
    let held = lock
        .transaction_with_behavior(troupe::runtime::rusqlite::TransactionBehavior::Immediate)
        .unwrap();
    let delegations = node.delegations().unwrap();
    let asked = {
        let (node, start) = (node.clone(), tasks(2));
        tokio::spawn(async move { delegations.start_instances(&node, start).await })
    };
    let home_named = home.display().to_string();
    tokio::time::timeout(WAIT, async {
        while processes_naming(&home_named) < 2 {
            tokio::task::yield_now().await;
        }
    })
    .await
    .expect("the harnesses did not start while the admission waited to commit");
    held.rollback().unwrap();
    let refused = asked
        .await
        .unwrap()
        .err()
        .expect("two instances pass a limit of one");
    assert!(
        refused.text.contains("max_concurrent_per_bot"),
        "{}",
        refused.text
    );
    // Killed and gone before the refusal is answered.
    assert_eq!(processes_naming(&home_named), 0);
    let instances = home.join("executors/pi/instances");
    assert_eq!(
        std::fs::read_dir(&instances)
            .map(|d| d.count())
            .unwrap_or_default(),
        0,
        "a refused instance's folder is left in {}",
        instances.display()
    );
    let recorded = node
        .store()
        .read(|c| troupe::actors::delegation::record::instances(c, false, 10))
        .await
        .unwrap();
    assert_eq!(recorded, Vec::new());
    // Within the limit, the harness started ahead runs its task.
    let started = node
        .delegations()
        .unwrap()
        .start_instances(&node, tasks(1))
        .await
        .map_err(|e| e.text)
        .unwrap();
    let report = tokio::time::timeout(WAIT, started.waiter.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        report.contains("[done]") && report.contains("done 1"),
        "{report}"
    );
    runtime.shutdown().await;
}

#[tokio::test]
async fn the_owner_starts_steers_and_stops_an_instance_through_the_server() {
    if Sandbox::detect_or_skip("the_owner_starts_an_instance_through_the_server").is_none() {
        return;
    }
    let s = super::server::Served::start(vec![]).await;
    let node = s.runtime.node().clone();
    troupe::runtime::executors::install_from(node.home(), "pi", &fake_pi(s.work.path())).unwrap();
    let folder = s.work.path().join("proj");
    std::fs::create_dir_all(&folder).unwrap();
    let body = json!({"executor": "pi", "folder": folder, "task": "hang"});
    // Not for a house's people.
    let (status, _) = s.post("/workbench", &s.ada, body.clone()).await;
    assert_eq!(status, reqwest::StatusCode::FORBIDDEN);
    let (status, started) = s.post("/workbench", &s.owner, body).await;
    assert_eq!(status, reqwest::StatusCode::CREATED, "{started}");
    let id = started["id"].as_str().unwrap().to_string();
    let (_, list) = s.get("/workbench", &s.owner).await;
    let listed = &list["instances"][0];
    assert_eq!(listed["id"], id.as_str());
    assert_eq!(listed["status"], "running");
    assert_eq!(listed["whose"], "user");
    // Its record, live: what is in it, then each event as it commits.
    let mut live = s.watch_owner(&format!("/workbench/{id}/events")).await;
    let (status, steered) = s
        .post(
            &format!("/workbench/{id}/steer"),
            &s.owner,
            json!({"message": "go on"}),
        )
        .await;
    assert_eq!(status, reqwest::StatusCode::OK, "{steered}");
    let steer = super::server::until(&mut live, "event", |f| f["kind"] == "steer").await;
    assert_eq!(steer["text"], "go on");
    let (status, _) = s
        .post(&format!("/workbench/{id}/stop"), &s.owner, json!({}))
        .await;
    assert_eq!(status, reqwest::StatusCode::OK);
    // It ignores the abort: after its grace it is killed, and says so;
    // the live record ends with its end.
    let end = super::server::until(&mut live, "end", |_| true).await;
    assert_eq!(end["status"], "stopped", "{end}");
    let (_, shown) = s.get(&format!("/workbench/{id}"), &s.owner).await;
    assert_eq!(shown["instance"]["status"], "stopped", "{shown}");
    assert!(
        shown["instance"]["result"]
            .as_str()
            .unwrap()
            .contains("killed"),
        "{shown}"
    );
    let events = shown["instance"]["events"].as_array().unwrap();
    assert!(
        events
            .iter()
            .any(|e| e["kind"] == "steer" && e["text"] == "go on"),
        "{shown}"
    );
    let (status, _) = s.get("/workbench/sub_nope", &s.owner).await;
    assert_eq!(status, reqwest::StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn a_bot_stops_the_users_own_instance_only_when_the_user_approves_each_time() {
    if Sandbox::detect_or_skip("a_bot_stops_the_users_own_instance").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (home, folder) = fake_home(dir.path());
    // The bot's model asks to stop whatever instance the task names.
    let model = Arc::new(ScriptedProvider::from_fn(|req| {
        use troupe::runtime::protocol::Message;
        match req.messages.last() {
            Some(Message::User { content }) => troupe::runtime::model::Turn::tool_call(
                "delegate",
                json!({"action": "stop", "subagent_id": content.trim()}),
            ),
            _ => troupe::runtime::model::Turn::text("done"),
        }
    }));
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(dir.path())
        .provider(model)
        // Auto mode: the user's instance is asked about all the same.
        .set("trust.mode", "auto")
        .build()
        .await
        .unwrap();
    let node = runtime.node().clone();
    // The user's own instance, as `troupe workbench start` makes one.
    let started = start_users_own(&node, &folder, &["hang"]).await;
    let id = started.instances[0].to_string();
    let status = |id: String| {
        let node = node.clone();
        async move {
            node.store()
                .read(move |c| troupe::actors::delegation::record::instance(c, &id))
                .await
                .unwrap()
                .unwrap()
                .status
        }
    };
    let bot = runtime.bot("assistant").await.unwrap();
    for answer in ["deny", "once"] {
        let mut turn = bot.send(&id).await.unwrap();
        let (request, reason) = super::support::wait_for(&mut turn, |e| match e {
            AgentEvent::ApprovalRequested {
                request_id, reason, ..
            } => Some((request_id.clone(), reason.clone())),
            _ => None,
        })
        .await;
        assert!(reason.contains("your own pi instance"), "{reason}");
        assert!(runtime.node().answer(&request, Some(json!(answer))));
        let result = super::support::wait_for(&mut turn, |e| match e {
            AgentEvent::ToolCallFinished { result, .. } => Some(result.text.clone()),
            _ => None,
        })
        .await;
        turn.result().await.unwrap();
        if answer == "deny" {
            assert!(result.contains("the user refused"), "{result}");
            assert_eq!(status(id.clone()).await, "running");
        } else {
            assert!(result.starts_with("Stopping"), "{result}");
        }
    }
    let report = tokio::time::timeout(WAIT, started.waiter.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(report.contains("[stopped]"), "{report}");
    runtime.shutdown().await;
}

/// `troupe bench executors` runs end to end (a merge once broke its
/// stand-in harness, and only measuring found it): every leg reports — the
/// hand-over to another account too — and no event of the concurrent leg
/// is lost or out of order.
#[test]
fn the_executors_benchmark_runs_every_leg() {
    if !ready("the_executors_benchmark_runs_every_leg") {
        return;
    }
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["bench", "executors", "--n", "1"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let line = String::from_utf8_lossy(&out.stdout);
    let result: serde_json::Value = serde_json::from_str(line.trim().lines().last().unwrap())
        .unwrap_or_else(|e| panic!("{e}: {line}"));
    for leg in [
        "1_bare",
        "2_bare_in_its_sandbox",
        "3_through_troupe_to_recorded",
    ] {
        assert!(
            result["start"][leg]["to_first_event"]["p50_us"].is_number(),
            "{leg}: {result}"
        );
    }
    assert_eq!(result["concurrent"]["lost"], 0, "{result}");
    assert_eq!(result["concurrent"]["out_of_order"], 0, "{result}");
    for part in [
        "limit_to_next_process_start",
        "limit_to_next_first_event_written",
        "limit_to_next_first_event_recorded",
    ] {
        assert!(
            result["hand_over"][part]["p50_us"].as_f64() > Some(0.0),
            "{part}: {result}"
        );
    }
}
