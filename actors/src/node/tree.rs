//! The node's actor tree: its root supervisor, the children it supervises,
//! and a picture of what is live (`troupe ps`, `Runtime::tree()`). The
//! features' routers join it as [`Branch`]es, wired in `crate::boot`.
//!
//! ```text
//! node            root supervisor (one_for_one)
//! ├─ conversations the router of conversations by id
//! │  └─ conv_…    a conversation (a subagent hangs under its delegation)
//! ├─ threads      the router of house threads by id
//! │  └─ thread_…  a thread's actor and director
//! ├─ environments the router of house environments by id
//! │  └─ sandbox_… an environment's actor: its commands and limits
//! ├─ post_office  hands over durable messages left waiting
//! ├─ delegations  the router of delegations by id
//! │  └─ deleg_…   collects its subagents' ends (its subagents, conversations
//! │               of the conversations' router, hang under it here)
//! ├─ commands     background commands (each listed under its conversation)
//! ├─ reviewer     background reviews, one `review:conv_…` each
//! ├─ scheduler    routine timers, when this node fires routines
//! │  └─ run_…     a routine run
//! └─ cluster      a node of a cluster: its inbox, membership (and node
//!                 server) and a gateway per peer (`crate::cluster::tree`)
//! ```

use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorRef};
use serde::{Deserialize, Serialize};
use troupe_runtime::supervise::{
    ChildSpec, ChildState, Intensity, Strategy, Supervisor, SupervisorMsg, SupervisorSpec,
};

use futures::future::BoxFuture;

use super::{Node, NodeError};

/// One actor of the tree, as `troupe ps` shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ActorInfo {
    /// Its kind (`node`, `conversations`, `scheduler`, `conversation`, `subagent`, …).
    pub kind: String,
    /// Its id (a conversation's id, or the child's name).
    pub id: String,
    /// The actor it hangs under.
    pub parent: Option<String>,
    /// `running`, `restarting` or `stopped`.
    pub state: String,
    /// How often it was restarted in this process.
    pub restarts: u32,
}

/// A feature's part of the tree: its actors under a child of the root (a
/// router of threads, of environments, of delegations). Features register
/// theirs as the node boots ([`NodeContext::add_branch`](super::NodeContext::add_branch)); the node names
/// none of them.
pub trait Branch: Send + Sync + 'static {
    /// Its live actors, each hung under its router.
    fn live(&self) -> Vec<ActorInfo>;

    /// Told when the node's shutdown begins, before background work is
    /// waited for and the tree stopped (what runs on its own is ended).
    fn stopping(&self) {}

    /// The work the node's shutdown lets finish (for up to
    /// [`BACKGROUND_GRACE`](super::BACKGROUND_GRACE)) before it stops the
    /// tree.
    fn drain(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }

    /// Stops what the root's stop left of it (called once, after the root
    /// stopped).
    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async {})
    }
}

impl Node {
    /// Starts the root supervisor: first the conversations' router, then
    /// `children` (the features' routers) in their order, then the post
    /// office. The root stops them in reverse order.
    pub(crate) async fn start_tree(&self, children: Vec<ChildSpec>) -> Result<(), NodeError> {
        let conversations = super::routed::child(&self.ctx.conversations);
        let mut spec = SupervisorSpec::new(Strategy::OneForOne)
            .intensity(Intensity::new(5, Duration::from_secs(60)))
            .child(conversations);
        for child in children {
            spec = spec.child(child);
        }
        if let (Some(every), true) = (self.ctx.settings.redeliver_after, self.ctx.settings.durable)
        {
            let node = Arc::downgrade(&self.ctx);
            spec = spec.child(ChildSpec::actor("post_office", move || {
                (super::post_office::PostOffice, (node.clone(), every))
            }));
        }
        let (root, _) = Actor::spawn(None, Supervisor, spec)
            .await
            .map_err(|e| NodeError::Actor(format!("the node's supervisor could not start: {e}")))?;
        *self.ctx.root.write() = Some(root);
        Ok(())
    }

    /// Starts `child` under the node's root supervisor, which restarts it
    /// by its policy (the routine scheduler joins this way).
    pub async fn supervise(&self, child: ChildSpec) -> Result<ActorCell, NodeError> {
        let root = self
            .ctx
            .root
            .read()
            .clone()
            .ok_or_else(|| NodeError::Actor("the node has stopped".into()))?;
        let name = child.id.clone();
        ractor::call!(root, SupervisorMsg::StartChild, child)
            .map_err(|e| NodeError::Actor(format!("the node's supervisor did not answer: {e}")))?
            .map_err(|e| NodeError::Actor(format!("{name} could not start: {e}")))
    }

    /// Stops the tree: every child in reverse start order, each within its deadline.
    pub(super) async fn stop_tree(&self) {
        let root = self.ctx.root.write().take();
        if let Some(root) = root {
            let _ = root
                .stop_and_wait(Some("shutdown".into()), Some(Duration::from_secs(30)))
                .await;
        }
        self.ctx.conversations.stop_all().await;
        for branch in self.ctx.branches() {
            branch.stop().await;
        }
    }

    /// The live actor tree: the root, its children, and every live
    /// delegation and conversation (a subagent under its delegation).
    pub async fn tree(&self) -> Vec<ActorInfo> {
        let mut tree = Vec::new();
        let root: Option<ActorRef<SupervisorMsg>> = self.ctx.root.read().clone();
        let Some(root) = root else {
            return tree;
        };
        tree.push(ActorInfo {
            kind: "node".into(),
            id: "node".into(),
            parent: None,
            state: "running".into(),
            restarts: 0,
        });
        let children = ractor::call!(root, SupervisorMsg::Children).unwrap_or_default();
        for child in children {
            tree.push(ActorInfo {
                kind: child.id.clone(),
                id: child.id.clone(),
                parent: Some("node".into()),
                state: match child.state {
                    ChildState::Running => "running",
                    ChildState::RestartPending => "restarting",
                    ChildState::Stopped => "stopped",
                }
                .into(),
                restarts: child.restarts,
            });
        }
        for branch in self.ctx.branches() {
            tree.extend(branch.live());
        }
        let live = self.ctx.conversations.live();
        let rows = self
            .ctx
            .store
            .read(move |c| {
                let mut rows = Vec::new();
                for id in live {
                    if let Some(row) =
                        troupe_runtime::store::conversations::get_conversation(c, id)?
                    {
                        // A subagent hangs under its delegation.
                        let delegation = super::opening::load(c, id)?
                            .and_then(|o| o.budget)
                            .and_then(|b| b.delegation)
                            .map(|d| d.to_string());
                        rows.push((row, delegation));
                    }
                }
                Ok(rows)
            })
            .await
            .unwrap_or_default();
        for (row, delegation) in rows {
            let parent = delegation.or_else(|| row.parent.map(|p| p.to_string()));
            tree.push(ActorInfo {
                kind: row.kind,
                id: row.id.to_string(),
                parent: Some(parent.unwrap_or_else(|| "conversations".to_string())),
                state: "running".into(),
                restarts: self.ctx.conversations.restarts(&row.id),
            });
        }
        tree
    }
}
