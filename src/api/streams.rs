//! The Rust API's streams: a turn's events ([`Turn`]), the runtime's
//! events ([`RuntimeEvents`], from [`Runtime::events`]), and a thread's
//! events and messages ([`ThreadEvents`], [`ThreadMessages`], from
//! [`ThreadRef::events`] and [`ThreadRef::messages`]) are each a
//! `futures::Stream`, so `StreamExt`'s `next`, `filter`, `take_while` or
//! a `select!` over several of them work as on any stream.
//!
//! A turn's stream is its own (it misses nothing and ends with the turn).
//! The runtime's and a thread's are views of the node's broadcast, which
//! keeps a bounded backlog: a subscriber that falls further behind misses
//! the oldest events rather than slowing the agents down, and counts them
//! (`missed()`); what happened is in the store either way. Both end when
//! the runtime shuts down, after what was published before.
//!
//! [`ThreadEvents`]: crate::ThreadEvents
//! [`ThreadMessages`]: crate::ThreadMessages
//! [`ThreadRef::events`]: crate::ThreadRef::events
//! [`ThreadRef::messages`]: crate::ThreadRef::messages

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use troupe_actors::events::NodeEvent;
use troupe_actors::feed::Feed;
use troupe_runtime::protocol::AgentEvent;

use super::{Runtime, Turn};

impl Stream for Turn {
    type Item = AgentEvent;

    /// The turn's next event; the stream ends with the turn (its last
    /// event is `turn_finished`).
    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<AgentEvent>> {
        self.events.poll_recv(cx)
    }
}

/// Every event of a runtime from the moment this is made on — each
/// conversation's and each registered actor's ([`NodeEvent::source`]
/// says whose): a `Stream<Item = NodeEvent>`. It ends when the runtime
/// shuts down, after the events published before.
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
///
/// use futures::StreamExt;
/// use troupe::EventSource as Source;
/// use troupe::runtime::model::{ScriptedProvider, Turn};
/// use troupe::{AgentEvent, BotSpec, Runtime};
///
/// #[tokio::main]
/// async fn main() -> anyhow::Result<()> {
///     let home = tempfile::tempdir()?;
///     let model = Arc::new(ScriptedProvider::new(vec![Turn::text("Done.")]));
///     let runtime = Runtime::builder().home(home.path()).provider(model).build().await?;
///     let events = runtime.events();
///
///     let scout = runtime.spawn_bot(BotSpec::new("scout", "Scout", "Finds files.")).await?;
///     scout.send("Go").await?.result().await?;
///
///     // The first turn that finished anywhere, and whose it was.
///     let finished = events.filter_map(|e| async move {
///         match (e.source(), &e.event) {
///             (Source::Conversation(id), AgentEvent::TurnFinished { text, .. }) => {
///                 Some((id, text.clone()))
///             }
///             _ => None,
///         }
///     });
///     let mut finished = std::pin::pin!(finished);
///     let (conversation, text) = tokio::time::timeout(Duration::from_secs(10), finished.next())
///         .await?
///         .expect("the runtime is running");
///     assert_eq!((conversation, text.as_str()), (scout.conversation(), "Done."));
///
///     runtime.shutdown().await;
///     Ok(())
/// }
/// ```
pub struct RuntimeEvents {
    inner: Feed<NodeEvent>,
}

impl std::fmt::Debug for RuntimeEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RuntimeEvents")
            .field("missed", &self.inner.missed())
            .finish_non_exhaustive()
    }
}

impl RuntimeEvents {
    /// How many events this subscriber fell too far behind to see.
    pub fn missed(&self) -> u64 {
        self.inner.missed()
    }
}

impl Stream for RuntimeEvents {
    type Item = NodeEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<NodeEvent>> {
        Pin::new(&mut self.inner).poll_next(cx)
    }
}

impl Runtime {
    /// Every event of the runtime from now on: each conversation's (turns,
    /// tool calls, notices) and each registered actor's (starts, stops,
    /// restarts), as a stream ([`RuntimeEvents`]).
    pub fn events(&self) -> RuntimeEvents {
        RuntimeEvents {
            inner: Feed::new(self.node.subscribe(), self.node.stopped()),
        }
    }
}
