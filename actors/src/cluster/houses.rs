//! Houses across nodes: which node hosts which house, making a house on a
//! chosen node, and HTTP requests for a house made to another node.
//!
//! A house's data lives in the store of exactly one node, which serves it
//! (no replication, no fail-over). Every node tells its peers the houses it
//! hosts — in its `hello`, and again whenever the list changes (a house
//! made, moved away or moved in while they are connected: membership looks every tick
//! and sends a `houses` frame to each peer not yet told). A peer keeps the
//! list in its store (`cluster_houses`), so a house on a node that is down
//! is still known to be there.
//!
//! A house is made on the node named (`troupe house create HOUSE --node N`)
//! or, without one, on the node rendezvous hashing picks among the members
//! connected now and this node ([`super::placement`]). On another node the
//! request is a `house_create` frame: that node commits the house before it
//! answers.
//!
//! A request to this node's API for a house a peer hosts goes to that peer
//! as an `http` frame — method, path, the headers the API reads, body —
//! which the peer runs through its own router ([`HttpHandler`]) and
//! answers with status, headers and body. The peer checks the token: a
//! token is valid where its house lives, and any node carries it there.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use ractor::ActorRef;
use serde::de::DeserializeOwned;
use serde::Serialize;
use troupe_runtime::house::DEFAULT_HOUSE;
use troupe_runtime::protocol::wire::{
    self, kind, Ack, HostedHouse, HouseCreate, HouseMade, Houses, HttpRequest, HttpResponse,
    Refusal,
};
use troupe_runtime::store::house as house_table;

use super::directory::Peer;
use super::inbox::InboxMsg;
use super::{placement, Cluster, Shared};
use crate::house::HouseRef;
use crate::node::NodeError;

/// How long a peer has to answer a `house_create` or an `http` frame.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs an HTTP request that came from another node through this node's
/// API (the server registers one with [`Cluster::serve_http`]).
#[async_trait::async_trait]
pub trait HttpHandler: Send + Sync + 'static {
    /// The answer to `request`, whose body is `body` (`request.body` is
    /// empty): the answer's head (its `body` empty) and its body.
    async fn handle(
        &self,
        request: HttpRequest,
        body: super::BodyStream,
    ) -> (HttpResponse, super::BodyStream);
}

/// What this node knows of the houses: its own, and the peers' announced.
#[derive(Default)]
pub(crate) struct HouseState {
    /// What each peer was told last (and acknowledged).
    told: parking_lot::Mutex<HashMap<String, Vec<HostedHouse>>>,
    /// An announcement runs (one at a time).
    announcing: std::sync::atomic::AtomicBool,
    /// Who answers HTTP requests from other nodes, and where this node's
    /// API listens.
    http: parking_lot::RwLock<Option<(Arc<dyn HttpHandler>, String)>>,
}

impl HouseState {
    /// Forgets what `peer` was told (it is gone: told again when it returns).
    pub(crate) fn forget(&self, peer: &str) {
        self.told.lock().remove(peer);
    }

    /// Who answers the HTTP requests other nodes forward here.
    pub(crate) fn handler(&self) -> Option<Arc<dyn HttpHandler>> {
        self.http.read().as_ref().map(|(h, _)| Arc::clone(h))
    }

    /// Where this node's HTTP API listens, when it serves one.
    pub(crate) fn http_url(&self) -> Option<String> {
        self.http.read().as_ref().map(|(_, url)| url.clone())
    }
}

