//! Where things live in the cluster, as this node knows it: the bots each
//! peer announced, where each peer listens and whether it is connected, and
//! the addresses of senders on other nodes (where replies go). Kept in
//! memory for the node's routing (asked on every send) and in the store
//! (`troupe_runtime::store::cluster`) to survive a restart.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::RwLock;
use troupe_runtime::protocol::wire::Hello;
use troupe_runtime::protocol::Address;
use troupe_runtime::store::cluster::{self as table, RemoteBot};
use troupe_runtime::store::{Store, StoreError};

use super::Shared;
use crate::node::Roster;

/// A peer node as this node knows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its name.
    pub node: String,
    /// Where it listens.
    pub listen: String,
    /// Whether a session with it is up now.
    pub connected: bool,
}

/// The cluster's directory, as this node knows it.
#[derive(Debug, Default)]
pub struct Directory {
    bots: RwLock<HashMap<String, RemoteBot>>,
    peers: RwLock<HashMap<String, Peer>>,
    routes: DashMap<String, String>,
}

impl Directory {
    /// What the store kept from earlier runs.
    pub async fn load(store: &Store) -> Result<Directory, StoreError> {
        let (bots, peers, routes) = store
            .read(|c| Ok((table::bots(c)?, table::peers(c)?, table::routes(c)?)))
            .await?;
        let directory = Directory::default();
        *directory.bots.write() = bots.into_iter().map(|b| (b.name.clone(), b)).collect();
        *directory.peers.write() = peers
            .into_iter()
            .map(|(node, listen)| {
                (
                    node.clone(),
                    Peer {
                        node,
                        listen,
                        connected: false,
                    },
                )
            })
            .collect();
        for (addr, node) in routes {
            directory.routes.insert(addr, node);
        }
        Ok(directory)
    }

    /// The node that hosts `to`, when it is another node.
    pub fn node_of(&self, to: &Address) -> Option<String> {
        if let Address::Bot(id) = to {
            if let Some(b) = self.bots.read().values().find(|b| b.id == *id) {
                return Some(b.node.clone());
            }
        }
        self.routes.get(&to.to_string()).map(|n| n.clone())
    }

    /// The bot `name` of another node.
    pub fn bot(&self, name: &str) -> Option<RemoteBot> {
        self.bots.read().get(name).cloned()
    }

    /// The names of the bots `node` hosts.
    pub fn bots_of(&self, node: &str) -> Vec<String> {
        let mut names: Vec<String> = self
            .bots
            .read()
            .values()
            .filter(|b| b.node == node)
            .map(|b| b.name.clone())
            .collect();
        names.sort();
        names
    }

    /// The peers, by name.
    pub fn peers(&self) -> Vec<Peer> {
        let mut peers: Vec<Peer> = self.peers.read().values().cloned().collect();
        peers.sort_by(|a, b| a.node.cmp(&b.node));
        peers
    }

    /// Notes that `addr` lives on `node` (the store has it already).
    pub fn route(&self, addr: String, node: String) {
        self.routes.insert(addr, node);
    }

    /// Says whether `node` is connected now.
    pub fn set_connected(&self, node: &str, connected: bool) {
        if let Some(p) = self.peers.write().get_mut(node) {
            p.connected = connected;
        }
    }

    /// Takes a peer's `hello`: where it listens and its bots, kept in the
    /// store too.
    pub async fn met(&self, store: &Store, hello: &Hello) -> Result<(), StoreError> {
        let bots: Vec<RemoteBot> = hello
            .bots
            .iter()
            .map(|b| RemoteBot {
                name: b.name.clone(),
                id: b.id,
                node: hello.node.clone(),
                description: b.description.clone(),
            })
            .collect();
        let (node, listen, kept) = (hello.node.clone(), hello.listen.clone(), bots.clone());
        store
            .write(move |tx| {
                table::set_peer(tx, &node, &listen)?;
                table::set_bots(tx, &node, &kept)
            })
            .await?;
        {
            let mut all = self.bots.write();
            all.retain(|_, b| b.node != hello.node);
            all.extend(bots.into_iter().map(|b| (b.name.clone(), b)));
        }
        self.peers.write().insert(
            hello.node.clone(),
            Peer {
                node: hello.node.clone(),
                listen: hello.listen.clone(),
                connected: true,
            },
        );
        Ok(())
    }
}

/// The other nodes' bots, in every bot's roster.
pub(crate) struct RemoteRoster(pub(crate) Arc<Shared>);

impl Roster for RemoteRoster {
    fn entries(&self) -> Vec<String> {
        let mut bots: Vec<RemoteBot> = self.0.directory.bots.read().values().cloned().collect();
        bots.sort_by(|a, b| a.name.cmp(&b.name));
        bots.into_iter()
            .map(|b| {
                format!(
                    "- {}: {} (on node {})",
                    b.name,
                    if b.description.is_empty() {
                        "a bot"
                    } else {
                        &b.description
                    },
                    b.node
                )
            })
            .collect()
    }
}
