//! Logical addressing: callers name an actor by its key, never by an `ActorRef`.
//!
//! A restart yields a new `ActorRef`, and an idle agent should not hold
//! memory. So nobody keeps a raw reference: they keep the key, and the
//! [`Router`] resolves it to whichever incarnation is live —
//!
//! - on the first message to a key it asks the [`Activator`] to spawn the
//!   actor (which rebuilds its state from the store in `pre_start`);
//! - after `idle_after` without messages it passivates the actor (drains its
//!   mailbox, stops it) and forgets it; the next message activates it again;
//! - it supervises what it activated: a failed actor is restarted per
//!   [`RouterConfig::restart`], within a per-key [`Intensity`], with a
//!   [`Backoff`];
//! - messages sent while there is no live incarnation (activating,
//!   restarting, passivating) are buffered and delivered, in order, to the
//!   next one.
//!
//! The hot path does not go through the router actor: a send is a map
//! lookup, a per-key lock and a mailbox push. The router actor only runs
//! activations, exits and the idle sweep.

mod actor;
mod slot;

use std::fmt::Debug;
use std::hash::Hash;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use dashmap::mapref::entry::Entry;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio::sync::{broadcast, mpsc};

use crate::supervise::{Backoff, ExitReason, Intensity, Restart};
use actor::{RouterActor, RouterArgs, RouterMsg};
use slot::Slot;

/// Spawns the actor for a key. The router calls it on a key's first message,
/// after a restartable exit, and after a passivated key is messaged again.
#[async_trait::async_trait]
pub trait Activator<K, M>: Send + Sync + 'static {
    /// Spawns the actor for `key` linked to `supervisor`
    /// (`Actor::spawn_linked(None, actor, args, supervisor)`); the actor
    /// rebuilds its state (from the store) in `pre_start`.
    async fn activate(
        &self,
        key: K,
        supervisor: ActorCell,
    ) -> Result<ActorRef<M>, ActorProcessingErr>;

    /// Like [`Activator::activate`], told whether this activation replaces
    /// an incarnation that failed (a restart). The router calls this one;
    /// by default it is `activate`.
    async fn activate_as(
        &self,
        key: K,
        supervisor: ActorCell,
        restarted: bool,
    ) -> Result<ActorRef<M>, ActorProcessingErr>
    where
        K: Send + 'static,
    {
        let _ = restarted;
        self.activate(key, supervisor).await
    }
}

/// What a key can be: hashable, comparable, printable, cheap to clone.
pub trait RouteKey: Clone + Eq + Hash + Debug + Send + Sync + 'static {}
impl<T: Clone + Eq + Hash + Debug + Send + Sync + 'static> RouteKey for T {}

/// How the router activates, supervises and passivates.
#[derive(Debug, Clone)]
pub struct RouterConfig {
    /// Passivate an actor idle this long (between 1× and 1.25× of it);
    /// `None` keeps actors live until they stop.
    pub idle_after: Option<Duration>,
    /// Which exits of an activated actor lead to a restart.
    pub restart: Restart,
    /// Per key: past this many restarts in the window, the router gives up on
    /// the key (drops its buffered messages; the next message activates anew).
    pub intensity: Intensity,
    /// The wait before a restart.
    pub backoff: Backoff,
    /// How long a stop (passivation, router shutdown) may take before a kill.
    pub shutdown: Duration,
    /// Capacity of the event channel ([`Router::subscribe`]).
    pub events: usize,
    /// Whether activations are reported as events (every other event
    /// always is). A router whose subscribers only care about exits turns
    /// it off: one wake-up fewer per activation.
    pub report_activations: bool,
}

impl Default for RouterConfig {
    fn default() -> Self {
        Self {
            idle_after: Some(Duration::from_secs(300)),
            restart: Restart::Transient,
            intensity: Intensity::default(),
            backoff: Backoff::None,
            shutdown: Duration::from_secs(5),
            events: 1024,
            report_activations: true,
        }
    }
}

/// What happened to a key's actor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RouterEvent<K> {
    /// An incarnation started; `restarted` when it replaces a failed one.
    Activated {
        /// The key.
        key: K,
        /// Whether this is a restart.
        restarted: bool,
    },
    /// An incarnation exited (passivation included).
    Exited {
        /// The key.
        key: K,
        /// Why.
        reason: ExitReason,
    },
    /// The key was passivated: its actor stopped after being idle.
    Passivated {
        /// The key.
        key: K,
    },
    /// The router gave up on the key (activation failed, or restarts past the
    /// intensity); `dropped` buffered messages were discarded.
    GaveUp {
        /// The key.
        key: K,
        /// The last failure.
        reason: ExitReason,
        /// How many buffered messages were dropped.
        dropped: usize,
    },
}

