//! The registered kinds of a node: each one's router under the root
//! supervisor, its typed handle ([`Kind`]), and the node's view of all of
//! them ([`Kinds`]): where envelopes to `actor:KIND/KEY` go, what the tree
//! lists, which kinds bots may message.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use dashmap::DashMap;
use futures::future::BoxFuture;
use ractor::{Actor, ActorCell, ActorProcessingErr, ActorRef};
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, AgentEvent, Envelope, Payload};
use troupe_runtime::router::{Router, RouterConfig, RouterError, RouterEvent};
use troupe_runtime::store::mailbox;
use troupe_runtime::supervise::{Backoff, Intensity, Restart};

use super::host::{Host, HostArgs, HostMsg};
use super::houses::{self, HouseKeys};
use super::{check_name, state, ActorAddress, KindError, UserActor};
use crate::events::ActorName;
use crate::node::routed::{self, Routed, RoutedKind};
use crate::node::{ActorInfo, Branch, Node, Roster, Route, WeakNode};

/// The key a bare kind name reaches (`message_agent` with target `desk`).
pub const DEFAULT_KEY: &str = "main";

/// The names of the root's own children, which no kind may take.
const RESERVED: &[&str] = &[
    "node",
    "conversations",
    "threads",
    "environments",
    "post_office",
    "delegations",
    "commands",
    "reviewer",
    "scheduler",
];

/// How a kind's actors are supervised and passivated, and whether bots
/// may message them.
#[derive(Debug, Clone)]
pub struct KindOptions {
    restart: Restart,
    intensity: Intensity,
    backoff: Backoff,
    idle_after: Option<Duration>,
    offer: Option<String>,
    house_keys: HouseKeys,
}

impl Default for KindOptions {
    /// Restarted after a panic or an error exit, at most 3 times in 5 s
    /// per key; passivated after 5 minutes idle; not offered to bots (and
    /// once offered, each house with its own keys).
    fn default() -> Self {
        Self {
            restart: Restart::Transient,
            intensity: Intensity::default(),
            backoff: Backoff::None,
            idle_after: Some(Duration::from_secs(300)),
            offer: None,
            house_keys: HouseKeys::PerHouse,
        }
    }
}

impl KindOptions {
    /// Which exits restart an actor (`Temporary`: none; a panic then ends
    /// it, and its next message activates it anew).
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Past `max_restarts` within `within`, the supervisor gives up on a
    /// key: its buffered messages are dropped (durable ones wait in the
    /// mailbox) and its next message activates it anew.
    pub fn intensity(mut self, max_restarts: u32, within: Duration) -> Self {
        self.intensity = Intensity::new(max_restarts, within);
        self
    }

    /// The wait before a restart.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Passivate an actor idle this long; `None` keeps it live.
    pub fn idle_after(mut self, idle: Option<Duration>) -> Self {
        self.idle_after = idle;
        self
    }

    /// Offers the kind to bots: it is in their roster with `description`
    /// and a `message_agent` target (`KIND` reaches key `main`,
    /// `KIND/KEY` another key). Say in the description what to send.
    /// Offered, it is offered to every bot: the home's and every
    /// house's ([`KindOptions::house_keys`] says which keys a house's
    /// bots reach).
    pub fn offer(mut self, description: impl Into<String>) -> Self {
        self.offer = Some(description.into());
        self
    }

    /// Whether the houses' bots share the kind's actors or each house
    /// has its own keys (the default): see [`HouseKeys`].
    pub fn house_keys(mut self, keys: HouseKeys) -> Self {
        self.house_keys = keys;
        self
    }
}

/// What one kind keeps: its name, options, factory and router.
struct KindInner<A: UserActor> {
    name: Arc<str>,
    options: KindOptions,
    factory: Box<dyn Fn(&str) -> A + Send + Sync>,
    routed: Routed<Arc<str>, HostMsg<A>>,
    node: WeakNode,
    restarts: DashMap<Arc<str>, u32>,
}

/// A registered kind: sends to its actors by address. Cheap to clone.
pub struct Kind<A: UserActor> {
    inner: Arc<KindInner<A>>,
}

