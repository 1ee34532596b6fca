//! `troupe bench`: the workloads troupe is measured on, with a zero-latency
//! model so every figure is the runtime's own overhead.
//!
//! The model is scripted: when the last message is not a tool result it calls
//! `lookup_weather({"city": "Paris"})`, after a result it answers with a
//! short text. One turn is user message → model → tool → model. Each run
//! prints one JSON line (the last line of its output) with the machine's core
//! count, so a comparison is one command away.
//!
//! `crash` is different: it measures nothing but checks that a process
//! killed at random moments loses and duplicates nothing ([`crash`]).

mod accounts;
mod actors;
mod actors_memory;
mod browser;
mod cluster;
mod cluster_agents;
mod cluster_move;
pub mod crash;
mod env;
mod executors;
mod files;
mod house;
mod mailbox;
mod many;
pub(crate) mod markdown;
mod mcp;
mod restart;
mod server;
mod turns;
mod web;

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{Tool, ToolContext, ToolSpec};

/// The workloads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Workload {
    /// W1: round trips between two agents through the actor mailbox.
    W1,
    /// W1 through the durable path (committed before acknowledged).
    W1Durable,
    /// W2: sequential turns, each in a fresh conversation.
    W2,
    /// W2-long: sequential turns in one conversation.
    W2Long,
    /// W3: many agents each doing one turn, all at once.
    W3,
    /// Cold start: process exec to ready, and to the end of one turn.
    ColdStart,
    /// Parents each delegating 10 subagents, all at once (`--n` parents).
    Delegation,
    /// `message_agent`'s durable path: send (committed) to the target's turn starting.
    Message,
    /// Stored conversations activated after a restart (`--n` conversations).
    Activation,
    /// A model call that panics, to the supervisor's restart and the resumed turn (`--n` restarts).
    Restart,
    /// The house: a round of three bot answers, post_to_thread delivery, and the
    /// thread tools over 100 bots, 1,000 threads and `--n` messages.
    House,
    /// `web_fetch` of a 1 MB page from loopback to Markdown, then from the cache (`--n` each).
    Web,
    /// House files: a 1 MiB write, search over `--n` files of 10 KB, a
    /// 10,000-file listing, and the storage of 100 versions of a 100 KiB file
    /// and of 20 versions of a 1 MiB file.
    Files,
    /// The crash harness: a worker process killed `--kills` times, then checked.
    Crash,
    /// Environments: a fresh sandbox's creation (`--n` of them), `run_command`'s
    /// overhead over the host, and the memory of 50 idle environments (needs bubblewrap).
    Env,
    /// An MCP call through troupe against the raw round trip, and the start
    /// with 20 configured servers (`--n` calls; needs `node`).
    Mcp,
    /// The server: HTTP post to committed, fan-out to 1,000 WebSocket
    /// watchers, 10,000 idle connections, the page's first load, a 2 KB
    /// message's Markdown rendered (`--n` posts).
    Server,
    /// Outside executors: an instance's start and its events recorded,
    /// against the bare harness (a stand-in for pi; `--n` starts; needs
    /// bubblewrap and node).
    Executors,
    /// Executors' accounts: reading `executor_accounts` for 3 harnesses × 5
    /// accounts with a week of usage (`--n` reads).
    Accounts,
    /// A program's own actor kind: in-memory and durable sends, a call's
    /// round trip, the activation of a stored actor (`--n` sends each).
    Actors,
    /// A program's actor kind at scale: `--n` stored keys (1,000,000) with
    /// `--live` of them live (100,000), and the resident memory.
    ActorsMemory,
    /// troupe's browser, headless: its start (`--n` of them, 5 at most), `--n` warm
    /// `browser_exec` calls navigating to a local page and reading its title, and
    /// the idle browser's resident memory (needs a Chromium).
    Browser,
    /// Durable sends between two nodes of a cluster on loopback: one at a
    /// time (latency), then `--n` at once (throughput).
    Cluster,
    /// Moving a house of 10,000 messages and 100 files between two nodes
    /// on loopback (`--n` houses, one after the other).
    ClusterMove,
    /// Three nodes of a cluster on loopback, each with `--n` live agents
    /// (10,000), and durable round trips between them.
    ClusterAgents,
    /// Internal: a node of `cluster-agents`.
    #[value(hide = true)]
    ClusterAgentsNode,
    /// Internal: the crash harness's worker.
    #[value(hide = true)]
    CrashWorker,
    /// Internal: the idle WebSocket clients of `server`.
    #[value(hide = true)]
    ServerClients,
}

