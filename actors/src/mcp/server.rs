//! The actor of one MCP server: it owns the connection (and a stdio
//! server's process group), connects on the first request, lists the tools
//! again when the server says they changed, and starts the server again
//! with backoff when it dies.
//!
//! Slow work (starting, the handshake, `tools/list`) runs in tasks whose
//! results come back as messages, so the actor always answers. Each
//! connection has an epoch: what a task reports about an older connection
//! is ignored. Five failures within a minute mark the server failed: its
//! callers get an error naming it at once, and it is tried again once the
//! minute has passed.

use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use rmcp::{Peer, RoleClient};
use tokio::sync::mpsc;
use troupe_runtime::mcp::client::{self, Connection, ListedTool, ServerEvent};

use super::tool::McpTool;
use super::ServerSlot;

/// The longest wait between two restarts.
pub const MAX_BACKOFF: Duration = Duration::from_secs(10);
/// Failures within [`FAILURE_WINDOW`] that mark a server failed.
pub const MAX_FAILURES: usize = 5;
/// How far back failures count.
pub const FAILURE_WINDOW: Duration = Duration::from_secs(60);

type PeerReply = RpcReplyPort<Result<Peer<RoleClient>, String>>;

/// What the actor of a server is told.
pub enum ServerMsg {
    /// A connection, made if need be.
    Peer(PeerReply),
    /// A connection attempt ended.
    Connected(u64, Box<Result<(Connection, Vec<ListedTool>), String>>),
    /// The connection of an epoch ended by itself.
    Closed(u64, String),
    /// The server said its tools changed.
    ToolsChanged(u64),
    /// The tools listed again.
    Listed(u64, Result<Vec<ListedTool>, String>),
    /// The backoff before a restart is over.
    Retry(u64),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for ServerMsg {}

enum Phase {
    Idle,
    Connecting,
    Ready(Box<Connection>),
    Backoff,
    Failed(Instant),
}

/// The actor's state.
pub struct State {
    slot: Arc<ServerSlot>,
    epoch: u64,
    phase: Phase,
    waiters: Vec<PeerReply>,
    failures: VecDeque<Instant>,
    last_error: Option<String>,
    restarts: u32,
}

/// The actor.
pub struct McpServer;

impl Actor for McpServer {
    type Msg = ServerMsg;
    type State = State;
    type Arguments = Arc<ServerSlot>;

    async fn pre_start(
        &self,
        _myself: ActorRef<ServerMsg>,
        slot: Arc<ServerSlot>,
    ) -> Result<State, ActorProcessingErr> {
        slot.update(|s| s.state = "idle".into());
        Ok(State {
            slot,
            epoch: 0,
            phase: Phase::Idle,
            waiters: Vec::new(),
            failures: VecDeque::new(),
            last_error: None,
            restarts: 0,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<ServerMsg>,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        // Dropping the connection kills a stdio server's process group.
        state.phase = Phase::Idle;
        state.slot.update(|s| s.state = "stopped".into());
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<ServerMsg>,
        msg: ServerMsg,
        state: &mut State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            ServerMsg::Peer(reply) => state.on_peer(&myself, reply),
            ServerMsg::Connected(epoch, result) => {
                if epoch == state.epoch {
                    state.on_connected(&myself, *result);
                }
            }
            ServerMsg::Closed(epoch, why) => {
                if epoch == state.epoch && matches!(state.phase, Phase::Ready(_)) {
                    state.on_closed(&myself, why);
                }
            }
            ServerMsg::ToolsChanged(epoch) => {
                if let (true, Phase::Ready(conn)) = (epoch == state.epoch, &state.phase) {
                    let peer = conn.peer();
                    let me = myself.clone();
                    tokio::spawn(async move {
                        let listed = client::list_tools(&peer).await.map_err(|e| e.0);
                        let _ = me.send_message(ServerMsg::Listed(epoch, listed));
                    });
                }
            }
            ServerMsg::Listed(epoch, listed) => {
                if epoch == state.epoch {
                    match listed {
                        Ok(tools) => state.publish(&tools),
                        Err(e) => {
                            tracing::warn!(server = %state.slot.config.name, error = %e, "mcp tools could not be listed again")
                        }
                    }
                }
            }
            ServerMsg::Retry(epoch) => {
                if epoch == state.epoch && matches!(state.phase, Phase::Backoff) {
                    state.connect(&myself);
                }
            }
        }
        Ok(())
    }
}

impl State {
    fn name(&self) -> &str {
        &self.slot.config.name
    }

    fn on_peer(&mut self, myself: &ActorRef<ServerMsg>, reply: PeerReply) {
        if let Phase::Ready(conn) = &self.phase {
            if conn.peer().is_transport_closed() {
                // It died and its watcher has not told us yet.
                self.on_closed(myself, "its connection closed".into());
            }
        }
        match &self.phase {
            Phase::Ready(conn) => {
                let _ = reply.send(Ok(conn.peer()));
            }
            Phase::Connecting | Phase::Backoff => self.waiters.push(reply),
            Phase::Idle => {
                self.waiters.push(reply);
                self.connect(myself);
            }
            Phase::Failed(since) => {
                if since.elapsed() >= FAILURE_WINDOW {
                    self.failures.clear();
                    self.waiters.push(reply);
                    self.connect(myself);
                } else {
                    let _ = reply.send(Err(self.failed_text()));
                }
            }
        }
    }

