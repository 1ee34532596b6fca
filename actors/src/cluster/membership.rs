//! Who is in the cluster: this node's node server, its connections, and the
//! peers' inboxes.
//!
//! ractor_cluster does the membership: its node server authenticates each
//! connection by the cookie and, connected to one node, connects to that
//! node's peers (transitive mode); process groups are kept in step over
//! every session. This actor only watches: every [`TICK`] it compares the
//! cluster's process group with the peers it knows, says `hello` to an
//! inbox it has not met (its name, where it listens, its bots), tells each
//! gateway whether its peer is reachable, and connects again to the nodes
//! it was told to join or has met, when no session with them is up.

use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashSet;
use ractor::{Actor, ActorCell, ActorId, ActorProcessingErr, ActorRef, SupervisionEvent};
use ractor_cluster::{NodeEventSubscription, NodeServer, NodeServerMessage};
use troupe_runtime::protocol::wire::{self, kind, Hello, HelloRequest};

use super::gateway::GatewayMsg;
use super::inbox::{group, InboxMsg};
use super::{ClusterError, ClusterOptions, Shared};

/// How often membership is looked at.
pub const TICK: Duration = Duration::from_millis(250);
/// How often a node that is not connected is dialled again.
pub const REDIAL: Duration = Duration::from_secs(1);

/// Starts the node server as `supervisor`'s child.
async fn serve(
    options: &ClusterOptions,
    supervisor: ActorCell,
) -> Result<ActorRef<NodeServerMessage>, ClusterError> {
    let encryption = options
        .tls
        .as_ref()
        .map(|tls| ractor_cluster::IncomingEncryptionMode::Tls(tls.acceptor.clone()));
    let server = NodeServer::new(
        options.listen.port(),
        options.cookie.clone(),
        options.node.clone(),
        options.listen.ip().to_string(),
        encryption,
        Some(ractor_cluster::node::NodeConnectionMode::Transitive),
    )
    .with_listen_addr(options.listen.ip())
    .with_max_inbound_frame_size(2 * wire::MAX_FRAME as u64);
    let (server, _) = Actor::spawn_linked(None, server, (), supervisor)
        .await
        .map_err(|e| ClusterError::Start(format!("the node server on {}: {e}", options.listen)))?;
    let _ = server.cast(NodeServerMessage::SubscribeToEvents {
        id: "troupe".into(),
        subscription: Box::new(Sessions::default()),
    });
    Ok(server)
}

/// Says when a connection closes before it authenticated: most often a
/// node with another cookie.
#[derive(Default)]
struct Sessions {
    authenticated: Arc<DashSet<u64>>,
}

impl NodeEventSubscription for Sessions {
    fn node_session_opened(&self, _ses: ractor_cluster::node::NodeServerSessionInformation) {}

    fn node_session_disconnected(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        if self.authenticated.remove(&ses.node_id).is_none() {
            eprintln!(
                "troupe: cluster: a connection with {} closed before it authenticated: a node with \
                 another cookie, or not a troupe node; it was refused",
                ses.peer_addr
            );
        }
    }

    fn node_session_authenticated(&self, ses: ractor_cluster::node::NodeServerSessionInformation) {
        self.authenticated.insert(ses.node_id);
        let name = ses.peer_name.map(|n| n.name).unwrap_or_default();
        eprintln!(
            "troupe: cluster: node `{name}` at {} authenticated",
            ses.peer_addr
        );
    }
}

