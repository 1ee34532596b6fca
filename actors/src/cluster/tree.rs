//! The cluster's actors under the node's tree, supervised.
//!
//! ```text
//! node
//! └─ cluster            a supervisor (one_for_one), a child of the node's root
//!    ├─ inbox           this node's inbox, in the cluster's process group
//!    ├─ membership      watches the members; owns ractor_cluster's node server
//!    └─ gateway:PEER    sends what waits in the outbox for PEER (one per peer)
//! ```
//!
//! Each restarts on its own: what it works on is in the store (the outbox,
//! the directory) or in ractor_cluster's process groups, so a new
//! incarnation picks up where the last one was. The node server is
//! membership's child: when it stops, membership stops and is restarted
//! with a new one (listening again on the same address). A gateway joins
//! the supervisor the first time its peer has something to send. What is
//! live, and how often each restarted, is `troupe ps` and the API's tree.

use std::sync::{Arc, Weak};
use std::time::Duration;

use dashmap::DashMap;
use ractor::{Actor, ActorRef};
use troupe_runtime::supervise::{
    Backoff, ChildSpec, Intensity, Strategy, Supervisor, SupervisorEvent, SupervisorMsg,
    SupervisorSpec,
};

use super::gateway::{Gateway, GatewayMsg};
use super::inbox::Inbox;
use super::membership::Membership;
use super::{ClusterError, Shared};
use crate::node::Node;
use crate::node::{ActorInfo, Branch};

/// The cluster supervisor's id under the node's root.
pub const CLUSTER: &str = "cluster";

/// What the tree shows of each child: `running`, `restarting` or
/// `stopped`, and its restarts.
pub(crate) type Children = DashMap<String, (&'static str, u32)>;

/// Starts the cluster's supervisor under the node's root, with the inbox
/// and membership (and so the node server); fails as soon as one of them
/// cannot start. Each incarnation of the supervisor puts itself in
/// `shared.supervisor`.
pub(crate) async fn start(node: &Node, shared: &Arc<Shared>) -> Result<(), ClusterError> {
    let (events, mut seen) = tokio::sync::mpsc::unbounded_channel();
    let weak = Arc::downgrade(shared);
    let inbox_of = weak.clone();
    let inbox = ChildSpec::new("inbox", move |sup| {
        let shared = inbox_of.upgrade();
        async move {
            let shared = shared.ok_or("the cluster has stopped")?;
            let name = super::inbox::name(&shared.options.node);
            let (inbox, _) = Actor::spawn_linked(Some(name), Inbox, shared, sup).await?;
            Ok(inbox.get_cell())
        }
    });
    let membership_of = weak.clone();
    let membership = ChildSpec::new("membership", move |sup| {
        let shared = membership_of.upgrade();
        async move {
            let shared = shared.ok_or("the cluster has stopped")?;
            let (membership, _) = Actor::spawn_linked(None, Membership, shared, sup).await?;
            Ok(membership.get_cell())
        }
    });
    let spec = SupervisorSpec::new(Strategy::OneForOne)
        .intensity(Intensity::new(10, Duration::from_secs(60)))
        .backoff(Backoff::Exponential {
            base: Duration::from_millis(100),
            max: Duration::from_secs(5),
        })
        .child(inbox)
        .child(membership)
        .events(events);
    node.supervise(ChildSpec::new(CLUSTER, move |sup| {
        let spec = spec.clone();
        let shared = weak.upgrade();
        async move {
            let (sup, _) = Actor::spawn_linked(None, Supervisor, spec, sup).await?;
            if let Some(shared) = shared {
                *shared.supervisor.write() = Some(sup.clone());
            }
            Ok(sup.get_cell())
        }
    }))
    .await
    .map_err(|e| ClusterError::Start(e.to_string()))?;
    // The children's starts are reported by now: the tree shows them from
    // the moment `start` returns, not once a task got round to them.
    while let Ok(event) = seen.try_recv() {
        record(shared, event);
    }
    let children = Arc::downgrade(shared);
    tokio::spawn(async move {
        while let Some(event) = seen.recv().await {
            let Some(shared) = children.upgrade() else {
                return;
            };
            record(&shared, event);
        }
    });
    Ok(())
}

/// What the tree shows of a supervisor event.
fn record(shared: &Shared, event: SupervisorEvent) {
    match event {
        SupervisorEvent::Started { child, restarts } => {
            shared.children.insert(child, ("running", restarts));
        }
        SupervisorEvent::Exited { child, .. } => {
            if let Some(mut c) = shared.children.get_mut(&child) {
                c.0 = "restarting";
            }
        }
        SupervisorEvent::StartFailed { child, error } => {
            tracing::warn!(%child, %error, "a cluster actor could not start");
        }
        SupervisorEvent::GaveUp { restarts, within } => {
            tracing::error!(restarts, ?within, "the cluster's supervisor gave up");
            for mut c in shared.children.iter_mut() {
                c.0 = "stopped";
            }
        }
    }
}

/// Starts the gateway to `peer` under the cluster's supervisor; it puts
/// itself in `shared.gateways` as it starts (each incarnation).
pub(crate) async fn start_gateway(
    shared: &Arc<Shared>,
    peer: &str,
) -> Result<ActorRef<GatewayMsg>, String> {
    let supervisor = shared
        .supervisor
        .read()
        .clone()
        .ok_or("the cluster has stopped")?;
    let (weak, name) = (Arc::downgrade(shared), peer.to_string());
    let spec = ChildSpec::new(format!("gateway:{peer}"), move |sup| {
        let args = (weak.clone(), name.clone());
        async move {
            let (gateway, _) = Actor::spawn_linked(None, Gateway, args, sup).await?;
            Ok(gateway.get_cell())
        }
    });
    let cell = ractor::call!(supervisor, SupervisorMsg::StartChild, spec)
        .map_err(|e| format!("the cluster's supervisor did not answer: {e}"))??;
    Ok(cell.into())
}

/// The cluster's part of `troupe ps`.
pub(crate) struct ClusterBranch(pub(crate) Weak<Shared>);

impl Branch for ClusterBranch {
    fn live(&self) -> Vec<ActorInfo> {
        let Some(shared) = self.0.upgrade() else {
            return Vec::new();
        };
        let mut live: Vec<ActorInfo> = shared
            .children
            .iter()
            .map(|c| ActorInfo {
                kind: c.key().split(':').next().unwrap_or_default().to_string(),
                id: c.key().clone(),
                parent: Some(CLUSTER.into()),
                state: c.value().0.into(),
                restarts: c.value().1,
            })
            .collect();
        live.sort_by(|a, b| a.id.cmp(&b.id));
        live
    }
}

/// Whether a gateway's incarnation is starting or running.
pub(crate) fn is_live(gateway: &ActorRef<GatewayMsg>) -> bool {
    matches!(
        gateway.get_status(),
        ractor::ActorStatus::Starting | ractor::ActorStatus::Running
    )
}
