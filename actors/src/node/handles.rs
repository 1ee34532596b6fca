//! The node as its features reach it: narrow accessors on [`Node`] and a
//! weak handle ([`WeakNode`]), so that a feature holds the node, never its
//! context. What a feature owns (its router, its service, its counters)
//! is its own, given by boot when it builds the feature; what is here is
//! the node's (its questions, its models, its event bus, its tree).

use std::sync::Arc;

use troupe_runtime::id::ConversationId;
use troupe_runtime::model::{ModelError, ResolvedModel};
use troupe_runtime::protocol::Address;

use super::{Branch, Node, NodeContext, Remote};
use crate::channel::Questions;
use crate::events::NodeEvent;

/// A handle on the node that does not keep it alive ([`Node::downgrade`]).
#[derive(Debug, Clone)]
pub struct WeakNode(pub(super) std::sync::Weak<NodeContext>);

impl WeakNode {
    /// The node, while it is there.
    pub(crate) fn upgrade(&self) -> Option<Node> {
        self.0.upgrade().map(Node::from_context)
    }
}

impl Node {
    /// A handle on this node that does not keep it alive (what the node's
    /// own services hold: the tools' desks, the features' actors).
    pub(crate) fn downgrade(&self) -> WeakNode {
        WeakNode(Arc::downgrade(&self.ctx))
    }

    /// Questions and approvals waiting for the user.
    pub(crate) fn questions(&self) -> &Arc<Questions> {
        &self.ctx.questions
    }

    /// Resolves a model spec (cached).
    pub(crate) fn resolve_model(&self, spec: &str) -> Result<ResolvedModel, ModelError> {
        self.ctx.resolve_model(spec)
    }

    /// Resolves the model of bot `bot` (`spec` its model spec).
    pub(crate) fn resolve_model_for(
        &self,
        bot: &str,
        spec: &str,
    ) -> Result<ResolvedModel, ModelError> {
        self.ctx.resolve_model_for(bot, spec)
    }

    /// Adds a feature's part of the actor tree (listed and stopped with it).
    pub(crate) fn add_branch(&self, branch: Arc<dyn Branch>) {
        self.ctx.add_branch(branch);
    }

    /// The names `models.toml` defines, in its order.
    pub(crate) fn model_names(&self) -> Vec<String> {
        self.ctx.model_names()
    }

    /// Where calls to `spec` go and the key they carry (read now).
    pub(crate) fn model_endpoint(
        &self,
        spec: &str,
    ) -> Result<troupe_runtime::model::ModelEndpoint, ModelError> {
        self.ctx.model_endpoint(spec)
    }

    /// The model troupe serves in-process for `spec`, when it has no
    /// endpoint but troupe can call it itself.
    pub(crate) fn served_model(
        &self,
        spec: &str,
    ) -> Option<Arc<dyn troupe_runtime::model::Provider>> {
        self.ctx.served_model(spec)
    }

    /// Says a roster gained or lost an entry (conversations recompute
    /// their tools).
    pub(crate) fn roster_changed(&self) {
        self.ctx.roster_changed();
    }

    /// Where envelopes for actors on other nodes go, in a cluster.
    pub(crate) fn remote(&self) -> Option<&Arc<dyn Remote>> {
        self.ctx.remote()
    }

    /// The node of this node's cluster that hosts `to`, when it is another
    /// (a bot, house thread or actor there); `None` outside a cluster.
    pub fn node_of(&self, to: &Address) -> Option<String> {
        self.ctx.remote().and_then(|r| r.node_of(to))
    }

    /// Sends envelopes for actors on other nodes to `remote` (a cluster's
    /// node, once).
    pub(crate) fn route_remote(&self, remote: Arc<dyn Remote>) {
        self.ctx.route_remote(remote);
    }

    /// Adds `roster`'s entries to every bot's roster.
    pub(crate) fn add_roster(&self, roster: Arc<dyn super::Roster>) {
        self.ctx.add_roster(roster);
    }

    /// The provider the program gave the node for every model, if any.
    pub(crate) fn model_override(&self) -> Option<Arc<dyn troupe_runtime::model::Provider>> {
        self.ctx.model_override()
    }

    /// Says whose tools a bot is offered, by source (once; the MCP
    /// servers when they start).
    pub(crate) fn offer_sources(&self, offers: Arc<dyn crate::toolset::SourceOffers>) {
        self.ctx.toolsets.offer_sources(offers);
    }

    /// Publishes `event` of `conversation` to the node's subscribers.
    pub(crate) fn publish(
        &self,
        conversation: ConversationId,
        event: troupe_runtime::protocol::AgentEvent,
    ) {
        self.emitter(conversation).emit(event);
    }

    /// What publishes the events of `conversation` to the node's
    /// subscribers.
    pub(crate) fn emitter(&self, conversation: ConversationId) -> crate::events::Emitter {
        crate::events::Emitter::new(conversation, None, self.ctx.bus.clone())
    }

    /// Publishes `event` of the registered actor `actor` to the node's
    /// subscribers.
    pub(crate) fn publish_actor(
        &self,
        actor: crate::events::ActorName,
        event: troupe_runtime::protocol::AgentEvent,
    ) {
        if self.ctx.bus.receiver_count() > 0 {
            let _ = self.ctx.bus.send(NodeEvent::of_actor(actor, event));
        }
    }
}
