//! One of the node's broadcasts as a `futures::Stream` that ends with the
//! node: [`Feed`] hands out what was published, skips (and counts) what a
//! slow subscriber fell too far behind to see, and ends once the node has
//! shut down and everything published before is handed out.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::broadcast;
use tokio_stream::wrappers::errors::BroadcastStreamRecvError;
use tokio_stream::wrappers::BroadcastStream;
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};

/// A subscriber's view of one broadcast, ending when the node stops.
pub struct Feed<T> {
    inner: BroadcastStream<T>,
    stopped: Pin<Box<WaitForCancellationFutureOwned>>,
    missed: u64,
}

impl<T> std::fmt::Debug for Feed<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Feed")
            .field("missed", &self.missed)
            .finish_non_exhaustive()
    }
}

impl<T: Clone + Send + 'static> Feed<T> {
    /// The feed of `receiver`, ending when `stopped` is cancelled.
    pub fn new(receiver: broadcast::Receiver<T>, stopped: CancellationToken) -> Self {
        Self {
            inner: BroadcastStream::new(receiver),
            stopped: Box::pin(stopped.cancelled_owned()),
            missed: 0,
        }
    }

    /// How many items this subscriber fell too far behind to see.
    pub fn missed(&self) -> u64 {
        self.missed
    }
}

impl<T: Clone + Send + 'static> Stream for Feed<T> {
    type Item = T;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        loop {
            match Pin::new(&mut self.inner).poll_next(cx) {
                Poll::Ready(Some(Ok(item))) => return Poll::Ready(Some(item)),
                Poll::Ready(Some(Err(BroadcastStreamRecvError::Lagged(n)))) => {
                    self.missed += n;
                    tracing::debug!(missed = n, "a subscriber fell behind the node's events");
                }
                Poll::Ready(None) => return Poll::Ready(None),
                // Nothing buffered: the end, if the node has stopped.
                Poll::Pending => {
                    return match self.stopped.as_mut().poll(cx) {
                        Poll::Ready(()) => Poll::Ready(None),
                        Poll::Pending => Poll::Pending,
                    }
                }
            }
        }
    }
}