/// Why a house could not be made, or reached, on another node.
#[derive(Debug, thiserror::Error)]
pub enum PlaceError {
    /// No member of that name.
    #[error(
        "there is no node `{node}` in cluster `{cluster}`; its members are {members} \
         (`troupe ps --cluster` lists them)"
    )]
    UnknownNode {
        /// The node asked for.
        node: String,
        /// The cluster.
        cluster: String,
        /// Its members, by name.
        members: String,
    },
    /// The node is known but not connected now.
    #[error("node `{node}` is down{}; start it again, or choose another node", at(.http))]
    Down {
        /// The node.
        node: String,
        /// Where its HTTP API listened.
        http: Option<String>,
    },
    /// The name is taken.
    #[error("{0}")]
    Conflict(String),
    /// The node refused the request as asked.
    #[error("{0}")]
    Refused(String),
    /// The node did not answer, or not sensibly.
    #[error("node `{node}` did not answer: {why}; try again")]
    Failed {
        /// The node.
        node: String,
        /// What happened.
        why: String,
    },
    /// This node's own store or actors failed.
    #[error("{0}")]
    Node(#[from] NodeError),
}

fn at(http: &Option<String>) -> String {
    http.as_ref()
        .map(|u| format!(" (its API was at {u})"))
        .unwrap_or_default()
}

/// Where a house was made.
#[derive(Debug)]
pub enum Placed {
    /// On this node.
    Here(HouseRef),
    /// On another node, which committed it.
    There {
        /// The node.
        node: String,
        /// The house.
        house: HostedHouse,
    },
}

/// A house another node hosts, as this node knows it.
#[derive(Debug, Clone)]
pub struct HouseOnPeer {
    /// The house.
    pub house: HostedHouse,
    /// The node that hosts it.
    pub node: String,
    /// Whether that node is connected now.
    pub connected: bool,
    /// Where its HTTP API listens, when it said.
    pub http: Option<String>,
}

/// This node's houses, as it announces them (the default house `home`,
/// which every node has for its own people, aside).
pub(crate) async fn local(shared: &Shared) -> Result<Vec<HostedHouse>, String> {
    let node = shared.node().ok_or("the node is stopping")?;
    let houses = node
        .store()
        .read(house_table::list_houses)
        .await
        .map_err(|e| e.to_string())?;
    Ok(houses
        .into_iter()
        .filter(|h| h.name != DEFAULT_HOUSE)
        .map(|h| HostedHouse {
            name: h.name,
            id: h.id,
        })
        .collect())
}

/// Tells each connected peer this node's houses, when they changed since
/// it was told last. One announcement at a time; off the caller's task.
pub(crate) fn announce(shared: &Arc<Shared>) {
    use std::sync::atomic::Ordering;
    if shared.inboxes.is_empty() || shared.houses.announcing.swap(true, Ordering::AcqRel) {
        return;
    }
    let shared = Arc::clone(shared);
    tokio::spawn(async move {
        if let Ok(now) = local(&shared).await {
            for (peer, inbox) in shared.connected() {
                if shared.houses.told.lock().get(&peer) == Some(&now) {
                    continue;
                }
                let body = Houses {
                    node: shared.options.node.clone(),
                    houses: now.clone(),
                    http: shared.houses.http_url(),
                };
                match call::<_, Ack>(&inbox, kind::HOUSES, &body, kind::ACK).await {
                    Ok(_) => {
                        shared.houses.told.lock().insert(peer, now.clone());
                    }
                    Err(e) => tracing::debug!(%peer, error = %e, "a peer was not told our houses"),
                }
            }
        }
        shared.houses.announcing.store(false, Ordering::Release);
    });
}

/// One frame of `kind` to a peer's inbox, answered with one of `answer`.
pub(crate) async fn call<B: Serialize, A: DeserializeOwned>(
    inbox: &ActorRef<InboxMsg>,
    kind: &str,
    body: &B,
    answer: &str,
) -> Result<A, String> {
    let frame = wire::encode(kind, kind, body).map_err(|e| e.to_string())?;
    let bytes = exchange(inbox, frame, CALL_TIMEOUT).await?;
    wire::decode::<A>(&bytes, answer)
        .map(|f| f.body)
        .map_err(|e| e.to_string())
}