    fn failed_text(&self) -> String {
        format!(
            "the MCP server `{}` keeps failing ({} failures within a minute; last: {}). Do the \
             task without it; the user can run `troupe mcp test {}` to see what is wrong. It is \
             tried again a minute after its last failure.",
            self.name(),
            self.failures.len(),
            self.last_error.as_deref().unwrap_or("unknown"),
            self.name()
        )
    }

    fn connect(&mut self, myself: &ActorRef<ServerMsg>) {
        self.epoch += 1;
        let epoch = self.epoch;
        self.phase = Phase::Connecting;
        self.slot.update(|s| s.state = "connecting".into());
        let slot = Arc::clone(&self.slot);
        let me = myself.clone();
        tokio::spawn(async move {
            let (events_tx, mut events_rx) = mpsc::unbounded_channel();
            let result =
                client::connect(&slot.config, &slot.cwd, events_tx, slot.tail.clone()).await;
            let result = match result {
                Ok(conn) => match client::list_tools(&conn.peer()).await {
                    Ok(tools) => Ok((conn, tools)),
                    Err(e) => Err(format!("the MCP server `{}`: {e}", slot.config.name)),
                },
                Err(e) => Err(e.0),
            };
            if result.is_ok() {
                let forward = me.clone();
                tokio::spawn(async move {
                    while let Some(event) = events_rx.recv().await {
                        let msg = match event {
                            ServerEvent::ToolsChanged => ServerMsg::ToolsChanged(epoch),
                        };
                        if forward.send_message(msg).is_err() {
                            break;
                        }
                    }
                });
            }
            let _ = me.send_message(ServerMsg::Connected(epoch, Box::new(result)));
        });
    }

    fn on_connected(
        &mut self,
        myself: &ActorRef<ServerMsg>,
        result: Result<(Connection, Vec<ListedTool>), String>,
    ) {
        match result {
            Ok((mut conn, tools)) => {
                if let Some(closed) = conn.closed() {
                    let (me, epoch) = (myself.clone(), self.epoch);
                    tokio::spawn(async move {
                        let why = closed.await.unwrap_or_else(|_| "dropped".into());
                        let _ = me.send_message(ServerMsg::Closed(epoch, why));
                    });
                }
                let (protocol, info) = (conn.protocol.clone(), conn.server_info.clone());
                tracing::info!(server = %self.name(), %protocol, tools = tools.len(), "mcp server ready");
                for waiter in self.waiters.drain(..) {
                    let _ = waiter.send(Ok(conn.peer()));
                }
                self.phase = Phase::Ready(Box::new(conn));
                self.slot.update(|s| {
                    s.state = "ready".into();
                    s.protocol = protocol;
                    s.server_info = info;
                    s.error = None;
                });
                self.publish(&tools);
            }
            Err(e) => {
                tracing::warn!(server = %self.name(), error = %e, "mcp server could not connect");
                self.fail(e.clone());
                for waiter in self.waiters.drain(..) {
                    let _ = waiter.send(Err(e.clone()));
                }
                if !matches!(self.phase, Phase::Failed(_)) {
                    // Tried again on the next request.
                    self.phase = Phase::Idle;
                    self.slot.update(|s| s.state = "idle".into());
                }
            }
        }
    }

    fn on_closed(&mut self, myself: &ActorRef<ServerMsg>, why: String) {
        let error = format!("the MCP server `{}` stopped ({why})", self.name());
        tracing::warn!(server = %self.name(), %why, "mcp server stopped; starting it again");
        self.phase = Phase::Backoff;
        self.fail(error);
        if matches!(self.phase, Phase::Failed(_)) {
            // Its tools stay listed: a call gets the error naming it, not
            // an unknown tool.
            let text = self.failed_text();
            for waiter in self.waiters.drain(..) {
                let _ = waiter.send(Err(text.clone()));
            }
            return;
        }
        self.restarts += 1;
        let restarts = self.restarts;
        self.slot.update(|s| {
            s.state = "restarting".into();
            s.restarts = restarts;
        });
        let delay = backoff(self.failures.len());
        let epoch = self.epoch;
        myself.send_after(delay, move || ServerMsg::Retry(epoch));
    }

    fn fail(&mut self, error: String) {
        let now = Instant::now();
        self.failures.push_back(now);
        while self
            .failures
            .front()
            .is_some_and(|t| now.duration_since(*t) > FAILURE_WINDOW)
        {
            self.failures.pop_front();
        }
        self.last_error = Some(error.clone());
        self.slot.update(|s| s.error = Some(error));
        if self.failures.len() >= MAX_FAILURES {
            self.phase = Phase::Failed(now);
            self.slot.update(|s| s.state = "failed".into());
        }
    }

    fn publish(&self, tools: &[ListedTool]) {
        let built = McpTool::build_all(&self.slot, tools);
        self.slot.set_tools(built);
    }
}

/// The wait before restart number `failures` (the first is at once).
fn backoff(failures: usize) -> Duration {
    match failures {
        0 | 1 => Duration::ZERO,
        n => (Duration::from_millis(250) * 2u32.saturating_pow(n as u32 - 2)).min(MAX_BACKOFF),
    }
}
