//! The user's MCP servers: one supervised actor per server, and their tools.
//!
//! [`McpServers`] is built from `mcp.json` before the node starts and added
//! to the tool registry as a source of changing tools; [`McpServers::start`]
//! then puts one [`server`] actor per server under the node's root
//! supervisor. Nothing connects at start except the `alwaysLoad` servers: a
//! server connects the first time `tool_search` looks into it or one of its
//! tools is called, so twenty configured servers cost a start nothing. A
//! server that dies is started again with backoff; one that keeps failing is
//! reported as an error result naming it, and asked again a minute later.
//! Which agents get a server: the main agent gets all; a bot gets those its
//! definition names (`mcp_servers`) and those whose `bots` list names it.

pub mod server;
pub mod tool;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use ractor::ActorRef;
use serde::Serialize;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::mcp::client::{McpError, StderrTail};
use troupe_runtime::mcp::{McpConfig, ServerConfig};
use troupe_runtime::supervise::ChildSpec;
use troupe_runtime::tool::catalog::LazySources;
use troupe_runtime::tool::registry::ToolSource;
use troupe_runtime::tool::{Tool, ToolSpec};

use crate::bot::BotSpec;
use crate::node::{Node, NodeError};
use server::{McpServer, ServerMsg};

/// Where a server is in its life, as `troupe mcp list` shows it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct ServerStatus {
    /// `idle` (not connected yet), `connecting`, `ready`, `restarting` or `failed`.
    pub state: String,
    /// The last error, when there was one.
    pub error: Option<String>,
    /// The protocol version agreed.
    pub protocol: String,
    /// The server's name and version, as it says.
    pub server_info: String,
    /// Its tools' troupe names.
    pub tools: Vec<String>,
    /// How often it was started again after dying.
    pub restarts: u32,
}

/// One server: its configuration, its actor, its tools and its status.
pub struct ServerSlot {
    /// Its configuration.
    pub config: ServerConfig,
    actor: RwLock<Option<ActorRef<ServerMsg>>>,
    tools: RwLock<Arc<Vec<Arc<dyn Tool>>>>,
    status: RwLock<ServerStatus>,
    tail: StderrTail,
    generation: Arc<AtomicU64>,
    changes: tokio::sync::watch::Sender<u64>,
    cwd: PathBuf,
}

impl std::fmt::Debug for ServerSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerSlot")
            .field("name", &self.config.name)
            .finish_non_exhaustive()
    }
}

impl ServerSlot {
    /// Its status now.
    pub fn status(&self) -> ServerStatus {
        self.status.read().clone()
    }

    /// The last lines it wrote to stderr.
    pub fn stderr(&self) -> Vec<String> {
        self.tail.lines()
    }

    /// Its tools now.
    pub fn tools(&self) -> Arc<Vec<Arc<dyn Tool>>> {
        Arc::clone(&self.tools.read())
    }

    /// Told of every change of its status or tools (a counter).
    pub fn watch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.changes.subscribe()
    }

    fn set_tools(&self, tools: Vec<Arc<dyn Tool>>) {
        self.status.write().tools = tools.iter().map(|t| t.spec().name.clone()).collect();
        *self.tools.write() = Arc::new(tools);
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.changes.send_modify(|n| *n += 1);
    }

    fn update(&self, f: impl FnOnce(&mut ServerStatus)) {
        f(&mut self.status.write());
        self.changes.send_modify(|n| *n += 1);
    }

    /// A connection to the server: connects it if it is not yet, waits for
    /// a restart in progress, or says why it cannot be used. Never hangs:
    /// the wait is bounded by its connect timeout.
    pub async fn peer(&self) -> Result<rmcp::Peer<rmcp::RoleClient>, McpError> {
        let name = &self.config.name;
        let actor = self.actor.read().clone().ok_or_else(|| {
            McpError(format!(
                "the MCP server `{name}` is not running (troupe is stopping)"
            ))
        })?;
        let wait = self.config.connect_timeout + server::MAX_BACKOFF + Duration::from_secs(5);
        match ractor::call_t!(actor, ServerMsg::Peer, wait.as_millis() as u64) {
            Ok(result) => result.map_err(McpError),
            Err(e) => Err(McpError(format!(
                "the MCP server `{name}` did not become ready within {} s ({e})",
                wait.as_secs()
            ))),
        }
    }
}

/// The servers of `mcp.json`.
#[derive(Clone, Debug)]
pub struct McpServers {
    slots: Arc<Vec<Arc<ServerSlot>>>,
    by_name: Arc<HashMap<String, usize>>,
    generation: Arc<AtomicU64>,
    config: Arc<McpConfig>,
}