/// Arguments of `troupe bench`.
#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    /// The workload.
    #[arg(value_enum)]
    pub workload: Workload,
    /// How many round trips, turns or agents.
    #[arg(long)]
    pub n: Option<usize>,
    /// Commit every message (on) or keep it in memory (off).
    #[arg(long, default_value = "on")]
    pub durable: String,
    /// Internal: run as the cold-start probe.
    #[arg(long, hide = true)]
    pub probe: bool,
    /// `actors-memory`: how many of the stored keys to keep live.
    #[arg(long)]
    pub live: Option<usize>,
    /// `crash`: how many times to kill the worker.
    #[arg(long, default_value_t = 30)]
    pub kills: usize,
    /// `crash`: the seed of the kill times and the workload.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// `crash`: how many nodes; above 1, this process and `N - 1` nodes it
    /// kills, one cluster on loopback (the harness across nodes).
    #[arg(long, default_value_t = 1)]
    pub nodes: usize,
    /// Internal: which crash worker this is.
    #[arg(long, hide = true, default_value_t = 0)]
    pub incarnation: u64,
    /// Internal: the crash worker settles instead of driving the workload.
    #[arg(long, hide = true)]
    pub settle: bool,
}

/// Runs a workload and returns its JSON line (`home`: the crash harness's,
/// from `--home`).
pub async fn run(
    args: BenchArgs,
    home: Option<std::path::PathBuf>,
) -> anyhow::Result<serde_json::Value> {
    let durable = match args.durable.as_str() {
        "on" => true,
        "off" => false,
        other => anyhow::bail!("`--durable {other}`: say `on` or `off`"),
    };
    let mut result = match args.workload {
        // A process started the way `troupe run` starts: driven from the
        // thread that called `block_on`.
        Workload::ColdStart if args.probe => turns::probe(durable).await?,
        Workload::ColdStart => turns::cold_start(durable).await?,
        Workload::Crash if args.nodes > 1 => {
            crash::nodes::bench(args.nodes, args.kills, args.seed).await?
        }
        Workload::Crash => crash::bench(home, args.kills, args.seed).await?,
        Workload::ServerClients => {
            server::clients(args.n.unwrap_or(10_000)).await?;
            serde_json::Value::Null
        }
        Workload::CrashWorker => {
            let home = home.ok_or_else(|| anyhow::anyhow!("the crash worker needs --home"))?;
            crash::worker::run(&home, args.seed, args.incarnation, args.settle).await?;
            serde_json::Value::Null
        }
        // The rest from a task of the runtime, as a server's handlers or
        // another agent drive it: the `block_on` thread is not one of the
        // runtime's workers, and every wake-up across to it would count.
        workload => tokio::spawn(in_process(workload, args.n, args.live, durable)).await??,
    };
    if let serde_json::Value::Object(map) = &mut result {
        map.insert(
            "cores".into(),
            json!(std::thread::available_parallelism()
                .map(|n| n.get())
                .unwrap_or(1)),
        );
    }
    Ok(result)
}

