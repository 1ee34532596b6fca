//! Posting from a house tool: to another thread of the house
//! (`post_to_thread`), or an attachment to the caller's own thread (what
//! `send_gif` posts). A post is committed to the thread's mailbox before
//! it is handed over, so one not handed over now lands when the thread
//! next runs.

use serde_json::json;
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::house::{Attachment, MemberKind, Post};
use troupe_runtime::protocol::{Address, Envelope, Payload, ToolResult};
use troupe_runtime::tool::ToolContext;

use super::{err, thread_data, HouseDesk};

impl HouseDesk {
    pub(super) async fn post_elsewhere(
        &self,
        ctx: &ToolContext,
        thread: &str,
        text: &str,
    ) -> ToolResult {
        if text.trim().is_empty() {
            return ToolResult::error("the message is empty.");
        }
        let (node, _) = match self.scope(ctx) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let (_, seat, t) = match self.thread(ctx, Some(thread)).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        if t.info.id == seat.thread {
            return ToolResult::error(
                "that is this thread: your answer is posted here already. post_to_thread is for another thread.",
            );
        }
        if t.info.archived {
            return ToolResult::error(format!(
                "thread `{}` is archived; nobody would see the post there.",
                t.info.label()
            ));
        }
        if let Err(e) = node.settings().check_user_message(text) {
            return err(e);
        }
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Conversation(ctx.conversation),
            to: Address::Thread(t.info.id),
            body: Payload::Post(Post {
                author: ctx.agent.clone(),
                author_kind: MemberKind::Bot,
                text: text.to_string(),
                round: None,
                depth: 1,
                via: Some(seat.thread),
                answers_offer: false,
                failed: None,
                attachments: Vec::new(),
            }),
            sent_at: chrono::Utc::now(),
        };
        let id = match node.store().send(envelope.clone()).await {
            Ok(id) => id,
            Err(e) => return ToolResult::error(format!("the post could not be saved: {e}")),
        };
        let mut data = thread_data(&t.info);
        data["delivery_id"] = json!(id.to_string());
        match node.route(envelope).await {
            Ok(()) => ToolResult::ok_with(
                format!("Posted to thread `{}` as `{}` (delivery id {id}).", t.info.label(), ctx.agent),
                data,
            ),
            Err(e) => ToolResult::ok_with(
                format!(
                    "Committed to thread `{}` (delivery id {id}) but not handed over now ({e}); it lands when \
                     the thread next runs. Do not post it again.",
                    t.info.label()
                ),
                data,
            ),
        }
    }

    pub(super) async fn post_here(
        &self,
        ctx: &ToolContext,
        attachment: Attachment,
        text: String,
    ) -> ToolResult {
        let (node, _) = match self.scope(ctx) {
            Ok(x) => x,
            Err(e) => return e,
        };
        let (_, seat, t) = match self.thread(ctx, None).await {
            Ok(x) => x,
            Err(e) => return e,
        };
        if t.info.archived {
            return ToolResult::error(format!(
                "thread `{}` is archived; nobody would see the post there.",
                t.info.label()
            ));
        }
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Conversation(ctx.conversation),
            to: Address::Thread(seat.thread),
            body: Payload::Post(Post {
                author: ctx.agent.clone(),
                author_kind: MemberKind::Bot,
                text: String::new(),
                round: None,
                depth: 1,
                via: None,
                answers_offer: false,
                failed: None,
                attachments: vec![attachment.clone()],
            }),
            sent_at: chrono::Utc::now(),
        };
        let id = match node.store().send(envelope.clone()).await {
            Ok(id) => id,
            Err(e) => return ToolResult::error(format!("the post could not be saved: {e}")),
        };
        let mut data = thread_data(&t.info);
        data["delivery_id"] = json!(id.to_string());
        data["post"] = json!(attachment);
        if let Err(e) = node.route(envelope).await {
            // Committed: it lands when the thread next runs.
            tracing::warn!(thread = %seat.thread, error = %e, "a post waits in the mailbox");
        }
        ToolResult::ok_with(text, data)
    }
}
