//! Background commands' ends, told to the conversation that asked.
//!
//! `run_command` with `background` and `notify_on_complete` registers the
//! conversation; when the command ends, [`CommandEnds`] sends it a durable
//! `command` notice (how it ended, where its log is, its last lines), which
//! starts a turn there — after a restart or a passivation too.

use std::sync::Arc;

use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_tools::run_command::background::CommandNotifier;

use crate::post::Post;

/// The node's [`CommandNotifier`].
pub struct CommandEnds {
    post: Arc<dyn Post>,
}

impl CommandEnds {
    /// The notifier that sends through `post` (the node).
    pub fn new(post: Arc<dyn Post>) -> Arc<Self> {
        Arc::new(Self { post })
    }
}

#[async_trait::async_trait]
impl CommandNotifier for CommandEnds {
    async fn command_finished(&self, conversation: ConversationId, id: &str, summary: &str) {
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Service("commands".into()),
            to: Address::Conversation(conversation),
            body: Payload::Notice {
                topic: "command".into(),
                text: summary.to_string(),
                data: serde_json::json!({ "command_id": id }),
            },
            sent_at: chrono::Utc::now(),
        };
        if let Err(e) = self.post.deliver(envelope).await {
            tracing::warn!(%conversation, command = id, error = %e, "a background command's end could not be told");
        }
    }
}
