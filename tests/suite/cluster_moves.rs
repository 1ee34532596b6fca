//! Moving a house between nodes, several `troupe serve` processes on
//! 127.0.0.1 (docs/cluster.md, "Moving a house"): a house moved from a to b
//! keeps its history, files, members and tokens, and the posts made through
//! a third node c while it moves all land on b; its bot's turns are then taken by b's bot
//! of that name. A move interrupted by killing the source before the switch
//! rolls back when it restarts; one interrupted by killing the target right
//! after it committed completes when the target returns; at no moment do
//! both nodes hold the house.

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::runtime::protocol::house::ThreadMessage;

use super::cli::{text, troupe};
use futures::StreamExt;
use tokio_tungstenite::tungstenite::Message as Ws;

use super::cluster::{Node, WAIT};
use super::cluster_houses::{get, send, url};
use super::cluster_streams::watch;

/// `troupe ARGS` on `node`'s home, which must succeed: its stdout.
fn ok(node: &Node, args: &[&str]) -> String {
    let out = troupe(&node.home, args);
    assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    text(&out.stdout)
}

const HOUSES: &str = "SELECT count(*) FROM houses WHERE name = 'acme'";
const MESSAGES: &str = "SELECT count(*) FROM thread_messages";

/// Two nodes, each with a bot `scribe`; the house `acme` on a with ada (her
/// token returned), scribe, a thread `launch` where scribe answered once,
/// and a file.
fn acme(a_kill_at: Option<&str>, b_kill_at: Option<&str>) -> (Node, Node, String) {
    let mut a = Node::new("a", "scribe", json!([{"text": "noted on a"}]));
    a.start_armed("secret", None, a_kill_at);
    let mut b = Node::new("b", "scribe", json!([{"text": "noted on b"}]));
    b.start_armed("secret", Some(a.port), b_kill_at);
    a.wait_line("met node `b`");
    b.wait_line("met node `a`");
    ok(&a, &["house", "create", "acme", "--node", "a"]);
    let added = ok(&a, &["house", "add", "acme", "--human", "ada"]);
    let token = added.lines().last().unwrap().trim().to_string();
    ok(&a, &["house", "add", "acme", "--bot", "scribe"]);
    ok(
        &a,
        &["thread", "create", "acme", "launch", "--with", "scribe"],
    );
    let said = ok(
        &a,
        &[
            "thread",
            "post",
            "acme",
            "launch",
            "@scribe first",
            "--as",
            "ada",
        ],
    );
    assert_eq!(said, "[scribe] noted on a\n");
    let plan = a.home.path().join("plan.md");
    std::fs::write(&plan, "the plan: ship on Friday\n").unwrap();
    ok(
        &a,
        &[
            "files",
            "put",
            "acme",
            "notes/plan.md",
            plan.to_str().unwrap(),
        ],
    );
    (a, b, token)
}

/// What `node` reads of the thread, as (author, text).
fn history(node: &Node) -> Vec<(String, String)> {
    ok(
        node,
        &[
            "thread", "read", "acme", "launch", "--json", "--limit", "500",
        ],
    )
    .lines()
    .map(|l| serde_json::from_str::<ThreadMessage>(l).unwrap())
    .map(|m| (m.author, m.text))
    .collect()
}