/// The membership actor's messages.
#[derive(Debug)]
pub enum MembershipMsg {
    /// Look at the process group and the connections.
    Tick,
    /// A peer's inbox answered `hello`.
    Met(ActorId, Box<Hello>, ActorRef<InboxMsg>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for MembershipMsg {}

/// The membership actor.
#[derive(Debug, Clone, Copy, Default)]
pub struct Membership;

/// What it keeps.
pub struct MembershipState {
    shared: Arc<Shared>,
    server: ActorRef<NodeServerMessage>,
    /// The peers' inboxes met, by actor, with their node.
    met: HashMap<ActorId, String>,
    /// Inboxes asked `hello` and not answered yet.
    asking: HashSet<ActorId>,
    /// Ticks since the last dial.
    ticks: u32,
    /// Addresses whose TLS refusal was said (until they connect).
    refused: Arc<DashSet<String>>,
}

impl Actor for Membership {
    type Msg = MembershipMsg;
    type State = MembershipState;
    type Arguments = Arc<Shared>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        shared: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let server = serve(&shared.options, myself.get_cell()).await?;
        let _ = myself.cast(MembershipMsg::Tick);
        Ok(MembershipState {
            shared,
            server,
            met: HashMap::new(),
            asking: HashSet::new(),
            ticks: u32::MAX / 2,
            refused: Arc::default(),
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        msg: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match msg {
            MembershipMsg::Tick => {
                tick(&myself, state).await;
                myself.send_after(TICK, || MembershipMsg::Tick);
            }
            MembershipMsg::Met(id, hello, inbox) => {
                state.asking.remove(&id);
                let Some(node) = state.shared.node() else {
                    return Ok(());
                };
                if let Err(e) = state.shared.directory.met(node.store(), &hello).await {
                    tracing::warn!(peer = %hello.node, error = %e, "a peer's hello could not be kept");
                    return Ok(());
                }
                node.roster_changed();
                super::kinds::hand_over_waiting(&state.shared, hello.kinds.clone());
                state.met.insert(id, hello.node.clone());
                state
                    .shared
                    .inboxes
                    .insert(hello.node.clone(), inbox.clone());
                if let Some(g) = state.shared.gateway(&hello.node).await {
                    let _ = g.cast(GatewayMsg::Connected(inbox));
                }
                eprintln!(
                    "troupe: cluster: met node `{}` ({} bot(s), {} house(s))",
                    hello.node,
                    hello.bots.len(),
                    hello.houses.len()
                );
            }
        }
        Ok(())
    }

    /// The node server is linked: if it stops, the cluster cannot go on
    /// and this actor stops with it (the node's serve says so).
    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        _state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                tracing::error!(actor = %cell.get_id(), ?reason, "the cluster's node server stopped");
                myself.stop(Some("the node server stopped".into()));
            }
            SupervisionEvent::ActorFailed(cell, error) => {
                tracing::error!(actor = %cell.get_id(), %error, "the cluster's node server failed");
                myself.stop(Some("the node server failed".into()));
            }
            SupervisionEvent::ActorStarted(_)
            | SupervisionEvent::ProcessGroupChanged(_)
            | SupervisionEvent::PidLifecycleEvent(_) => {}
        }
        Ok(())
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        state.server.stop(None);
        Ok(())
    }
}