/// Why a router operation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RouterError {
    /// The router is not running.
    #[error("the router has stopped; start a new one")]
    Stopped,
    /// The router could not be started.
    #[error("the router could not start: {0}")]
    Start(String),
    /// The actor dropped the reply port without answering (it failed, or
    /// the router gave up on it).
    #[error("the actor for {key} did not answer (it failed or was given up); retry the call")]
    NoReply {
        /// The key, printed.
        key: String,
    },
    /// No answer within the timeout.
    #[error("the actor for {key} did not answer within {timeout:?}")]
    Timeout {
        /// The key, printed.
        key: String,
        /// The timeout.
        timeout: Duration,
    },
}

pub(crate) struct Shared<K, M> {
    pub(crate) slots: crate::hash::FastDashMap<K, Arc<Slot<M>>>,
    pub(crate) activator: Arc<dyn Activator<K, M>>,
    pub(crate) epoch: AtomicU64,
    pub(crate) events: crate::bus::Bus<RouterEvent<K>>,
    /// The lossless watchers ([`Router::watch`]).
    pub(crate) watchers: parking_lot::Mutex<Vec<mpsc::UnboundedSender<RouterEvent<K>>>>,
}

impl<K: RouteKey, M> Shared<K, M> {
    pub(crate) fn emit(&self, event: RouterEvent<K>) {
        {
            let mut watchers = self.watchers.lock();
            if !watchers.is_empty() {
                watchers.retain(|w| w.send(event.clone()).is_ok());
            }
        }
        let _ = self.events.send(event);
    }
}

/// A handle on a router: cheap to clone, shared by every caller.
pub struct Router<K, M> {
    shared: Arc<Shared<K, M>>,
    actor: ActorRef<RouterMsg<K, M>>,
}

impl<K, M> Clone for Router<K, M> {
    fn clone(&self) -> Self {
        Self {
            shared: self.shared.clone(),
            actor: self.actor.clone(),
        }
    }
}

impl<K: RouteKey, M: ractor::Message> Router<K, M> {
    /// Starts a router that activates actors through `activator`.
    pub async fn start(
        activator: impl Activator<K, M>,
        config: RouterConfig,
    ) -> Result<Self, RouterError> {
        Self::start_inner(activator, config, None).await
    }

    /// Starts a router linked to `parent`, which then supervises it.
    pub async fn start_linked(
        activator: impl Activator<K, M>,
        config: RouterConfig,
        parent: ActorCell,
    ) -> Result<Self, RouterError> {
        Self::start_inner(activator, config, Some(parent)).await
    }

    async fn start_inner(
        activator: impl Activator<K, M>,
        config: RouterConfig,
        parent: Option<ActorCell>,
    ) -> Result<Self, RouterError> {
        let events = crate::bus::Bus::new(config.events);
        let activator: Arc<dyn Activator<K, M>> = Arc::new(activator);
        let shared = Arc::new(Shared {
            slots: crate::hash::FastDashMap::default(),
            activator: Arc::clone(&activator),
            epoch: AtomicU64::new(0),
            events,
            watchers: parking_lot::Mutex::new(Vec::new()),
        });
        let args = RouterArgs {
            shared: shared.clone(),
            activator,
            config,
        };
        let spawned = match parent {
            Some(parent) => RouterActor::spawn_linked(None, RouterActor::new(), args, parent).await,
            None => RouterActor::spawn(None, RouterActor::new(), args).await,
        };
        let (actor, _) = spawned.map_err(|e| RouterError::Start(e.to_string()))?;
        Ok(Self { shared, actor })
    }

    /// Sends `msg` to the actor for `key`, activating it if needed. The
    /// message is delivered or buffered for the next incarnation; it is lost
    /// only if that incarnation fails before handling it, or the router gives
    /// up on the key.
    pub fn send(&self, key: K, msg: M) -> Result<(), RouterError> {
        let epoch = self.shared.epoch.load(Ordering::Relaxed);
        let mut msg = msg;
        loop {
            let slot = match self.shared.slots.get(&key) {
                Some(slot) => slot.clone(),
                None => match self.shared.slots.entry(key.clone()) {
                    Entry::Occupied(entry) => entry.get().clone(),
                    Entry::Vacant(entry) => {
                        entry.insert(Arc::new(Slot::waiting(msg, epoch)));
                        // The sender's runtime starts the activation itself,
                        // one hop fewer than through the router's mailbox;
                        // the router hears when it is done.
                        if tokio::runtime::Handle::try_current().is_ok() {
                            actor::spawn_activation(
                                Arc::clone(&self.shared.activator),
                                self.actor.clone(),
                                key,
                                false,
                            );
                            return Ok(());
                        }
                        return self
                            .actor
                            .send_message(RouterMsg::Activate(key.clone()))
                            .map_err(|_| {
                                self.shared.slots.remove(&key);
                                RouterError::Stopped
                            });
                    }
                },
            };
            match slot.offer(msg, epoch) {
                Ok(()) => return Ok(()),
                // Passivated and removed meanwhile: look the key up again.
                Err(back) => msg = back,
            }
        }
    }

