//! One connection to one MCP server, over the official SDK (`rmcp`).
//!
//! A stdio server is a child process in a process group of its own, so
//! stopping it kills everything it started (an `npx` wrapper and its
//! `node`); its stderr is drained into tracing and its last lines kept to
//! say what went wrong. A streamable HTTP server is reached with the
//! workspace's one reqwest client ([`crate::net`]). The handshake is the
//! SDK's: it probes the stateless 2026-07-28 lifecycle and falls back to
//! `initialize` for the servers that speak 2025-11-25, and it reads past
//! notifications a server sends before its answer.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{
    serve_client_with_lifecycle, ClientLifecycleMode, NotificationContext, RunningService,
    RunningServiceCancellationToken,
};
use rmcp::{ClientHandler, Peer, RoleClient};
use serde_json::Value;
use tokio::io::AsyncBufReadExt;
use tokio::sync::{mpsc, oneshot};

use super::config::{ServerConfig, Transport};

/// Why a server could not be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct McpError(pub String);

/// What a server tells troupe without being asked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerEvent {
    /// `notifications/tools/list_changed`.
    ToolsChanged,
}

/// One tool as a server lists it.
#[derive(Debug, Clone, PartialEq)]
pub struct ListedTool {
    /// Its name on the server.
    pub name: String,
    /// Its description (its title when it has none).
    pub description: String,
    /// Its input schema.
    pub schema: Value,
    /// `readOnlyHint`.
    pub read_only: bool,
    /// `destructiveHint` (the protocol's default is true for a tool that
    /// is not read-only).
    pub destructive: bool,
}

struct Handler {
    info: ClientConfig,
    events: mpsc::UnboundedSender<ServerEvent>,
    server: String,
}

impl ClientHandler for Handler {
    fn get_info(&self) -> ClientConfig {
        self.info.clone()
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        tracing::debug!(server = %self.server, "mcp tools changed");
        let _ = self.events.send(ServerEvent::ToolsChanged);
    }
}

/// A child process group, killed when dropped, and by its watchdog when
/// troupe dies without dropping it ([`crate::tether`]).
struct ProcessGroup {
    child: tokio::process::Child,
    _watchdog: Option<crate::tether::Watchdog>,
}

impl ProcessGroup {
    fn kill(&mut self) {
        if let Some(pid) = self.child.id() {
            if let Some(pid) = rustix::process::Pid::from_raw(pid as i32) {
                let _ = rustix::process::kill_process_group(pid, rustix::process::Signal::KILL);
            }
        }
        let _ = self.child.start_kill();
    }
}

impl Drop for ProcessGroup {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A live connection. Dropping it (or [`Connection::stop`]) ends it and
/// kills a stdio server's whole process group.
pub struct Connection {
    peer: Peer<RoleClient>,
    cancel: Option<RunningServiceCancellationToken>,
    process: Option<ProcessGroup>,
    closed: Option<oneshot::Receiver<String>>,
    /// The protocol version agreed.
    pub protocol: String,
    /// The server's name and version, as it says.
    pub server_info: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("protocol", &self.protocol)
            .field("server_info", &self.server_info)
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The peer to send requests through (cheap to clone).
    pub fn peer(&self) -> Peer<RoleClient> {
        self.peer.clone()
    }

    /// Resolves when the connection ends by itself (the process died, the
    /// stream closed), with why. Taken once.
    pub fn closed(&mut self) -> Option<oneshot::Receiver<String>> {
        self.closed.take()
    }

    /// Ends the connection and kills the process group.
    pub fn stop(mut self) {
        self.shut();
    }

    fn shut(&mut self) {
        if let Some(cancel) = self.cancel.take() {
            cancel.cancel();
        }
        if let Some(mut process) = self.process.take() {
            process.kill();
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.shut();
    }
}

/// The last lines a stdio server wrote to stderr.
#[derive(Debug, Clone, Default)]
pub struct StderrTail(Arc<Mutex<VecDeque<String>>>);

impl StderrTail {
    const LINES: usize = 20;

