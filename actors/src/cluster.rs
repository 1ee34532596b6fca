//! A node of a cluster: several `troupe serve` processes on ractor_cluster,
//! with the durable mailbox's guarantee across them (docs/cluster.md).
//!
//! What ractor_cluster does is used as it is: its node server listens,
//! authenticates peers by the cluster's cookie, connects transitively, and
//! keeps process groups in step across nodes. Each node puts one actor,
//! its [`inbox`], in the cluster's process group; a node finds the others
//! by that group ([`membership`]) and asks each who it is and which bots it
//! hosts (a `hello`).
//!
//! What it lacks — durability — is built on the store
//! (`troupe_runtime::store::cluster`). A durable message for an actor on
//! another node is committed in the local mailbox as any other, then moved
//! to the outbox in one transaction (this module's [`Remote`] for the
//! node's routing); a [`gateway`] per peer sends what waits there, as
//! versioned frames (`troupe_runtime::protocol::wire`), until the peer
//! acknowledges; the peer commits a message (and notes it received, for
//! dedup) before it acknowledges. The reply, a message from the peer's
//! conversation to the sender's, comes back the same way: the peer noted
//! where its sender lives when it received it.
//!
//! Why the directory of bots is a table filled from each node's `hello`
//! rather than a process group per bot: a group forgets a node as soon as
//! it is down, and a message for a bot of a node that is down must still be
//! committed (it goes when the node returns).

pub mod bodies;
pub mod directory;
pub mod gateway;
pub mod houses;
pub mod inbox;
pub mod kinds;
pub mod membership;
pub mod moves;
pub mod options;
pub mod placement;
pub mod streams;
pub mod tls;
pub mod tree;

use std::sync::Arc;

use dashmap::DashMap;
use ractor::ActorRef;
use troupe_runtime::id::BotId;
use troupe_runtime::protocol::{Address, Envelope};
use troupe_runtime::store::cluster as table;
use troupe_runtime::store::mailbox;
use troupe_runtime::supervise::SupervisorMsg;

pub use bodies::{BodyStream, ForwardError, HttpAnswer};
pub use houses::{HouseOnPeer, HttpHandler, PlaceError, Placed};
pub use moves::{MoveReport, Serving};
pub use options::{ClusterError, ClusterOptions};
pub use streams::{OpenError, Relayed, StreamHandler, StreamLink};
pub use tls::{Tls, TlsFiles};

use crate::node::{Node, Remote, WeakNode};
use directory::Directory;
use gateway::GatewayMsg;

/// A running node of a cluster: what the node's routing and `troupe ps`
/// ask of it.
#[derive(Clone)]
pub struct Cluster {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("node", &self.shared.options.node)
            .finish_non_exhaustive()
    }
}

/// What the cluster's actors share: the options, the directory and the
/// gateways by peer.
pub struct Shared {
    pub(crate) options: ClusterOptions,
    pub(crate) node: WeakNode,
    pub(crate) directory: Directory,
    pub(crate) gateways: DashMap<String, ActorRef<GatewayMsg>>,
    /// The listen address actually bound (the port chosen when 0 was asked).
    pub(crate) listen: String,
    /// The peers' inboxes reachable now, by peer: a gateway started late
    /// (or again) finds its peer here.
    pub(crate) inboxes: DashMap<String, ActorRef<inbox::InboxMsg>>,
    /// How many messages peers acknowledged since the start.
    pub(crate) acked: tokio::sync::watch::Sender<u64>,
    /// Cancelled when the cluster stops: what waits on peers stops waiting.
    pub(crate) stopping: tokio_util::sync::CancellationToken,
    /// The cluster's supervisor (each incarnation puts itself here).
    pub(crate) supervisor: parking_lot::RwLock<Option<ActorRef<SupervisorMsg>>>,
    /// Its children as `troupe ps` shows them.
    pub(crate) children: tree::Children,
    /// The houses: what each peer was told, who answers forwarded HTTP.
    pub(crate) houses: houses::HouseState,
    /// The WebSocket streams relayed to or from other nodes.
    pub(crate) streams: streams::Streams,
    /// The houses moving from this node, or moved from it.
    pub(crate) moves: moves::Moves,
    /// The HTTP exchanges whose bodies go in pieces.
    pub(crate) bodies: bodies::Bodies,
}