impl<A: UserActor> Clone for Kind<A> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<A: UserActor> std::fmt::Debug for Kind<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kind")
            .field("name", &self.inner.name)
            .finish()
    }
}

impl<A: UserActor> Kind<A> {
    /// Its name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The address of its actor `key`.
    pub fn address(&self, key: impl Into<Arc<str>>) -> ActorAddress<A> {
        ActorAddress::new(Arc::clone(&self.inner.name), key)
    }

    fn router(&self, to: &ActorAddress<A>) -> Result<Router<Arc<str>, HostMsg<A>>, KindError> {
        if to.kind != self.inner.name {
            return Err(KindError::Unknown(to.kind.to_string()));
        }
        self.inner
            .routed
            .router()
            .map_err(|_| unreachable(to, "its kind's supervisor is not running"))
    }

    /// Sends `msg` in memory to the actor `to`, activating it if needed.
    /// No answer; lost if the process stops before it is handled.
    pub fn send(&self, to: &ActorAddress<A>, msg: A::Msg) -> Result<(), KindError> {
        self.router(to)?
            .send(Arc::clone(&to.key), HostMsg::Tell(msg))
            .map_err(|e| unreachable(to, e))
    }

    /// Sends `msg` in memory to `to` and waits at most `timeout` for its
    /// reply.
    pub async fn call(
        &self,
        to: &ActorAddress<A>,
        msg: A::Msg,
        timeout: Duration,
    ) -> Result<A::Reply, KindError> {
        let answer = self
            .router(to)?
            .call(Arc::clone(&to.key), |port| HostMsg::Ask(msg, port), timeout)
            .await
            .map_err(|e| unreachable(to, e))?;
        answer.map_err(|error| KindError::Failed {
            address: to.to_string(),
            error,
        })
    }

    /// Sends `msg` to `to` through the durable mailbox: committed before
    /// this returns its delivery id, then handed over; applied once, in
    /// the transaction that saves the actor's state, even across a crash.
    pub async fn send_durable(
        &self,
        to: &ActorAddress<A>,
        msg: &A::Msg,
    ) -> Result<MsgId, KindError> {
        let router = self.router(to)?;
        let node = self
            .inner
            .node
            .upgrade()
            .ok_or_else(|| unreachable(to, "the node has stopped"))?;
        let data = serde_json::to_value(msg).map_err(|e| KindError::Store {
            address: to.to_string(),
            detail: e.to_string(),
        })?;
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Service("program".into()),
            to: to.to_address(),
            body: Payload::Custom {
                name: self.inner.name.to_string(),
                data,
            },
            sent_at: chrono::Utc::now(),
        };
        let id = node
            .store()
            .send(envelope.clone())
            .await
            .map_err(|e| KindError::Store {
                address: to.to_string(),
                detail: e.to_string(),
            })?;
        // Committed: if the hand-over fails, the post office or the next
        // activation delivers it.
        let _ = router.send(Arc::clone(&to.key), HostMsg::Durable(Box::new(envelope)));
        Ok(id)
    }

    /// Whether actor `key` is live now.
    pub fn is_live(&self, key: &str) -> bool {
        self.inner.routed.is_live(&Arc::from(key))
    }

    /// How many of its actors are live now.
    pub fn live_count(&self) -> usize {
        self.inner.routed.live_count()
    }

    /// Passivates actor `key` now if it is live (its mailbox is handled
    /// first); `false` when it was not live. Its next message activates it
    /// from its stored state.
    pub async fn passivate(&self, key: &str) -> bool {
        let key: Arc<str> = Arc::from(key);
        let Some(actor) = self.inner.routed.live_actor(&key) else {
            return false;
        };
        self.inner.routed.passivate(key, actor.get_id()).await
    }

    /// How often actor `key` was restarted in this process.
    pub fn restarts(&self, key: &str) -> u32 {
        self.inner.restarts.get(key).map_or(0, |r| *r)
    }
}

fn unreachable<A>(to: &ActorAddress<A>, detail: impl std::fmt::Display) -> KindError {
    KindError::Unreachable {
        address: to.to_string(),
        detail: detail.to_string(),
    }
}

