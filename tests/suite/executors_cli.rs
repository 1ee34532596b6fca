//! `troupe executors list | install --from | remove` driven as a user would,
//! offline: pi is linked from `tests/executors/node_modules`, which
//! `scripts/test` installs with `npm ci --prefix tests/executors`. Without
//! that folder the test says so and passes, unless
//! `TROUPE_TEST_REQUIRE_EXECUTORS=1` asks it to fail instead (as
//! `scripts/test` does once it has installed it).

use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::cli::{command, house_with_assistant, text, troupe};
use super::support::TestHome;

/// The pi `scripts/test` installs, or `None` (after saying why) where it
/// or a sandbox is missing, unless the run requires them.
fn pi_modules(test: &str) -> Option<PathBuf> {
    let modules = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/executors/node_modules");
    if !modules.join("@mariozechner/pi-coding-agent").exists() {
        let why = format!(
            "needs {} (npm ci --prefix tests/executors)",
            modules.display()
        );
        assert!(
            std::env::var_os("TROUPE_TEST_REQUIRE_EXECUTORS").is_none(),
            "{test} {why}"
        );
        eprintln!("skipped: {test} {why}");
        return None;
    }
    Some(modules)
}

fn list(home: &TestHome) -> Value {
    let out = troupe(home, &["executors", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// pi's entry in the list (the first), not installed.
fn not_installed(home: &TestHome) -> Value {
    json!({
        "name": "pi",
        "package": "@mariozechner/pi-coding-agent",
        "pinned": "0.73.1",
        "installed": false,
        "version": null,
        "dir": home.path().join("executors/pi"),
        "entry": null,
        "from": null,
    })
}

#[test]
fn pi_is_installed_from_a_node_modules_folder_listed_and_removed() {
    let Some(modules) = pi_modules("the executors test") else {
        return;
    };
    let home = TestHome::new();
    assert_eq!(list(&home)[0], not_installed(&home));
    let names: Vec<Value> = list(&home)
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["name"].clone())
        .collect();
    assert_eq!(names, [json!("pi"), json!("claude-code"), json!("codex")]);
    let human = troupe(&home, &["executors", "list"]);
    assert_eq!(
        text(&human.stdout).lines().next().unwrap(),
        "pi  -  not installed  (troupe executors install pi)"
    );
    assert!(
        text(&human.stdout).contains("codex  -  not installed  (troupe executors install codex)"),
        "{}",
        text(&human.stdout)
    );

    let from = modules.display().to_string();
    let out = troupe(&home, &["executors", "install", "pi", "--from", &from]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let dir = home.path().join("executors/pi");
    assert_eq!(
        text(&out.stdout),
        format!("pi  0.73.1  installed  {}\n", dir.display())
    );

    let canonical = modules.canonicalize().unwrap();
    assert_eq!(
        list(&home)[0],
        json!({
            "name": "pi",
            "package": "@mariozechner/pi-coding-agent",
            "pinned": "0.73.1",
            "installed": true,
            "version": "0.73.1",
            "dir": dir,
            "entry": canonical.join("@mariozechner/pi-coding-agent/dist/cli.js"),
            "from": canonical.display().to_string(),
        })
    );

    let out = troupe(&home, &["executors", "remove", "pi"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(list(&home)[0], not_installed(&home));
    assert!(
        modules
            .join("@mariozechner/pi-coding-agent/dist/cli.js")
            .exists(),
        "remove unlinks the folder, never deletes what it points to"
    );
}

#[test]
fn an_unknown_executor_is_refused_with_the_known_ones() {
    let home = TestHome::new();
    let out = troupe(&home, &["executors", "install", "vi"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("there is no executor named `vi`; the known ones are: pi"),
        "{}",
        text(&out.stderr)
    );
}

/// `troupe thread post` stays until the work a bot handed to pi
/// (`delegate_task`) has reported into the thread, not only until pi has
/// ended: the report is enqueued for the thread when the instance's end is
/// recorded and posted a moment later, and a command that left in between
/// took the thread's actor with it. So a `thread read` right after shows
/// the report, and so did the post's own output.
#[test]
fn a_cli_post_stays_until_pis_report_is_in_the_thread() {
    let test = "a_cli_post_stays_until_pis_report_is_in_the_thread";
    let Some(modules) = pi_modules(test) else {
        return;
    };
    if troupe::runtime::sandbox::Sandbox::detect_or_skip(test).is_none() {
        return;
    }
    let home = TestHome::new();
    let from = modules.display().to_string();
    let out = troupe(&home, &["executors", "install", "pi", "--from", &from]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script = home.path().join("script.json");
    let write = json!({"path": "notes.txt", "content": "env-pi"});
    let turns = json!({
        "bots": {"assistant": {"turns": [
            {"tool_calls": [{"name": "create_environment", "arguments": {}}]},
            {"tool_calls": [{"name": "delegate_task", "arguments": {"task": "Write notes.txt"}}]},
            {"text": "pi is on it."}
        ]}},
        "executors": {"pi": {"turns": [
            {"tool_calls": [{"name": "write", "arguments": write}]},
            {"text": "Wrote notes.txt."}
        ]}}
    });
    std::fs::write(&script, turns.to_string()).unwrap();
    let model = format!("script:{}", script.display());
    let run = |args: &[&str]| {
        command(&home, args)
            .env("NO_COLOR", "1")
            .env("TROUPE_MODEL", &model)
            .output()
            .expect("the troupe binary runs")
    };
    house_with_assistant(&home);
    let post = run(&[
        "thread",
        "post",
        "acme",
        "general",
        "@assistant write the notes",
        "--as",
        "ada",
        "--timeout",
        "120",
    ]);
    assert!(post.status.success(), "{}", text(&post.stderr));
    let said = text(&post.stdout);
    let read = run(&["thread", "read", "acme", "general"]);
    assert!(read.status.success(), "{}", text(&read.stderr));
    let thread = text(&read.stdout);
    assert!(
        said.contains("pi is on it."),
        "{said}\n--- the thread:\n{thread}"
    );
    assert!(
        said.contains("instance(s) of delegation"),
        "{said}\n--- the thread:\n{thread}"
    );
    assert!(
        thread.contains("[done]") && thread.contains("Wrote notes.txt."),
        "{thread}"
    );
}
