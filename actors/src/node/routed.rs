//! One routed kind of actor: the piece every routed feature is made of.
//!
//! Conversations, house threads, environments, delegations and each actor
//! kind a Rust program registers are actors addressed by a key through a
//! [`Router`] (`runtime::router`) that runs as a child of the node's root
//! supervisor. Each is one [`RoutedKind`]: it holds a [`Routed`] (the
//! router once started, and its names in the tree), says how its router is
//! configured and how one of its actors is activated, and may act on the
//! router's events. [`child`] makes the root's child that starts it; the
//! events reach [`RoutedKind::on_event`] through a lossless watch, so an
//! exit or a give-up someone acts on is never dropped.

use std::sync::{Arc, Weak};
use std::time::Duration;

use ractor::{ActorCell, ActorProcessingErr, ActorRef};
use troupe_runtime::router::{Activator, RouteKey, Router, RouterConfig, RouterError, RouterEvent};
use troupe_runtime::supervise::ChildSpec;

use super::ActorInfo;

/// The actors of one routed kind: its router (once started under the root)
/// and its names in the tree.
pub struct Routed<K, M> {
    /// The root's child that routes them (`threads`, `environments`, …).
    name: Arc<str>,
    /// What each of them is called in the tree (`thread`, `sandbox`, …).
    kind: Arc<str>,
    router: parking_lot::RwLock<Option<Router<K, M>>>,
}

impl<K, M> std::fmt::Debug for Routed<K, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Routed")
            .field("name", &self.name)
            .field("running", &self.router.read().is_some())
            .finish()
    }
}

impl<K: RouteKey + std::fmt::Display, M: ractor::Message> Routed<K, M> {
    /// Actors called `kind`, routed by the root's child `name`; not
    /// running until [`child`] starts them.
    pub fn new(name: impl Into<Arc<str>>, kind: impl Into<Arc<str>>) -> Self {
        Self {
            name: name.into(),
            kind: kind.into(),
            router: parking_lot::RwLock::new(None),
        }
    }

    /// The root's child that routes them.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The router, while it runs.
    ///
    /// # Errors
    ///
    /// [`RouterError::Stopped`] before it started or once it stopped.
    pub fn router(&self) -> Result<Router<K, M>, RouterError> {
        self.router.read().clone().ok_or(RouterError::Stopped)
    }

    /// Sends `msg` to `key`'s actor, activating it (see [`Router::send`]).
    ///
    /// # Errors
    ///
    /// The router's.
    pub fn send(&self, key: K, msg: M) -> Result<(), RouterError> {
        self.router()?.send(key, msg)
    }

    /// Sends `msg` to `key`'s actor; when it has none yet, the caller's
    /// task starts it (see [`Router::send_activating`]).
    ///
    /// # Errors
    ///
    /// The router's.
    pub async fn send_activating(&self, key: K, msg: M) -> Result<(), RouterError> {
        self.router()?.send_activating(key, msg).await
    }

    /// Whether `key` has a live actor.
    pub fn is_live(&self, key: &K) -> bool {
        self.router.read().as_ref().is_some_and(|r| r.is_live(key))
    }

    /// How many of them are live.
    pub fn live_count(&self) -> usize {
        self.router.read().as_ref().map_or(0, Router::live_count)
    }

    /// The keys with a live actor.
    pub fn live(&self) -> Vec<K> {
        self.router
            .read()
            .as_ref()
            .map(Router::live_keys)
            .unwrap_or_default()
    }

    /// The live actor of `key`.
    pub fn live_actor(&self, key: &K) -> Option<ActorRef<M>> {
        self.router.read().as_ref()?.live_actor(key)
    }

    /// Passivates `key` now if `actor` is its live incarnation; `false`
    /// when it did not.
    pub async fn passivate(&self, key: K, actor: ractor::ActorId) -> bool {
        match self.router() {
            Ok(router) => router.passivate(key, actor).await.unwrap_or(false),
            Err(_) => false,
        }
    }

