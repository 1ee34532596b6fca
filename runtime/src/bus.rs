//! A broadcast channel made when its first subscriber comes.
//!
//! tokio's `broadcast::channel(n)` allocates and writes all `n` of its slots
//! when it is made. The node's event bus (4,096 slots of 248 bytes), the
//! threads' events (4,096 of 192) and the routers' event channels were
//! written at every start, whether or not anything ever listened: about 730
//! of a cold start's 2,600 page faults (docs/benchmarks.md). A send that finds no
//! subscriber is dropped by tokio too, and a subscriber only ever sees what
//! is sent after it subscribed; so a channel made at the first
//! [`Bus::subscribe`] shows every subscriber exactly what a channel made at
//! once would have shown it.

use std::sync::{Arc, OnceLock};

use tokio::sync::broadcast;

/// A broadcast channel of `T`, made at its first subscriber. Cheap to clone:
/// every clone is the same channel.
pub struct Bus<T> {
    inner: Arc<Inner<T>>,
}

struct Inner<T> {
    /// The slots a subscriber may fall behind by before it misses the
    /// oldest (`Lagged`); `None` for a channel given made, which has its own.
    capacity: Option<usize>,
    sender: OnceLock<broadcast::Sender<T>>,
}

impl<T: Clone> Bus<T> {
    /// A bus whose subscribers may fall `capacity` events behind (at least
    /// one); nothing is allocated for its events until the first subscriber.
    pub fn new(capacity: usize) -> Self {
        Self {
            inner: Arc::new(Inner {
                capacity: Some(capacity.max(1)),
                sender: OnceLock::new(),
            }),
        }
    }

    /// A bus over a channel already made (a caller's own sender: what is
    /// sent on either reaches the subscribers of both).
    pub fn of(sender: broadcast::Sender<T>) -> Self {
        Self {
            inner: Arc::new(Inner {
                capacity: None,
                sender: OnceLock::from(sender),
            }),
        }
    }

    /// Sends `value` to every current subscriber; returns how many it
    /// reached. With none, `value` is dropped.
    pub fn send(&self, value: T) -> usize {
        self.inner
            .sender
            .get()
            .and_then(|sender| sender.send(value).ok())
            .unwrap_or(0)
    }

    /// A new subscriber, which sees every event sent from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<T> {
        self.inner
            .sender
            .get_or_init(|| broadcast::channel(self.inner.capacity.unwrap_or(1)).0)
            .subscribe()
    }

    /// How many subscribers there are now.
    pub fn receiver_count(&self) -> usize {
        self.inner
            .sender
            .get()
            .map_or(0, broadcast::Sender::receiver_count)
    }

    /// Whether its channel was made (it had a subscriber, or was given one).
    #[cfg(test)]
    fn is_made(&self) -> bool {
        self.inner.sender.get().is_some()
    }
}

impl<T> Clone for Bus<T> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<T> std::fmt::Debug for Bus<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bus")
            .field("capacity", &self.inner.capacity)
            .field("made", &self.inner.sender.get().is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use tokio::sync::broadcast::error::TryRecvError;

    use super::*;

    #[test]
    fn nothing_is_made_until_a_subscriber_comes_and_it_sees_what_follows() {
        let bus = Bus::new(4);
        assert_eq!(bus.send(1), 0, "no subscriber: dropped");
        assert_eq!(bus.receiver_count(), 0);
        assert!(!bus.is_made(), "made with no subscriber");

        let clone = bus.clone();
        let mut rx = clone.subscribe();
        assert!(bus.is_made());
        assert_eq!(bus.receiver_count(), 1);
        assert_eq!(bus.send(2), 1);
        assert_eq!(rx.try_recv(), Ok(2), "the value sent before it is not seen");
        assert_eq!(rx.try_recv(), Err(TryRecvError::Empty));
    }

    #[test]
    fn a_subscriber_lags_past_the_capacity_as_on_a_channel() {
        let bus = Bus::new(2);
        let mut rx = bus.subscribe();
        for i in 0..3 {
            bus.send(i);
        }
        assert_eq!(rx.try_recv(), Err(TryRecvError::Lagged(1)));
        assert_eq!(rx.try_recv(), Ok(1));
        assert_eq!(rx.try_recv(), Ok(2));
    }

    #[test]
    fn a_bus_over_a_given_channel_shares_it() {
        let (sender, mut given) = broadcast::channel(8);
        let bus = Bus::of(sender.clone());
        let mut ours = bus.subscribe();
        assert_eq!(bus.send("a"), 2);
        sender.send("b").unwrap();
        assert_eq!((given.try_recv(), given.try_recv()), (Ok("a"), Ok("b")));
        assert_eq!((ours.try_recv(), ours.try_recv()), (Ok("a"), Ok("b")));
    }
}
