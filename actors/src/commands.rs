//! Background commands' ends, told to the conversation that asked.
//!
//! `run_command` with `background` and `notify_on_complete` registers the
//! conversation; when the command ends, [`CommandEnds`] sends it a durable
//! `command` notice (how it ended, where its log is, its last lines), which
//! starts a turn there — after a restart or a passivation too.
//!
//! The commands themselves are actors under the node's `commands`
//! supervisor ([`BackgroundCommands`]); `troupe ps` lists each running one
//! under the conversation that started it ([`CommandsBranch`]).

use std::sync::Arc;

use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_tools::run_command::background::{BackgroundCommands, CommandNotifier};

use crate::node::{ActorInfo, Branch};
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

/// The running background commands in the actor tree, each under the
/// conversation that started it (their supervisor is the root's `commands`).
pub struct CommandsBranch(pub Arc<BackgroundCommands>);

impl Branch for CommandsBranch {
    fn live(&self) -> Vec<ActorInfo> {
        self.0
            .running()
            .into_iter()
            .map(|command| ActorInfo {
                kind: "command".into(),
                id: command.id,
                parent: Some(command.conversation.to_string()),
                state: "running".into(),
                restarts: 0,
            })
            .collect()
    }

    fn stopping(&self) {
        self.0.stop_all();
    }
}
