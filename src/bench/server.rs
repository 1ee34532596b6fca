//! `troupe bench server`: the HTTP API and the event streams on loopback.
//!
//! - **post**: `POST …/messages` with a member's token, answered once the
//!   post is committed; `--n` posts one after another on a kept-alive
//!   connection, p50/p99 of the round trip.
//! - **fan-out**: 1,000 WebSocket watchers of one thread; 50 posts, and for
//!   each the time from sending the post to each watcher receiving the
//!   message, p50/p99 over every (watcher, message).
//! - **idle**: 10,000 idle WebSocket connections opened by a child process
//!   (so the file descriptors and memory of the clients are not counted):
//!   the whole server process's resident memory before and with them.
//! - **page**: the web page's first load (HTML, script, style), in bytes.
//! - **markdown**: a typical 2 KB message rendered and sanitised
//!   ([`super::markdown`]), 10,000 times, p50/p99 of one.

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use troupe_runtime::model::{ScriptedProvider, Turn};

use super::{percentiles, rss_bytes};
use crate::server::auth::RateLimit;
use crate::server::{page, Server, ServerOptions};
use crate::Runtime;

const WATCHERS: usize = 1_000;
const FAN_OUT_POSTS: usize = 50;
const IDLE: usize = 10_000;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Opens a watcher of `url` (a thread's events) and waits for its `ready`.
async fn watcher(url: &str, token: &str) -> anyhow::Result<Socket> {
    let mut request = url.into_client_request()?;
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse()?);
    let (mut socket, _) = tokio_tungstenite::connect_async(request).await?;
    while let Some(frame) = socket.next().await {
        if let Message::Text(t) = frame? {
            if t.contains("\"ready\"") {
                return Ok(socket);
            }
        }
    }
    anyhow::bail!("the stream closed before it was ready")
}

/// Runs the workload with `n` posts.
pub async fn server(n: usize) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let model = ScriptedProvider::from_fn(|_| Turn::text("ok")).recording(false);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model))
        .set("review.enabled", "false")
        .build()
        .await?;
    let house = runtime.create_house("bench").await?;
    house.add_human("ada", None).await?;
    house
        .create_thread(Some("general"), &[], "ada", &["ada".into()])
        .await?;
    let token = house.issue_token("ada").await?.secret;
    let server = Server::start(
        runtime.node().clone(),
        ServerOptions {
            listen: "127.0.0.1:0".parse()?,
            rate: RateLimit {
                per_second: 1e9,
                burst: 1e9,
            },
            ..ServerOptions::default()
        },
    )
    .await?;
    let base = format!("http://{}/api/houses/bench/threads/general", server.addr());
    let events = format!("{}/events", base.replacen("http", "ws", 1));
    troupe_runtime::net::install_crypto_provider();
    let http = troupe_runtime::net::client_builder().build()?;
    let post = |text: String| {
        http.post(format!("{base}/messages"))
            .bearer_auth(&token)
            .json(&json!({ "text": text }))
            .send()
    };

    // Post to committed.
    for i in 0..20 {
        post(format!("warm {i}")).await?.error_for_status()?;
    }
    let mut posts = Vec::with_capacity(n);
    for i in 0..n {
        let start = Instant::now();
        post(format!("post {i}")).await?.error_for_status()?;
        posts.push(start.elapsed());
    }

    // Fan-out to 1,000 watchers.
    let mut sockets = Vec::with_capacity(WATCHERS);
    for _ in 0..WATCHERS {
        sockets.push(watcher(&events, &token).await?);
    }
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant)>();
    let mut readers = Vec::with_capacity(WATCHERS);
    for mut socket in sockets {
        let tx = tx.clone();
        readers.push(tokio::spawn(async move {
            let mut seen = 0;
            while seen < FAN_OUT_POSTS {
                match socket.next().await {
                    Some(Ok(Message::Text(t)))
                        if t.contains("\"type\":\"message\"") && t.contains("fan-out ") =>
                    {
                        let _ = tx.send((seen, Instant::now()));
                        seen += 1;
                    }
                    Some(Ok(_)) => {}
                    _ => return,
                }
            }
        }));
    }
    drop(tx);
    let mut fan_out = Vec::with_capacity(WATCHERS * FAN_OUT_POSTS);
    for i in 0..FAN_OUT_POSTS {
        let start = Instant::now();
        post(format!("fan-out {i}")).await?.error_for_status()?;
        for _ in 0..WATCHERS {
            let (seen, at) = tokio::time::timeout(Duration::from_secs(30), rx.recv())
                .await?
                .ok_or_else(|| anyhow::anyhow!("a watcher stopped"))?;
            anyhow::ensure!(seen == i, "a watcher saw message {seen} for post {i}");
            fan_out.push(at.duration_since(start));
        }
    }
    for r in readers {
        r.await?;
    }

    // 10,000 idle connections, held by a child process.
    let idle = idle(&events, &token).await?;

    server.stop().await;
    runtime.shutdown().await;
    Ok(json!({
        "workload": "server",
        "post_to_committed": percentiles(posts),
        "posts": n,
        "fan_out_1000_watchers": percentiles(fan_out),
        "fan_out_posts": FAN_OUT_POSTS,
        "idle": idle,
        "page_first_load_bytes": page::first_load_bytes(),
        "page_first_load_gzip_bytes": page::first_load_gzip_bytes(),
        "markdown_2kb": super::markdown::markdown(10_000),
    }))
}

/// The server's memory before and after a child opens [`IDLE`] watchers.
async fn idle(events: &str, token: &str) -> anyhow::Result<serde_json::Value> {
    let exe = std::env::current_exe()?;
    let before = rss_bytes();
    let mut child = tokio::process::Command::new(exe)
        .args(["bench", "server-clients", "--n", &IDLE.to_string()])
        .env("TROUPE_BENCH_URL", events)
        .env("TROUPE_BENCH_TOKEN", token)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
    let mut lines = BufReader::new(stdout).lines();
    let started = Instant::now();
    let line = tokio::time::timeout(Duration::from_secs(300), lines.next_line())
        .await??
        .unwrap_or_default();
    anyhow::ensure!(line == "ready", "the clients' process said `{line}`");
    let opened = started.elapsed();
    let after = rss_bytes();
    drop(child.stdin.take());
    let _ = child.wait().await;
    Ok(json!({
        "connections": IDLE,
        // The whole server process: the node, its store, the 2,000 posts
        // and the fan-out's leftovers included. The allocator may hand
        // memory back in between, so `after` can be below `before`.
        "server_rss_before_mib": mib(before),
        "server_rss_with_connections_mib": mib(after),
        "opened_in_ms": opened.as_millis() as u64,
    }))
}

fn mib(bytes: u64) -> f64 {
    (bytes as f64 / 1_048_576.0 * 10.0).round() / 10.0
}

/// The child of [`idle`]: opens `n` watchers of `$TROUPE_BENCH_URL`, says
/// `ready`, and holds them until its stdin closes.
pub async fn clients(n: usize) -> anyhow::Result<()> {
    let url = std::env::var("TROUPE_BENCH_URL")?;
    let token = std::env::var("TROUPE_BENCH_TOKEN")?;
    let mut sockets = Vec::with_capacity(n);
    let mut opening = futures::stream::iter(0..n)
        .map(|_| watcher(&url, &token))
        .buffer_unordered(64);
    while let Some(socket) = opening.next().await {
        sockets.push(socket?);
    }
    println!("ready");
    let mut stdin = BufReader::new(tokio::io::stdin()).lines();
    while stdin.next_line().await?.is_some() {}
    drop(sockets);
    Ok(())
}
