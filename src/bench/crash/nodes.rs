//! `troupe bench crash --nodes N --kills K`: the crash harness across the
//! nodes of a cluster.
//!
//! This process is node `a`; nodes `b`, `c`, … are `troupe serve`
//! processes of their own homes, one cluster on loopback. `a` sends durable
//! messages to every other node without pause, each addressed to a service
//! of that node that takes none, so that a message, once applied, stays
//! in that node's mailbox where it is counted. Meanwhile the harness kills
//! one of the receiving nodes with SIGKILL a seeded random 20–300 ms after
//! `a` met it, and starts it again on its home and port, `K` times in all
//! — with messages to it in `a`'s outbox, in flight between the nodes, or
//! committed and not yet acknowledged.
//!
//! Then it stops sending, waits until `a`'s outbox is empty (every message
//! acknowledged), stops the nodes and reads their stores: every message
//! `a` committed must be in the mailbox of the node it was addressed to,
//! once, and noted received there (`cluster_received`); none may be on
//! another node, none left in an outbox. The JSON line's counts named
//! `lost`, `dup` and `missing` must be 0.
//!
//! What it does not kill: node `a`, the sender. A sender killed with
//! messages in its outbox is the single-node harness's case (the outbox is
//! a table of its store, committed with the message); here the receiving
//! side's crash is what crosses nodes.

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use troupe_actors::cluster::{Cluster, ClusterOptions};
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_runtime::rusqlite::{Connection, OpenFlags};

use super::Rng;
use crate::api::Runtime;

const COOKIE: &str = "crash-harness-cookie";

/// How long a node may take to meet `a`, and the end to settle.
const MEET: Duration = Duration::from_secs(60);
const SETTLE: Duration = Duration::from_secs(180);

/// Messages sent at once, and the pause between two such batches.
const BATCH: usize = 32;
const PACE: Duration = Duration::from_millis(2);

/// A receiving node: a `troupe serve` process on its home and port.
struct Receiver {
    name: String,
    home: PathBuf,
    port: u16,
    child: Option<tokio::process::Child>,
}

impl Receiver {
    /// The service its messages are addressed to.
    fn address(&self) -> Address {
        Address::Service(format!("crash-{}", self.name))
    }