/// One encoded frame to a peer's inbox, answered within `timeout`: the
/// answer's bytes, checked, its kind not `refused` (that is the error).
pub(super) async fn exchange(
    inbox: &ActorRef<InboxMsg>,
    frame: Vec<u8>,
    timeout: Duration,
) -> Result<Vec<u8>, String> {
    let bytes = match inbox
        .call(|reply| InboxMsg::Call(frame, reply), Some(timeout))
        .await
        .map_err(|e| format!("it could not be reached ({e})"))?
    {
        ractor::rpc::CallResult::Success(bytes) => bytes,
        ractor::rpc::CallResult::Timeout => return Err("no answer in time".into()),
        ractor::rpc::CallResult::SenderError => return Err("the call was dropped".into()),
    };
    let (got, _) = wire::head(&bytes).map_err(|e| e.to_string())?;
    if got == kind::REFUSED {
        let why = wire::decode::<Refusal>(&bytes, kind::REFUSED)
            .map(|f| f.body.reason)
            .unwrap_or_else(|e| e.to_string());
        return Err(format!("it refused: {why}"));
    }
    Ok(bytes)
}

impl Cluster {
    /// The node rendezvous hashing places a new house `name` on, among
    /// the members connected now and this node.
    pub fn place(&self, name: &str) -> String {
        let peers = self.shared.directory.peers();
        let me = self.shared.options.node.as_str();
        let nodes = peers
            .iter()
            .filter(|p| p.connected)
            .map(|p| p.node.as_str())
            .chain([me]);
        placement::place(name, nodes).unwrap_or(me).to_string()
    }

    /// The peer that hosts the house `name` (a name or an id), when
    /// another node hosts it.
    pub fn house_on_peer(&self, name: &str) -> Option<HouseOnPeer> {
        let (house, peer) = self.shared.directory.house(name)?;
        Some(HouseOnPeer {
            house: HostedHouse {
                name: house.name,
                id: house.id,
            },
            node: peer.node,
            connected: peer.connected,
            http: peer.http,
        })
    }

    /// Every house the peers host, with its node, by name.
    pub fn peer_houses(&self) -> Vec<(HostedHouse, String)> {
        self.shared
            .directory
            .houses()
            .into_iter()
            .map(|h| {
                (
                    HostedHouse {
                        name: h.name,
                        id: h.id,
                    },
                    h.node,
                )
            })
            .collect()
    }

    /// Makes the house `name` on `node` (this one or a peer), or on the
    /// node [`Cluster::place`] picks when `node` is None. A name another
    /// node hosts already is refused; a peer commits the house before it
    /// answers.
    pub async fn create_house(&self, node: Option<&str>, name: &str) -> Result<Placed, PlaceError> {
        let target = node.map_or_else(|| self.place(name), str::to_string);
        if let Some(there) = self.house_on_peer(name) {
            return Err(PlaceError::Conflict(format!(
                "a house named `{name}` exists already, on node `{}`",
                there.node
            )));
        }
        let shared = &self.shared;
        let local = shared
            .node()
            .ok_or_else(|| NodeError::Actor("the node is stopping".into()))?;
        if target == shared.options.node {
            let house = local.create_house(name).await?;
            announce(shared);
            return Ok(Placed::Here(house));
        }
        let peer = self.peer_up(&target)?;
        let inbox = shared
            .inboxes
            .get(&peer.node)
            .map(|r| r.clone())
            .ok_or_else(|| PlaceError::Down {
                node: peer.node.clone(),
                http: peer.http.clone(),
            })?;
        let ask = HouseCreate {
            from_node: shared.options.node.clone(),
            name: name.to_string(),
        };
        let made: HouseMade = call(&inbox, kind::HOUSE_CREATE, &ask, kind::HOUSE_MADE)
            .await
            .map_err(|why| PlaceError::Failed {
                node: target.clone(),
                why,
            })?;
        let Some(house) = made.house else {
            return Err(match made.code.as_str() {
                "conflict" => PlaceError::Conflict(made.message),
                _ => PlaceError::Refused(made.message),
            });
        };
        shared
            .directory
            .add_house(local.store(), &target, &house)
            .await
            .map_err(NodeError::from)?;
        Ok(Placed::There {
            node: target,
            house,
        })
    }

