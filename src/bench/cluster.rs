//! `troupe bench cluster`: durable sends between two nodes on loopback.
//!
//! Node `b` is a `troupe serve` process of its own; node `a` is this
//! process. Each message is committed in a's store, moved to its outbox,
//! sent by a's gateway to b, committed in b's store and acknowledged — the
//! latency measured is from before a's commit to the acknowledgement, one
//! message at a time; the throughput is `--n` messages sent at once, to the
//! last acknowledgement. The messages are addressed to a service of b that
//! takes none (they wait in b's mailbox), so what is measured is the path
//! between the nodes and not b's turns.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_actors::cluster::{Cluster, ClusterOptions};
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload};

use super::percentiles;
use crate::api::Runtime;

const COOKIE: &str = "bench-cookie";
/// One-at-a-time sends measured for the latency.
const SAMPLES: usize = 500;
/// Sends in flight at once for the throughput.
const IN_FLIGHT: usize = 1_024;

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn envelope(i: usize) -> Envelope {
    Envelope {
        id: MsgId::new(),
        from: Address::Service("bench-a".into()),
        to: Address::Service("bench".into()),
        body: Payload::Text {
            sender: "bench".into(),
            text: format!("message {i}"),
            expects_reply: false,
        },
        sent_at: chrono::Utc::now(),
    }
}

/// Two nodes on loopback: `b` a `troupe serve` process, `a` this one.
pub(super) struct Pair {
    /// Node a's runtime.
    pub(super) runtime: Runtime,
    /// Node a's part of the cluster, connected to b.
    pub(super) cluster: Cluster,
    b: std::process::Child,
    _homes: (tempfile::TempDir, tempfile::TempDir),
}

impl Pair {
    /// Starts b, then a joining it, and waits until they met.
    pub(super) async fn start() -> anyhow::Result<Pair> {
        let home_a = tempfile::tempdir()?;
        let home_b = tempfile::tempdir()?;
        let (port_a, port_b) = (free_port()?, free_port()?);
        let b = Command::new(std::env::current_exe()?)
            .arg("--home")
            .arg(home_b.path())
            .args(["serve", "--listen", "127.0.0.1:0", "--cluster", "bench"])
            .args(["--node-name", "b", "--cluster-listen"])
            .arg(format!("127.0.0.1:{port_b}"))
            .env("TROUPE_CLUSTER_COOKIE", COOKIE)
            .env("TROUPE_REVIEW__ENABLED", "false")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let started = async {
            let runtime = Runtime::builder()
                .home(home_a.path())
                .cwd(home_a.path())
                .set("review.enabled", "false")
                .build()
                .await?;
            let cluster = Cluster::start(
                runtime.node(),
                ClusterOptions {
                    cluster: "bench".into(),
                    node: "a".into(),
                    listen: format!("127.0.0.1:{port_a}").parse()?,
                    join: vec![format!("127.0.0.1:{port_b}")],
                    cookie: COOKIE.into(),
                    allow_plaintext: false,
                    tls: None,
                },
            )
            .await?;
            let deadline = Instant::now() + Duration::from_secs(60);
            while !cluster.is_connected("b") {
                anyhow::ensure!(Instant::now() < deadline, "node b never connected");
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            anyhow::Ok((runtime, cluster))
        }
        .await;
        match started {
            Ok((runtime, cluster)) => Ok(Pair {
                runtime,
                cluster,
                b,
                _homes: (home_a, home_b),
            }),
            Err(e) => {
                let mut b = b;
                let _ = b.kill();
                let _ = b.wait();
                Err(e)
            }
        }
    }

    /// Stops both nodes.
    pub(super) async fn stop(mut self) {
        self.cluster.stop();
        self.runtime.shutdown().await;
        let _ = self.b.kill();
        let _ = self.b.wait();
    }
}

/// Runs the workload with `n` messages for the throughput.
pub async fn cluster(n: usize) -> anyhow::Result<serde_json::Value> {
    let pair = Pair::start().await?;
    let result = measure(&pair, n).await;
    pair.stop().await;
    result
}

async fn measure(pair: &Pair, n: usize) -> anyhow::Result<serde_json::Value> {
    let (node, cluster) = (pair.runtime.node().clone(), &pair.cluster);
    cluster.route(&Address::Service("bench".into()), "b");
    let mut acked = cluster.acked();
    let mut wait_for = async |target: u64| -> anyhow::Result<()> {
        tokio::time::timeout(Duration::from_secs(120), acked.wait_for(|n| *n >= target))
            .await
            .map_err(|_| anyhow::anyhow!("node b did not acknowledge in time"))??;
        Ok(())
    };

    let mut samples = Vec::with_capacity(SAMPLES);
    for i in 0..SAMPLES {
        let t = Instant::now();
        node.deliver(envelope(i)).await?;
        wait_for(i as u64 + 1).await?;
        samples.push(t.elapsed());
    }

    let started = Instant::now();
    let mut sent = 0;
    while sent < n {
        let batch = IN_FLIGHT.min(n - sent);
        let sends = (sent..sent + batch).map(|i| node.deliver(envelope(i)));
        for r in futures::future::join_all(sends).await {
            r?;
        }
        sent += batch;
    }
    wait_for((SAMPLES + n) as u64).await?;
    let took = started.elapsed();
    Ok(json!({
        "workload": "cluster",
        "what": "durable sends between two nodes on loopback: committed at a, committed at b and acknowledged",
        "latency": percentiles(samples),
        "samples": SAMPLES,
        "n": n,
        "sends_per_s": (n as f64 / took.as_secs_f64()).round(),
        "seconds": (took.as_secs_f64() * 1000.0).round() / 1000.0,
    }))
}
