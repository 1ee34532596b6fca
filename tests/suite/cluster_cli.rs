//! The CLI of one node reaching a house of another, several `troupe serve`
//! processes on 127.0.0.1 (docs/cluster.md): on node a's home, `thread
//! create|post|read|list|search` and `house rules` for a house on node b
//! go through a's server to b, and print what b's own CLI prints for it;
//! so do `files ls|get|log|search` for files written there; a house known
//! on no node keeps the CLI's error; once b is killed, the commands fail
//! with the 503's message naming b.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::runtime::protocol::house::ThreadMessage;

use super::cli::{text, troupe};
use super::cluster::Node;

/// `troupe ARGS` on `node`'s home, which must succeed: its stdout.
fn ok(node: &Node, args: &[&str]) -> String {
    let out = troupe(&node.home, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

/// `troupe ARGS` on `node`'s home, which must fail: its stderr.
fn refused(node: &Node, args: &[&str]) -> String {
    let out = troupe(&node.home, args);
    assert!(!out.status.success(), "{args:?}: {}", text(&out.stdout));
    text(&out.stderr)
}

#[test]
fn thread_rules_and_files_commands_on_one_node_reach_a_house_on_another_until_it_is_down() {
    let mut a = Node::new("a", "alice", json!([]));
    a.start("secret", None);
    let mut b = Node::new("b", "bob", json!([{"text": "Friday, as planned"}]));
    b.start("secret", Some(a.port));
    a.wait_line("met node `b`");
    b.wait_line("met node `a`");

    // A house on b, made and peopled through a.
    ok(&a, &["house", "create", "acme", "--node", "b"]);
    ok(&a, &["house", "add", "acme", "--human", "ada"]);
    ok(
        &a,
        &["house", "add", "acme", "--bot", "bob", "--listen", "all"],
    );

    // Opened and posted in through a; bob's answer printed as it lands.
    let opened = ok(&a, &["thread", "create", "acme", "launch", "--with", "bob"]);
    assert!(
        opened.starts_with("opened thread `launch` in `acme` ("),
        "{opened}"
    );
    assert_eq!(
        b.count("SELECT count(*) FROM threads WHERE name = 'launch'"),
        1
    );
    let out = troupe(
        &a.home,
        &[
            "thread",
            "post",
            "acme",
            "launch",
            "when is the launch?",
            "--as",
            "ada",
            "--timeout",
            "60",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "[bob] Friday, as planned\n");

    // Read through a: the thread as b holds it, printed as b's CLI prints it.
    let read = ok(&a, &["thread", "read", "acme", "launch", "--json"]);
    let messages: Vec<ThreadMessage> = read
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let said: Vec<(&str, &str)> = messages
        .iter()
        .map(|m| (m.author.as_str(), m.text.as_str()))
        .collect();
    assert_eq!(
        said,
        [
            ("ada", "when is the launch?"),
            ("bob", "Friday, as planned")
        ]
    );
    for args in [
        &["thread", "read", "acme", "launch", "--json"][..],
        &["thread", "read", "acme", "launch", "--offset", "1"],
        &["thread", "list", "acme"],
        &["thread", "list", "acme", "--json"],
        &["thread", "search", "acme", "planned"],
        &["house", "rules", "acme"],
    ] {
        assert_eq!(ok(&a, args), ok(&b, args), "{args:?}");
    }
    assert_eq!(
        ok(&a, &["thread", "read", "acme", "launch", "--offset", "1"]),
        "[ada] when is the launch?\n"
    );
    let listed = ok(&a, &["thread", "list", "acme"]);
    assert!(listed.starts_with("launch "), "{listed}");
    assert!(listed.contains("2 messages"), "{listed}");

    // The rules, changed through a, are b's.
    assert_eq!(
        ok(&a, &["house", "rules", "acme", "--max-chain", "2"]),
        "max_turns_per_round = 3\nmax_chain = 2\ncontext_messages = 30\n"
    );
    assert_eq!(
        ok(&b, &["house", "rules", "acme"]),
        "max_turns_per_round = 3\nmax_chain = 2\ncontext_messages = 30\n"
    );

    // Files written on b, in two versions: read through a as b's CLI reads them.
    let local = tempfile::tempdir().unwrap();
    let plan = local.path().join("plan.md");
    std::fs::write(&plan, "# Launch\n\nThe launch is on Friday.\n").unwrap();
    let plan = plan.to_str().unwrap();
    ok(
        &b,
        &["files", "put", "acme", "notes/plan.md", plan, "-m", "first"],
    );
    std::fs::write(
        local.path().join("plan.md"),
        "# Launch\n\nMoved to Monday.\n",
    )
    .unwrap();
    ok(
        &b,
        &["files", "put", "acme", "notes/plan.md", plan, "-m", "moved"],
    );
    for args in [
        &["files", "search", "acme", "launch"][..],
        &["files", "ls", "acme"],
        &["files", "ls", "acme", "notes", "--json"],
        &["files", "get", "acme", "notes/plan.md"],
        &["files", "get", "acme", "notes/plan.md", "--version", "1"],
        &["files", "get", "acme", "notes/plan.md", "--text"],
        &["files", "log", "acme"],
        &["files", "log", "acme", "notes/plan.md", "--json"],
    ] {
        assert_eq!(ok(&a, args), ok(&b, args), "{args:?}");
    }
    assert_eq!(
        ok(&a, &["files", "get", "acme", "notes/plan.md"]),
        "# Launch\n\nMoved to Monday.\n"
    );
    let log = ok(&a, &["files", "log", "acme", "notes/plan.md"]);
    assert_eq!(log.lines().count(), 2, "{log}");
    assert!(log.lines().all(|l| l.contains("+notes/plan.md")), "{log}");
    let hits = ok(&a, &["files", "search", "acme", "launch"]);
    assert!(
        hits.starts_with("[1] notes/plan.md#1, version 2 — "),
        "{hits}"
    );
    // Written and removed through a: on b.
    let put = ok(&a, &["files", "put", "acme", "notes/extra.md", plan]);
    assert!(put.starts_with("notes/extra.md → version 3 ("), "{put}");
    assert!(ok(&b, &["files", "ls", "acme"]).contains("notes/extra.md"));
    assert_eq!(
        ok(&a, &["files", "rm", "acme", "notes/extra.md"]),
        "removed `notes/extra.md` and all its versions (files version 4)\n"
    );
    assert!(!ok(&b, &["files", "ls", "acme"]).contains("notes/extra.md"));
    let missing = ["files", "get", "acme", "notes/none.md"];
    let err = refused(&a, &missing);
    assert_eq!(err, refused(&b, &missing));
    assert!(err.contains("there is no file `notes/none.md`"), "{err}");

    // A house on no node: the CLI's own error, through the server too.
    for args in [
        &["thread", "read", "nowhere", "launch"][..],
        &["files", "ls", "nowhere"],
    ] {
        let err = refused(&a, args);
        assert!(err.contains("there is no house named `nowhere`"), "{err}");
    }

    // b down: the 503's message, naming b.
    b.kill();
    a.wait_line("node `b` is gone");
    for args in [
        &["thread", "read", "acme", "launch"][..],
        &["thread", "list", "acme"],
        &["house", "rules", "acme"],
        &["files", "ls", "acme"],
        &["files", "get", "acme", "notes/plan.md"],
    ] {
        let err = refused(&a, args);
        assert!(
            err.contains("node `b`") && err.contains("down"),
            "{args:?}: {err}"
        );
    }
}