/// A kind as the node sees it, whatever its type.
trait AnyKind: Send + Sync + 'static {
    fn offer(&self) -> Option<&str>;
    fn house_keys(&self) -> HouseKeys;
    fn deliver(&self, key: String, envelope: Envelope) -> Result<(), String>;
    fn live(&self) -> Vec<ActorInfo>;
    fn stop(&self) -> BoxFuture<'_, ()>;
    fn typed(self: Arc<Self>) -> Arc<dyn Any + Send + Sync>;
}

impl<A: UserActor> AnyKind for KindInner<A> {
    fn offer(&self) -> Option<&str> {
        self.options.offer.as_deref()
    }

    fn house_keys(&self) -> HouseKeys {
        self.options.house_keys
    }

    fn deliver(&self, key: String, envelope: Envelope) -> Result<(), String> {
        self.routed
            .send(Arc::from(key), HostMsg::Durable(Box::new(envelope)))
            .map_err(|e| format!("actor kind `{}` is not running: {e}", self.name))
    }

    fn live(&self) -> Vec<ActorInfo> {
        self.routed
            .live()
            .into_iter()
            .map(|key| ActorInfo {
                kind: self.name.to_string(),
                id: format!("{}/{key}", self.name),
                parent: Some(self.name.to_string()),
                state: "running".into(),
                restarts: self.restarts.get(&key).map_or(0, |r| *r),
            })
            .collect()
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(self.routed.stop())
    }

    fn typed(self: Arc<Self>) -> Arc<dyn Any + Send + Sync> {
        self
    }
}

/// The node's registered kinds.
#[derive(Default)]
pub struct Kinds {
    kinds: DashMap<String, Arc<dyn AnyKind>>,
    /// How many of them are offered to bots (kinds are never unregistered
    /// once started): every new conversation asks whether any is.
    offered: std::sync::atomic::AtomicUsize,
}

impl std::fmt::Debug for Kinds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Kinds")
            .field("kinds", &self.kinds.len())
            .finish()
    }
}

impl Kinds {
    /// The kind registered as `name` with type `A`.
    pub fn get<A: UserActor>(&self, name: &str) -> Result<Kind<A>, KindError> {
        let found = self
            .kinds
            .get(name)
            .map(|k| Arc::clone(k.value()))
            .ok_or_else(|| KindError::Unknown(name.to_string()))?;
        let inner = found
            .typed()
            .downcast::<KindInner<A>>()
            .map_err(|_| KindError::Unknown(name.to_string()))?;
        Ok(Kind { inner })
    }

    /// Whether a kind is registered as `name`.
    pub fn contains(&self, name: &str) -> bool {
        self.kinds.contains_key(name)
    }

    /// The registered kinds' names, sorted.
    pub fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = self.kinds.iter().map(|k| k.key().clone()).collect();
        names.sort();
        names
    }

    /// The kinds offered to bots: their names and descriptions.
    pub fn offered(&self) -> Vec<(String, String)> {
        let mut offered: Vec<(String, String)> = self
            .kinds
            .iter()
            .filter_map(|k| k.offer().map(|d| (k.key().clone(), d.to_string())))
            .collect();
        offered.sort();
        offered
    }

    /// The address a bot's `message_agent` target names, when it names an
    /// offered kind (`desk` or `desk/KEY`); `house` is the bot's house
    /// when it works for one other than the home's own, whose keys it
    /// reaches ([`HouseKeys`]).
    pub fn target(&self, target: &str, house: Option<&str>) -> Option<Address> {
        let (kind, key) = target.split_once('/').unwrap_or((target, DEFAULT_KEY));
        let keys = self
            .kinds
            .get(kind)
            .filter(|k| k.offer().is_some())
            .map(|k| k.house_keys())?;
        (!key.trim().is_empty()).then(|| Address::Actor {
            kind: kind.to_string(),
            key: houses::reached(keys, house, key),
        })
    }
}

