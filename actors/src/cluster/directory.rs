//! Where things live in the cluster, as this node knows it: the bots and
//! houses each peer announced, where each peer listens (its node server and
//! its HTTP API) and whether it is connected, and
//! the addresses of senders on other nodes (where replies go). Kept in
//! memory for the node's routing (asked on every send) and in the store
//! (`troupe_runtime::store::cluster`) to survive a restart.

use std::collections::HashMap;
use std::sync::Arc;

use dashmap::DashMap;
use parking_lot::RwLock;
use troupe_runtime::protocol::wire::{Hello, HostedHouse};
use troupe_runtime::protocol::Address;
use troupe_runtime::store::cluster::{self as table, RemoteBot, RemoteHouse};
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
    /// Where its HTTP API listens, when it said.
    pub http: Option<String>,
    /// Whether a session with it is up now.
    pub connected: bool,
}

/// The cluster's directory, as this node knows it.
#[derive(Debug, Default)]
pub struct Directory {
    bots: RwLock<HashMap<String, RemoteBot>>,
    peers: RwLock<HashMap<String, Peer>>,
    houses: RwLock<Vec<RemoteHouse>>,
    routes: DashMap<String, String>,
    /// The actor kinds each peer registered, by node.
    kinds: RwLock<HashMap<String, Vec<String>>>,
}