    fn push(&self, line: String) {
        let mut lines = self.0.lock();
        if lines.len() == Self::LINES {
            lines.pop_front();
        }
        lines.push_back(line);
    }

    /// The lines, oldest first.
    pub fn lines(&self) -> Vec<String> {
        self.0.lock().iter().cloned().collect()
    }

    fn suffix(&self) -> String {
        let lines = self.lines();
        match lines.len() {
            0 => String::new(),
            _ => format!(
                "; its last words on stderr: {}",
                lines[lines.len().saturating_sub(3)..].join(" / ")
            ),
        }
    }
}

fn client_info() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("troupe", env!("CARGO_PKG_VERSION")),
    )
}

fn lifecycle() -> ClientLifecycleMode {
    ClientLifecycleMode::Auto {
        preferred_versions: vec![rmcp::model::ProtocolVersion::LATEST],
        legacy_version: None,
    }
}

/// Connects to `config`'s server within its connect timeout. Tool-list
/// changes arrive on `events`; stderr lines are kept in `tail`.
pub async fn connect(
    config: &ServerConfig,
    cwd: &Path,
    events: mpsc::UnboundedSender<ServerEvent>,
    tail: StderrTail,
) -> Result<Connection, McpError> {
    let name = config.name.clone();
    let handler = Handler {
        info: client_info(),
        events,
        server: name.clone(),
    };
    let timeout = config.connect_timeout;
    let too_slow = |tail: &StderrTail| {
        McpError(format!(
            "the MCP server `{name}` did not finish its handshake within {} s{}; check that it \
             starts on its own (`troupe mcp test {name}`), or raise `connectTimeout`",
            timeout.as_secs_f64(),
            tail.suffix()
        ))
    };
    let failed = |e: &dyn std::fmt::Display, tail: &StderrTail| {
        McpError(format!(
            "the MCP server `{name}` failed its handshake: {e}{}",
            tail.suffix()
        ))
    };
    match &config.transport {
        Transport::Stdio {
            command,
            args,
            env,
            cwd: own_cwd,
        } => {
            let mut cmd = tokio::process::Command::new(command);
            cmd.args(args)
                .envs(env)
                .current_dir(own_cwd.as_deref().unwrap_or(cwd))
                .stdin(std::process::Stdio::piped())
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
            // Started tethered: the server and whatever it starts die with
            // troupe, SIGKILL included, not only when it is dropped.
            let crate::tether::Running {
                mut child,
                watchdog,
                ..
            } = crate::tether::start(cmd).map_err(|e| {
                McpError(format!(
                    "could not start the MCP server `{name}` (`{command}`): {e}; check that the \
                     program is installed and on PATH"
                ))
            })?;
            let (Some(stdin), Some(stdout), Some(stderr)) =
                (child.stdin.take(), child.stdout.take(), child.stderr.take())
            else {
                return Err(McpError(format!(
                    "the MCP server `{name}` started without its pipes"
                )));
            };
            let process = ProcessGroup {
                child,
                _watchdog: watchdog,
            };
            drain_stderr(name.clone(), stderr, tail.clone());
            let started = tokio::time::timeout(
                timeout,
                serve_client_with_lifecycle(handler, (stdout, stdin), lifecycle()),
            )
            .await;
            let service = match started {
                Err(_) => return Err(too_slow(&tail)),
                Ok(Err(e)) => {
                    // Give stderr's reader the process's last words.
                    drop(process);
                    return Err(failed(&e, &tail));
                }
                Ok(Ok(service)) => service,
            };
            Ok(finish(service, Some(process)))
        }
        Transport::Http { url, headers } => {
            use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
            use rmcp::transport::StreamableHttpClientTransport;
            let client = crate::net::client_builder()
                .connect_timeout(timeout)
                .build()
                .map_err(|e| McpError(format!("could not build an HTTP client: {e}")))?;
            let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            let mut custom = HashMap::new();
            for (key, value) in headers {
                if key.eq_ignore_ascii_case("authorization") {
                    if let Some(token) = value.strip_prefix("Bearer ") {
                        transport_config = transport_config.auth_header(token);
                        continue;
                    }
                }
                let header_name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                    .map_err(|e| McpError(format!("the header `{key}` of `{name}`: {e}")))?;
                let header_value = reqwest::header::HeaderValue::from_str(value)
                    .map_err(|e| McpError(format!("the header `{key}` of `{name}`: {e}")))?;
                custom.insert(header_name, header_value);
            }
            let transport_config = transport_config.custom_headers(custom);
            let transport = StreamableHttpClientTransport::with_client(client, transport_config);
            let started = tokio::time::timeout(
                timeout,
                serve_client_with_lifecycle(handler, transport, lifecycle()),
            )
            .await;
            match started {
                Err(_) => Err(too_slow(&tail)),
                Ok(Err(e)) => Err(failed(&e, &tail)),
                Ok(Ok(service)) => Ok(finish(service, None)),
            }
        }
    }
}

