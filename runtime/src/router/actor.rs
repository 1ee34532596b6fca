//! The router actor: the supervisor of every activated actor.
//!
//! It runs activations (off its own mailbox, in tasks), reacts to exits
//! (restart, re-activate, retire, give up) and sweeps idle keys. Senders
//! never wait on it: they only post `Activate` for a key that had no slot.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use ractor::concurrency::JoinHandle;
use ractor::{Actor, ActorId, ActorProcessingErr, ActorRef, RpcReplyPort, SupervisionEvent};

use super::slot::Slot;
use super::{Activator, RouteKey, RouterConfig, RouterEvent, Shared};
use crate::hash::FastMap;
use crate::supervise::{stop_child, ExitReason, RestartLog};

/// Ticks of the idle sweep per `idle_after`.
const TICKS_PER_IDLE: u64 = 4;

pub(crate) enum RouterMsg<K, M> {
    /// A sender created the slot of `K`: activate it.
    Activate(K),
    /// An activation task finished.
    Activated {
        key: K,
        result: Result<ActorRef<M>, String>,
        restarted: bool,
    },
    /// A restart backoff elapsed.
    RestartDue(K),
    /// Sweep idle keys.
    Tick,
    /// A passivating actor had its shutdown deadline: kill it if it still runs.
    PassivationDeadline(K, ActorId),
    /// The actor `ActorId` of `K` finds itself idle: passivate it now.
    Passivate(K, ActorId, RpcReplyPort<bool>),
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl<K: Send + 'static, M: ractor::Message> ractor::Message for RouterMsg<K, M> {}

/// Runs `activator` for `key` in a task and tells `router` what came of it.
/// If the router is gone by then, the new actor is stopped.
pub(crate) fn spawn_activation<K: RouteKey, M: ractor::Message>(
    activator: Arc<dyn Activator<K, M>>,
    router: ActorRef<RouterMsg<K, M>>,
    key: K,
    restarted: bool,
) {
    tokio::spawn(async move {
        let result = activator
            .activate_as(key.clone(), router.get_cell(), restarted)
            .await
            .map_err(|e| e.to_string());
        let started = result.as_ref().ok().cloned();
        let sent = router.send_message(RouterMsg::Activated {
            key,
            result,
            restarted,
        });
        if let (Err(_), Some(actor)) = (sent, started) {
            actor.stop(Some(ExitReason::SHUTDOWN.to_string()));
        }
    });
}

pub(crate) struct RouterArgs<K, M> {
    pub(crate) shared: Arc<Shared<K, M>>,
    pub(crate) activator: Arc<dyn Activator<K, M>>,
    pub(crate) config: RouterConfig,
}

pub(crate) struct RouterActor<K, M>(PhantomData<fn() -> (K, M)>);

impl<K, M> RouterActor<K, M> {
    pub(crate) fn new() -> Self {
        Self(PhantomData)
    }
}

struct KeyState<M> {
    actor: Option<ActorRef<M>>,
    activating: bool,
    passivating: bool,
    log: RestartLog,
}

impl<M> Default for KeyState<M> {
    fn default() -> Self {
        Self {
            actor: None,
            activating: false,
            passivating: false,
            log: RestartLog::default(),
        }
    }
}

pub(crate) struct RouterState<K, M> {
    args: RouterArgs<K, M>,
    keys: FastMap<K, KeyState<M>>,
    by_id: FastMap<ActorId, K>,
    /// Exits that arrived before the activation that spawned the actor
    /// reported back (supervision events overtake ordinary messages).
    orphans: FastMap<ActorId, ExitReason>,
    ticker: Option<JoinHandle<()>>,
}

impl<K: RouteKey, M: ractor::Message> RouterState<K, M> {
    fn slot(&self, key: &K) -> Option<Arc<Slot<M>>> {
        self.args.shared.slots.get(key).map(|slot| slot.clone())
    }

    fn emit(&self, event: RouterEvent<K>) {
        self.args.shared.emit(event);
    }

    fn activate(&mut self, myself: &ActorRef<RouterMsg<K, M>>, key: K, restarted: bool) {
        self.keys.entry(key.clone()).or_default().activating = true;
        spawn_activation(self.args.activator.clone(), myself.clone(), key, restarted);
    }

