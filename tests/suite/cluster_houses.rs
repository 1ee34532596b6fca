//! Houses across the nodes of a cluster, several `troupe serve` processes
//! on 127.0.0.1 (docs/cluster.md): a house made with `--node b` from node
//! a lives on b and is listed with its node on a; rendezvous hashing
//! places houses made without `--node` deterministically; a request to a
//! for a house on b is served by b, with b's token; once b is stopped, it
//! answers 503 naming b.

use serde_json::{json, Value};

use super::cli::{text, troupe};
use super::cluster::Node;

/// `troupe house …` on `node`'s home (through its running server).
fn house(node: &Node, args: &[&str]) -> std::process::Output {
    let mut all = vec!["house"];
    all.extend_from_slice(args);
    troupe(&node.home, &all)
}

/// The URL of `node`'s HTTP API, from the file its server writes.
pub(super) fn url(node: &Node) -> String {
    let running: Value = serde_json::from_str(
        &std::fs::read_to_string(node.home.path().join("serve.json")).unwrap(),
    )
    .unwrap();
    running["url"].as_str().unwrap().to_string()
}

/// `GET path` on `base` with `token`: status and JSON body.
pub(super) fn get(base: &str, path: &str, token: &str) -> (u16, Value) {
    send(base, reqwest::Method::GET, path, token, Value::Null)
}

/// `method path` on `base` with `token` and a JSON `body` (none if null):
/// status and JSON body.
pub(super) fn send(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Value,
) -> (u16, Value) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut request = troupe::runtime::net::client_builder()
            .build()
            .unwrap()
            .request(method, format!("{base}{path}"))
            .bearer_auth(token);
        if !body.is_null() {
            request = request.json(&body);
        }
        let r = request.send().await.unwrap();
        let status = r.status().as_u16();
        (status, r.json().await.unwrap_or(Value::Null))
    })
}

#[test]
fn houses_are_placed_on_nodes_listed_with_them_and_served_from_any_node_until_theirs_is_down() {
    let mut a = Node::new("a", "alice", json!([]));
    a.start("secret", None);
    let mut b = Node::new("b", "bob", json!([]));
    b.start("secret", Some(a.port));
    a.wait_line("met node `b`");
    b.wait_line("met node `a`");

    // Placed by name, from a, on b: committed by b before a prints it.
    let out = house(&a, &["create", "acme", "--node", "b"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("on node `b`"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(
        b.count("SELECT count(*) FROM houses WHERE name = 'acme'"),
        1
    );
    assert_eq!(
        a.count("SELECT count(*) FROM houses WHERE name = 'acme'"),
        0
    );
    let listed = text(&house(&a, &["list"]).stdout);
    let line = listed
        .lines()
        .find(|l| l.starts_with("acme "))
        .unwrap_or_default();
    assert!(line.trim_end().ends_with(" b"), "{listed}");
    let out = house(&a, &["create", "acme"]);
    assert!(!out.status.success(), "a name taken on b is taken");
    let out = house(&a, &["create", "other", "--node", "zed"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("no node `zed`"),
        "{}",
        text(&out.stderr)
    );

    // Rendezvous over {a, b}: `h1` goes to a, `h2` to b (pinned by the
    // placement's unit test of the hash), from either node.
    assert!(house(&a, &["create", "h1"]).status.success());
    assert!(house(&b, &["create", "h2"]).status.success());
    assert_eq!(a.count("SELECT count(*) FROM houses WHERE name = 'h1'"), 1);
    assert_eq!(b.count("SELECT count(*) FROM houses WHERE name = 'h2'"), 1);
    // b tells a of h2 (made on b) by itself.
    a.wait_count(
        "SELECT count(*) FROM cluster_houses WHERE name = 'h2' AND node = 'b'",
        1,
    );
    let ps = text(&troupe(&a.home, &["ps", "--cluster"]).stdout);
    assert!(ps.contains("houses: acme, h2"), "{ps}");
    assert!(ps.contains("houses: h1"), "{ps}");

    // A person of acme (added through a, made on b) reads acme through a.
    let out = house(&a, &["add", "acme", "--human", "ada"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let token = text(&out.stdout).lines().last().unwrap().trim().to_string();
    let (status, body) = get(&url(&a), "/api/houses/acme/members", &token);
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["members"][0]["handle"], "ada", "{body}");
    let (status, body) = send(
        &url(&a),
        reqwest::Method::POST,
        "/api/houses/acme/threads",
        &token,
        json!({"name": "launch"}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        b.count("SELECT count(*) FROM threads WHERE name = 'launch'"),
        1
    );
    let members = text(&house(&a, &["members", "acme"]).stdout);
    assert!(members.contains("ada"), "{members}");
    // A token of a's house `home` is not one of acme's: b says so.
    let (status, _) = get(&url(&a), "/api/houses/acme/threads", "not-a-token");
    assert_eq!(status, 401);

    b.kill();
    a.wait_line("node `b` is gone");
    let (status, body) = get(&url(&a), "/api/houses/acme/threads", &token);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["error"]["node"], "b", "{body}");
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("node `b`") && message.contains("down"),
        "{message}"
    );
}
