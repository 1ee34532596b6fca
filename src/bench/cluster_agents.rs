//! `troupe bench cluster-agents`: three nodes of one cluster on loopback,
//! each with `--n` live agents, and durable sends between them.
//!
//! Node `a` is this process; `b` and `c` are this binary again, run as
//! bench nodes (`cluster-agents-node`), each on a home of its own. Every
//! node brings `--n` agents live at once — a conversation each, one tool
//! turn each over the zero-latency model, kept in memory — and the program's
//! actor kind `tally` is registered on `b` and `c` (its actors placed
//! between them by rendezvous hashing of their keys), `probe` on `a`.
//! Measured with the agents live: a durable round trip — `a` commits a
//! ping to a tally on `b` or `c`, which applies it and sends a pong back
//! (committed there, applied at `a`) — one at a time, then `--n` pings to
//! `--n` distinct tallies at once; and each node's resident memory. Each
//! ping must come back exactly once.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::json;
use tokio::sync::mpsc;
use troupe_actors::cluster::{Cluster, ClusterOptions};
use troupe_actors::kinds::{ActorAddress, ActorError, Context, KindOptions, UserActor};
use troupe_actors::toolset::Narrowing;
use troupe_runtime::model::ScriptedProvider;

use super::{percentiles, rss_bytes, Weather};
use crate::Runtime;

const COOKIE: &str = "bench-cookie";
/// Round trips measured one at a time.
const SAMPLES: usize = 500;
/// The environment variable a bench node reads: `NAME,PORT,JOIN_PORT,HOME`.
const NODE_ENV: &str = "TROUPE_BENCH_CLUSTER_NODE";

/// A ping to a tally, or its pong back to the probe.
#[derive(Debug, Serialize, Deserialize)]
pub struct Ping(u64);

impl ractor::Message for Ping {}

/// A tally on `b` or `c`: counts its pings, answers each to `a`'s probe.
struct Tally;

#[async_trait::async_trait]
impl UserActor for Tally {
    type Msg = Ping;
    type Reply = u64;
    type State = u64;

    async fn handle(&self, cx: &mut Context<'_, Self>, Ping(n): Ping) -> Result<u64, ActorError> {
        *cx.state_mut() += 1;
        cx.save();
        // Committed with the ping's consumption: sent once it is applied.
        cx.tell(&ActorAddress::<Probe>::new("probe", "a"), &Ping(n))
            .map_err(ActorError::from)?;
        Ok(*cx.state())
    }
}

/// `a`'s probe: hands each pong to the bench.
struct Probe(mpsc::UnboundedSender<u64>);

#[async_trait::async_trait]
impl UserActor for Probe {
    type Msg = Ping;
    type Reply = ();
    type State = ();

    async fn handle(&self, _cx: &mut Context<'_, Self>, Ping(n): Ping) -> Result<(), ActorError> {
        let _ = self.0.send(n);
        Ok(())
    }
}

async fn runtime(home: &std::path::Path) -> anyhow::Result<Runtime> {
    Ok(Runtime::builder()
        .home(home)
        .cwd(home)
        .provider(Arc::new(ScriptedProvider::weather().recording(false)))
        .tool(Weather::new())
        .set("review.enabled", "false")
        .build()
        .await?)
}

async fn start_cluster(
    runtime: &Runtime,
    name: &str,
    port: u16,
    join: Option<u16>,
) -> anyhow::Result<Cluster> {
    Ok(Cluster::start(
        runtime.node(),
        ClusterOptions {
            cluster: "bench".into(),
            node: name.into(),
            listen: format!("127.0.0.1:{port}").parse()?,
            join: join.map(|p| format!("127.0.0.1:{p}")).into_iter().collect(),
            cookie: COOKIE.into(),
            allow_plaintext: false,
            tls: None,
        },
    )
    .await?)
}

