//! `troupe mcp list` and `troupe mcp test NAME`: the servers of `mcp.json`,
//! connected now to say whether they work and what tools they offer.
//!
//! Neither needs the home's lock: each connects to the servers itself (in
//! parallel, each within its `connectTimeout`) and stops them after.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use troupe_actors::mcp::tool::tool_name;
use troupe_runtime::home::Home;
use troupe_runtime::mcp::client::{self, ListedTool, StderrTail};
use troupe_runtime::mcp::{McpConfig, ServerConfig, ServerTrust, Transport};

/// What `troupe mcp` does.
#[derive(Debug, clap::Subcommand)]
pub enum McpCommand {
    /// Every server of mcp.json: connects each, and shows its state and tools.
    List {
        /// One JSON object per server.
        #[arg(long)]
        json: bool,
    },
    /// Connects one server, lists its tools, and says what is wrong if it fails.
    Test {
        /// The server's name in mcp.json.
        name: String,
    },
}

/// One server as `troupe mcp list` reports it.
#[derive(Debug, Serialize)]
pub struct ServerReport {
    /// Its name.
    pub name: String,
    /// `ready`, `failed` or `invalid` (mcp.json is wrong about it).
    pub state: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// `trusted` or `untrusted`.
    pub trust: String,
    /// Connected at start, tools always on.
    pub always_load: bool,
    /// The protocol version agreed.
    pub protocol: String,
    /// The server's name and version, as it says.
    pub server_info: String,
    /// Its tools by troupe name, with flags.
    pub tools: Vec<ToolReport>,
    /// What went wrong.
    pub error: Option<String>,
    /// Its last lines on stderr.
    pub stderr: Vec<String>,
}

/// One tool in a report.
#[derive(Debug, Serialize)]
pub struct ToolReport {
    /// `mcp__<server>__<tool>`.
    pub name: String,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint`.
    pub destructive: bool,
}

/// Runs `troupe mcp …`.
pub async fn mcp(home: Option<PathBuf>, command: McpCommand) -> anyhow::Result<ExitCode> {
    let home = home.map(Home::new).unwrap_or_else(Home::from_env);
    let env = |k: &str| std::env::var(k).ok();
    let config = McpConfig::load(&home.mcp_file(), &env);
    let cwd = std::env::current_dir()?;
    match command {
        McpCommand::List { json } => {
            let reports =
                futures::future::join_all(config.servers.iter().map(|s| report(s, cwd.clone())))
                    .await;
            let mut all = reports;
            for problem in &config.problems {
                all.push(invalid(problem));
            }
            if json {
                for r in &all {
                    println!("{}", serde_json::to_string(r)?);
                }
            } else if all.is_empty() {
                println!(
                    "no MCP servers: add them to {} (Claude Code's .mcp.json format)",
                    home.mcp_file().display()
                );
            } else {
                for r in &all {
                    print_report(r, false);
                }
            }
            let ok = all.iter().all(|r| r.state == "ready");
            Ok(if ok {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        McpCommand::Test { name } => {
            if let Some(problem) = config
                .problems
                .iter()
                .find(|p| p.server.as_deref() == Some(name.as_str()) || p.server.is_none())
            {
                println!("{problem}");
                return Ok(ExitCode::FAILURE);
            }
            let Some(server) = config.get(&name) else {
                let names: Vec<&str> = config.servers.iter().map(|s| s.name.as_str()).collect();
                anyhow::bail!(
                    "there is no MCP server named `{name}` in {}; the servers are: {}",
                    home.mcp_file().display(),
                    if names.is_empty() {
                        "none".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            };
            let r = report(server, cwd).await;
            print_report(&r, true);
            Ok(if r.state == "ready" {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

fn invalid(problem: &troupe_runtime::mcp::McpConfigError) -> ServerReport {
    ServerReport {
        name: problem
            .server
            .clone()
            .unwrap_or_else(|| "(mcp.json)".into()),
        state: "invalid".into(),
        transport: String::new(),
        trust: String::new(),
        always_load: false,
        protocol: String::new(),
        server_info: String::new(),
        tools: Vec::new(),
        error: Some(problem.to_string()),
        stderr: Vec::new(),
    }
}

async fn report(server: &ServerConfig, cwd: PathBuf) -> ServerReport {
    let tail = StderrTail::default();
    let (events, _rx) = tokio::sync::mpsc::unbounded_channel();
    let mut out = ServerReport {
        name: server.name.clone(),
        state: "failed".into(),
        transport: match server.transport {
            Transport::Stdio { .. } => "stdio".into(),
            Transport::Http { .. } => "http".into(),
        },
        trust: match server.trust {
            ServerTrust::Trusted => "trusted".into(),
            ServerTrust::Untrusted => "untrusted".into(),
        },
        always_load: server.always_load,
        protocol: String::new(),
        server_info: String::new(),
        tools: Vec::new(),
        error: None,
        stderr: Vec::new(),
    };
    match client::connect(server, &cwd, events, tail.clone()).await {
        Ok(conn) => {
            out.protocol = conn.protocol.clone();
            out.server_info = conn.server_info.clone();
            match client::list_tools(&conn.peer()).await {
                Ok(tools) => {
                    out.state = "ready".into();
                    out.tools = tools.iter().map(|t| tool_report(&server.name, t)).collect();
                }
                Err(e) => out.error = Some(e.0),
            }
            conn.stop();
        }
        Err(e) => out.error = Some(e.0),
    }
    out.stderr = tail.lines();
    out
}

fn tool_report(server: &str, tool: &ListedTool) -> ToolReport {
    ToolReport {
        name: tool_name(server, &tool.name).unwrap_or_else(|| {
            format!(
                "(left out: `{}` makes a name over 64 characters)",
                tool.name
            )
        }),
        read_only: tool.read_only,
        destructive: tool.destructive,
    }
}

fn print_report(r: &ServerReport, verbose: bool) {
    let mut head = format!("{}  {}", r.name, r.state);
    if !r.transport.is_empty() {
        head.push_str(&format!("  {} {}", r.transport, r.trust));
    }
    if r.always_load {
        head.push_str("  alwaysLoad");
    }
    if !r.server_info.is_empty() {
        head.push_str(&format!("  ({}, protocol {})", r.server_info, r.protocol));
    }
    println!("{head}");
    if let Some(error) = &r.error {
        println!("  error: {error}");
    }
    for t in &r.tools {
        let mut flags = Vec::new();
        if t.read_only {
            flags.push("read-only");
        }
        if t.destructive {
            flags.push("destructive");
        }
        println!("  {}  {}", t.name, flags.join(", "));
    }
    if verbose && !r.stderr.is_empty() {
        println!("  stderr:");
        for line in &r.stderr {
            println!("    {line}");
        }
    }
}
