//! Several `troupe serve` processes as nodes of one cluster on 127.0.0.1
//! (docs/cluster.md): a bot on node A messages a bot on node B and gets its
//! reply; a node with another cookie is refused; node B killed with a
//! message to it in A's outbox gets it exactly once when it returns; the
//! test process itself, joined as a node one wire version newer whose
//! frames carry fields B does not know, is understood; the crash harness
//! across three nodes loses nothing.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe::runtime::rusqlite::{Connection, OpenFlags};

use super::cli::{text, troupe};
use super::support::TestHome;

pub(super) const WAIT: Duration = Duration::from_secs(60);

/// A free loopback port (taken and given back).
pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// One node: its home, its process, its stderr's lines.
pub(super) struct Node {
    pub(super) home: TestHome,
    name: &'static str,
    pub(super) port: u16,
    model: String,
    child: Option<Child>,
    lines: Option<mpsc::Receiver<String>>,
}

impl Node {
    /// A home with `bot`, scripted by `turns`.
    pub(super) fn new(name: &'static str, bot: &str, turns: serde_json::Value) -> Node {
        let home = TestHome::new();
        let script = home.path().join("bots.json");
        std::fs::write(
            &script,
            json!({"bots": {bot: {"turns": turns}}}).to_string(),
        )
        .unwrap();
        let out = troupe(&home, &["bots", "create", bot, "--description", "a helper"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        Node {
            home,
            name,
            port: free_port(),
            model: format!("script:{}", script.display()),
            child: None,
            lines: None,
        }
    }

    /// Starts `troupe serve` as node `name` of cluster `c`, joining `join`.
    pub(super) fn start(&mut self, cookie: &str, join: Option<u16>) {
        self.start_armed(cookie, join, None);
    }

    /// [`Node::start`], the process killing itself at the fault point
    /// `kill_at` (`TROUPE_KILL_AT`) when given.
    pub(super) fn start_armed(&mut self, cookie: &str, join: Option<u16>, kill_at: Option<&str>) {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_troupe"));
        cmd.arg("--home")
            .arg(self.home.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--cluster", "c"])
            .args(["--node-name", self.name])
            .args(["--cluster-listen", &format!("127.0.0.1:{}", self.port)])
            .current_dir(self.home.path())
            .env_remove("TROUPE_HOME")
            .env("TROUPE_MODEL", &self.model)
            .env("TROUPE_CLUSTER_COOKIE", cookie)
            .stderr(Stdio::piped());
        if let Some(port) = join {
            cmd.args(["--join", &format!("127.0.0.1:{port}")]);
        }
        match kill_at {
            Some(point) => cmd.env("TROUPE_KILL_AT", point),
            None => cmd.env_remove("TROUPE_KILL_AT"),
        };
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    // Keep reading so the process never blocks on a full pipe.
                }
            }
        });
        self.child = Some(child);
        self.lines = Some(rx);
        self.wait_line("troupe serving");
    }

    /// Waits for a line of its stderr containing `needle`; returns it.
    pub(super) fn wait_line(&self, needle: &str) -> String {
        let rx = self.lines.as_ref().unwrap();
        let deadline = Instant::now() + WAIT;
        let mut said = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match rx.recv_timeout(left) {
                Ok(line) if line.contains(needle) => return line,
                Ok(line) => said.push(line),
                Err(e) => panic!(
                    "node {} never said `{needle}` ({e}); it said:\n{}",
                    self.name,
                    said.join("\n")
                ),
            }
        }
    }

    pub(super) fn kill(&mut self) {
        let mut child = self.child.take().unwrap();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        self.lines = None;
    }

    /// Waits for the process to end by itself (a fault point killed it).
    pub(super) fn wait_dead(&mut self) {
        let status = self.child.take().unwrap().wait().unwrap();
        assert!(!status.success(), "node {} was to be killed", self.name);
        self.lines = None;
    }

    /// A count from its database, read beside the running server.
    pub(super) fn count(&self, sql: &str) -> i64 {
        count(&self.home.path().join("troupe.db"), sql)
    }

    /// Waits until `sql` counts `n`.
    pub(super) fn wait_count(&self, sql: &str, n: i64) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.count(sql);
            if got == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "node {}: `{sql}` counted {got}, not {n}",
                self.name
            );
            // The database has no event to wait on from another process.
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `troupe run --bot BOT TEXT` through its server.
    pub(super) fn run(&self, bot: &str, message: &str) -> String {
        let out = troupe(&self.home, &["run", "--bot", bot, message]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

fn count(db: &Path, sql: &str) -> i64 {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY).unwrap();
    conn.busy_timeout(Duration::from_secs(5)).unwrap();
    conn.query_row(sql, [], |r| r.get(0)).unwrap()
}

pub(super) fn alice_asks_bob() -> serde_json::Value {
    json!([
        {"tool_calls": [{"name": "message_agent",
                         "arguments": {"target": "bob", "message": "what is the launch date?"}}]},
        {"text": "asked bob", "expect": "Delivered to `bob`"},
        {"text": "bob says Friday", "expect": "on Friday"}
    ])
}

pub(super) fn bob_answers() -> serde_json::Value {
    json!([{"text": "the launch is on Friday", "expect": "launch date"}])
}

pub(super) const ASKED: &str =
    "SELECT count(*) FROM messages WHERE text LIKE '%what is the launch date?%'";
pub(super) const HEARD: &str = "SELECT count(*) FROM messages WHERE text = 'bob says Friday'";

#[test]
fn a_bot_on_one_node_messages_a_bot_on_another_and_gets_its_reply() {
    let mut b = Node::new("b", "bob", bob_answers());
    b.start("secret", None);
    let mut a = Node::new("a", "alice", alice_asks_bob());
    a.start("secret", Some(b.port));
    a.wait_line("met node `b` (1 bot(s)");
    b.wait_line("met node `a` (1 bot(s)");
    let out = troupe(&a.home, &["ps", "--cluster"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let members = text(&out.stdout);
    assert!(members.contains("a (this node)"), "{members}");
    assert!(
        members.contains(&format!("b  127.0.0.1:{}  connected  bots: bob", b.port)),
        "{members}"
    );

    assert_eq!(
        a.run("alice", "ask bob when the launch is").trim(),
        "asked bob"
    );
    b.wait_count(ASKED, 1);
    a.wait_count(HEARD, 1);
    a.wait_count("SELECT count(*) FROM cluster_outbox", 0);
    b.wait_count("SELECT count(*) FROM cluster_outbox", 0);
}

#[test]
fn a_node_with_another_cookie_is_refused() {
    let mut a = Node::new("a", "alice", json!([]));
    a.start("secret", None);
    let mut c = Node::new("c", "carol", json!([]));
    c.start("not the secret", Some(a.port));
    a.wait_line("closed before it authenticated");
    c.wait_line("closed before it authenticated");
    assert_eq!(a.count("SELECT count(*) FROM cluster_peers"), 0);
    assert_eq!(c.count("SELECT count(*) FROM cluster_peers"), 0);
}

#[test]
fn a_message_to_a_killed_node_is_delivered_once_when_it_returns() {
    let mut b = Node::new("b", "bob", bob_answers());
    b.start("secret", None);
    let mut a = Node::new("a", "alice", alice_asks_bob());
    a.start("secret", Some(b.port));
    a.wait_line("met node `b`");
    b.kill();
    a.wait_line("node `b` is gone");

    // Committed to A's outbox while B is down.
    assert_eq!(
        a.run("alice", "ask bob when the launch is").trim(),
        "asked bob"
    );
    a.wait_count("SELECT count(*) FROM cluster_outbox WHERE peer = 'b'", 1);
    assert_eq!(b.count(ASKED), 0);

    b.start("secret", None);
    a.wait_count("SELECT count(*) FROM cluster_outbox", 0);
    b.wait_count(ASKED, 1);
    a.wait_count(HEARD, 1);
    b.wait_count("SELECT count(*) FROM cluster_received", 1);
    assert_eq!(b.count(ASKED), 1, "applied exactly once");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_one_wire_version_newer_with_an_unknown_field_is_understood() {
    use ractor::Actor;
    use ractor_cluster::NodeServer;
    use serde::Serialize;
    use troupe::actors::cluster::inbox::{group, InboxMsg};
    use troupe::runtime::id::{ConversationId, MsgId};
    use troupe::runtime::protocol::wire::{self, kind, Ack, Hello, Version, VERSION};
    use troupe::runtime::protocol::{Address, Envelope, Payload};

    let mut b = Node::new(
        "b",
        "bob",
        json!([{"text": "noted", "expect": "from a newer node"}]),
    );
    b.start("secret", None);

    // This test process joins as node `newer`, speaking the next minor version.
    let server = NodeServer::new(
        free_port(),
        "secret".into(),
        "newer".into(),
        "127.0.0.1".into(),
        None,
        None,
    )
    .with_listen_addr("127.0.0.1".parse().unwrap());
    let (server, _) = Actor::spawn(None, server, ()).await.unwrap();
    ractor_cluster::client_connect(&server, format!("127.0.0.1:{}", b.port))
        .await
        .unwrap();
    let deadline = Instant::now() + WAIT;
    let inbox: ractor::ActorRef<InboxMsg> = loop {
        if let Some(cell) = ractor::pg::get_members(&group("c")).into_iter().next() {
            break cell.into();
        }
        assert!(Instant::now() < deadline, "node b's inbox never joined");
        // ractor's process groups have no event to await outside an actor.
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let call = |frame: Vec<u8>| {
        let inbox = inbox.clone();
        async move {
            match inbox
                .call(|r| InboxMsg::Call(frame, r), Some(Duration::from_secs(10)))
                .await
                .unwrap()
            {
                ractor::rpc::CallResult::Success(bytes) => bytes,
                other => panic!("no answer: {other:?}"),
            }
        }
    };
    let newer = Version {
        major: VERSION.major,
        minor: VERSION.minor + 1,
    };

    #[derive(Serialize)]
    struct NewerFrame<B> {
        version: Version,
        kind: String,
        id: String,
        body: B,
        trace: String,
    }
    #[derive(Serialize)]
    struct NewerHelloRequest {
        cluster: String,
        node: String,
        zone: String,
    }
    #[derive(Serialize)]
    struct NewerDelivery {
        from_node: String,
        envelope: Envelope,
        priority: u8,
    }

    let hello = rmp_serde::to_vec_named(&NewerFrame {
        version: newer,
        kind: kind::HELLO.into(),
        id: "hello".into(),
        body: NewerHelloRequest {
            cluster: "c".into(),
            node: "newer".into(),
            zone: "eu-1".into(),
        },
        trace: "00-abc".into(),
    })
    .unwrap();
    let answer = call(hello).await;
    let hello: Hello = wire::decode(&answer, kind::HELLO).unwrap().body;
    assert_eq!(hello.node, "b");
    let bob = hello.bots.iter().find(|x| x.name == "bob").unwrap().id;

    let envelope = Envelope {
        id: MsgId::new(),
        from: Address::Conversation(ConversationId::new()),
        to: Address::Bot(bob),
        body: Payload::Text {
            sender: "zed".into(),
            text: "hello from a newer node".into(),
            expects_reply: false,
        },
        sent_at: chrono::Utc::now(),
    };
    let delivery = rmp_serde::to_vec_named(&NewerFrame {
        version: newer,
        kind: kind::ENVELOPE.into(),
        id: envelope.id.to_string(),
        body: NewerDelivery {
            from_node: "newer".into(),
            envelope,
            priority: 3,
        },
        trace: "00-abc".into(),
    })
    .unwrap();
    let ack: Ack = wire::decode(&call(delivery.clone()).await, kind::ACK)
        .unwrap()
        .body;
    assert!(ack.first);
    // Sent again (an acknowledgement lost): acknowledged, not applied twice.
    let again: Ack = wire::decode(&call(delivery).await, kind::ACK).unwrap().body;
    assert!(!again.first);
    let heard = "SELECT count(*) FROM messages WHERE text LIKE '%hello from a newer node%'";
    b.wait_count(heard, 1);
    b.wait_count("SELECT count(*) FROM messages WHERE text = 'noted'", 1);
    assert_eq!(b.count(heard), 1);
    server.stop(None);
}

/// The crash harness across nodes (`troupe bench crash --nodes 3`): two
/// receiving nodes killed five times in all while messages to them are in
/// flight; every message committed at the sender is applied once, on its
/// node, and acknowledged.
#[test]
fn the_crash_harness_across_three_nodes_loses_nothing_and_applies_nothing_twice() {
    let home = TestHome::new();
    let out = troupe(
        &home,
        &[
            "bench", "crash", "--nodes", "3", "--kills", "5", "--seed", "11",
        ],
    );
    let line = text(&out.stdout);
    assert!(out.status.success(), "{line}\n{}", text(&out.stderr));
    let result: serde_json::Value = serde_json::from_str(line.trim()).unwrap();
    assert!(result["sent"].as_u64().unwrap() > 0, "{result}");
    for key in [
        "lost",
        "dup",
        "misplaced_lost",
        "unnoted_missing",
        "missing_acknowledgements",
    ] {
        assert_eq!(result[key], 0, "{key}: {result}");
    }
    assert_eq!(
        result["applied_on_b"].as_u64().unwrap() + result["applied_on_c"].as_u64().unwrap(),
        result["sent"].as_u64().unwrap(),
        "{result}"
    );
}
