//! Erlang/OTP-style supervision over ractor.
//!
//! ractor reports a child's start, exit and failure to its parent as a
//! `SupervisionEvent`, and by default a parent simply stops when any child
//! exits. That default is never what an agent runtime wants, so every
//! supervisor here handles the events itself and decides by policy:
//!
//! - a [`Strategy`] says which children restart together (only the one that
//!   exited, all of them, or it and those started after it);
//! - a child's [`Restart`] kind says whether it is restarted at all
//!   (permanent: always; transient: only after an abnormal exit; temporary:
//!   never);
//! - an [`Intensity`] caps restarts (at most N within T); past it the
//!   supervisor stops its children and fails with
//!   [`SupervisorError::IntensityExceeded`], which its own parent sees as a
//!   [`ExitReason::Failed`] — escalation up the tree;
//! - a [`Backoff`] spaces restarts out;
//! - children start in the order given, stop in reverse order, and each has a
//!   shutdown deadline after which it is killed.
//!
//! A child is described by a [`ChildSpec`] holding a factory, so every restart
//! builds a fresh actor (which rebuilds its state in `pre_start`). The same
//! pieces ([`ExitReason`], [`Restart`], [`RestartLog`], [`Backoff`]) are what
//! the [router](crate::router) uses to supervise the actors it activates.

mod exit;
mod intensity;
mod spec;
mod supervisor;

pub use exit::ExitReason;
pub use intensity::{Backoff, Intensity, RestartLog};
pub use spec::{ChildSpec, ChildState, ChildStatus, StartFuture, SupervisorEvent, SupervisorSpec};
pub use supervisor::{stop_child, Supervisor, SupervisorError, SupervisorMsg};

/// Which children restart when one of them has to be restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Strategy {
    /// Only the child that exited is restarted.
    OneForOne,
    /// Every child is stopped (in reverse order) and all are restarted (in order).
    OneForAll,
    /// The child that exited and every child started after it are restarted.
    RestForOne,
}

/// Whether a child is restarted after it exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restart {
    /// Always restarted, whatever the exit reason.
    Permanent,
    /// Restarted only after an abnormal exit ([`ExitReason::is_abnormal`]).
    Transient,
    /// Never restarted.
    Temporary,
}

impl Restart {
    /// Whether a child of this kind that exited for `reason` is restarted.
    pub fn restarts_after(self, reason: &ExitReason) -> bool {
        match self {
            Self::Permanent => true,
            Self::Transient => reason.is_abnormal(),
            Self::Temporary => false,
        }
    }
}

#[cfg(test)]
#[path = "supervise_tests.rs"]
mod tests;