impl Directory {
    /// What the store kept from earlier runs.
    pub async fn load(store: &Store) -> Result<Directory, StoreError> {
        let (bots, peers, routes, houses, kinds) = store
            .read(|c| {
                Ok((
                    table::bots(c)?,
                    table::peers(c)?,
                    table::routes(c)?,
                    table::houses(c)?,
                    table::kinds(c)?,
                ))
            })
            .await?;
        let directory = Directory::default();
        for (node, kind) in kinds {
            directory.kinds.write().entry(node).or_default().push(kind);
        }
        *directory.houses.write() = houses;
        *directory.bots.write() = bots.into_iter().map(|b| (b.name.clone(), b)).collect();
        *directory.peers.write() = peers
            .into_iter()
            .map(|(node, listen, http)| {
                (
                    node.clone(),
                    Peer {
                        node,
                        listen,
                        http,
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
        match to {
            Address::Bot(id) => {
                if let Some(b) = self.bots.read().values().find(|b| b.id == *id) {
                    return Some(b.node.clone());
                }
            }
            Address::Actor { kind, key } => {
                if let Some(node) = self.kind_node(kind, key) {
                    return Some(node);
                }
            }
            _ => {}
        }
        self.routes.get(&to.to_string()).map(|n| n.clone())
    }

    /// The peer whose actor `kind/key` is: of the peers that registered
    /// `kind`, the one rendezvous hashing of `kind/key` picks (any node
    /// picks the same, from the same announcements).
    fn kind_node(&self, kind: &str, key: &str) -> Option<String> {
        let kinds = self.kinds.read();
        let hosts = kinds
            .iter()
            .filter(|(_, k)| k.iter().any(|k| k == kind))
            .map(|(node, _)| node.as_str());
        super::placement::place(&format!("{kind}/{key}"), hosts).map(str::to_string)
    }

    /// The peers that registered the actor kind `kind`, by name.
    pub fn kind_hosts(&self, kind: &str) -> Vec<String> {
        let mut hosts: Vec<String> = self
            .kinds
            .read()
            .iter()
            .filter(|(_, k)| k.iter().any(|k| k == kind))
            .map(|(node, _)| node.clone())
            .collect();
        hosts.sort();
        hosts
    }

    /// The actor kinds `node` registered, as it announced them.
    pub fn kinds_of(&self, node: &str) -> Vec<String> {
        self.kinds.read().get(node).cloned().unwrap_or_default()
    }

    /// Takes the actor kinds `node` registered (its latest announcement),
    /// kept in the store too.
    pub async fn set_kinds(
        &self,
        store: &Store,
        node: &str,
        kinds: &[String],
    ) -> Result<(), StoreError> {
        let (n, k) = (node.to_string(), kinds.to_vec());
        store.write(move |tx| table::set_kinds(tx, &n, &k)).await?;
        self.kinds.write().insert(node.to_string(), kinds.to_vec());
        Ok(())
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

    /// The peer that hosts the house `name` (or of that id), with what
    /// this node knows of it: the first by node name if two announced one
    /// name (made while they were apart).
    pub fn house(&self, name: &str) -> Option<(RemoteHouse, Peer)> {
        let house = self
            .houses
            .read()
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name) || h.id.to_string() == name)
            .cloned()?;
        let peer = self.peers.read().get(&house.node).cloned()?;
        Some((house, peer))
    }

    /// Every house the peers announced, by name.
    pub fn houses(&self) -> Vec<RemoteHouse> {
        self.houses.read().clone()
    }

    /// The names of the houses `node` hosts.
    pub fn houses_of(&self, node: &str) -> Vec<String> {
        self.houses
            .read()
            .iter()
            .filter(|h| h.node == node)
            .map(|h| h.name.clone())
            .collect()
    }

    /// The peer `node`, when this node has met it.
    pub fn peer(&self, node: &str) -> Option<Peer> {
        self.peers.read().get(node).cloned()
    }

    /// Takes `node`'s houses now (its announcement) and where its HTTP
    /// API listens, kept in the store too.
    pub async fn set_houses(
        &self,
        store: &Store,
        node: &str,
        houses: &[HostedHouse],
        http: Option<String>,
    ) -> Result<(), StoreError> {
        let houses = self.announced(node, houses);
        let (n, kept, h) = (node.to_string(), houses.clone(), http.clone());
        store
            .write(move |tx| {
                table::set_peer_http(tx, &n, h.as_deref())?;
                table::set_houses(tx, &n, &kept)
            })
            .await?;
        if let Some(p) = self.peers.write().get_mut(node) {
            p.http = http;
        }
        self.replace_houses(node, houses);
        Ok(())
    }

    /// What `node` hosts, from what it announced: a house it no longer
    /// lists that no other node lists yet stays on it for now. A house
    /// moved away is announced by its new node in a moment, and until then
    /// the node it left forwards what is asked of it there (announcements
    /// from two nodes arrive in any order).
    fn announced(&self, node: &str, houses: &[HostedHouse]) -> Vec<RemoteHouse> {
        let mut now = remote_houses(node, houses);
        let all = self.houses.read();
        let gone: Vec<RemoteHouse> = all
            .iter()
            .filter(|h| h.node == node && !now.iter().any(|n| n.id == h.id))
            .filter(|h| !all.iter().any(|o| o.node != node && o.id == h.id))
            .cloned()
            .collect();
        now.extend(gone);
        now
    }

    /// `node`'s houses are `houses` now; a house of the same id another
    /// node was thought to host is `node`'s (it moved).
    fn replace_houses(&self, node: &str, houses: Vec<RemoteHouse>) {
        let mut all = self.houses.write();
        all.retain(|h| h.node != node && !houses.iter().any(|n| n.id == h.id));
        all.extend(houses);
        all.sort_by(|a, b| a.name.cmp(&b.name).then(a.node.cmp(&b.node)));
    }

    /// The house `id` is this node's (it moved here): no peer hosts it.
    pub async fn drop_house(&self, store: &Store, id: &str) -> Result<(), StoreError> {
        let owned = id.to_string();
        store.write(move |tx| table::drop_house(tx, &owned)).await?;
        self.houses.write().retain(|h| h.id.to_string() != id);
        Ok(())
    }

    /// Notes that `node` made `house` (it answered so), kept in the store too.
    pub async fn add_house(
        &self,
        store: &Store,
        node: &str,
        house: &HostedHouse,
    ) -> Result<(), StoreError> {
        let house = RemoteHouse {
            name: house.name.clone(),
            id: house.id,
            node: node.to_string(),
        };
        let kept = house.clone();
        store.write(move |tx| table::add_house(tx, &kept)).await?;
        let mut all = self.houses.write();
        all.retain(|h| !(h.node == house.node && h.name == house.name));
        all.push(house);
        all.sort_by(|a, b| a.name.cmp(&b.name).then(a.node.cmp(&b.node)));
        Ok(())
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

    /// `addr` lives on this node (again).
    pub fn unroute(&self, addr: &str) {
        self.routes.remove(addr);
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
        let houses = self.announced(&hello.node, &hello.houses);
        let (node, listen, http) = (hello.node.clone(), hello.listen.clone(), hello.http.clone());
        let (kept, kept_houses, kinds) = (bots.clone(), houses.clone(), hello.kinds.clone());
        store
            .write(move |tx| {
                table::set_peer(tx, &node, &listen, http.as_deref())?;
                table::set_bots(tx, &node, &kept)?;
                table::set_kinds(tx, &node, &kinds)?;
                table::set_houses(tx, &node, &kept_houses)
            })
            .await?;
        self.kinds
            .write()
            .insert(hello.node.clone(), hello.kinds.clone());
        self.replace_houses(&hello.node, houses);
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
                http: hello.http.clone(),
                connected: true,
            },
        );
        Ok(())
    }
}

fn remote_houses(node: &str, houses: &[HostedHouse]) -> Vec<RemoteHouse> {
    houses
        .iter()
        .map(|h| RemoteHouse {
            name: h.name.clone(),
            id: h.id,
            node: node.to_string(),
        })
        .collect()
}

/// The other nodes' bots, in every bot's roster.
pub(crate) struct RemoteRoster(pub(crate) Arc<Shared>);

impl Roster for RemoteRoster {
    fn is_empty(&self) -> bool {
        self.0.directory.bots.read().is_empty()
    }

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