fn finish(
    service: RunningService<RoleClient, Handler>,
    process: Option<ProcessGroup>,
) -> Connection {
    let peer = service.peer().clone();
    let cancel = service.cancellation_token();
    let info = peer
        .peer_info()
        .and_then(|info| serde_json::to_value(&*info).ok())
        .unwrap_or_default();
    let protocol = info
        .get("protocolVersion")
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string();
    let server_info = info
        .get("serverInfo")
        .map(|imp| {
            let field = |k: &str| imp.get(k).and_then(Value::as_str).unwrap_or("");
            format!("{} {}", field("name"), field("version"))
        })
        .unwrap_or_default();
    let (tx, rx) = oneshot::channel();
    tokio::spawn(async move {
        let why = match service.waiting().await {
            Ok(reason) => format!("{reason:?}"),
            Err(e) => e.to_string(),
        };
        let _ = tx.send(why);
    });
    Connection {
        peer,
        cancel: Some(cancel),
        process,
        closed: Some(rx),
        protocol,
        server_info: server_info.trim().to_string(),
    }
}

fn drain_stderr(server: String, stderr: tokio::process::ChildStderr, tail: StderrTail) {
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::info!(target: "troupe::mcp::stderr", server = %server, "{line}");
            tail.push(line);
        }
    });
}

/// Lists every tool of the server (following pages).
pub async fn list_tools(peer: &Peer<RoleClient>) -> Result<Vec<ListedTool>, McpError> {
    let tools = peer
        .list_all_tools()
        .await
        .map_err(|e| McpError(format!("tools/list failed: {e}")))?;
    Ok(tools
        .iter()
        .filter_map(|t| serde_json::to_value(t).ok())
        .map(|t| listed(&t))
        .collect())
}

fn listed(tool: &Value) -> ListedTool {
    let text = |key: &str| tool.get(key).and_then(Value::as_str).map(str::to_string);
    let hint = |key: &str| {
        tool.get("annotations")
            .and_then(|a| a.get(key))
            .and_then(Value::as_bool)
    };
    let read_only = hint("readOnlyHint").unwrap_or(false);
    ListedTool {
        name: text("name").unwrap_or_default(),
        description: text("description")
            .or_else(|| text("title"))
            .unwrap_or_default(),
        schema: tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"})),
        read_only,
        destructive: hint("destructiveHint").unwrap_or(!read_only),
    }
}

/// Calls `tool` with `arguments` and returns the result's JSON. Dropping
/// the future before the answer sends `notifications/cancelled`.
pub async fn call_tool(
    peer: &Peer<RoleClient>,
    tool: &str,
    arguments: serde_json::Map<String, Value>,
) -> Result<Value, McpError> {
    let params = CallToolRequestParams::new(tool.to_string()).with_arguments(arguments);
    match peer.call_tool_once(params).await {
        Ok(rmcp::model::CallToolResponse::Complete(result)) => {
            serde_json::to_value(&result).map_err(|e| McpError(e.to_string()))
        }
        Ok(_) => Err(McpError(
            "the server asked for more input or started a task, which troupe does not support yet"
                .into(),
        )),
        Err(e) => Err(McpError(e.to_string())),
    }
}

/// How long a call may take when the server sets no `timeout`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(120);
