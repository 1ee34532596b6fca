//! What the user approved, and for how long.
//!
//! In an interactive channel the user answers a question of the gate with
//! an [`ApprovalAnswer`]: once, for this session, always, or no. A session
//! approval lives in the conversation's [`GateSession`]; an "always" one is
//! kept by an [`ApprovalStore`] — [`FileApprovals`] writes them to the
//! home's `approvals.json`. Neither is ever consulted for a hardline or an
//! outside-the-machine command: the gate looks approvals up only at its last
//! step, and refuses to remember anything else.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};

use super::TrustError;
use crate::home::Home;
pub use crate::tool::services::GateSession;

/// The user's answer to a question of the gate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalAnswer {
    /// Run it this once.
    Once,
    /// Run it, and the same call again without asking for this session.
    Session,
    /// Run it, and never ask about the same call again.
    Always,
    /// Do not run it.
    Deny,
}

/// Where "always" approvals are kept.
pub trait ApprovalStore: Send + Sync + std::fmt::Debug {
    /// Whether the call with this key is approved for good.
    fn contains(&self, key: &str) -> bool;

    /// Approves the call with this key for good.
    fn add(&self, key: &str) -> Result<(), TrustError>;
}

/// "Always" approvals held in memory only (tests, embedded runtimes).
#[derive(Debug, Default)]
pub struct MemoryApprovals {
    keys: Mutex<HashSet<String>>,
}

impl ApprovalStore for MemoryApprovals {
    fn contains(&self, key: &str) -> bool {
        self.keys.lock().contains(key)
    }

    fn add(&self, key: &str) -> Result<(), TrustError> {
        self.keys.lock().insert(key.to_string());
        Ok(())
    }
}

/// "Always" approvals kept in the home's `approvals.json`.
///
/// The file is `{"version": 1, "always": ["command:…", "write:…"]}`; the
/// user may edit it (or delete it to forget every approval). It is read once
/// when opened and rewritten whole, through a temporary file, on each
/// addition.
#[derive(Debug)]
pub struct FileApprovals {
    path: PathBuf,
    keys: Mutex<BTreeSet<String>>,
}

#[derive(Debug, Default, Serialize, Deserialize)]
struct ApprovalsFile {
    version: u32,
    always: BTreeSet<String>,
}

impl FileApprovals {
    /// The file of `home`: `approvals.json`.
    pub fn path_in(home: &Home) -> PathBuf {
        home.root().join("approvals.json")
    }

    /// Opens the home's approvals; a missing file is empty.
    pub fn open(home: &Home) -> Result<Self, TrustError> {
        let path = Self::path_in(home);
        let keys = match std::fs::read_to_string(&path) {
            Ok(text) => {
                let file: ApprovalsFile =
                    serde_json::from_str(&text).map_err(|e| TrustError::Approvals {
                        path: path.clone(),
                        message: format!(
                            "is not valid ({e}); fix it or delete it to forget every \"always\" approval"
                        ),
                    })?;
                file.always
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => BTreeSet::new(),
            Err(e) => {
                return Err(TrustError::Approvals {
                    path,
                    message: format!("cannot be read ({e}); check its permissions"),
                })
            }
        };
        Ok(Self {
            path,
            keys: Mutex::new(keys),
        })
    }
}

impl ApprovalStore for FileApprovals {
    fn contains(&self, key: &str) -> bool {
        self.keys.lock().contains(key)
    }

    fn add(&self, key: &str) -> Result<(), TrustError> {
        let mut keys = self.keys.lock();
        if !keys.insert(key.to_string()) {
            return Ok(());
        }
        let file = ApprovalsFile {
            version: 1,
            always: keys.clone(),
        };
        let fail = |e: String| TrustError::Approvals {
            path: self.path.clone(),
            message: format!("cannot be written ({e}); check that the home folder is writable"),
        };
        let text = serde_json::to_string_pretty(&file).map_err(|e| fail(e.to_string()))?;
        if let Some(dir) = self.path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| fail(e.to_string()))?;
        }
        let tmp = self.path.with_extension("json.tmp");
        std::fs::write(&tmp, text).map_err(|e| fail(e.to_string()))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| fail(e.to_string()))?;
        Ok(())
    }
}