impl Shared {
    pub(crate) fn node(&self) -> Option<Node> {
        self.node.upgrade()
    }

    /// The peers connected now, with their inboxes.
    pub(crate) fn connected(&self) -> Vec<(String, ActorRef<inbox::InboxMsg>)> {
        self.inboxes
            .iter()
            .map(|e| (e.key().clone(), e.value().clone()))
            .collect()
    }

    /// The gateway to `peer`, started under the cluster's supervisor if
    /// there is none yet (a gateway that failed is restarted by it; what it
    /// was sending is still in the outbox).
    pub(crate) async fn gateway(self: &Arc<Self>, peer: &str) -> Option<ActorRef<GatewayMsg>> {
        if let Some(g) = self.gateways.get(peer).filter(|g| tree::is_live(g)) {
            return Some(g.clone());
        }
        match tree::start_gateway(self, peer).await {
            Ok(gateway) => Some(gateway),
            // Started by another caller meanwhile: it is in the map.
            Err(e) => match self.gateways.get(peer).filter(|g| tree::is_live(g)) {
                Some(g) => Some(g.clone()),
                None => {
                    tracing::warn!(peer, error = %e, "the gateway to a peer could not start");
                    None
                }
            },
        }
    }
}

impl Cluster {
    /// Starts this node's part of the cluster beside `node`: its node
    /// server, its inbox, the gateways to the peers it knows, and the
    /// connections to `options.join`.
    pub async fn start(node: &Node, options: ClusterOptions) -> Result<Cluster, ClusterError> {
        options.check()?;
        // Said plainly here rather than through the supervisor's start of
        // the node server (the port is bound again there at once).
        std::net::TcpListener::bind(options.listen).map_err(|e| {
            ClusterError::Start(format!(
                "the node server cannot listen on {}: {e}",
                options.listen
            ))
        })?;
        let directory = Directory::load(node.store()).await?;
        let listen = options.listen.to_string();
        let shared = Arc::new(Shared {
            options,
            node: node.downgrade(),
            directory,
            gateways: DashMap::new(),
            inboxes: DashMap::new(),
            listen,
            acked: tokio::sync::watch::Sender::new(0),
            stopping: tokio_util::sync::CancellationToken::new(),
            supervisor: parking_lot::RwLock::new(None),
            children: tree::Children::new(),
            houses: houses::HouseState::default(),
            streams: streams::Streams::default(),
            moves: moves::Moves::default(),
            bodies: bodies::Bodies::default(),
        });
        moves::load(&shared, node.store()).await?;
        tree::start(node, &shared).await?;
        node.add_branch(Arc::new(tree::ClusterBranch(Arc::downgrade(&shared))));
        // Gateways for what waits in the outbox since the last run.
        let waiting = node.store().read(table::outbox_peers).await?;
        for (peer, _) in waiting {
            if let Some(g) = shared.gateway(&peer).await {
                let _ = g.cast(GatewayMsg::Flush);
            }
        }
        let routing = Arc::new(Routing(Arc::clone(&shared)));
        node.route_remote(routing.clone());
        // Messages for other nodes a crash left in the mailbox, before they
        // were moved to the outbox: moved now.
        let pending = node.store().read(mailbox::pending_all).await?;
        for envelope in pending {
            if let Some(peer) = routing.node_of(&envelope.to) {
                if let Err(e) = routing.forward(envelope, peer).await {
                    tracing::warn!(error = %e, "a message for another node stays in the mailbox");
                }
            }
        }
        node.add_roster(Arc::new(directory::RemoteRoster(Arc::clone(&shared))));
        node.roster_changed();
        Ok(Cluster { shared })
    }

    /// This node's name.
    pub fn node_name(&self) -> &str {
        &self.shared.options.node
    }

