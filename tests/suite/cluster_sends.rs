//! Durable sends across nodes besides `message_agent` (docs/cluster.md):
//! a program's own actor kind registered on another node takes durable
//! sends once, across a SIGKILL of that node, and answers back; posts a
//! program sends to a house's thread while the house moves to another
//! node are held, then land on the new node, each once.
//!
//! Node `a` is this test's process (the Rust API); node `b` is a `troupe
//! serve` process, or this test binary run again as a child with a kind
//! of its own.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use troupe::actors::cluster::{Cluster, ClusterOptions};
use troupe::runtime::id::MsgId;
use troupe::runtime::protocol::house::{Member, MemberKind, Post};
use troupe::runtime::protocol::{Address, Envelope, Payload};
use troupe::runtime::store::house as houses;
use troupe::{ActorAddress, ActorError, Context, Runtime, UserActor};

use super::cluster::Node;
use super::support::{script, TestHome, WAIT};

const COOKIE: &str = "secret";

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// This process as node `a` of the test cluster `c`, joining `join`.
async fn node_a(runtime: &Runtime, port: u16, join: Option<u16>) -> Cluster {
    Cluster::start(
        runtime.node(),
        ClusterOptions {
            cluster: "c".into(),
            node: "a".into(),
            listen: format!("127.0.0.1:{port}").parse().unwrap(),
            join: join.map(|p| format!("127.0.0.1:{p}")).into_iter().collect(),
            cookie: COOKIE.into(),
            allow_plaintext: false,
            tls: None,
        },
    )
    .await
    .unwrap()
}