    /// Forgets `key` if nothing waits for it, else activates it again.
    fn retire_or_reactivate(&mut self, myself: &ActorRef<RouterMsg<K, M>>, key: K) {
        let removed = self
            .args
            .shared
            .slots
            .remove_if(&key, |_, slot| slot.close(false).0)
            .is_some();
        if removed || self.slot(&key).is_none() {
            self.keys.remove(&key);
        } else {
            self.activate(myself, key, false);
        }
    }

    fn give_up(&mut self, key: K, reason: ExitReason) {
        let mut dropped = 0;
        self.args.shared.slots.remove_if(&key, |_, slot| {
            dropped = slot.close(true).1;
            true
        });
        self.keys.remove(&key);
        self.emit(RouterEvent::GaveUp {
            key,
            reason,
            dropped,
        });
    }

    /// Restarts `key` after a failure, within its intensity and after the backoff.
    fn restart(&mut self, myself: &ActorRef<RouterMsg<K, M>>, key: K, reason: ExitReason) {
        let config = &self.args.config;
        let (intensity, backoff) = (config.intensity, config.backoff);
        let Some(state) = self.keys.get_mut(&key) else {
            return;
        };
        if !state.log.record(intensity) {
            self.give_up(key, reason);
            return;
        }
        let delay = backoff.delay(state.log.recent());
        if delay.is_zero() {
            self.activate(myself, key, true);
        } else {
            myself.send_after(delay, move || RouterMsg::RestartDue(key));
        }
    }

    fn on_exit(&mut self, myself: &ActorRef<RouterMsg<K, M>>, id: ActorId, reason: ExitReason) {
        let Some(key) = self.by_id.remove(&id) else {
            self.orphans.insert(id, reason);
            return;
        };
        let Some(state) = self.keys.get_mut(&key) else {
            return;
        };
        if state.actor.as_ref().map(|a| a.get_id()) != Some(id) {
            return;
        }
        state.actor = None;
        let passivating = std::mem::replace(&mut state.passivating, false);
        self.emit(RouterEvent::Exited {
            key: key.clone(),
            reason: reason.clone(),
        });
        let Some(slot) = self.slot(&key) else {
            self.keys.remove(&key);
            return;
        };
        // From here on, senders buffer until the next incarnation.
        slot.hold();
        if passivating {
            self.emit(RouterEvent::Passivated { key: key.clone() });
            self.retire_or_reactivate(myself, key);
        } else if self.args.config.restart.restarts_after(&reason) {
            self.restart(myself, key, reason);
        } else {
            self.retire_or_reactivate(myself, key);
        }
    }

    fn on_activated(
        &mut self,
        myself: &ActorRef<RouterMsg<K, M>>,
        key: K,
        result: Result<ActorRef<M>, String>,
        restarted: bool,
    ) {
        let slot = self.slot(&key);
        if slot.is_some() && !self.keys.contains_key(&key) {
            // Activated straight from a sender (its first message).
            self.keys.insert(key.clone(), KeyState::default());
        }
        let Some(state) = self.keys.get_mut(&key) else {
            if let Ok(actor) = result {
                actor.stop(Some(ExitReason::SHUTDOWN.to_string()));
            }
            return;
        };
        state.activating = false;
        match result {
            Ok(actor) => {
                let id = actor.get_id();
                let Some(slot) = slot else {
                    actor.stop(Some(ExitReason::SHUTDOWN.to_string()));
                    self.keys.remove(&key);
                    return;
                };
                state.actor = Some(actor.clone());
                self.by_id.insert(id, key.clone());
                slot.go_live(&actor);
                if self.args.config.report_activations {
                    self.emit(RouterEvent::Activated {
                        key: key.clone(),
                        restarted,
                    });
                }
                if let Some(reason) = self.orphans.remove(&id) {
                    self.on_exit(myself, id, reason);
                }
            }
            Err(error) => {
                let reason = ExitReason::Failed(error);
                if restarted {
                    self.restart(myself, key, reason);
                } else {
                    self.give_up(key, reason);
                }
            }
        }
    }

    /// Passivates `key` if `id` is its live incarnation and it is neither
    /// activating nor passivating already; says whether it did.
    fn passivate(&mut self, myself: &ActorRef<RouterMsg<K, M>>, key: K, id: ActorId) -> bool {
        let Some(slot) = self.slot(&key) else {
            return false;
        };
        let Some(state) = self.keys.get_mut(&key) else {
            return false;
        };
        let current = state.actor.as_ref().map(|a| a.get_id());
        if state.activating || state.passivating || current != Some(id) {
            return false;
        }
        let Some(actor) = slot.hold() else {
            return false;
        };
        state.passivating = true;
        let _ = actor.drain();
        let deadline = self.args.config.shutdown;
        myself.send_after(deadline, move || RouterMsg::PassivationDeadline(key, id));
        true
    }