    /// Where this node's node server listens.
    pub fn listen(&self) -> &str {
        &self.shared.listen
    }

    /// The members as this node sees them.
    pub fn members(&self) -> serde_json::Value {
        members(&self.shared)
    }

    /// How many messages peers acknowledged since this node started; it
    /// moves when a batch is acknowledged.
    pub fn acked(&self) -> tokio::sync::watch::Receiver<u64> {
        self.shared.acked.subscribe()
    }

    /// The peers this node knows, connected now or not.
    pub fn peers(&self) -> Vec<directory::Peer> {
        self.shared.directory.peers()
    }

    /// Whether the peer `node` is connected now.
    pub fn is_connected(&self, node: &str) -> bool {
        self.shared
            .directory
            .peers()
            .iter()
            .any(|p| p.node == node && p.connected)
    }

    /// Tells this node that durable messages for `addr` go to `node` (as
    /// it learns by itself of a sender on another node).
    pub fn route(&self, addr: &Address, node: &str) {
        self.shared
            .directory
            .route(addr.to_string(), node.to_string());
    }

    /// The cluster's supervisor, whose children are this node's `inbox`,
    /// `membership` (which owns ractor_cluster's node server) and a
    /// `gateway:PEER` per peer with something to send; none once stopped.
    pub fn supervisor(&self) -> Option<ActorRef<SupervisorMsg>> {
        self.shared.supervisor.read().clone()
    }

    /// Stops the cluster's actors, its supervisor first (the node stops
    /// on its own).
    pub fn stop(&self) {
        self.shared.stopping.cancel();
        if let Some(supervisor) = self.shared.supervisor.write().take() {
            supervisor.stop(None);
        }
    }
}

impl Node {
    /// The cluster's members as this node sees them, when it is a node of
    /// one: `{cluster, members: [{node, listen, self, connected, bots}]}`.
    pub fn cluster_members(&self) -> Option<serde_json::Value> {
        self.remote().map(|r| r.members())
    }
}

fn members(shared: &Shared) -> serde_json::Value {
    let mut nodes = vec![serde_json::json!({
        "node": shared.options.node,
        "listen": shared.listen,
        "self": true,
        "connected": true,
        "bots": shared.node().map(|n| n.bots().into_iter().map(|b| b.spec.name.clone()).collect::<Vec<_>>()).unwrap_or_default(),
        "kinds": kinds::local(shared),
    })];
    for peer in shared.directory.peers() {
        nodes.push(serde_json::json!({
            "node": peer.node,
            "listen": peer.listen,
            "self": false,
            "connected": peer.connected,
            "bots": shared.directory.bots_of(&peer.node),
            "kinds": shared.directory.kinds_of(&peer.node),
        }));
    }
    serde_json::json!({"cluster": shared.options.cluster, "members": nodes})
}

/// The node's routing to other nodes.
struct Routing(Arc<Shared>);

#[async_trait::async_trait]
impl Remote for Routing {
    fn node_of(&self, to: &Address) -> Option<String> {
        // An actor of a kind registered here is this node's.
        if let Address::Actor { kind, .. } = to {
            if kinds::is_local(&self.0, kind) {
                return None;
            }
        }
        self.0.directory.node_of(to)
    }

    fn holds(&self, envelope: &Envelope) -> bool {
        self.0.moves.holds(envelope)
    }

    fn kinds_changed(&self) {
        kinds::announce(&self.0);
    }

    async fn forward(&self, envelope: Envelope, peer: String) -> Result<(), String> {
        let node = self.0.node().ok_or("the node is stopping")?;
        let p = peer.clone();
        node.store()
            .write(move |tx| table::forward(tx, &envelope, &p))
            .await
            .map_err(|e| e.to_string())?;
        if let Some(g) = self.0.gateway(&peer).await {
            let _ = g.cast(GatewayMsg::Flush);
        }
        Ok(())
    }

    fn bot(&self, name: &str) -> Option<BotId> {
        self.0.directory.bot(name).map(|b| b.id)
    }

    fn members(&self) -> serde_json::Value {
        members(&self.0)
    }
}
