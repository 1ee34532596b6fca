//! Your own actor kinds on a [`Runtime`]: register a type implementing
//! [`UserActor`] under a kind name, then send to its actors by
//! [`ActorAddress`] — in memory, with a reply, or durably. See
//! `troupe_actors::kinds` for the guarantees and `docs/api.md`.

use std::time::Duration;

use troupe_actors::kinds::{ActorAddress, Kind, KindError, KindOptions, UserActor};
use troupe_runtime::id::MsgId;
use troupe_runtime::protocol::{Address, Envelope, Payload};

use super::{Runtime, RuntimeError};

/// How long [`Runtime::call`] waits for a reply.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);

impl Runtime {
    /// Registers the actor kind `kind` with the default [`KindOptions`]
    /// (restarted after a panic, passivated after 5 minutes idle, not
    /// offered to bots): `factory` makes the value for a key each time its
    /// actor is activated; its state comes from the store.
    ///
    /// # Examples
    ///
    /// ```
    /// use troupe::{ActorError, Context, Runtime, UserActor};
    ///
    /// /// Counts what it is told.
    /// struct Counter;
    ///
    /// #[troupe::async_trait]
    /// impl UserActor for Counter {
    ///     type Msg = u64;
    ///     type Reply = u64;
    ///     type State = u64;
    ///
    ///     async fn handle(&self, cx: &mut Context<'_, Self>, add: u64) -> Result<u64, ActorError> {
    ///         *cx.state_mut() += add;
    ///         cx.save(); // committed when this message ends
    ///         Ok(*cx.state())
    ///     }
    /// }
    ///
    /// # #[tokio::main(flavor = "multi_thread", worker_threads = 2)]
    /// # async fn main() -> anyhow::Result<()> {
    /// let home = tempfile::tempdir()?;
    /// let model = std::sync::Arc::new(troupe::runtime::model::ScriptedProvider::new(vec![]));
    /// let runtime = Runtime::builder().home(home.path()).cwd(home.path()).provider(model).build().await?;
    /// let counters = runtime.register("counter", |_key: &str| Counter).await?;
    /// let apples = counters.address("apples");
    ///
    /// runtime.send(&apples, 2)?;                           // in memory, no answer
    /// assert_eq!(runtime.call(&apples, 3).await?, 5);      // in memory, with the reply
    /// runtime.send_durable(&apples, 10).await?;            // committed before it returns
    /// assert_eq!(runtime.call(&apples, 0).await?, 15);
    /// runtime.shutdown().await;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn register<A: UserActor>(
        &self,
        kind: &str,
        factory: impl Fn(&str) -> A + Send + Sync + 'static,
    ) -> Result<Kind<A>, RuntimeError> {
        self.register_with(kind, KindOptions::default(), factory)
            .await
    }

    /// Registers the actor kind `kind` with `options`: its restart policy,
    /// its passivation, and whether bots may message it
    /// ([`KindOptions::offer`]).
    ///
    /// # Examples
    ///
    /// ```no_run
    /// # use troupe::{ActorError, Context, Runtime, UserActor};
    /// # struct Desk;
    /// # #[troupe::async_trait]
    /// # impl UserActor for Desk {
    /// #     type Msg = String; type Reply = String; type State = Vec<String>;
    /// #     async fn handle(&self, _cx: &mut Context<'_, Self>, m: String) -> Result<String, ActorError> { Ok(m) }
    /// # }
    /// # async fn demo(runtime: Runtime) -> anyhow::Result<()> {
    /// use std::time::Duration;
    /// use troupe::KindOptions;
    /// use troupe::runtime::supervise::Restart;
    ///
    /// let options = KindOptions::default()
    ///     .restart(Restart::Permanent)
    ///     .intensity(5, Duration::from_secs(60))
    ///     .idle_after(Some(Duration::from_secs(30)))
    ///     .offer("the ticket desk: send it the problem in one message");
    /// runtime.register_with("desk", options, |_key: &str| Desk).await?;
    /// # Ok(())
    /// # }
    /// ```
    pub async fn register_with<A: UserActor>(
        &self,
        kind: &str,
        options: KindOptions,
        factory: impl Fn(&str) -> A + Send + Sync + 'static,
    ) -> Result<Kind<A>, RuntimeError> {
        Ok(self.node.register(kind, options, factory).await?)
    }

    /// The kind registered as `name` with type `A`.
    pub fn kind<A: UserActor>(&self, name: &str) -> Result<Kind<A>, RuntimeError> {
        Ok(self.node.kinds().get(name)?)
    }

    /// Sends `msg` in memory to the actor `to`, activating it from its
    /// stored state if needed. No reply; a message not yet handled is lost
    /// if the process stops (use [`Runtime::send_durable`] for one that
    /// must not be). See [`Runtime::register`] for an example.
    pub fn send<A: UserActor>(
        &self,
        to: &ActorAddress<A>,
        msg: A::Msg,
    ) -> Result<(), RuntimeError> {
        Ok(self.node.kinds().get::<A>(to.kind())?.send(to, msg)?)
    }

    /// Sends `msg` in memory to `to` and waits for its reply (at most
    /// 60 s; [`Kind::call`] takes another timeout). The actor's error
    /// comes back as [`RuntimeError::Actor`]. See [`Runtime::register`].
    pub async fn call<A: UserActor>(
        &self,
        to: &ActorAddress<A>,
        msg: A::Msg,
    ) -> Result<A::Reply, RuntimeError> {
        let kind = self.node.kinds().get::<A>(to.kind())?;
        Ok(kind.call(to, msg, CALL_TIMEOUT).await?)
    }

    /// Sends `msg` to `to` through the durable mailbox: committed before
    /// this returns its delivery id; the actor applies it once — in the
    /// transaction that consumes it and saves its state — even if the
    /// process is killed in between (it is delivered again when the kind
    /// is registered after the restart). See [`Runtime::register`].
    ///
    /// In a cluster, an actor whose kind this node does not register but
    /// another node does is that node's: the message is committed here and
    /// forwarded to it, which applies it once (docs/cluster.md).
    pub async fn send_durable<A: UserActor>(
        &self,
        to: &ActorAddress<A>,
        msg: A::Msg,
    ) -> Result<MsgId, RuntimeError> {
        let address = to.to_address();
        match self.node.kinds().get::<A>(to.kind()) {
            Ok(kind) => Ok(kind.send_durable(to, &msg).await?),
            // A kind another node of the cluster registered: committed
            // here, then forwarded through the outbox to that node, which
            // commits it before it acknowledges (docs/cluster.md).
            Err(KindError::Unknown(_)) if self.node.node_of(&address).is_some() => {
                let data = serde_json::to_value(&msg).map_err(|e| KindError::Store {
                    address: to.to_string(),
                    detail: e.to_string(),
                })?;
                let envelope = Envelope {
                    id: MsgId::new(),
                    from: Address::Service("program".into()),
                    to: address,
                    body: Payload::Custom {
                        name: to.kind().to_string(),
                        data,
                    },
                    sent_at: chrono::Utc::now(),
                };
                Ok(self.node.deliver(envelope).await?)
            }
            Err(e) => Err(e.into()),
        }
    }
}
