//! Whom `run_command` tells when a background command it started with
//! `notify_on_complete` ends: the node, which sends the conversation a
//! durable notice. A typed service of the node
//! ([`NodeServices::command_notifier`](super::NodeServices::command_notifier)),
//! defined here so that the tools and the node both name it.

use crate::id::ConversationId;

/// Told when a background command started with `notify_on_complete` ends.
#[async_trait::async_trait]
pub trait CommandNotifier: Send + Sync {
    /// Command `id` of `conversation` ended; `summary` says how, where its
    /// log is, and its last lines.
    async fn command_finished(&self, conversation: ConversationId, id: &str, summary: &str);
}