impl McpServers {
    /// The servers of `config`; tools resolve relative paths against `cwd`.
    pub fn new(config: McpConfig, cwd: PathBuf) -> Self {
        let generation = Arc::new(AtomicU64::new(0));
        let slots: Vec<Arc<ServerSlot>> = config
            .servers
            .iter()
            .map(|c| {
                Arc::new(ServerSlot {
                    config: c.clone(),
                    actor: RwLock::new(None),
                    tools: RwLock::new(Arc::new(Vec::new())),
                    status: RwLock::new(ServerStatus {
                        state: "idle".into(),
                        ..Default::default()
                    }),
                    tail: StderrTail::default(),
                    generation: Arc::clone(&generation),
                    changes: tokio::sync::watch::channel(0).0,
                    cwd: cwd.clone(),
                })
            })
            .collect();
        let by_name = slots
            .iter()
            .enumerate()
            .map(|(i, s)| (s.config.name.clone(), i))
            .collect();
        Self {
            slots: Arc::new(slots),
            by_name: Arc::new(by_name),
            generation,
            config: Arc::new(config),
        }
    }

    /// What `mcp.json` said, with its problems.
    pub fn config(&self) -> &McpConfig {
        &self.config
    }

    /// Every server, in the file's order.
    pub fn servers(&self) -> &[Arc<ServerSlot>] {
        &self.slots
    }

    /// The server called `name`.
    pub fn get(&self, name: &str) -> Option<&Arc<ServerSlot>> {
        self.by_name.get(name).map(|&i| &self.slots[i])
    }

    /// Whether `bot` gets the server `name`.
    pub fn offers_to(&self, name: &str, bot: &BotSpec) -> bool {
        let Some(slot) = self.get(name) else {
            return false;
        };
        bot.name == MAIN_AGENT
            || bot.mcp_servers.iter().any(|s| s == name)
            || slot.config.bots.iter().any(|b| b == &bot.name)
    }

    /// Starts one actor per server under `node`'s supervisor, and makes
    /// the servers known to the node's tools. The `alwaysLoad` servers are
    /// connected before this returns (each within its connect timeout; one
    /// that fails is reported by its calls and by `troupe mcp list`).
    pub async fn start(&self, node: &Node) -> Result<(), NodeError> {
        let _ = node.features().mcp.set(self.clone());
        node.offer_sources(Arc::new(self.clone()));
        node.services()
            .node()
            .set_lazy_sources(troupe_runtime::tool::catalog::Lazy(Arc::new(self.clone())));
        for slot in self.slots.iter() {
            let shared = Arc::clone(slot);
            let child = ChildSpec::new(format!("mcp:{}", slot.config.name), move |supervisor| {
                let slot = Arc::clone(&shared);
                async move {
                    let (actor, _) =
                        ractor::Actor::spawn_linked(None, McpServer, Arc::clone(&slot), supervisor)
                            .await?;
                    *slot.actor.write() = Some(actor.clone());
                    Ok(actor.get_cell())
                }
            });
            node.supervise(child).await?;
        }
        let always: Vec<_> = self
            .slots
            .iter()
            .filter(|s| s.config.always_load)
            .map(|s| async move {
                if let Err(e) = s.peer().await {
                    tracing::warn!(server = %s.config.name, error = %e, "an alwaysLoad MCP server did not connect");
                }
            })
            .collect();
        futures::future::join_all(always).await;
        Ok(())
    }
}

impl ToolSource for McpServers {
    fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.slots
            .iter()
            .flat_map(|s| s.tools().iter().cloned().collect::<Vec<_>>())
            .collect()
    }

    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        let server = name.strip_prefix("mcp__")?.split("__").next()?;
        let slot = McpServers::get(self, server)?;
        let tools = slot.tools();
        tools.iter().find(|t| t.spec().name == name).cloned()
    }

    fn generation(&self) -> u64 {
        self.generation.load(Ordering::SeqCst)
    }
}

#[async_trait::async_trait]
impl LazySources for McpServers {
    fn pending(&self) -> Vec<String> {
        self.slots
            .iter()
            .filter(|s| s.status.read().state == "idle")
            .map(|s| format!("mcp:{}", s.config.name))
            .collect()
    }

    async fn start(&self, sources: &[String]) -> (Vec<ToolSpec>, Vec<String>) {
        let wanted: Vec<&Arc<ServerSlot>> = sources
            .iter()
            .filter_map(|s| s.strip_prefix("mcp:"))
            .filter_map(|name| McpServers::get(self, name))
            .collect();
        let results = futures::future::join_all(wanted.iter().map(|s| s.peer())).await;
        let mut specs = Vec::new();
        let mut failures = Vec::new();
        for (slot, result) in wanted.into_iter().zip(results) {
            match result {
                Ok(_) => specs.extend(slot.tools().iter().map(|t| t.spec().clone())),
                Err(e) => failures.push(e.to_string()),
            }
        }
        (specs, failures)
    }
}

/// Reads `mcp.json` of `home`, logging what was wrong with it.
pub fn load_config(
    home: &troupe_runtime::home::Home,
    env: &dyn Fn(&str) -> Option<String>,
) -> McpConfig {
    let config = McpConfig::load(&home.mcp_file(), env);
    for problem in &config.problems {
        tracing::error!("{problem}");
    }
    config
}

impl crate::toolset::SourceOffers for McpServers {
    fn offers(&self, server: &str, bot: &BotSpec) -> bool {
        self.offers_to(server, bot)
    }
}
