//! The crash harness, short: the real binary's worker killed with SIGKILL
//! 30 times on one home, in the middle of its turns, posts, durable sends
//! to a program's actor kind and multi-file house file writes, then
//! checked (`troupe bench crash`; the long run and
//! its figures are in the README).

use super::cli::{text, troupe};
use super::support::TestHome;

#[test]
fn thirty_kills_lose_nothing_and_do_nothing_twice() {
    let home = TestHome::new();
    let out = troupe(&home, &["bench", "crash", "--kills", "30", "--seed", "7"]);
    let stdout = text(&out.stdout);
    let log =
        std::fs::read_to_string(home.path().join("crash-harness/workers.log")).unwrap_or_default();
    let line: serde_json::Value = serde_json::from_str(stdout.trim())
        .unwrap_or_else(|e| panic!("{e}: {stdout}\n{}\n{log}", text(&out.stderr)));
    assert!(out.status.success(), "{line}\n{log}");
    let gated: Vec<_> = line
        .as_object()
        .unwrap()
        .iter()
        .filter(|(k, _)| {
            ["lost", "dup", "twice", "missing", "mixed"]
                .iter()
                .any(|w| k.contains(w))
        })
        .filter(|(_, v)| v.as_u64() != Some(0))
        .collect();
    assert_eq!(gated, vec![], "{line}");
    assert_eq!(line["integrity"], "ok");
    assert_eq!(line["kills"], 30);
    // Some workers died between a subagent's close and the parent's report.
    assert!(
        line["subagent_end_kills"].as_u64().unwrap_or(0) > 0,
        "{line}"
    );
    for workload in [
        "acknowledged",
        "tool_calls",
        "messages_to_agents",
        "delegations",
        "routine_runs",
        "thread_posts_acknowledged",
        "file_versions",
        "file_writes_acknowledged",
        "actor_sends_acknowledged",
    ] {
        assert!(
            line[workload].as_u64().unwrap() > 0,
            "no {workload}: {line}"
        );
    }
}
