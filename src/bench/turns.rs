//! W2, W2-long, W3 and cold start: turns over the zero-latency model.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_actors::toolset::Narrowing;
use troupe_runtime::model::ScriptedProvider;
use troupe_runtime::protocol::TurnOutcome;

use super::{peak_rss_bytes, percentiles, rss_bytes, Weather};
use crate::Runtime;

async fn runtime(home: &std::path::Path, durable: bool) -> anyhow::Result<Runtime> {
    let model = Arc::new(ScriptedProvider::weather().recording(false));
    Ok(Runtime::builder()
        .home(home)
        .cwd(home)
        .provider(model)
        .tool(Weather::new())
        .durable(durable)
        // The background review is separate work; these measure the turn.
        .set("review.enabled", "false")
        .build()
        .await?)
}

async fn one_turn(
    runtime: &Runtime,
    conversation: troupe_runtime::id::ConversationId,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let (_events, done) = runtime
        .node()
        .send(conversation, "What is the weather in Paris?")
        .await?;
    let report = done.await?;
    anyhow::ensure!(
        report.outcome == TurnOutcome::Finished,
        "turn ended with {:?}",
        report.outcome
    );
    Ok(started.elapsed())
}

/// W2: `n` sequential turns, each in a fresh conversation.
pub async fn sequential(n: usize, durable: bool) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let runtime = runtime(home.path(), durable).await?;
    let node = runtime.node().clone();
    let mut samples = Vec::with_capacity(n);
    let started = Instant::now();
    for _ in 0..n {
        let conversation = node
            .new_conversation("assistant", Narrowing::default())
            .await?;
        samples.push(one_turn(&runtime, conversation).await?);
    }
    let wall = started.elapsed();
    runtime.shutdown().await;
    Ok(json!({
        "workload": "w2", "durable": durable, "turns": n,
        "per_turn": percentiles(samples),
        "turns_per_s": (n as f64 / wall.as_secs_f64()).round(),
    }))
}

/// W2-long: `n` sequential turns in one conversation.
pub async fn long(n: usize, durable: bool) -> anyhow::Result<serde_json::Value> {
    let dir = tempfile::tempdir()?;
    let home = std::env::var_os("TROUPE_BENCH_HOME")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| dir.path().to_path_buf());
    let runtime = runtime(&home, durable).await?;
    let conversation = runtime
        .node()
        .new_conversation("assistant", Narrowing::default())
        .await?;
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(one_turn(&runtime, conversation).await?);
    }
    let window = 20.min(n);
    let first = percentiles(samples[..window].to_vec());
    let last = percentiles(samples[n - window..].to_vec());
    let db = std::fs::metadata(home.join("troupe.db"))
        .map(|m| m.len())
        .unwrap_or(0)
        + std::fs::metadata(home.join("troupe.db-wal"))
            .map(|m| m.len())
            .unwrap_or(0);
    runtime.shutdown().await;
    Ok(json!({
        "workload": "w2-long", "durable": durable, "turns": n,
        "first_turns": first, "last_turns": last,
        "db_bytes": db, "rss_mib": rss_bytes() / (1 << 20),
    }))
}

/// Activation: `n` stored conversations (three turns each, 12 messages)
/// after a restart, so none is live; asking each for its status activates
/// it from the store: its row, its bot, its history, its actor. Then the
/// same query again, live.
pub async fn activation(n: usize) -> anyhow::Result<serde_json::Value> {
    const TURNS_EACH: usize = 3;
    let home = tempfile::tempdir()?;
    let mut stored = Vec::with_capacity(n);
    {
        let runtime = runtime(home.path(), true).await?;
        let node = runtime.node().clone();
        for _ in 0..n {
            let conversation = node
                .new_conversation("assistant", Narrowing::default())
                .await?;
            for _ in 0..TURNS_EACH {
                one_turn(&runtime, conversation).await?;
            }
            stored.push(conversation);
        }
        runtime.shutdown().await;
    }
    let runtime = runtime(home.path(), true).await?;
    let node = runtime.node().clone();
    let live_before = node.live_conversations();
    let mut cold = Vec::with_capacity(n);
    for &conversation in &stored {
        let started = Instant::now();
        node.status(conversation).await?;
        cold.push(started.elapsed());
    }
    anyhow::ensure!(
        node.live_conversations() >= live_before + n,
        "only {} of {n} conversations became live",
        node.live_conversations().saturating_sub(live_before)
    );
    let mut warm = Vec::with_capacity(n);
    for &conversation in &stored {
        let started = Instant::now();
        node.status(conversation).await?;
        warm.push(started.elapsed());
    }
    runtime.shutdown().await;
    Ok(json!({
        "workload": "activation", "conversations": n, "messages_each": TURNS_EACH * 4,
        "activate": percentiles(cold), "live": percentiles(warm),
    }))
}