#[async_trait::async_trait]
impl Route for Kinds {
    async fn deliver(&self, envelope: Envelope) -> Result<(), String> {
        let Address::Actor { kind, key } = &envelope.to else {
            return Err(format!("{} is not a registered actor", envelope.to));
        };
        let found = self.kinds.get(kind).map(|k| Arc::clone(k.value()));
        match found {
            Some(found) => found.deliver(key.clone(), envelope),
            // It waits in the mailbox until the program registers the kind.
            None => Err(format!(
                "no actor kind `{kind}` is registered in this process yet"
            )),
        }
    }
}

impl Roster for Kinds {
    fn is_empty(&self) -> bool {
        self.offered.load(std::sync::atomic::Ordering::Relaxed) == 0
    }

    fn entries(&self) -> Vec<String> {
        self.offered()
            .into_iter()
            .map(|(name, description)| {
                format!("- {name}: {description} (an actor: target `{name}`, or `{name}/KEY` for another of its kind)")
            })
            .collect()
    }
}

impl Branch for Kinds {
    fn live(&self) -> Vec<ActorInfo> {
        let kinds: Vec<Arc<dyn AnyKind>> =
            self.kinds.iter().map(|k| Arc::clone(k.value())).collect();
        kinds.iter().flat_map(|k| k.live()).collect()
    }

    fn stop(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            let kinds: Vec<Arc<dyn AnyKind>> =
                self.kinds.iter().map(|k| Arc::clone(k.value())).collect();
            for kind in kinds {
                kind.stop().await;
            }
        })
    }
}

impl Node {
    /// The node's registered actor kinds.
    pub fn kinds(&self) -> Arc<Kinds> {
        Arc::clone(&self.features().kinds)
    }

    /// Registers the actor kind `name` of type `A`: `factory` makes the
    /// value for a key at each activation; `options` says how its actors
    /// are restarted, passivated, and offered to bots. Its supervisor
    /// joins the root; durable messages that waited for the kind (sent
    /// before a restart of the process) are handed over now.
    pub async fn register<A: UserActor>(
        &self,
        name: &str,
        options: KindOptions,
        factory: impl Fn(&str) -> A + Send + Sync + 'static,
    ) -> Result<Kind<A>, KindError> {
        check_name(name)?;
        if RESERVED.contains(&name) {
            return Err(KindError::BadName {
                name: name.to_string(),
                why: "the node's own supervisor has a child of that name".into(),
            });
        }
        if options.offer.is_some() && self.bot(name).is_ok() {
            return Err(KindError::BadName {
                name: name.to_string(),
                why: "a bot has that name, and bots would message it instead".into(),
            });
        }
        let kinds = self.kinds();
        let inner = Arc::new(KindInner {
            name: Arc::from(name),
            options,
            factory: Box::new(factory),
            routed: Routed::new(name, name),
            node: self.downgrade(),
            restarts: DashMap::new(),
        });
        match kinds.kinds.entry(name.to_string()) {
            dashmap::mapref::entry::Entry::Occupied(_) => {
                return Err(KindError::Exists(name.to_string()))
            }
            dashmap::mapref::entry::Entry::Vacant(entry) => {
                entry.insert(inner.clone());
            }
        }
        if let Err(e) = self.supervise(routed::child(&inner)).await {
            kinds.kinds.remove(name);
            return Err(KindError::Unreachable {
                address: name.to_string(),
                detail: e.to_string(),
            });
        }
        if inner.options.offer.is_some() {
            kinds
                .offered
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            self.roster_changed();
        }
        if let Some(remote) = self.remote() {
            remote.kinds_changed();
        }
        let prefix = format!("actor:{name}/");
        let waiting = self
            .store()
            .read(move |c| mailbox::pending_prefixed(c, &prefix, usize::MAX))
            .await
            .unwrap_or_default();
        for envelope in waiting {
            if let Address::Actor { key, .. } = &envelope.to {
                let _ = inner.deliver(key.clone(), envelope.clone());
            }
        }
        Ok(Kind { inner })
    }
}