    /// Its live actors as the tree lists them, each under its router.
    pub fn actors(&self) -> Vec<ActorInfo> {
        self.live()
            .into_iter()
            .map(|key| ActorInfo {
                kind: self.kind.to_string(),
                id: key.to_string(),
                parent: Some(self.name.to_string()),
                state: "running".into(),
                restarts: 0,
            })
            .collect()
    }

    /// Stops every actor (each within its deadline) and the router.
    pub async fn stop(&self) {
        let router = self.router.write().take();
        if let Some(router) = router {
            router.stop().await;
        }
    }
}

/// A feature whose actors are routed by key: what the generic piece needs
/// of it.
#[async_trait::async_trait]
pub trait RoutedKind: Send + Sync + 'static {
    /// What addresses one of its actors.
    type Key: RouteKey + std::fmt::Display;
    /// Its actors' message.
    type Msg: ractor::Message;

    /// Its actors and their router.
    fn routed(&self) -> &Routed<Self::Key, Self::Msg>;

    /// How its router activates, restarts and passivates them.
    fn config(&self) -> RouterConfig;

    /// Spawns the actor of `key` linked to `supervisor`; `restarted` when
    /// it replaces an incarnation that failed.
    async fn activate(
        self: Arc<Self>,
        key: Self::Key,
        supervisor: ActorCell,
        restarted: bool,
    ) -> Result<ActorRef<Self::Msg>, ActorProcessingErr>;

    /// What it does before its router starts (loads what its actors need).
    async fn prepare(&self) -> Result<(), ActorProcessingErr> {
        Ok(())
    }

    /// Acts on one of its router's events, every one in order.
    async fn on_event(&self, event: RouterEvent<Self::Key>) {
        let _ = event;
    }
}

/// Activates `F`'s actors for its router.
struct Activate<F> {
    feature: Weak<F>,
}

#[async_trait::async_trait]
impl<F: RoutedKind> Activator<F::Key, F::Msg> for Activate<F> {
    async fn activate(
        &self,
        key: F::Key,
        supervisor: ActorCell,
    ) -> Result<ActorRef<F::Msg>, ActorProcessingErr> {
        self.activate_as(key, supervisor, false).await
    }

    async fn activate_as(
        &self,
        key: F::Key,
        supervisor: ActorCell,
        restarted: bool,
    ) -> Result<ActorRef<F::Msg>, ActorProcessingErr> {
        let feature = self.feature.upgrade().ok_or("the node is stopping")?;
        feature.activate(key, supervisor, restarted).await
    }
}

/// Starts `feature`'s router linked to `supervisor`, and the task that hands
/// each of its events to [`RoutedKind::on_event`].
///
/// # Errors
///
/// When [`RoutedKind::prepare`] fails or the router cannot start.
pub async fn start<F: RoutedKind>(
    feature: &Arc<F>,
    supervisor: ActorCell,
) -> Result<ActorCell, ActorProcessingErr> {
    feature.prepare().await?;
    let activator = Activate {
        feature: Arc::downgrade(feature),
    };
    let router = Router::start_linked(activator, feature.config(), supervisor).await?;
    let cell = router.cell();
    // Lossless: an exit or a give-up is never missed.
    let mut events = router.watch();
    *feature.routed().router.write() = Some(router);
    let weak = Arc::downgrade(feature);
    tokio::spawn(async move {
        while let Some(event) = events.recv().await {
            let Some(feature) = weak.upgrade() else {
                return;
            };
            feature.on_event(event).await;
        }
    });
    Ok(cell)
}

/// The root's child that starts `feature`'s router (and, after a failure,
/// starts it again).
pub fn child<F: RoutedKind>(feature: &Arc<F>) -> ChildSpec {
    let weak = Arc::downgrade(feature);
    ChildSpec::new(feature.routed().name(), move |supervisor: ActorCell| {
        let weak = weak.clone();
        async move {
            let feature = weak.upgrade().ok_or("the node is stopping")?;
            start(&feature, supervisor).await
        }
    })
    // The router stops each of its actors within its own deadline, all at once.
    .shutdown(Duration::from_secs(10))
}
