//! Watching a thread: its events and its posted messages as
//! `futures::Stream`s, filtered out of the node's one broadcast of every
//! thread's events.
//!
//! The broadcast keeps a bounded backlog; a watcher that falls further
//! behind misses the oldest events instead of slowing the threads down.
//! The streams skip what was missed and count it ([`ThreadEvents::missed`]);
//! the thread's messages are in the store either way
//! ([`ThreadRef::read`](super::ThreadRef::read)).

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::broadcast;
use tokio_util::sync::CancellationToken;
use troupe_runtime::id::ThreadId;

use crate::feed::Feed;

use super::{ThreadEvent, ThreadMessageEvent};

/// The events of one thread from the moment this is made: a
/// `Stream<Item = ThreadEvent>`, which ends when the node shuts down.
pub struct ThreadEvents {
    thread: ThreadId,
    inner: Feed<ThreadEvent>,
}

impl std::fmt::Debug for ThreadEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadEvents")
            .field("thread", &self.thread)
            .field("missed", &self.inner.missed())
            .finish_non_exhaustive()
    }
}

impl ThreadEvents {
    pub(crate) fn new(
        thread: ThreadId,
        all: broadcast::Receiver<ThreadEvent>,
        stopped: CancellationToken,
    ) -> Self {
        Self {
            thread,
            inner: Feed::new(all, stopped),
        }
    }

    /// The next event of the thread; `None` once the node has shut down.
    /// (The same as `StreamExt::next`.)
    pub async fn next(&mut self) -> Option<ThreadEvent> {
        futures::StreamExt::next(self).await
    }

    /// How many events (of any thread) this watcher fell too far behind
    /// to see.
    pub fn missed(&self) -> u64 {
        self.inner.missed()
    }
}

impl Stream for ThreadEvents {
    type Item = ThreadEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<ThreadEvent>> {
        loop {
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Ready(Some(event)) if event.thread() == self.thread => {
                    return Poll::Ready(Some(event))
                }
                Poll::Ready(Some(_)) => {}
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}

/// The messages posted to one thread (by people, bots and the program), in
/// order: a `Stream<Item = ThreadMessageEvent>` over [`ThreadEvents`].
#[derive(Debug)]
pub struct ThreadMessages {
    events: ThreadEvents,
}

impl ThreadMessages {
    pub(crate) fn new(events: ThreadEvents) -> Self {
        Self { events }
    }

    /// How many events this watcher fell too far behind to see.
    pub fn missed(&self) -> u64 {
        self.events.missed()
    }
}

impl Stream for ThreadMessages {
    type Item = ThreadMessageEvent;

    fn poll_next(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<ThreadMessageEvent>> {
        loop {
            match Pin::new(&mut self.events).poll_next(cx) {
                Poll::Ready(Some(ThreadEvent::Posted(posted))) => return Poll::Ready(Some(posted)),
                Poll::Ready(Some(
                    ThreadEvent::Offered { .. }
                    | ThreadEvent::TurnFailed { .. }
                    | ThreadEvent::Held { .. }
                    | ThreadEvent::RoundSettled { .. },
                )) => {}
                Poll::Ready(None) => return Poll::Ready(None),
                Poll::Pending => return Poll::Pending,
            }
        }
    }
}