    fn start(&mut self) -> anyhow::Result<()> {
        let child = tokio::process::Command::new(std::env::current_exe()?)
            .arg("--home")
            .arg(&self.home)
            .args(["serve", "--listen", "127.0.0.1:0", "--cluster", "crash"])
            .args(["--node-name", &self.name, "--cluster-listen"])
            .arg(format!("127.0.0.1:{}", self.port))
            .env_remove("TROUPE_HOME")
            .env("TROUPE_CLUSTER_COOKIE", COOKIE)
            .env("TROUPE_REVIEW__ENABLED", "false")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()?;
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL, and waits until it is gone.
    async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// Runs the harness with `nodes` nodes (this one and `nodes - 1` receiving
/// ones) and `kills` kills; returns the JSON line.
pub async fn bench(nodes: usize, kills: usize, seed: u64) -> anyhow::Result<serde_json::Value> {
    anyhow::ensure!(
        (2..=6).contains(&nodes),
        "`--nodes {nodes}`: the harness runs 2 to 6 nodes (this one and the ones it kills)"
    );
    let started = Instant::now();
    let dir = tempfile::tempdir()?;
    let mut receivers = Vec::with_capacity(nodes - 1);
    for i in 1..nodes {
        let name = char::from(b'a' + i as u8).to_string();
        let home = dir.path().join(&name);
        std::fs::create_dir_all(&home)?;
        let mut node = Receiver {
            name,
            home,
            port: free_port()?,
            child: None,
        };
        node.start()?;
        receivers.push(node);
    }
    let outcome = run(dir.path(), &mut receivers, kills, seed).await;
    for node in &mut receivers {
        let _ = node.kill().await;
    }
    let mut line = outcome?;
    if let serde_json::Value::Object(map) = &mut line {
        map.insert(
            "seconds".into(),
            json!((started.elapsed().as_secs_f64() * 10.0).round() / 10.0),
        );
    }
    Ok(line)
}

async fn run(
    dir: &Path,
    receivers: &mut [Receiver],
    kills: usize,
    seed: u64,
) -> anyhow::Result<serde_json::Value> {
    let home = dir.join("a");
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(dir)
        .set("review.enabled", "false")
        .build()
        .await?;
    let node = runtime.node().clone();
    let cluster = Cluster::start(
        &node,
        ClusterOptions {
            cluster: "crash".into(),
            node: "a".into(),
            listen: format!("127.0.0.1:{}", free_port()?).parse()?,
            join: receivers
                .iter()
                .map(|r| format!("127.0.0.1:{}", r.port))
                .collect(),
            cookie: COOKIE.into(),
            allow_plaintext: false,
            tls: None,
        },
    )
    .await?;
    for r in receivers.iter() {
        cluster.route(&r.address(), &r.name);
    }
    for r in receivers.iter() {
        meet(&cluster, &r.name).await?;
    }

    // The sender: batches to every node in turn, each message noted once
    // `a` committed it.
    let sent: Arc<Mutex<HashMap<MsgId, usize>>> = Arc::default();
    let stop = CancellationToken::new();
    let sender = {
        let (node, sent, stop) = (node.clone(), Arc::clone(&sent), stop.clone());
        let addresses: Vec<Address> = receivers.iter().map(Receiver::address).collect();
        tokio::spawn(async move {
            let mut i = 0_usize;
            let mut failed = 0_usize;
            while !stop.is_cancelled() {
                let batch: Vec<(usize, Envelope)> = (0..BATCH)
                    .map(|k| {
                        let to = (i + k) % addresses.len();
                        (to, envelope(&addresses[to], i + k))
                    })
                    .collect();
                i += BATCH;
                let sends = batch.into_iter().map(|(to, envelope)| {
                    let node = node.clone();
                    async move { (to, envelope.id, node.deliver(envelope).await) }
                });
                for (to, id, delivered) in futures::future::join_all(sends).await {
                    match delivered {
                        Ok(_) => {
                            sent.lock()
                                .unwrap_or_else(|e| e.into_inner())
                                .insert(id, to);
                        }
                        Err(_) => failed += 1,
                    }
                }
                tokio::time::sleep(PACE).await;
            }
            failed
        })
    };

    let mut rng = Rng::new(seed);
    for _ in 0..kills {
        let victim = &mut receivers[rng.below(receivers.len() as u64) as usize];
        meet(&cluster, &victim.name).await?;
        tokio::time::sleep(Duration::from_millis(20 + rng.below(281))).await;
        victim.kill().await?;
        victim.start()?;
    }
    stop.cancel();
    let failed = sender.await?;

    // Settle: every node back, every message acknowledged.
    for r in receivers.iter() {
        meet(&cluster, &r.name).await?;
    }
    let deadline = Instant::now() + SETTLE;
    let waiting = loop {
        let waiting: i64 = node
            .store()
            .read(|c| Ok(c.query_row("SELECT count(*) FROM cluster_outbox", [], |r| r.get(0))?))
            .await?;
        if waiting == 0 || Instant::now() >= deadline {
            break waiting;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    cluster.stop();
    runtime.shutdown().await;
    for r in receivers.iter_mut() {
        r.kill().await?;
    }

    let sent = std::mem::take(&mut *sent.lock().unwrap_or_else(|e| e.into_inner()));
    let mut line = serde_json::Map::new();
    line.insert("workload".into(), json!("crash"));
    line.insert("nodes".into(), json!(receivers.len() + 1));
    line.insert("kills".into(), json!(kills));
    line.insert("seed".into(), json!(seed));
    line.insert("sent".into(), json!(sent.len()));
    line.insert("sends_refused".into(), json!(failed));
    line.insert("missing_acknowledgements".into(), json!(waiting));
    let (mut lost, mut dup, mut misplaced, mut unnoted) = (0, 0, 0, 0);
    for (index, r) in receivers.iter().enumerate() {
        let found = applied(&r.home.join("troupe.db"), &r.address())?;
        let expected: HashSet<String> = sent
            .iter()
            .filter(|(_, to)| **to == index)
            .map(|(id, _)| id.to_string())
            .collect();
        lost += expected
            .iter()
            .filter(|id| !found.mailbox.contains_key(*id))
            .count();
        dup += found.mailbox.values().filter(|n| **n > 1).count();
        misplaced += found
            .mailbox
            .keys()
            .filter(|id| !expected.contains(*id))
            .count();
        unnoted += expected
            .iter()
            .filter(|id| !found.received.contains(*id))
            .count();
        line.insert(format!("applied_on_{}", r.name), json!(found.mailbox.len()));
    }
    line.insert("lost".into(), json!(lost));
    line.insert("dup".into(), json!(dup));
    line.insert("misplaced_lost".into(), json!(misplaced));
    line.insert("unnoted_missing".into(), json!(unnoted));
    Ok(serde_json::Value::Object(line))
}

/// One message from `a`'s bench service to `to`.
fn envelope(to: &Address, i: usize) -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Service("crash-a".into()),
        to: to.clone(),
        body: Payload::Text {
            sender: "crash harness".into(),
            text: format!("message {i}"),
            expects_reply: false,
        },
        sent_at: chrono::Utc::now(),
    }
}

/// Waits until `a` is connected to `node`.
async fn meet(cluster: &Cluster, node: &str) -> anyhow::Result<()> {
    let deadline = Instant::now() + MEET;
    while !cluster.is_connected(node) {
        anyhow::ensure!(
            Instant::now() < deadline,
            "node {node} did not meet node a within {} s",
            MEET.as_secs()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    Ok(())
}

/// What a receiving node's store holds of the harness's messages.
struct Applied {
    /// The mailbox's rows for the harness's service, by id, with how many.
    mailbox: HashMap<String, usize>,
    /// The ids noted received.
    received: HashSet<String>,
}

fn applied(db: &Path, address: &Address) -> anyhow::Result<Applied> {
    let conn = Connection::open_with_flags(db, OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    conn.busy_timeout(Duration::from_secs(5))?;
    let mut mailbox = HashMap::new();
    let mut rows = conn.prepare("SELECT id FROM mailbox WHERE to_addr = ?1")?;
    for id in rows.query_map([address.to_string()], |r| r.get::<_, String>(0))? {
        *mailbox.entry(id?).or_insert(0) += 1;
    }
    let mut rows = conn.prepare("SELECT id FROM cluster_received")?;
    let received = rows
        .query_map([], |r| r.get::<_, String>(0))?
        .collect::<Result<_, _>>()?;
    Ok(Applied { mailbox, received })
}
