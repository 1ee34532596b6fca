//! What a supervisor is told to run, and what it reports.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use ractor::{Actor, ActorCell, ActorProcessingErr};
use tokio::sync::mpsc::UnboundedSender;

use super::{Backoff, ExitReason, Intensity, Restart, Strategy};

/// The future a child factory returns: the started child's cell.
pub type StartFuture = Pin<Box<dyn Future<Output = Result<ActorCell, ActorProcessingErr>> + Send>>;

type Factory = Arc<dyn Fn(ActorCell) -> StartFuture + Send + Sync>;

/// One child of a supervisor: its id, restart kind, shutdown deadline, and a
/// factory that spawns a fresh actor linked to the supervisor it is given.
#[derive(Clone)]
pub struct ChildSpec {
    /// The child's id, unique among its siblings.
    pub id: String,
    /// Whether it is restarted after it exits.
    pub restart: Restart,
    /// How long a graceful stop may take before the child is killed.
    pub shutdown: Duration,
    factory: Factory,
}

impl std::fmt::Debug for ChildSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChildSpec")
            .field("id", &self.id)
            .field("restart", &self.restart)
            .field("shutdown", &self.shutdown)
            .finish_non_exhaustive()
    }
}

impl ChildSpec {
    /// A permanent child with a 5 s shutdown deadline, started by `start`,
    /// which must spawn the actor linked to the supervisor cell it is given
    /// (`Actor::spawn_linked(None, actor, args, supervisor)`).
    pub fn new<F, Fut>(id: impl Into<String>, start: F) -> Self
    where
        F: Fn(ActorCell) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<ActorCell, ActorProcessingErr>> + Send + 'static,
    {
        Self {
            id: id.into(),
            restart: Restart::Permanent,
            shutdown: Duration::from_secs(5),
            factory: Arc::new(move |sup| Box::pin(start(sup))),
        }
    }

    /// A child spawned from the actor and arguments `make` returns each time.
    pub fn actor<A, F>(id: impl Into<String>, make: F) -> Self
    where
        A: Actor,
        F: Fn() -> (A, A::Arguments) + Send + Sync + 'static,
    {
        let make = Arc::new(make);
        Self::new(id, move |sup| {
            let (actor, args) = make();
            async move {
                let (actor_ref, _) = A::spawn_linked(None, actor, args, sup).await?;
                Ok(actor_ref.get_cell())
            }
        })
    }

    /// Sets the restart kind.
    pub fn restart(mut self, restart: Restart) -> Self {
        self.restart = restart;
        self
    }

    /// Sets the shutdown deadline.
    pub fn shutdown(mut self, deadline: Duration) -> Self {
        self.shutdown = deadline;
        self
    }

    /// Spawns a fresh incarnation linked to `supervisor`.
    pub fn start(&self, supervisor: ActorCell) -> StartFuture {
        (self.factory)(supervisor)
    }
}

/// A supervisor's policy and children: the arguments of [`super::Supervisor`].
#[derive(Debug, Clone)]
pub struct SupervisorSpec {
    /// Which children restart together.
    pub strategy: Strategy,
    /// The restart limit; past it the supervisor fails.
    pub intensity: Intensity,
    /// The wait before a restart.
    pub backoff: Backoff,
    /// The children, in start order.
    pub children: Vec<ChildSpec>,
    /// Where to report what happens to the children (tests, telemetry).
    pub events: Option<UnboundedSender<SupervisorEvent>>,
}

impl SupervisorSpec {
    /// A spec with `strategy`, the default intensity, no backoff and no children.
    pub fn new(strategy: Strategy) -> Self {
        Self {
            strategy,
            intensity: Intensity::default(),
            backoff: Backoff::None,
            children: Vec::new(),
            events: None,
        }
    }

    /// Sets the restart intensity.
    pub fn intensity(mut self, intensity: Intensity) -> Self {
        self.intensity = intensity;
        self
    }

    /// Sets the backoff.
    pub fn backoff(mut self, backoff: Backoff) -> Self {
        self.backoff = backoff;
        self
    }

    /// Appends a child (children start in the order appended).
    pub fn child(mut self, child: ChildSpec) -> Self {
        self.children.push(child);
        self
    }

    /// Reports every [`SupervisorEvent`] to `events`.
    pub fn events(mut self, events: UnboundedSender<SupervisorEvent>) -> Self {
        self.events = Some(events);
        self
    }
}

/// Something that happened to a supervisor's children.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SupervisorEvent {
    /// A child started; `restarts` is how often it was restarted before.
    Started {
        /// The child's id.
        child: String,
        /// Its restart count so far.
        restarts: u32,
    },
    /// A child exited (on its own, or stopped/killed by the supervisor).
    Exited {
        /// The child's id.
        child: String,
        /// Why.
        reason: ExitReason,
    },
    /// A restart of a child could not start it.
    StartFailed {
        /// The child's id.
        child: String,
        /// The factory's error.
        error: String,
    },
    /// The restart intensity was exceeded: the supervisor stopped its
    /// children and is failing.
    GaveUp {
        /// The restarts counted in the window.
        restarts: u32,
        /// The window.
        within: Duration,
    },
}

/// Whether a child is running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChildState {
    /// It is running.
    Running,
    /// It will be restarted (after the backoff).
    RestartPending,
    /// It exited and will not be restarted.
    Stopped,
}

/// A child as a supervisor sees it, from [`super::SupervisorMsg::Children`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChildStatus {
    /// The child's id.
    pub id: String,
    /// Whether it runs.
    pub state: ChildState,
    /// How many times it was restarted.
    pub restarts: u32,
    /// Why its last incarnation exited, if one did.
    pub last_exit: Option<ExitReason>,
}