/// How long W3 waits after its burst before it reads the memory again.
const SETTLE: Duration = Duration::from_millis(500);

/// W3: `n` agents, each doing one turn, all at once. Reads the memory
/// added right after the last turn, and again [`SETTLE`] later with the
/// agents still live: the cost of the agents, not of their burst.
pub async fn many(n: usize, durable: bool) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let runtime = runtime(home.path(), durable).await?;
    let node = runtime.node().clone();
    let rss_before = rss_bytes();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..n {
        let runtime = runtime.clone();
        let node = node.clone();
        tasks.spawn(async move {
            let conversation = node
                .new_conversation("assistant", Narrowing::default())
                .await?;
            one_turn(&runtime, conversation).await
        });
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    let wall = started.elapsed();
    let rss_after = rss_bytes();
    // The agents stay live (not passivated); what the burst itself freed
    // goes back to the system as the runtime's idle workers collect their
    // heaps (`src/idle_heap.rs`).
    tokio::time::sleep(SETTLE).await;
    let rss_settled = rss_bytes();
    runtime.shutdown().await;
    let mib = |bytes: u64| bytes.saturating_sub(rss_before) as f64 / (1u64 << 20) as f64;
    Ok(json!({
        "workload": "w3", "durable": durable, "agents": n,
        "wall_ms": (wall.as_secs_f64() * 1000.0).round(),
        "rss_added_mib": mib(rss_after),
        "rss_settled_mib": mib(rss_settled),
        "peak_rss_mib": peak_rss_bytes() / (1 << 20),
    }))
}

/// The cold-start probe: builds a runtime, says ready, runs one turn.
pub async fn probe(durable: bool) -> anyhow::Result<serde_json::Value> {
    let home = std::env::var_os("TROUPE_BENCH_HOME").map(std::path::PathBuf::from);
    let dir = tempfile::tempdir()?;
    let home = home.unwrap_or_else(|| dir.path().to_path_buf());
    let runtime = runtime(&home, durable).await?;
    let conversation = runtime
        .node()
        .new_conversation("assistant", Narrowing::default())
        .await?;
    println!("ready");
    one_turn(&runtime, conversation).await?;
    println!("turn");
    runtime.shutdown().await;
    Ok(json!({"probe": true}))
}

/// Cold start: spawns the probe and times its lines.
pub async fn cold_start(durable: bool) -> anyhow::Result<serde_json::Value> {
    use tokio::io::AsyncBufReadExt;
    let exe = std::env::current_exe()?;
    let mut ready = Vec::new();
    let mut turn = Vec::new();
    for _ in 0..10 {
        let home = tempfile::tempdir()?;
        let started = Instant::now();
        let mut child = tokio::process::Command::new(&exe)
            .args([
                "bench",
                "cold-start",
                "--probe",
                "--durable",
                if durable { "on" } else { "off" },
            ])
            .env("TROUPE_BENCH_HOME", home.path())
            .env("TROUPE_HOME", home.path())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let mut lines = tokio::io::BufReader::new(stdout).lines();
        while let Some(line) = lines.next_line().await? {
            match line.as_str() {
                "ready" => ready.push(started.elapsed()),
                "turn" => turn.push(started.elapsed()),
                _ => {}
            }
        }
        child.wait().await?;
    }
    Ok(json!({
        "workload": "cold-start", "durable": durable, "runs": 10,
        "to_ready": percentiles(ready), "to_first_turn": percentiles(turn),
    }))
}