/// Brings `n` agents live at once, a tool turn each: how long it took.
async fn agents(runtime: &Runtime, n: usize) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let node = runtime.node().clone();
        tasks.spawn(async move {
            let conversation = node
                .new_conversation("assistant", Narrowing::default())
                .await?;
            let (_events, done) = node
                .send(conversation, "What is the weather in Paris?")
                .await?;
            done.await?;
            anyhow::Ok(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(started.elapsed())
}

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / f64::from(1u32 << 20) * 10.0).round() / 10.0
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

/// A bench node (`b` or `c`): its agents live, `tally` registered, in the
/// cluster; says so on stdout, then runs until killed.
pub async fn node(n: usize) -> anyhow::Result<()> {
    let spec = std::env::var(NODE_ENV)?;
    let parts: Vec<&str> = spec.splitn(4, ',').collect();
    let [name, port, join, home] = parts[..] else {
        anyhow::bail!("{NODE_ENV} is `NAME,PORT,JOIN_PORT,HOME`, not `{spec}`");
    };
    let runtime = runtime(std::path::Path::new(home)).await?;
    let rss_before = rss_bytes();
    let took = agents(&runtime, n).await?;
    runtime
        .register_with("tally", KindOptions::default(), |_: &str| Tally)
        .await?;
    let _cluster = start_cluster(&runtime, name, port.parse()?, Some(join.parse()?)).await?;
    println!(
        "{}",
        json!({"node": name, "agents": n, "agents_up_ms": took.as_millis(),
               "rss_mib": mib(rss_bytes()), "rss_added_mib": mib(rss_bytes().saturating_sub(rss_before))})
    );
    std::future::pending::<()>().await;
    Ok(())
}

/// Starts bench node `name` joining `join`; its ready line.
fn spawn_node(
    name: &str,
    n: usize,
    join: u16,
    home: &std::path::Path,
) -> anyhow::Result<(Child, serde_json::Value)> {
    let spec = format!("{name},{},{join},{}", free_port()?, home.display());
    let mut child = Command::new(std::env::current_exe()?)
        .args(["bench", "cluster-agents-node", "--n", &n.to_string()])
        .env(NODE_ENV, spec)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let ready = loop {
        match lines.next() {
            Some(Ok(line)) if line.starts_with('{') => break serde_json::from_str(&line)?,
            Some(Ok(_)) => continue,
            _ => {
                let _ = child.kill();
                anyhow::bail!("bench node `{name}` stopped before it was ready");
            }
        }
    };
    Ok((child, ready))
}

/// Runs the workload with `n` agents on each of the three nodes.
pub async fn cluster_agents(n: usize) -> anyhow::Result<serde_json::Value> {
    let homes = [
        tempfile::tempdir()?,
        tempfile::tempdir()?,
        tempfile::tempdir()?,
    ];
    let runtime = runtime(homes[0].path()).await?;
    let rss_before = rss_bytes();
    let a_up = agents(&runtime, n).await?;
    let (tx, mut pongs) = mpsc::unbounded_channel();
    runtime
        .register_with("probe", KindOptions::default(), move |_: &str| {
            Probe(tx.clone())
        })
        .await?;
    let port = free_port()?;
    let cluster = start_cluster(&runtime, "a", port, None).await?;
    let mut children = Vec::new();
    let result = async {
        let mut nodes = vec![json!({"node": "a", "agents": n, "agents_up_ms": a_up.as_millis(),
            "rss_added_mib": mib(rss_bytes().saturating_sub(rss_before))})];
        for (name, home) in [("b", &homes[1]), ("c", &homes[2])] {
            let (child, ready) = spawn_node(name, n, port, home.path())?;
            children.push(child);
            nodes.push(ready);
        }
        let node = runtime.node().clone();
        let tally = |i: usize| ActorAddress::<Tally>::new("tally", format!("k{i}"));
        let deadline = Instant::now() + Duration::from_secs(60);
        while !(cluster.is_connected("b") && cluster.is_connected("c"))
            || node.node_of(&tally(0).to_address()).is_none()
        {
            anyhow::ensure!(Instant::now() < deadline, "the nodes never met");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let placed: HashSet<String> = (0..64)
            .filter_map(|i| node.node_of(&tally(i).to_address()))
            .collect();
        anyhow::ensure!(placed.len() == 2, "the tallies are all on {placed:?}");

        // One round trip at a time.
        let mut samples = Vec::with_capacity(SAMPLES);
        for i in 0..SAMPLES {
            let started = Instant::now();
            runtime.send_durable(&tally(i), Ping(i as u64)).await?;
            let back = tokio::time::timeout(Duration::from_secs(30), pongs.recv())
                .await?
                .ok_or_else(|| anyhow::anyhow!("the probe stopped"))?;
            anyhow::ensure!(back == i as u64, "pong {back} for ping {i}");
            samples.push(started.elapsed());
        }
        // `n` at once, each to a tally of its own.
        let started = Instant::now();
        let sends: Vec<_> = (0..n)
            .map(|i| {
                let runtime = runtime.clone();
                tokio::spawn(async move {
                    runtime
                        .send_durable(&tally(SAMPLES + i), Ping((SAMPLES + i) as u64))
                        .await
                })
            })
            .collect();
        for send in sends {
            send.await??;
        }
        let mut seen = HashSet::with_capacity(n);
        while seen.len() < n {
            let back = tokio::time::timeout(Duration::from_secs(60), pongs.recv())
                .await?
                .ok_or_else(|| anyhow::anyhow!("the probe stopped"))?;
            anyhow::ensure!(seen.insert(back), "pong {back} came back twice");
        }
        let burst = started.elapsed();
        nodes[0]["rss_mib"] = json!(mib(rss_bytes()));
        Ok(json!({
            "workload": "cluster-agents",
            "what": "3 nodes on loopback, each with --n live agents (one tool turn each); durable ping → tally on b or c → pong back to a",
            "nodes": nodes,
            "round_trip_ms": percentiles(samples),
            "burst": n,
            "burst_ms": burst.as_millis(),
            "round_trips_per_s": (n as f64 / burst.as_secs_f64()).round(),
        }))
    }
    .await;
    for mut child in children {
        let _ = child.kill();
        let _ = child.wait();
    }
    cluster.stop();
    runtime.shutdown().await;
    result
}
