//! A narrow handle to the durable mailbox, for features that only send.
//!
//! What sends a notice into a conversation (a background command's end)
//! needs no more of the node than this; holding a [`Post`] rather than the
//! node keeps it out of the node's imports.

use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::Envelope;

/// Sends durable messages.
#[async_trait::async_trait]
pub trait Post: Send + Sync + 'static {
    /// Commits `envelope` to the durable mailbox, then hands it to its
    /// receiver; its id once committed, or why it was not.
    async fn deliver(&self, envelope: Envelope) -> Result<MsgId, String>;
}