/// A kind's actors are activated from their stored state, restarted and
/// passivated as its options say; their router's events are published as
/// the node's actor events.
#[async_trait::async_trait]
impl<A: UserActor> RoutedKind for KindInner<A> {
    type Key = Arc<str>;
    type Msg = HostMsg<A>;

    fn routed(&self) -> &Routed<Arc<str>, HostMsg<A>> {
        &self.routed
    }

    fn config(&self) -> RouterConfig {
        let options = &self.options;
        RouterConfig {
            idle_after: options.idle_after,
            restart: options.restart,
            intensity: options.intensity,
            backoff: options.backoff,
            shutdown: Duration::from_secs(5),
            events: 1024,
            report_activations: true,
        }
    }

    async fn activate(
        self: Arc<Self>,
        key: Arc<str>,
        supervisor: ActorCell,
        _restarted: bool,
    ) -> Result<ActorRef<HostMsg<A>>, ActorProcessingErr> {
        let kind = self;
        let node = kind.node.upgrade().ok_or("the node is stopping")?;
        let address = Address::Actor {
            kind: kind.name.to_string(),
            key: key.to_string(),
        };
        let stored = node.store().read(move |c| state::load(c, &address)).await?;
        let state = match stored.state {
            Some(json) => serde_json::from_str(&json).map_err(|e| {
                format!(
                    "the stored state of actor {}/{key} does not decode as its kind's state ({e}); \
                     change the state type compatibly (serde defaults) or remove the key",
                    kind.name
                )
            })?,
            None => A::State::default(),
        };
        let args = HostArgs {
            actor: (kind.factory)(&key),
            kind: Arc::clone(&kind.name),
            key,
            state,
            pending: stored.pending,
            node: node.downgrade(),
        };
        let (actor, _) = Actor::spawn_linked(None, Host::<A>::new(), args, supervisor).await?;
        Ok(actor)
    }

    async fn on_event(&self, event: RouterEvent<Arc<str>>) {
        let kind = self;
        let Some(node) = kind.node.upgrade() else {
            return;
        };
        let (key, event) = describe(kind, event);
        let actor = ActorName {
            kind: kind.name.to_string(),
            key: key.to_string(),
        };
        node.publish_actor(actor, event);
    }
}

/// The key a router event is about, and the actor event it stands for.
fn describe<A: UserActor>(
    kind: &KindInner<A>,
    event: RouterEvent<Arc<str>>,
) -> (Arc<str>, AgentEvent) {
    let id = |key: &str| format!("{}/{key}", kind.name);
    match event {
        RouterEvent::Activated {
            key,
            restarted: false,
        } => {
            let event = AgentEvent::ActorStarted {
                kind: kind.name.to_string(),
                id: id(&key),
                parent: Some(kind.name.to_string()),
            };
            (key, event)
        }
        RouterEvent::Activated {
            key,
            restarted: true,
        } => {
            let restarts = {
                let mut count = kind.restarts.entry(Arc::clone(&key)).or_insert(0);
                *count += 1;
                *count
            };
            let event = AgentEvent::ActorRestarted {
                kind: kind.name.to_string(),
                id: id(&key),
                parent: Some(kind.name.to_string()),
                restarts,
                reason: "its last incarnation failed".into(),
            };
            (key, event)
        }
        RouterEvent::Exited { key, reason } => {
            let event = AgentEvent::ActorStopped {
                kind: kind.name.to_string(),
                id: id(&key),
                reason: reason.to_string(),
            };
            (key, event)
        }
        RouterEvent::Passivated { key } => {
            let event = AgentEvent::ActorStopped {
                kind: kind.name.to_string(),
                id: id(&key),
                reason: "passivated".into(),
            };
            (key, event)
        }
        RouterEvent::GaveUp { key, reason, .. } => {
            let event = AgentEvent::ActorStopped {
                kind: kind.name.to_string(),
                id: id(&key),
                reason: format!("given up by its supervisor: {reason}"),
            };
            (key, event)
        }
    }
}

impl From<RouterError> for KindError {
    fn from(e: RouterError) -> Self {
        KindError::Unreachable {
            address: String::new(),
            detail: e.to_string(),
        }
    }
}
