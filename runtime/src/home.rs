//! The home on disk: where a troupe keeps its settings, database and files.
//!
//! `$TROUPE_HOME` (default `~/.troupe`) holds `config.toml`, `models.toml`,
//! `mcp.json`, `troupe.db`, the main agent's `memory/` and `skills/`, each
//! bot's own folder under `bots/<name>/`, `spill/` for oversized tool results,
//! `commands/` for background command output and `documents/` for converted
//! documents. `Home` only names paths; reading and writing them belongs to the
//! modules that own each file. One process at a time writes a home: it holds
//! the lock on `troupe.lock` ([`HomeLock`]).

mod database;
mod lock;

use std::path::{Path, PathBuf};

pub use database::traces_of_use;
pub use lock::{Holder, HomeLock, LockError, Owner, Seal};

/// The name of the main agent, whose files live at the top of the home.
pub const MAIN_AGENT: &str = "assistant";

/// A troupe home folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Home {
    root: PathBuf,
}

impl Home {
    /// A home at `root` (not created until something is written).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        Self { root: root.into() }
    }

    /// The home named by `$TROUPE_HOME`, else `~/.troupe`, else `./.troupe`.
    pub fn from_env() -> Self {
        if let Some(dir) = std::env::var_os("TROUPE_HOME").filter(|v| !v.is_empty()) {
            return Self::new(dir);
        }
        match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => Self::new(PathBuf::from(home).join(".troupe")),
            None => Self::new(".troupe"),
        }
    }

    /// The user's own home folder (`$HOME`; `/` when it is not set): what
    /// `~` means to the gate and the file tools.
    pub fn user_home() -> PathBuf {
        std::env::var_os("HOME")
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from("/"))
    }

    /// The home folder itself.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `config.toml`.
    pub fn config_file(&self) -> PathBuf {
        self.root.join("config.toml")
    }

    /// `models.toml`.
    pub fn models_file(&self) -> PathBuf {
        self.root.join("models.toml")
    }

    /// `mcp.json`.
    pub fn mcp_file(&self) -> PathBuf {
        self.root.join("mcp.json")
    }

    /// `troupe.db`, the SQLite store.
    pub fn database(&self) -> PathBuf {
        self.root.join("troupe.db")
    }

    /// `troupe.lock`: locked by the process that owns the home's writes,
    /// and naming it ([`HomeLock`]).
    pub fn lock_file(&self) -> PathBuf {
        self.root.join("troupe.lock")
    }

    /// `plugins/`.
    pub fn plugins_dir(&self) -> PathBuf {
        self.root.join("plugins")
    }

    /// `spill/`, where oversized tool results are kept whole.
    pub fn spill_dir(&self) -> PathBuf {
        self.root.join("spill")
    }

    /// `commands/`, where background commands write their output.
    pub fn commands_dir(&self) -> PathBuf {
        self.root.join("commands")
    }

    /// `documents/`, the conversion cache of documents read as Markdown.
    pub fn documents_dir(&self) -> PathBuf {
        self.root.join("documents")
    }

    /// `bots/`, which holds each bot's own folder.
    pub fn bots_dir(&self) -> PathBuf {
        self.root.join("bots")
    }

    /// The folder of an agent's own files: the home itself for the main
    /// agent, `bots/<name>/` for a bot.
    pub fn agent_dir(&self, agent: &str) -> PathBuf {
        if agent == MAIN_AGENT {
            self.root.clone()
        } else {
            self.bots_dir().join(agent)
        }
    }

    /// An agent's `memory/` folder. The user's profile (`USER.md`) is shared:
    /// see [`Home::user_profile`].
    pub fn memory_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("memory")
    }

    /// The shared user profile, `memory/USER.md` at the top of the home.
    pub fn user_profile(&self) -> PathBuf {
        self.root.join("memory").join("USER.md")
    }

    /// An agent's notes, `MEMORY.md` in its memory folder.
    pub fn agent_notes(&self, agent: &str) -> PathBuf {
        self.memory_dir(agent).join("MEMORY.md")
    }

    /// An agent's `skills/` folder.
    pub fn skills_dir(&self, agent: &str) -> PathBuf {
        self.agent_dir(agent).join("skills")
    }

    /// The files a tool must never write: settings, plugins, the database.
    pub fn protected_paths(&self) -> Vec<PathBuf> {
        vec![
            self.config_file(),
            self.models_file(),
            self.mcp_file(),
            self.plugins_dir(),
            self.root.join("plugin-data"),
            self.database(),
            self.root.join("troupe.db-wal"),
            self.root.join("troupe.db-shm"),
            self.lock_file(),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bots_have_their_own_folders_and_share_the_profile() {
        let home = Home::new("/h");
        assert_eq!(
            home.agent_notes(MAIN_AGENT),
            PathBuf::from("/h/memory/MEMORY.md")
        );
        assert_eq!(
            home.agent_notes("scout"),
            PathBuf::from("/h/bots/scout/memory/MEMORY.md")
        );
        assert_eq!(
            home.skills_dir("scout"),
            PathBuf::from("/h/bots/scout/skills")
        );
        assert_eq!(home.user_profile(), PathBuf::from("/h/memory/USER.md"));
    }
}
