//! How a node starts: the one place that knows every feature.
//!
//! The node (`crate::node`: its context, its conversations and their
//! router, the addressing of messages) names no feature. Each feature —
//! house threads, environments, delegations, agents, routines' tools,
//! background reviews, command notices — sits above it and is wired here:
//! its router joins the actor tree, its handles into [`Features`] (typed,
//! read by the node's accessors) and into the services every
//! conversation's tools get, its hooks onto the node's turn ends. So modules depend one way,
//! features on the node, and this module on all of them.
//!
//! ```text
//! boot ─┬─ agents ── routine, delegation, messaging
//!       ├─ environment ── house ── messaging
//!       ├─ review, commands, mcp
//!       └─ node (context, conversation, router, addressing, tree)
//! ```

use std::sync::Arc;

use troupe_runtime::agents::Agents;

use crate::agents::AgentDesk;
use crate::delegation::Delegations;
use crate::environment::{BindingChanges, Environments};
use crate::house::Threads;
use crate::kinds::Kinds;
use crate::mcp::McpServers;
use crate::node::routed;
use crate::node::{Node, NodeError, NodeOptions, WeakNode, Wired, Wiring};
use crate::review::{ReviewHook, ReviewWork, Reviews};
use crate::routine::service::RoutineService;

/// The routed features' handles, made with the node: each feature is
/// given its own when it is built, and the node's public accessors
/// (`Node::kinds`, `Node::delegations`, …) read them here, typed.
pub(crate) struct Features {
    /// The house threads.
    pub threads: Arc<Threads>,
    /// The environments.
    pub environments: Arc<Environments>,
    /// The actor kinds a Rust program registers.
    pub kinds: Arc<Kinds>,
    /// The delegations.
    pub delegations: Arc<Delegations>,
    /// The routines' service: the scheduler's options and handle, set by
    /// the scheduler or [`RoutineService::configure`] (one with default
    /// options when first asked for otherwise).
    pub routines: parking_lot::RwLock<Option<Arc<RoutineService>>>,
    /// The servers of `mcp.json`, once [`McpServers::start`] started them.
    pub mcp: std::sync::OnceLock<McpServers>,
    /// The background reviews, when the node reviews.
    pub reviews: std::sync::OnceLock<Arc<Reviews>>,
}

impl Features {
    fn new(node: &WeakNode, bindings: &BindingChanges) -> Self {
        Self {
            threads: Arc::new(Threads::new(node.clone())),
            environments: Arc::new(Environments::new(node.clone(), bindings)),
            kinds: Arc::new(Kinds::default()),
            delegations: Delegations::new(node.clone()),
            routines: parking_lot::RwLock::new(None),
            mcp: std::sync::OnceLock::new(),
            reviews: std::sync::OnceLock::new(),
        }
    }
}

/// The node holds these handles, typed (see [`crate::node::Wiring`]).
impl Wired for Wiring {
    type Features = Features;
}

impl Node {
    /// The features' handles boot made with this node.
    pub(crate) fn features(&self) -> &Features {
        self.context().features()
    }

    /// The node's threads: their router and their events.
    pub(crate) fn threads(&self) -> &Arc<Threads> {
        &self.features().threads
    }

    /// The node's environments: their router, the threads bound to them,
    /// and their control groups.
    pub(crate) fn environments(&self) -> &Arc<Environments> {
        &self.features().environments
    }

    /// The node's delegations (`delegate`, executor instances).
    pub fn delegations(&self) -> Option<Arc<Delegations>> {
        Some(Arc::clone(&self.features().delegations))
    }

    /// The servers of `mcp.json`, once started on this node
    /// ([`McpServers::start`]).
    pub fn mcp_servers(&self) -> Option<&McpServers> {
        self.features().mcp.get()
    }

    /// How many background reviews are running.
    pub fn reviews_running(&self) -> usize {
        self.features().reviews.get().map_or(0, |r| r.running())
    }

    /// Opens the store and starts the node: the actor tree with every
    /// feature's router, the tools' services, the bots; then, when
    /// `options.recover` says so, undelivered messages are redelivered and
    /// interrupted turns resumed.
    pub async fn start(options: NodeOptions) -> Result<Node, NodeError> {
        let recover = options.recover;
        // Moves when a thread's environment changes: its tools are recomputed.
        let bindings = BindingChanges::default();
        let node = Node::build(options, vec![bindings.source()], |node| {
            Features::new(node, &bindings)
        })?;
        let ctx = Arc::clone(node.context());
        let Features {
            threads,
            environments,
            kinds,
            delegations,
            ..
        } = node.features();
        ctx.route_threads(threads.clone());
        ctx.add_branch(threads.clone());
        ctx.add_branch(environments.clone());
        ctx.route_actors(kinds.clone());
        ctx.add_roster(kinds.clone());
        ctx.add_branch(kinds.clone());
        node.start_tree(vec![routed::child(threads), routed::child(environments)])
            .await?;
        ctx.add_branch(delegations.clone());
        node.supervise(routed::child(delegations)).await?;
        // The tools' typed handles on the node (see `troupe_runtime::tool::services`).
        let typed = ctx.services.node();
        typed.set_agents(Agents(AgentDesk::new(&node, Arc::downgrade(delegations))));
        typed.set_houses(troupe_runtime::house::Houses(
            crate::house::tools::HouseDesk::new(&node),
        ));
        typed.set_environments(troupe_runtime::environment::Environments(
            crate::environment::tools::EnvironmentDesk::new(&node),
        ));
        typed.set_file_limits(ctx.settings.files);
        // `executor_accounts` reads the accounts the node started with.
        typed.set_executors(ctx.settings.executors.clone());
        typed.set_command_notifier(crate::commands::CommandEnds::new(Arc::new(node.clone())));
        // One registry of background commands for the process: any
        // conversation stops one by id, and shutdown ends them all.
        let commands =
            Arc::new(troupe_tools::run_command::background::BackgroundCommands::default());
        node.supervise(commands.child()).await?;
        ctx.add_branch(Arc::new(crate::commands::CommandsBranch(Arc::clone(
            &commands,
        ))));
        typed.set_background_commands(commands);
        ctx.add_hook(delegations.clone());
        if ctx.settings.review_every_n_turns > 0 {
            let every = ctx.settings.review_every_n_turns;
            let work = ReviewWork::new(Arc::clone(&ctx.gate));
            let reviews = Reviews::start(&node, work, every).await?;
            let _ = node.features().reviews.set(Arc::clone(&reviews));
            ctx.add_branch(reviews.clone());
            ctx.add_hook(ReviewHook::new(&node, every, reviews));
        }
        node.load_bots().await?;
        if recover {
            node.recover().await?;
            delegations.recover(&node).await;
        }
        Ok(node)
    }
}
