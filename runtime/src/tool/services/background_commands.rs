//! The node's background commands, which `run_command` starts with
//! `background` and stops by id: a typed service of the node
//! ([`NodeServices::background_commands`](super::NodeServices::background_commands)).
//!
//! Their supervisor is an actor of `troupe-tools`
//! (`run_command::background::BackgroundCommands`), which implements
//! [`BackgroundCommandServices`]; the trait is defined here so that the
//! node's services hold it typed, and what starting a command needs
//! ([`Launch`]) is made of this crate's types. An unsandboxed command's
//! settings are sealed by its supervisor (`trust::seal`, which this module
//! cannot name: `trust` names the tools' module).

use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use super::command_notifier::CommandNotifier;
use crate::home::Home;
use crate::id::ConversationId;
use crate::sandbox::{Confinement, Sandbox};

/// Starts and stops the background commands of a node.
#[async_trait::async_trait]
pub trait BackgroundCommandServices: Send + Sync {
    /// Starts a command in the background.
    async fn start(&self, launch: Launch<'_>) -> std::io::Result<Started>;

    /// Stops command `id` and waits (up to a while) for it to end; `Ok`
    /// with its ending line, or `Err` with what was wrong.
    async fn stop(&self, id: &str) -> Result<String, String>;
}

/// What starting a background command needs.
pub struct Launch<'a> {
    /// The shell command.
    pub command: &'a str,
    /// Where it runs.
    pub cwd: &'a Path,
    /// The home: its log goes to the home's `commands/`, and unsandboxed,
    /// troupe's settings in it are put back when it ends.
    pub home: &'a Home,
    /// Ends it after this long, if given.
    pub timeout: Option<Duration>,
    /// The sandbox it runs in and what it may touch there; `None` runs it
    /// on the machine itself.
    pub sandbox: Option<(&'a Sandbox, &'a Confinement)>,
    /// The addresses its network reaches through the proxy
    /// (`[sandbox] allow_addresses`).
    pub allow: &'a [IpAddr],
    /// Whom to tell when it ends, if anyone.
    pub notify: Option<(Arc<dyn CommandNotifier>, ConversationId)>,
    /// The conversation that starts it.
    pub conversation: ConversationId,
}

/// What starting a background command answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The id to stop it by.
    pub id: String,
    /// Where its output goes.
    pub log: PathBuf,
}