    /// The peer `node`, connected now; else why not.
    pub(super) fn peer_up(&self, node: &str) -> Result<Peer, PlaceError> {
        let Some(peer) = self.shared.directory.peer(node) else {
            let mut members: Vec<String> = self
                .shared
                .directory
                .peers()
                .into_iter()
                .map(|p| format!("`{}`", p.node))
                .collect();
            members.push(format!("`{}` (this node)", self.shared.options.node));
            return Err(PlaceError::UnknownNode {
                node: node.to_string(),
                cluster: self.shared.options.cluster.clone(),
                members: members.join(", "),
            });
        };
        if !peer.connected {
            return Err(PlaceError::Down {
                node: peer.node,
                http: peer.http,
            });
        }
        Ok(peer)
    }

    /// Sends an HTTP request to `node`, which runs it through its own API.
    pub async fn forward_http(
        &self,
        node: &str,
        request: &HttpRequest,
    ) -> Result<HttpResponse, PlaceError> {
        let peer = self.peer_up(node)?;
        let inbox = self
            .shared
            .inboxes
            .get(&peer.node)
            .map(|r| r.clone())
            .ok_or_else(|| PlaceError::Down {
                node: peer.node.clone(),
                http: peer.http.clone(),
            })?;
        call(&inbox, kind::HTTP, request, kind::HTTP_ANSWER)
            .await
            .map_err(|why| PlaceError::Failed {
                node: node.to_string(),
                why,
            })
    }

    /// Answers the HTTP requests other nodes forward here with `handler`;
    /// `url` is where this node's API listens (told to the peers).
    pub fn serve_http(&self, handler: Arc<dyn HttpHandler>, url: String) {
        *self.shared.houses.http.write() = Some((handler, url));
        // Every peer told again, now with where the API listens.
        self.shared.houses.told.lock().clear();
    }

    /// The members as this node sees them, each with its houses:
    /// `{cluster, members: [{node, listen, http, self, connected, bots, houses}]}`.
    pub async fn members_with_houses(&self) -> serde_json::Value {
        let mut members = super::members(&self.shared);
        let mine: Vec<String> = local(&self.shared)
            .await
            .unwrap_or_default()
            .into_iter()
            .map(|h| h.name)
            .collect();
        for m in members["members"].as_array_mut().into_iter().flatten() {
            let houses = if m["self"] == true {
                m["http"] = serde_json::json!(self.shared.houses.http_url());
                mine.clone()
            } else {
                let node = m["node"].as_str().unwrap_or_default().to_string();
                m["http"] =
                    serde_json::json!(self.shared.directory.peer(&node).and_then(|p| p.http));
                self.shared.directory.houses_of(&node)
            };
            m["houses"] = serde_json::json!(houses);
        }
        members
    }
}

/// The peer's side of `house_create`: the house committed, then the answer.
pub(crate) async fn made(shared: &Arc<Shared>, ask: HouseCreate) -> HouseMade {
    let refused = |code: &str, message: String| HouseMade {
        house: None,
        code: code.into(),
        message,
    };
    if let Some((_, peer)) = shared.directory.house(&ask.name) {
        if peer.node != ask.from_node {
            return refused(
                "conflict",
                format!(
                    "a house named `{}` exists already, on node `{}`",
                    ask.name, peer.node
                ),
            );
        }
    }
    let Some(node) = shared.node() else {
        return refused("refused", "the node is stopping; try again".into());
    };
    match node.create_house(&ask.name).await {
        Ok(h) => {
            announce(shared);
            HouseMade {
                house: Some(HostedHouse {
                    name: h.house.name,
                    id: h.house.id,
                }),
                code: String::new(),
                message: String::new(),
            }
        }
        Err(NodeError::Conflict(m)) => {
            refused("conflict", format!("{m} on node `{}`", shared.options.node))
        }
        Err(e) => refused("refused", e.to_string()),
    }
}
