//! `troupe bench mcp`: what troupe adds to an MCP call, and what configured
//! servers cost a start.
//!
//! Two copies of a tiny stdio MCP server (the tests' fixture, written to a
//! temp folder; `node` must be on PATH) answer `echo`. The raw round trip is
//! the SDK's `tools/call` straight to one; the troupe call goes to the other
//! through the dispatcher (schema check, gate, timeout, its own task), the
//! server's actor (which hands out the connection) and the result's
//! conversion. The overhead is the difference of the two medians. Then a
//! runtime is built on a home with no `mcp.json` and on one with 20 servers,
//! which connect lazily, so they should cost the start nothing.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use troupe_runtime::home::Home;
use troupe_runtime::mcp::client::{self, StderrTail};
use troupe_runtime::mcp::McpConfig;
use troupe_runtime::model::ScriptedProvider;
use troupe_runtime::protocol::ToolCall;
use troupe_runtime::tool::dispatch::{DispatchSettings, Dispatcher, OpenGate};
use troupe_runtime::tool::registry::Registry;
use troupe_runtime::tool::ToolContext;

use super::percentiles;

const FIXTURE: &str = include_str!("../../tests/mcp/fixture.mjs");

/// Runs the benchmark with `n` calls each way.
pub async fn mcp(n: usize) -> anyhow::Result<serde_json::Value> {
    let dir = tempfile::tempdir()?;
    let script = dir.path().join("fixture.mjs");
    std::fs::write(&script, FIXTURE)?;
    let server = |name: &str, always: bool| json!({ name: {"command": "node", "args": [script.display().to_string()], "alwaysLoad": always} });
    let text = json!({"mcpServers": server("bench", true)}).to_string();
    let config = McpConfig::parse(&dir.path().join("mcp.json"), &text, &|_| None);

    // The raw round trip.
    let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
    let raw_conn = client::connect(
        &config.servers[0],
        dir.path(),
        events,
        StderrTail::default(),
    )
    .await?;
    let peer = raw_conn.peer();
    let args = || {
        let mut map = serde_json::Map::new();
        map.insert("text".into(), json!("ping"));
        map
    };
    for _ in 0..50 {
        client::call_tool(&peer, "echo", args()).await?;
    }
    let mut raw = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        client::call_tool(&peer, "echo", args()).await?;
        raw.push(t.elapsed());
    }
    raw_conn.stop();

    // Through troupe: a runtime on a home whose mcp.json names the server.
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home)?;
    std::fs::write(home.join("mcp.json"), &text)?;
    let runtime = crate::Runtime::builder()
        .home(&home)
        .cwd(&home)
        .provider(Arc::new(ScriptedProvider::new(Vec::new())))
        .durable(false)
        .build()
        .await?;
    let servers = runtime
        .node()
        .mcp_servers()
        .cloned()
        .ok_or_else(|| anyhow::anyhow!("the runtime has no MCP servers"))?;
    let mut registry = Registry::new();
    registry.add_source(Arc::new(servers));
    let dispatcher = Dispatcher::new(
        Arc::new(registry),
        Arc::new(OpenGate),
        DispatchSettings::default(),
    );
    let name = "mcp__bench__echo".to_string();
    let visible: HashSet<String> = [name.clone()].into();
    let ctx = ToolContext::standalone(Home::new(&home), home.clone());
    let call = ToolCall {
        id: "call_bench".into(),
        name,
        arguments: json!({"text": "ping"}),
    };
    for _ in 0..50 {
        dispatcher.run_one(&call, &visible, &ctx).await;
    }
    let mut through = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let result = dispatcher.run_one(&call, &visible, &ctx).await;
        through.push(t.elapsed());
        anyhow::ensure!(!result.is_error(), "the call failed: {}", result.text);
    }
    runtime.shutdown().await;

    // Start-up with 0 and with 20 configured (lazy) servers.
    let mut twenty = serde_json::Map::new();
    for i in 0..20 {
        if let serde_json::Value::Object(one) = server(&format!("s{i}"), false) {
            twenty.extend(one);
        }
    }
    let start_none = start_times(dir.path().join("none"), None).await?;
    let start_twenty = start_times(
        dir.path().join("twenty"),
        Some(json!({ "mcpServers": twenty }).to_string()),
    )
    .await?;

    let median = |v: &[Duration]| {
        let mut v = v.to_vec();
        v.sort_unstable();
        v[v.len() / 2]
    };
    let overhead = median(&through).saturating_sub(median(&raw));
    Ok(json!({
        "workload": "mcp",
        "calls": n,
        "raw_call": percentiles(raw),
        "troupe_call": percentiles(through),
        "overhead_p50_us": (overhead.as_secs_f64() * 1e7).round() / 10.0,
        "start_no_servers": percentiles(start_none),
        "start_20_servers": percentiles(start_twenty),
    }))
}

/// How long building a runtime takes on a fresh home, 10 times.
async fn start_times(
    root: std::path::PathBuf,
    mcp: Option<String>,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::new();
    for i in 0..10 {
        let home = root.join(i.to_string());
        std::fs::create_dir_all(&home)?;
        if let Some(text) = &mcp {
            std::fs::write(home.join("mcp.json"), text)?;
        }
        let t = Instant::now();
        let runtime = crate::Runtime::builder()
            .home(&home)
            .cwd(&home)
            .provider(Arc::new(ScriptedProvider::new(Vec::new())))
            .durable(false)
            .build()
            .await?;
        times.push(t.elapsed());
        runtime.shutdown().await;
    }
    Ok(times)
}
