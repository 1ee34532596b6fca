//! `troupe run` past the happy path, with the real binary: a question
//! nobody can answer (stdin is not a terminal) ends the run at once, and a
//! turn that delegates is followed until its subagents have reported.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::cli::{text, troupe, write_script};
use super::support::TestHome;

/// `troupe run`'s own exit status for a question nobody could answer.
const NEEDS_ANSWER: i32 = 7;

#[test]
fn a_run_that_needs_approval_without_a_terminal_ends_at_once_and_says_how_to_allow_it() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.path().join("build")).unwrap();
    let model = write_script(
        &home,
        "turns.json",
        json!([
            {"tool_calls": [{"name": "run_command", "arguments": {"command": "rm -rf ./build"}}]},
            {"text": "cleaned up"}
        ]),
    );
    // `output()` gives the child no stdin: it is not a terminal. Before the
    // fix the run waited out the gate's 600 s timeout here.
    let started = std::time::Instant::now();
    let out = troupe(&home, &["run", "--model", &model, "clean up"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(NEEDS_ANSWER), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    for part in [
        "needs your approval, and nobody can give it: stdin is not a terminal",
        "call: run_command {\"command\":\"rm -rf ./build\"}",
        "why: `rm -rf ./build`",
        "choices: once, session, always, deny",
        "in a terminal",
        "--auto",
        "[trust]\n      allow = [\"rm -rf ./build\"]",
    ] {
        assert!(err.contains(part), "`{part}` missing from:\n{err}");
    }
    // The call did not run, and the turn ended rather than going on.
    assert!(home.path().join("build").exists());
    assert_eq!(text(&out.stdout), "");
    assert!(!err.contains("troupe: the turn was stopped"), "{err}");
}

#[test]
fn a_run_whose_model_asks_the_user_without_a_terminal_ends_at_once_with_the_questions() {
    let home = TestHome::new();
    let model = write_script(
        &home,
        "turns.json",
        json!([
            {"tool_calls": [{"name": "ask_user", "arguments": {"questions": [
                {"question": "Which city?", "choices": ["Paris", "Oslo"]}
            ]}}]},
            {"text": "Paris it is"}
        ]),
    );
    let out = troupe(&home, &["run", "--model", &model, "plan a trip"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(NEEDS_ANSWER), "{err}");
    assert!(
        err.contains("? Which city?\n    1. Paris\n    2. Oslo\n    3. Other"),
        "{err}"
    );
    assert!(err.contains("stdin is not a terminal"), "{err}");
    assert_eq!(text(&out.stdout), "");
}

#[test]
fn a_run_that_delegates_waits_for_the_report_and_prints_the_answer_after_it() {
    let home = TestHome::new();
    // The parent's next step and the two subagents' first steps run at
    // once, in any order: all three answer the same. The fifth call is the
    // parent's turn that the delegation's report starts.
    let model = write_script(
        &home,
        "turns.json",
        json!([
            {"tool_calls": [{"name": "delegate", "arguments": {"tasks": [
                {"goal": "count the apples"},
                {"goal": "count the pears"}
            ]}}]},
            {"text": "working on it"},
            {"text": "working on it"},
            {"text": "working on it"},
            {"text": "Both counts are in.", "expect": "count the pears"}
        ]),
    );
    let out = troupe(&home, &["run", "--model", &model, "count the fruit"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "working on it\nBoth counts are in.\n",
        "{}",
        text(&out.stderr)
    );
    let db = troupe::runtime::rusqlite::Connection::open(home.path().join("troupe.db")).unwrap();
    let delegations: Vec<String> = db
        .prepare("SELECT status FROM delegations")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(delegations, ["reported"]);
    let subagents: Vec<(String, String)> = db
        .prepare("SELECT goal, status FROM subagents ORDER BY position")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        subagents,
        [
            ("count the apples".to_string(), "done".to_string()),
            ("count the pears".to_string(), "done".to_string())
        ]
    );
}