/// A workload measured inside this process.
async fn in_process(
    workload: Workload,
    n: Option<usize>,
    live: Option<usize>,
    durable: bool,
) -> anyhow::Result<serde_json::Value> {
    match workload {
        Workload::W1 => mailbox::in_memory(n.unwrap_or(50_000)).await,
        Workload::W1Durable => mailbox::durable(n.unwrap_or(20_000)).await,
        Workload::W2 => turns::sequential(n.unwrap_or(2_000), durable).await,
        Workload::W2Long => turns::long(n.unwrap_or(300), durable).await,
        Workload::W3 => turns::many(n.unwrap_or(1_000), durable).await,
        Workload::Delegation => many::delegation(n.unwrap_or(1_000), 10).await,
        Workload::Message => many::message(n.unwrap_or(2_000)).await,
        Workload::Activation => turns::activation(n.unwrap_or(1_000)).await,
        Workload::ColdStart => turns::cold_start(durable).await,
        Workload::Restart => restart::restart(n.unwrap_or(500), durable).await,
        Workload::House => house::house(n.unwrap_or(1_000_000)).await,
        Workload::Web => web::fetch(n.unwrap_or(50)).await,
        Workload::Browser => browser::run(n.unwrap_or(50)).await,
        Workload::Mcp => mcp::mcp(n.unwrap_or(2_000)).await,
        Workload::Files => files::files(n.unwrap_or(2_000)).await,
        Workload::Server => server::server(n.unwrap_or(2_000)).await,
        Workload::Env => env::env(n.unwrap_or(20)).await,
        Workload::Executors => executors::executors(n.unwrap_or(20)).await,
        Workload::Accounts => accounts::accounts(n.unwrap_or(200)).await,
        Workload::Cluster => cluster::cluster(n.unwrap_or(20_000)).await,
        Workload::ClusterMove => cluster_move::cluster_move(n.unwrap_or(3)).await,
        Workload::ClusterAgents => cluster_agents::cluster_agents(n.unwrap_or(10_000)).await,
        Workload::ClusterAgentsNode => {
            cluster_agents::node(n.unwrap_or(10_000)).await?;
            Ok(serde_json::Value::Null)
        }
        Workload::Actors => actors::actors(n.unwrap_or(100_000)).await,
        Workload::ActorsMemory => {
            actors_memory::memory(n.unwrap_or(1_000_000), live.unwrap_or(100_000)).await
        }
        Workload::Crash | Workload::CrashWorker | Workload::ServerClients => {
            anyhow::bail!("the crash harness runs in its own processes")
        }
    }
}

/// `lookup_weather(city)`: always "sunny, 21C".
pub struct Weather {
    spec: ToolSpec,
}

impl Weather {
    /// The tool.
    pub fn new() -> Arc<Self> {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["city"],
            "properties": {"city": {"type": "string", "description": "The city."}}
        });
        Arc::new(Self {
            spec: ToolSpec::new("lookup_weather", "The weather in a city.", schema).read_only(),
        })
    }
}

#[async_trait::async_trait]
impl Tool for Weather {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn offer_varies(&self) -> bool {
        false
    }

    async fn call(&self, _args: serde_json::Value, _ctx: &ToolContext) -> ToolResult {
        ToolResult::ok("sunny, 21C")
    }
}

/// Percentiles of durations, in microseconds.
pub fn percentiles(mut samples: Vec<Duration>) -> serde_json::Value {
    samples.sort_unstable();
    let at = |p: f64| {
        if samples.is_empty() {
            return 0.0;
        }
        let i = ((samples.len() as f64 - 1.0) * p).round() as usize;
        samples[i].as_secs_f64() * 1e6
    };
    json!({"p50_us": round(at(0.5)), "p99_us": round(at(0.99)), "max_us": round(at(1.0))})
}

fn round(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

/// The process's resident memory, in bytes.
pub fn rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| {
            s.split_whitespace()
                .nth(1)
                .and_then(|v| v.parse::<u64>().ok())
        })
        .map(|pages| pages * 4096)
        .unwrap_or(0)
}

/// The process's peak resident memory, in bytes.
pub fn peak_rss_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines().find(|l| l.starts_with("VmHWM:")).and_then(|l| {
                l.split_whitespace()
                    .nth(1)
                    .and_then(|v| v.parse::<u64>().ok())
            })
        })
        .map(|kb| kb * 1024)
        .unwrap_or(0)
}
