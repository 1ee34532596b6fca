//! Why an actor stopped, as a value.
//!
//! ractor reports an exit as an optional string (a clean stop, a kill) or a
//! boxed error (a panic or an `Err` from a handler). Restart policy needs to
//! tell these apart, and tests need to assert them, so they are folded into
//! one typed enum here.

use ractor::{ActorCell, SupervisionEvent};

/// The reason an actor exited.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExitReason {
    /// It stopped cleanly with no reason, or with the reason `"normal"`.
    Normal,
    /// It was asked to shut down: the reason was `"shutdown"` (or began with
    /// `"shutdown:"`), or it was drained (ractor's `"Drained"`).
    Shutdown,
    /// It stopped cleanly with some other reason, given here.
    Stopped(String),
    /// It was killed: its work was cancelled without running `post_stop`.
    Killed,
    /// A handler panicked or returned an error; the text is the panic message
    /// or the error's display.
    Failed(String),
}

impl ExitReason {
    /// The stop reason to give ractor for a supervisor-initiated shutdown.
    pub const SHUTDOWN: &'static str = "shutdown";

    /// Classifies a clean stop's optional reason string as ractor reports it.
    pub fn from_stop_reason(reason: Option<&str>) -> Self {
        match reason {
            None | Some("normal") => Self::Normal,
            Some("shutdown") | Some("Drained") => Self::Shutdown,
            Some(r) if r.starts_with("shutdown:") => Self::Shutdown,
            Some("killed") | Some("actor_task_cancelled") => Self::Killed,
            Some(other) => Self::Stopped(other.to_string()),
        }
    }

    /// The actor and its exit reason, if `event` reports an exit.
    pub fn from_event(event: &SupervisionEvent) -> Option<(ActorCell, Self)> {
        match event {
            SupervisionEvent::ActorTerminated(cell, _, reason) => {
                Some((cell.clone(), Self::from_stop_reason(reason.as_deref())))
            }
            SupervisionEvent::ActorFailed(cell, err) => {
                Some((cell.clone(), Self::Failed(err.to_string())))
            }
            SupervisionEvent::ActorStarted(_)
            | SupervisionEvent::ProcessGroupChanged(_)
            | SupervisionEvent::PidLifecycleEvent(_) => None,
        }
    }

    /// Whether the exit was abnormal (a failure or a kill). A transient child
    /// is restarted only after an abnormal exit.
    pub fn is_abnormal(&self) -> bool {
        match self {
            Self::Normal | Self::Shutdown | Self::Stopped(_) => false,
            Self::Killed | Self::Failed(_) => true,
        }
    }
}

impl std::fmt::Display for ExitReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Normal => f.write_str("normal"),
            Self::Shutdown => f.write_str("shutdown"),
            Self::Stopped(r) => write!(f, "stopped: {r}"),
            Self::Killed => f.write_str("killed"),
            Self::Failed(e) => write!(f, "failed: {e}"),
        }
    }
}
