//! How a node starts: the one place that knows every feature.
//!
//! The node (`crate::node`: its context, its conversations and their
//! router, the addressing of messages) names no feature. Each feature —
//! house threads, environments, delegations, agents, routines' tools,
//! background reviews, command notices — sits above it and is wired here:
//! its router joins the actor tree, its registry goes into the node's
//! extensions, its handles into the services every conversation's tools
//! get, its hooks onto the node's turn ends. So modules depend one way,
//! features on the node, and this module on all of them.
//!
//! ```text
//! boot ─┬─ agents ── routine, delegation, messaging
//!       ├─ environment ── house ── messaging
//!       ├─ review, commands, mcp
//!       └─ node (context, conversation, router, addressing, tree)
//! ```

use std::sync::Arc;
use std::time::Duration;

use ractor::ActorCell;
use troupe_runtime::agents::Agents;
use troupe_runtime::supervise::ChildSpec;

use crate::agents::NodeAgents;
use crate::delegation::{Delegations, DelegationsHandle};
use crate::environment::Sandboxes;
use crate::house::Hub;
use crate::node::{Node, NodeContext, NodeError, NodeOptions};

impl Node {
    /// Opens the store and starts the node: the actor tree with every
    /// feature's router, the tools' services, the bots; then, when
    /// `options.recover` says so, undelivered messages are redelivered and
    /// interrupted turns resumed.
    pub async fn start(options: NodeOptions) -> Result<Node, NodeError> {
        let recover = options.recover;
        let sandboxes = Arc::new(Sandboxes::default());
        let node = Node::build(options, vec![sandboxes.tool_source()])?;
        let ctx = Arc::clone(node.context());
        let hub = Arc::new(Hub::default());
        ctx.set_extension(Arc::clone(&hub));
        ctx.set_extension(Arc::clone(&sandboxes));
        ctx.route_threads(hub.clone());
        ctx.add_branch(hub);
        ctx.add_branch(sandboxes);
        let kinds = ctx.kinds();
        ctx.route_actors(kinds.clone());
        ctx.add_roster(kinds.clone());
        ctx.add_branch(kinds);
        node.start_tree(vec![
            router_child(&ctx, "threads", |ctx, supervisor| async move {
                crate::house::start(&ctx, supervisor).await
            }),
            router_child(&ctx, "sandboxes", |ctx, supervisor| async move {
                crate::environment::start(&ctx, supervisor).await
            }),
        ])
        .await?;

        let delegations = Delegations::new(&node);
        ctx.services
            .insert(Arc::new(DelegationsHandle(Arc::clone(&delegations))));
        ctx.add_branch(delegations.clone());
        delegations.start(&node).await?;
        ctx.services
            .insert(Arc::new(Agents(NodeAgents::new(&node))));
        ctx.services.insert(Arc::new(troupe_runtime::house::Houses(
            crate::house::tools::NodeHouses::new(&node),
        )));
        ctx.services
            .insert(Arc::new(troupe_runtime::environment::Environments(
                crate::environment::tools::NodeEnvironments::new(&node),
            )));
        ctx.services.insert(Arc::new(ctx.settings.files));
        ctx.services.insert(Arc::new(
            troupe_tools::run_command::background::CommandNotifications(
                crate::commands::CommandEnds::new(Arc::new(node.clone())),
            ),
        ));
        // Shared by every conversation (keyed by conversation), so what a
        // conversation read survives its passivation.
        ctx.services
            .insert(Arc::new(troupe_tools::ledger::ReadLedger::default()));
        // One registry of background commands for the process: any
        // conversation stops one by id, and shutdown ends them all.
        let commands =
            Arc::new(troupe_tools::run_command::background::BackgroundCommands::default());
        node.supervise(commands.child()).await?;
        ctx.add_branch(Arc::new(crate::commands::CommandsBranch(Arc::clone(
            &commands,
        ))));
        ctx.services.insert(commands);
        ctx.add_hook(delegations.clone());
        if ctx.settings.review_every_n_turns > 0 {
            let every = ctx.settings.review_every_n_turns;
            let reviews = crate::review::Reviews::start(&node, every).await?;
            ctx.add_branch(reviews.clone());
            ctx.add_hook(crate::review::ReviewHook::new(&node, every, reviews));
        }
        node.load_bots().await?;
        if recover {
            node.recover().await?;
            delegations.recover(&node).await;
        }
        Ok(node)
    }
}

/// A feature's router as a child of the root, started by `start` with the
/// node's context (given up when the node is stopping).
fn router_child<F, Fut>(ctx: &Arc<NodeContext>, name: &str, start: F) -> ChildSpec
where
    F: Fn(Arc<NodeContext>, ActorCell) -> Fut + Send + Sync + Clone + 'static,
    Fut: std::future::Future<Output = Result<ActorCell, ractor::ActorProcessingErr>>
        + Send
        + 'static,
{
    let ctx = Arc::downgrade(ctx);
    ChildSpec::new(name, move |supervisor: ActorCell| {
        let ctx = ctx.clone();
        let start = start.clone();
        async move {
            let ctx = ctx.upgrade().ok_or("the node is stopping")?;
            start(ctx, supervisor).await
        }
    })
    // The router stops each of its actors within its own deadline, all at once.
    .shutdown(Duration::from_secs(10))
}