async fn tick(myself: &ActorRef<MembershipMsg>, state: &mut MembershipState) {
    let members: Vec<ActorCell> = ractor::pg::get_members(&group(&state.shared.options.cluster))
        .into_iter()
        .filter(|c| !c.get_id().is_local())
        .collect();
    let present: HashSet<ActorId> = members.iter().map(|c| c.get_id()).collect();
    // Inboxes gone: their sessions closed.
    let gone: Vec<ActorId> = state
        .met
        .keys()
        .filter(|id| !present.contains(id))
        .copied()
        .collect();
    for id in gone {
        if let Some(peer) = state.met.remove(&id) {
            if state.met.values().any(|p| *p == peer) {
                continue;
            }
            state.shared.directory.set_connected(&peer, false);
            state.shared.inboxes.remove(&peer);
            state.shared.houses.forget(&peer);
            super::streams::peer_down(&state.shared, &peer);
            if let Some(g) = state.shared.gateways.get(&peer) {
                let _ = g.cast(GatewayMsg::Disconnected);
            }
            eprintln!("troupe: cluster: node `{peer}` is gone; messages to it wait in the outbox");
        }
    }
    // Inboxes new: say hello.
    for cell in members {
        let id = cell.get_id();
        if state.met.contains_key(&id) || !state.asking.insert(id) {
            continue;
        }
        let inbox: ActorRef<InboxMsg> = cell.into();
        let request = HelloRequest {
            cluster: state.shared.options.cluster.clone(),
            node: state.shared.options.node.clone(),
        };
        let me = myself.clone();
        tokio::spawn(async move {
            match hello(&inbox, &request).await {
                Ok(h) => {
                    let _ = me.cast(MembershipMsg::Met(id, Box::new(h), inbox));
                }
                Err(e) => tracing::warn!(error = %e, "a peer did not answer hello"),
            }
        });
    }
    // The peers told of this node's houses, when they changed.
    super::houses::announce(&state.shared);
    // The house moves whose end the target must tell, once it is here.
    super::moves::tick(&state.shared);
    // Dial the nodes not connected.
    state.ticks = state.ticks.saturating_add(1);
    if u128::from(state.ticks) * TICK.as_millis() >= REDIAL.as_millis() {
        state.ticks = 0;
        let connected: HashSet<String> = state
            .shared
            .directory
            .peers()
            .into_iter()
            .filter(|p| p.connected)
            .map(|p| p.listen)
            .collect();
        let mut dialled: Vec<String> = state.shared.options.join.clone();
        dialled.extend(state.shared.directory.peers().into_iter().map(|p| p.listen));
        dialled.sort();
        dialled.dedup();
        for addr in dialled {
            if connected.contains(&addr) || addr == state.shared.listen {
                continue;
            }
            let server = state.server.clone();
            let tls = state.shared.options.tls.clone();
            let said = Arc::clone(&state.refused);
            tokio::spawn(async move {
                match dial(&server, &addr, tls).await {
                    Ok(()) => {
                        said.remove(&addr);
                    }
                    Err(Dial::Refused(why)) => {
                        // Said once per address until it connects: a
                        // certificate is not fixed by dialling again.
                        if said.insert(addr.clone()) {
                            eprintln!("troupe: cluster: {why}");
                        }
                        tracing::warn!(%addr, %why, "a node refused TLS");
                    }
                    Err(Dial::Unreachable(e)) => {
                        tracing::debug!(%addr, error = %e, "a node could not be reached yet");
                    }
                }
            });
        }
        // What waits for a peer is tried again.
        for g in state.shared.gateways.iter() {
            let _ = g.cast(GatewayMsg::Flush);
        }
    }
}

/// Why a node could not be dialled.
enum Dial {
    /// Its TLS was refused, by either side: said to the operator.
    Refused(String),
    /// Not reachable (yet): dialled again.
    Unreachable(String),
}

/// Opens a session with the node at `addr`, over TLS when the cluster has it.
async fn dial(
    server: &ActorRef<NodeServerMessage>,
    addr: &str,
    tls: Option<super::tls::Tls>,
) -> Result<(), Dial> {
    use ractor_cluster::ClientConnectErr;
    let result = match (tls, addr.parse::<SocketAddr>()) {
        (Some(tls), _) => {
            let name = super::tls::server_name(addr).map_err(Dial::Refused)?;
            ractor_cluster::client_connect_enc(server, addr, tls.connector, name).await
        }
        (None, Ok(to)) => ractor_cluster::client_connect(server, to).await,
        (None, Err(_)) => ractor_cluster::client_connect(server, addr).await,
    };
    result.map_err(|e| match e {
        ClientConnectErr::Encryption(e) => Dial::Refused(format!(
            "TLS with the node at {addr} failed: {e} (is its certificate signed by this \
             cluster's `tls_ca`, and does it name {addr}'s host?)"
        )),
        other => Dial::Unreachable(other.to_string()),
    })
}

async fn hello(inbox: &ActorRef<InboxMsg>, request: &HelloRequest) -> Result<Hello, String> {
    let frame = wire::encode(kind::HELLO, "hello", request).map_err(|e| e.to_string())?;
    let answer = inbox
        .call(
            |reply| InboxMsg::Call(frame, reply),
            Some(Duration::from_secs(10)),
        )
        .await
        .map_err(|e| e.to_string())?;
    let bytes = match answer {
        ractor::rpc::CallResult::Success(b) => b,
        ractor::rpc::CallResult::Timeout => return Err("no answer in time".into()),
        ractor::rpc::CallResult::SenderError => return Err("the call was dropped".into()),
    };
    wire::decode::<Hello>(&bytes, kind::HELLO)
        .map(|f| f.body)
        .map_err(|e| e.to_string())
}