#[test]
fn a_house_moves_with_its_history_and_files_and_takes_the_posts_made_while_it_moves() {
    let (a, b, token) = acme(None, None);
    let mut c = Node::new("c", "scribe", json!([]));
    c.start("secret", Some(a.port));
    c.wait_line("met node `b`");
    c.wait_count(
        "SELECT count(*) FROM cluster_houses WHERE name = 'acme' AND node = 'a'",
        1,
    );
    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut stream = rt
        .block_on(watch(
            &url(&a),
            "/api/houses/acme/threads/launch/events",
            &token,
        ))
        .unwrap();

    // ada posts through c's API without pause (c forwards them to a, and
    // a to b once the house is there); the move starts once ten posts are
    // in, so the rest meet it.
    let base = url(&c);
    let (tx, rx) = std::sync::mpsc::channel();
    let poster = std::thread::spawn(move || {
        let mut statuses = Vec::new();
        for i in 0..200 {
            let (status, body) = send(
                &base,
                reqwest::Method::POST,
                "/api/houses/acme/threads/launch/messages",
                &token,
                json!({"text": format!("post {i}")}),
            );
            assert_eq!(status, 202, "post {i}: {body}");
            statuses.push(status);
            if i == 9 {
                tx.send(()).unwrap();
            }
        }
        (statuses.len(), token)
    });
    rx.recv().unwrap();
    let moved = ok(&a, &["house", "move", "acme", "b"]);
    assert!(
        moved.starts_with("moved house `acme` from node `a` to node `b` (epoch 1): 1 threads,"),
        "{moved}"
    );
    let (posted, token) = poster.join().unwrap();
    // A stream of the thread on a closes, saying where the house went.
    let closed = rt.block_on(async {
        loop {
            let next = tokio::time::timeout(WAIT, stream.next()).await.unwrap();
            if let Some(Ok(Ws::Close(Some(close)))) = next {
                return close;
            }
            assert!(next.is_some(), "the stream ended without a close frame");
        }
    });
    assert_eq!(u16::from(closed.code), 1012);
    assert!(closed.reason.contains("moved to node `b`"), "{closed:?}");
    assert_eq!(posted, 200);
    // The move took a snapshot between two of ada's posts: some before it,
    // the others held at a and sent on to b.
    let snapshot: u64 = moved
        .split(" messages")
        .next()
        .and_then(|s| s.rsplit(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!((12..202).contains(&snapshot), "{moved}");

    // Every post is on b, in order after the history; nothing is left on a.
    assert_eq!((a.count(HOUSES), b.count(HOUSES)), (0, 1));
    assert_eq!(a.count(MESSAGES), 0);
    let mut expected = vec![
        ("ada".to_string(), "@scribe first".to_string()),
        ("scribe".into(), "noted on a".into()),
    ];
    expected.extend((0..200).map(|i| ("ada".to_string(), format!("post {i}"))));
    assert_eq!(history(&a), expected, "read through a");
    assert_eq!(history(&b), expected, "read on b");
    assert_eq!(history(&c), expected, "read through c");

    // b's scribe answers now; the file, the members and ada's token moved.
    let said = ok(
        &a,
        &[
            "thread",
            "post",
            "acme",
            "launch",
            "@scribe again",
            "--as",
            "ada",
        ],
    );
    assert_eq!(said, "[scribe] noted on b\n");
    assert_eq!(
        ok(&a, &["files", "get", "acme", "notes/plan.md"]),
        "the plan: ship on Friday\n"
    );
    let (status, body) = get(&url(&a), "/api/houses/acme/members", &token);
    assert_eq!(status, 200, "{body}");
    let listed = ok(&a, &["house", "list"]);
    let line = listed.lines().find(|l| l.starts_with("acme ")).unwrap();
    assert!(line.trim_end().ends_with(" b"), "{listed}");
}

#[test]
fn a_move_interrupted_by_killing_either_node_rolls_back_or_completes_on_restart() {
    let (mut a, mut b, _) = acme(Some("house_move:copied"), Some("house_move:committed"));
    let before = history(&a);

    // a dies with the house copied to b, before asking b to take it.
    let out = troupe(&a.home, &["house", "move", "acme", "b"]);
    assert!(!out.status.success());
    a.wait_dead();
    assert_eq!(b.count(HOUSES), 0);
    a.start("secret", Some(b.port));
    a.wait_line("house `acme` was not moved to node `b`; it is served here again");
    assert_eq!((a.count(HOUSES), b.count(HOUSES)), (1, 0));
    assert_eq!(history(&a), before);

    // b dies right after it committed the house, before it answers.
    let out = troupe(&a.home, &["house", "move", "acme", "b"]);
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert!(said.contains("not known yet"), "{said}");
    b.wait_dead();
    assert_eq!(
        (a.count(HOUSES), b.count(HOUSES)),
        (1, 1),
        "a waits, unserved"
    );
    b.start("secret", Some(a.port));
    a.wait_line("house `acme` moved to node `b` (epoch 2)");
    assert_eq!((a.count(HOUSES), b.count(HOUSES)), (0, 1));
    assert_eq!(history(&a), before, "read through a, from b");
}
