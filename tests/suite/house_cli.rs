//! `troupe house` and `troupe thread` as a user runs them: one process per
//! command, a per-bot script that goes on across commands, and two houses
//! that see nothing of each other.

use serde_json::json;

use super::cli::{text, troupe};
use super::support::TestHome;

/// Runs `troupe` with the per-bot script `model` and `--set` `agent.model`.
fn run(home: &TestHome, model: &str, args: &[&str]) -> (bool, String, String) {
    let mut all = vec!["--set", model];
    all.extend_from_slice(args);
    let out = troupe(home, &all);
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

fn ok(home: &TestHome, model: &str, args: &[&str]) -> String {
    let (success, stdout, stderr) = run(home, model, args);
    assert!(success, "troupe {args:?} failed: {stderr}");
    stdout
}

#[test]
fn a_house_is_made_and_talked_in_from_the_command_line() {
    let home = TestHome::new();
    let script = home.path().join("bots.json");
    std::fs::write(
        &script,
        json!({"bots": {"assistant": {"turns": [
            {"text": "Hello Ada, the launch is on Friday."},
            {"tool_calls": [{"name": "create_thread", "arguments": {"name": "launch-plans", "tags": ["launch"]}}]},
            {"text": "I opened launch-plans."}
        ]}}})
        .to_string(),
    )
    .unwrap();
    let model = format!("agent.model=script:{}", script.display());
    let m = model.as_str();
    ok(&home, m, &["house", "create", "acme"]);
    ok(&home, m, &["house", "create", "beta"]);
    ok(&home, m, &["house", "add", "acme", "--human", "ada"]);
    ok(
        &home,
        m,
        &[
            "house",
            "add",
            "acme",
            "--bot",
            "assistant",
            "--listen",
            "all",
        ],
    );
    ok(
        &home,
        m,
        &[
            "house",
            "add",
            "beta",
            "--bot",
            "assistant",
            "--listen",
            "all",
        ],
    );
    let members = ok(&home, m, &["house", "members", "acme", "--json"]);
    assert!(
        members.contains("\"ada\"") && members.contains("\"listen\":\"all\""),
        "{members}"
    );
    ok(
        &home,
        m,
        &["thread", "create", "acme", "general", "--tag", "team"],
    );

    let answer = ok(
        &home,
        m,
        &[
            "thread",
            "post",
            "acme",
            "general",
            "hi @assistant, when?",
            "--as",
            "ada",
        ],
    );
    assert_eq!(
        answer.trim(),
        "[assistant] Hello Ada, the launch is on Friday."
    );
    // The next command goes on with the bot's script.
    let answer = ok(
        &home,
        m,
        &[
            "thread",
            "post",
            "acme",
            "general",
            "open a thread for the plans",
        ],
    );
    assert_eq!(answer.trim(), "[assistant] I opened launch-plans.");
    let read = ok(&home, m, &["thread", "read", "acme", "general", "--json"]);
    assert_eq!(read.lines().count(), 4, "{read}");
    let listed = ok(&home, m, &["thread", "list", "acme", "--json"]);
    assert!(
        listed.contains("launch-plans") && listed.contains("general"),
        "{listed}"
    );
    let found = ok(&home, m, &["thread", "search", "acme", "friday"]);
    assert!(
        found.contains("general") && found.contains("[Friday]"),
        "{found}"
    );

    // House beta lists none of it, reads none of it, finds none of it.
    assert!(ok(&home, m, &["thread", "list", "beta", "--json"])
        .trim()
        .is_empty());
    let (success, _, stderr) = run(&home, m, &["thread", "read", "beta", "general"]);
    assert!(
        !success && stderr.contains("`beta` has no thread `general`"),
        "{stderr}"
    );
    assert!(ok(&home, m, &["thread", "search", "beta", "friday"])
        .trim()
        .is_empty());
    let members = ok(&home, m, &["house", "members", "beta"]);
    assert!(!members.contains("ada"), "{members}");
    let (success, _, stderr) = run(
        &home,
        m,
        &["thread", "post", "beta", "general", "hi", "--as", "ada"],
    );
    assert!(!success, "{stderr}");

    // Archive and unarchive.
    ok(&home, m, &["thread", "archive", "acme", "general"]);
    let (success, _, stderr) = run(&home, m, &["thread", "archive", "acme", "general"]);
    assert!(!success && stderr.contains("archived already"), "{stderr}");
    assert!(!ok(&home, m, &["thread", "list", "acme"]).contains("general"));
    assert!(ok(&home, m, &["thread", "list", "acme", "--all"]).contains("archived"));
    let (success, _, stderr) = run(
        &home,
        m,
        &["thread", "post", "acme", "general", "still there?"],
    );
    assert!(!success && stderr.contains("unarchive"), "{stderr}");
    ok(&home, m, &["thread", "unarchive", "acme", "general"]);
}

#[test]
fn mistakes_get_clear_errors() {
    let home = TestHome::new();
    let m = "agent.max_steps_per_turn=5";
    let (success, _, stderr) = run(&home, m, &["house", "members", "nowhere"]);
    assert!(
        !success && stderr.contains("troupe house create nowhere"),
        "{stderr}"
    );
    ok(&home, m, &["house", "create", "acme"]);
    let (success, _, stderr) = run(&home, m, &["house", "create", "ACME"]);
    assert!(!success && stderr.contains("exists already"), "{stderr}");
    let (success, _, stderr) = run(&home, m, &["house", "create", "no spaces"]);
    assert!(
        !success && stderr.contains("not a valid house name"),
        "{stderr}"
    );
    let (success, _, stderr) = run(&home, m, &["house", "add", "acme", "--bot", "ghost"]);
    assert!(
        !success && stderr.contains("no bot named `ghost`"),
        "{stderr}"
    );
    let (success, _, stderr) = run(
        &home,
        m,
        &[
            "house",
            "add",
            "acme",
            "--bot",
            "assistant",
            "--listen",
            "loud",
        ],
    );
    assert!(
        !success && stderr.contains("--listen must be all, mentions or off"),
        "{stderr}"
    );
    ok(&home, m, &["thread", "create", "acme", "general"]);
    let (success, _, stderr) = run(&home, m, &["thread", "post", "acme", "general", "hello"]);
    assert!(!success && stderr.contains("has no people"), "{stderr}");
    let (success, _, stderr) = run(
        &home,
        m,
        &["thread", "post", "acme", "general", "hello", "--as", "zed"],
    );
    assert!(
        !success && stderr.contains("not a member of `acme`"),
        "{stderr}"
    );
    // The home's own house is there from the start, with its owner and the main agent.
    let members = ok(&home, m, &["house", "members", "home"]);
    assert!(
        members.contains("owner") && members.contains("assistant"),
        "{members}"
    );
}