    fn sweep(&mut self, myself: &ActorRef<RouterMsg<K, M>>) {
        let now = self.args.shared.epoch.fetch_add(1, Ordering::Relaxed) + 1;
        let idle: Vec<(K, Arc<Slot<M>>)> = self
            .args
            .shared
            .slots
            .iter()
            .filter(|entry| {
                now.saturating_sub(entry.last_used.load(Ordering::Relaxed)) > TICKS_PER_IDLE
            })
            .map(|entry| (entry.key().clone(), entry.value().clone()))
            .collect();
        for (key, slot) in idle {
            let Some(state) = self.keys.get_mut(&key) else {
                continue;
            };
            if state.activating || state.passivating {
                continue;
            }
            if let Some(actor) = slot.hold() {
                state.passivating = true;
                // Drain: what is already in its mailbox is handled first.
                let _ = actor.drain();
                let id = actor.get_id();
                let deadline = self.args.config.shutdown;
                myself.send_after(deadline, move || RouterMsg::PassivationDeadline(key, id));
            }
        }
    }
}

impl<K: RouteKey, M: ractor::Message> Actor for RouterActor<K, M> {
    type Msg = RouterMsg<K, M>;
    type State = RouterState<K, M>;
    type Arguments = RouterArgs<K, M>;

    async fn pre_start(
        &self,
        myself: ActorRef<Self::Msg>,
        args: RouterArgs<K, M>,
    ) -> Result<Self::State, ActorProcessingErr> {
        let ticker = args.config.idle_after.map(|idle| {
            let period = (idle / TICKS_PER_IDLE as u32).max(std::time::Duration::from_millis(1));
            // Not `send_interval`: it gives up while the actor is still starting.
            let router = myself.clone();
            tokio::spawn(async move {
                let mut interval = tokio::time::interval(period);
                interval.tick().await;
                loop {
                    interval.tick().await;
                    if router.send_message(RouterMsg::Tick).is_err() {
                        break;
                    }
                }
            })
        });
        Ok(RouterState {
            args,
            keys: FastMap::default(),
            by_id: FastMap::default(),
            orphans: FastMap::default(),
            ticker,
        })
    }

    async fn post_stop(
        &self,
        _myself: ActorRef<Self::Msg>,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some(ticker) = state.ticker.take() {
            ticker.abort();
        }
        let actors: Vec<ActorRef<M>> = state
            .keys
            .values_mut()
            .filter_map(|key| key.actor.take())
            .collect();
        for entry in state.args.shared.slots.iter() {
            entry.close(true);
        }
        state.args.shared.slots.clear();
        let deadline = state.args.config.shutdown;
        futures::future::join_all(
            actors
                .iter()
                .map(|actor| async move { stop_child(&actor.get_cell(), deadline).await }),
        )
        .await;
        Ok(())
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            RouterMsg::Activate(key) => {
                let busy = state
                    .keys
                    .get(&key)
                    .is_some_and(|k| k.activating || k.actor.is_some());
                if !busy {
                    state.activate(&myself, key, false);
                }
            }
            RouterMsg::Activated {
                key,
                result,
                restarted,
            } => state.on_activated(&myself, key, result, restarted),
            RouterMsg::RestartDue(key) => {
                let due = state
                    .keys
                    .get(&key)
                    .is_some_and(|k| !k.activating && k.actor.is_none());
                if due {
                    state.activate(&myself, key, true);
                }
            }
            RouterMsg::Tick => state.sweep(&myself),
            RouterMsg::Passivate(key, id, reply) => {
                let done = state.passivate(&myself, key, id);
                let _ = reply.send(done);
            }
            RouterMsg::PassivationDeadline(key, id) => {
                if let Some(k) = state.keys.get(&key) {
                    if let Some(actor) = &k.actor {
                        if k.passivating && actor.get_id() == id {
                            actor.kill();
                        }
                    }
                }
            }
        }
        Ok(())
    }

    async fn handle_supervisor_evt(
        &self,
        myself: ActorRef<Self::Msg>,
        event: SupervisionEvent,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        if let Some((cell, reason)) = ExitReason::from_event(&event) {
            state.on_exit(&myself, cell.get_id(), reason);
        }
        Ok(())
    }
}