/// Waits until `done` holds, looking every 10 ms: what it watches is
/// another process's.
async fn until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !done() {
        assert!(Instant::now() < deadline, "never: {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

// ---- a program's actor kind on another node ----

/// Node b's ledger: keeps each number it is sent, and tells node a's
/// teller it did.
struct Ledger;

#[derive(Debug, Serialize, Deserialize)]
struct Entry(u64);

impl ractor::Message for Entry {}

#[troupe::async_trait]
impl UserActor for Ledger {
    type Msg = Entry;
    type Reply = usize;
    type State = Vec<u64>;

    async fn handle(
        &self,
        cx: &mut Context<'_, Self>,
        Entry(n): Entry,
    ) -> Result<usize, ActorError> {
        cx.state_mut().push(n);
        cx.save();
        // Committed with the entry: sent once the entry is applied.
        cx.tell(&ActorAddress::<Teller>::new("teller", "main"), &Entry(n))
            .map_err(ActorError::from)?;
        Ok(cx.state().len())
    }
}

/// Node a's teller: keeps what the ledger told it.
struct Teller;

#[troupe::async_trait]
impl UserActor for Teller {
    type Msg = Entry;
    type Reply = Vec<u64>;
    type State = Vec<u64>;

    async fn handle(
        &self,
        cx: &mut Context<'_, Self>,
        Entry(n): Entry,
    ) -> Result<Vec<u64>, ActorError> {
        if n != u64::MAX {
            cx.state_mut().push(n);
            cx.save();
        }
        Ok(cx.state().clone())
    }
}

/// Node b as a child process: this test binary, running
/// [`ledger_node`] on the home and ports its environment names.
fn start_ledger_node(home: &std::path::Path, port: u16, join: u16) -> Child {
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args([
            "suite::cluster_sends::ledger_node",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env("TROUPE_TEST_LEDGER_NODE", home)
        .env("TROUPE_TEST_LEDGER_PORT", port.to_string())
        .env("TROUPE_TEST_LEDGER_JOIN", join.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if line == "ledger node ready" {
                let _ = tx.send(());
            }
        }
    });
    rx.recv_timeout(WAIT)
        .expect("the ledger node did not start");
    child
}

/// The child process of [`a_kind_on_another_node_takes_durable_sends_once_across_its_sigkill`]:
/// node b, with the kind `ledger` registered.
#[tokio::test]
#[ignore = "run as a child process by a_kind_on_another_node_takes_durable_sends_once_across_its_sigkill"]
async fn ledger_node() {
    let Ok(home) = std::env::var("TROUPE_TEST_LEDGER_NODE") else {
        return;
    };
    let port: u16 = std::env::var("TROUPE_TEST_LEDGER_PORT")
        .unwrap()
        .parse()
        .unwrap();
    let join: u16 = std::env::var("TROUPE_TEST_LEDGER_JOIN")
        .unwrap()
        .parse()
        .unwrap();
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(&home)
        .provider(script(vec![]))
        .build()
        .await
        .unwrap();
    runtime.register("ledger", |_: &str| Ledger).await.unwrap();
    let _cluster = Cluster::start(
        runtime.node(),
        ClusterOptions {
            cluster: "c".into(),
            node: "b".into(),
            listen: format!("127.0.0.1:{port}").parse().unwrap(),
            join: vec![format!("127.0.0.1:{join}")],
            cookie: COOKIE.into(),
            allow_plaintext: false,
            tls: None,
        },
    )
    .await
    .unwrap();
    println!("ledger node ready");
    std::future::pending::<()>().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kind_on_another_node_takes_durable_sends_once_across_its_sigkill() {
    let home_a = TestHome::new();
    let home_b = TestHome::new();
    let runtime = home_a.builder(script(vec![])).build().await.unwrap();
    let tellers = runtime.register("teller", |_: &str| Teller).await.unwrap();
    let teller = tellers.address("main");
    let (port_a, port_b) = (free_port(), free_port());
    let cluster = node_a(&runtime, port_a, None).await;
    let mut b = start_ledger_node(home_b.path(), port_b, port_a);
    let books = ActorAddress::<Ledger>::new("ledger", "books");
    let node = runtime.node().clone();
    until("node a knows node b's kind `ledger`", || {
        node.node_of(&books.to_address()).as_deref() == Some("b")
    })
    .await;
    let members = cluster.members();
    let kinds_of = |node: &str| {
        members["members"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["node"] == node)
            .map(|m| m["kinds"].clone())
    };
    assert_eq!(kinds_of("a"), Some(json!(["teller"])), "{members}");
    assert_eq!(kinds_of("b"), Some(json!(["ledger"])), "{members}");

    // Half sent, then node b killed while they are in flight; the other
    // half sent while it is down (committed here, waiting in the outbox).
    for n in 0..50 {
        runtime.send_durable(&books, Entry(n)).await.unwrap();
    }
    b.kill().unwrap(); // SIGKILL
    b.wait().unwrap();
    for n in 50..100 {
        runtime.send_durable(&books, Entry(n)).await.unwrap();
    }
    let mut b = start_ledger_node(home_b.path(), port_b, port_a);

    // Every entry applied on b exactly once: b told a's teller once each.
    let told = tokio::time::timeout(WAIT, async {
        loop {
            let seen = runtime.call(&teller, Entry(u64::MAX)).await.unwrap();
            if seen.len() >= 100 {
                return seen;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
    .expect("node b did not apply every entry");
    let mut sorted = told.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..100).collect::<Vec<u64>>(), "each entry once");
    let waiting: i64 = runtime
        .node()
        .store()
        .read(|c| Ok(c.query_row("SELECT count(*) FROM cluster_outbox", [], |r| r.get(0))?))
        .await
        .unwrap();
    assert_eq!(waiting, 0, "every send acknowledged");

    // A kind neither node registered is refused, not committed.
    let err = runtime
        .send_durable(&ActorAddress::<Ledger>::new("nosuch", "k"), Entry(1))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("register it first"), "{err}");

    b.kill().unwrap();
    b.wait().unwrap();
    cluster.stop();
    runtime.shutdown().await;
}

// ---- posts to a house's thread while the house moves ----

fn post(thread: troupe::runtime::id::ThreadId, i: usize) -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Service("program".into()),
        to: Address::Thread(thread),
        body: Payload::Post(Post {
            author: "ann".into(),
            author_kind: MemberKind::Human,
            text: format!("program post {i}"),
            round: None,
            depth: 0,
            via: None,
            answers_offer: false,
            failed: None,
            attachments: Vec::new(),
        }),
        sent_at: chrono::Utc::now(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn posts_a_program_sends_while_a_house_moves_land_on_the_new_node_once() {
    const POSTS: usize = 300;
    let mut b = Node::new("b", "scribe", json!([]));
    b.start(COOKIE, None);
    let home_a = TestHome::new();
    let runtime = home_a.builder(script(vec![])).build().await.unwrap();
    let cluster = node_a(&runtime, free_port(), Some(b.port)).await;
    let c = cluster.clone();
    until("node a met node b", || c.is_connected("b")).await;
    let thread = runtime
        .node()
        .store()
        .write(|tx| {
            let h = houses::create_house(tx, "acme")?;
            let ann = Member {
                handle: "ann".into(),
                kind: MemberKind::Human,
                display_name: "Ann".into(),
                listen: None,
                bot: None,
            };
            houses::put_member(tx, h.id, &ann)?;
            Ok(houses::create_thread(tx, h.id, Some("launch"), &[], "ann", &[])?.id)
        })
        .await
        .unwrap();

    // The program posts without pause; the move starts after its 20th.
    let node = runtime.node().clone();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel();
    let poster = tokio::spawn(async move {
        let mut started = Some(started_tx);
        for i in 0..POSTS {
            node.deliver(post(thread, i)).await.unwrap();
            if i == 20 {
                let _ = started.take().map(|s| s.send(()));
            }
            tokio::task::yield_now().await;
        }
    });
    started_rx.await.unwrap();
    let report = cluster.move_house("acme", "b").await.unwrap();
    poster.await.unwrap();
    assert!(
        report.counts.messages < POSTS as u64,
        "the move met the posts: it copied {} of them",
        report.counts.messages
    );

    // On b: every post once, the ones held during the move included.
    let deadline = Instant::now() + super::cluster::WAIT;
    while b.count("SELECT count(*) FROM thread_messages WHERE text LIKE 'program post %'")
        < POSTS as i64
    {
        if Instant::now() > deadline {
            let dump = runtime
                .node()
                .store()
                .read(|c| {
                    let mut out = Vec::new();
                    let mut stmt = c.prepare(
                        "SELECT to_addr, envelope FROM mailbox WHERE consumed_at IS NULL",
                    )?;
                    let rows = stmt.query_map([], |r| {
                        Ok(format!(
                            "pending {} {}",
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?
                        ))
                    })?;
                    for r in rows {
                        out.push(r?);
                    }
                    let mut stmt = c.prepare("SELECT peer, envelope FROM cluster_outbox")?;
                    let rows = stmt.query_map([], |r| {
                        Ok(format!(
                            "outbox {} {}",
                            r.get::<_, String>(0)?,
                            r.get::<_, String>(1)?
                        ))
                    })?;
                    for r in rows {
                        out.push(r?);
                    }
                    Ok(out)
                })
                .await
                .unwrap();
            panic!(
                "b has {} posts, {} pending there; a: {dump:#?}",
                b.count("SELECT count(*) FROM thread_messages WHERE text LIKE 'program post %'"),
                b.count("SELECT count(*) FROM mailbox WHERE consumed_at IS NULL"),
            );
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        b.count(
            "SELECT count(DISTINCT text) FROM thread_messages WHERE text LIKE 'program post %'"
        ),
        POSTS as i64
    );
    let left: (i64, i64) = runtime
        .node()
        .store()
        .read(|c| {
            Ok(c.query_row(
                "SELECT (SELECT count(*) FROM thread_messages),
                        (SELECT count(*) FROM mailbox WHERE consumed_at IS NULL)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )?)
        })
        .await
        .unwrap();
    assert_eq!(left, (0, 0), "nothing of the house, nothing waiting, on a");

    // A post sent to the thread after the move goes to b too.
    runtime.node().deliver(post(thread, POSTS)).await.unwrap();
    b.wait_count(
        "SELECT count(*) FROM thread_messages WHERE text LIKE 'program post %'",
        POSTS as i64 + 1,
    );
    cluster.stop();
    runtime.shutdown().await;
}