    /// Like [`Router::send`], but when `key` has no slot yet the caller's
    /// task runs its activation itself and hands the message to the new
    /// actor at once: no task is spawned and the router is not waited for
    /// (it hears of the actor afterwards, off the caller's path). Messages
    /// other senders send meanwhile wait in the slot, in order.
    pub async fn send_activating(&self, key: K, msg: M) -> Result<(), RouterError> {
        let epoch = self.shared.epoch.load(Ordering::Relaxed);
        if self.shared.slots.contains_key(&key) {
            return self.send(key, msg);
        }
        match self.shared.slots.entry(key.clone()) {
            Entry::Occupied(_) => return self.send(key, msg),
            Entry::Vacant(entry) => {
                entry.insert(Arc::new(Slot::waiting(msg, epoch)));
            }
        }
        let result = self
            .shared
            .activator
            .activate_as(key.clone(), self.actor.get_cell(), false)
            .await
            .map_err(|e| e.to_string());
        if let Ok(actor) = &result {
            if let Some(slot) = self.shared.slots.get(&key).map(|s| s.clone()) {
                slot.go_live(actor);
            }
        }
        let started = result.as_ref().ok().cloned();
        let told = self.actor.send_message(RouterMsg::Activated {
            key,
            result,
            restarted: false,
        });
        if let (Err(_), Some(actor)) = (told, started) {
            actor.stop(Some(ExitReason::SHUTDOWN.to_string()));
            return Err(RouterError::Stopped);
        }
        Ok(())
    }

    /// Sends the request `make` builds around a reply port and waits for the
    /// answer at most `timeout`.
    pub async fn call<R: Send + 'static>(
        &self,
        key: K,
        make: impl FnOnce(RpcReplyPort<R>) -> M,
        timeout: Duration,
    ) -> Result<R, RouterError> {
        let (tx, rx) = ractor::concurrency::oneshot();
        self.send(key.clone(), make(tx.into()))?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(_)) => Err(RouterError::NoReply {
                key: format!("{key:?}"),
            }),
            Err(_) => Err(RouterError::Timeout {
                key: format!("{key:?}"),
                timeout,
            }),
        }
    }

    /// Passivates `key` now, if `actor` is its live incarnation (an actor
    /// that knows it is idle asks this itself; the idle sweep knows only
    /// when it was last sent to). From the answer on, messages for `key`
    /// wait for its next incarnation; what is already in the actor's
    /// mailbox is handled before it stops. `false` when the router did
    /// not passivate it (another incarnation, or one starting or stopping).
    pub async fn passivate(&self, key: K, actor: ractor::ActorId) -> Result<bool, RouterError> {
        ractor::call!(self.actor, RouterMsg::Passivate, key, actor)
            .map_err(|_| RouterError::Stopped)
    }

    /// The keys with a live incarnation taking messages.
    pub fn live_keys(&self) -> Vec<K> {
        self.shared
            .slots
            .iter()
            .filter(|entry| entry.value().is_live())
            .map(|entry| entry.key().clone())
            .collect()
    }

    /// Every event from now on, none dropped: for whoever acts on them (a
    /// waiter to answer, a control group to empty). Unlike
    /// [`Router::subscribe`], a slow reader never misses one: what it has
    /// not read yet waits in memory.
    pub fn watch(&self) -> mpsc::UnboundedReceiver<RouterEvent<K>> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.shared.watchers.lock().push(tx);
        rx
    }

    /// Events about activations, exits, passivations and give-ups, for
    /// onlookers: a reader that falls more than the configured number of
    /// events behind misses the oldest (`Lagged`). What must not be missed
    /// goes through [`Router::watch`].
    pub fn subscribe(&self) -> broadcast::Receiver<RouterEvent<K>> {
        self.shared.events.subscribe()
    }

    /// How many keys have a live incarnation taking messages.
    pub fn live_count(&self) -> usize {
        self.shared
            .slots
            .iter()
            .filter(|entry| entry.value().is_live())
            .count()
    }

    /// Whether `key` has a live incarnation taking messages.
    pub fn is_live(&self, key: &K) -> bool {
        self.shared
            .slots
            .get(key)
            .is_some_and(|slot| slot.is_live())
    }

    /// The live incarnation of `key`, if it takes messages now (to ask
    /// for its passivation, or to watch it).
    pub fn live_actor(&self, key: &K) -> Option<ActorRef<M>> {
        self.shared.slots.get(key).and_then(|slot| slot.live())
    }

    /// The router actor, e.g. to link or monitor it.
    pub fn cell(&self) -> ActorCell {
        self.actor.get_cell()
    }

    /// Stops every activated actor (each within the shutdown deadline) and
    /// then the router.
    pub async fn stop(&self) {
        let _ = self
            .actor
            .stop_and_wait(Some(ExitReason::SHUTDOWN.to_string()), None)
            .await;
    }
}

#[cfg(test)]
#[path = "router_tests.rs"]
mod tests;
