//! A conversation's memory of the gate (`crate::trust`): what the user
//! approved for the session, and the guardian's run of refusals.
//!
//! It lives here, beside the conversation's other typed services, because
//! the conversation's services hold it (`Services::gate_session`) and
//! `crate::trust` names this module, not the other way round.

use std::collections::HashSet;
use std::sync::atomic::{AtomicU32, Ordering};

use parking_lot::Mutex;

/// A conversation's memory of the gate: session approvals and the
/// guardian's run of refusals.
#[derive(Debug, Default)]
pub struct GateSession {
    approved: Mutex<HashSet<String>>,
    guardian_denials: AtomicU32,
}

impl GateSession {
    /// An empty session.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remembers an approval for the rest of the session.
    pub fn approve(&self, key: impl Into<String>) {
        self.approved.lock().insert(key.into());
    }

    /// Whether the call with this key was approved for the session.
    pub fn is_approved(&self, key: &str) -> bool {
        self.approved.lock().contains(key)
    }

    /// How many times in a row the guardian refused.
    pub fn guardian_denials(&self) -> u32 {
        self.guardian_denials.load(Ordering::Relaxed)
    }

    pub(crate) fn guardian_denied(&self) -> u32 {
        self.guardian_denials.fetch_add(1, Ordering::Relaxed) + 1
    }

    pub(crate) fn reset_denials(&self) {
        self.guardian_denials.store(0, Ordering::Relaxed);
    }
}
