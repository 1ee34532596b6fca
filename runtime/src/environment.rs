//! Environments: the sandboxes of a house where `run_command` runs for the
//! threads bound to them.
//!
//! What every layer shares: the settings (`[environments]` in
//! `config.toml`), the records the store keeps and the CLI and tools show,
//! and [`EnvironmentServices`], the handle through which the environment
//! tools reach the node's sandbox actors. The tables live in
//! [`crate::store::environments`]; the actors in the actors crate; what
//! confines a command in [`crate::sandbox::jail`].

pub mod endpoint;

use std::path::PathBuf;
use std::time::Duration;

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

pub use endpoint::Endpoint;

use crate::id::{EnvironmentId, HouseId, ThreadId};
use crate::sandbox::jail::LandlockMode;
pub use crate::tool::services::environments::{EnvironmentServices, Environments, TaskRequest};

/// The byte quota's share of one file when `disk_files` is not set: 16 KiB,
/// so the default 2 GiB workdir holds 131,072 files and a 16 MiB one 1,024.
///
/// A file costs the kernel memory (its inode and name, about 1 KiB, charged
/// to the environment's memory) whatever its size: a byte quota alone lets a
/// command make hundreds of thousands of empty files.
pub const BYTES_PER_FILE: u64 = 16 * 1024;

/// `[environments]`: the limits and lifetime of house environments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EnvironmentSettings {
    /// Seconds without a command before an environment's actor stops and
    /// its processes are killed (its workdir stays); 0 never.
    pub idle_secs: u64,
    /// A command's wall time when the call gives none, in seconds.
    pub command_timeout_secs: u64,
    /// The longest wall time a command may ask for, in seconds.
    pub max_command_timeout_secs: u64,
    /// Memory of all of an environment's processes, in MiB.
    pub memory_mib: u64,
    /// Processes (and threads) of an environment at once.
    pub processes: u64,
    /// CPU: a share of one core, in percent (a control group's quota).
    pub cpu_percent: u32,
    /// CPU seconds one process may use.
    pub cpu_secs: u64,
    /// The workdir's quota, in MiB.
    pub disk_mib: u64,
    /// The workdir's quota in files (every file, folder and link counts);
    /// unset: one per [`BYTES_PER_FILE`] of `disk_mib`.
    pub disk_files: Option<u64>,
    /// Whether commands share the machine's network (off: a network
    /// namespace of their own, with only its loopback).
    pub network: bool,
    /// Whether a kernel without Landlock refuses commands.
    pub landlock: LandlockMode,
    /// The `troupe` binary whose hidden helper confines commands (default:
    /// this program).
    pub helper: Option<PathBuf>,
    /// Endpoints (`host:port`) every house's environments may reach through
    /// their Sandbox actor's proxy, when they have no network.
    pub egress: Vec<Endpoint>,
}

impl Default for EnvironmentSettings {
    fn default() -> Self {
        Self {
            idle_secs: 900,
            command_timeout_secs: 120,
            max_command_timeout_secs: 600,
            memory_mib: 1024,
            processes: 256,
            cpu_percent: 100,
            cpu_secs: 600,
            disk_mib: 2048,
            disk_files: None,
            network: false,
            landlock: LandlockMode::Required,
            helper: None,
            egress: Vec::new(),
        }
    }
}

impl EnvironmentSettings {
    /// How long an idle environment's actor lives.
    pub fn idle(&self) -> Option<Duration> {
        (self.idle_secs > 0).then(|| Duration::from_secs(self.idle_secs))
    }

    /// The workdir quota in bytes.
    pub fn disk_bytes(&self) -> u64 {
        self.disk_mib.saturating_mul(1024 * 1024)
    }

    /// The workdir's quota in files: `disk_files`, else one per
    /// [`BYTES_PER_FILE`] of the byte quota.
    pub fn disk_files(&self) -> u64 {
        self.disk_files
            .unwrap_or_else(|| self.disk_bytes() / BYTES_PER_FILE)
            .max(1)
    }

    /// The memory cap in bytes.
    pub fn memory_bytes(&self) -> u64 {
        self.memory_mib.saturating_mul(1024 * 1024)
    }
}

/// A house's own rule about environments (in the house's settings).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct HouseEnvironmentPolicy {
    /// Whether environments of this house may run commands without a
    /// sandbox when none works on the machine. Off unless set: without a
    /// sandbox, `create_environment` fails.
    pub allow_unsandboxed: bool,
    /// Endpoints (`host:port`) this house's environments may reach through
    /// their Sandbox actor's proxy, besides `[environments] egress`.
    pub egress: Vec<Endpoint>,
}

/// Where an environment is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EnvironmentStatus {
    /// Its actor is live: commands start at once.
    Active,
    /// Its actor is stopped (idle); the next command starts it again.
    Idle,
    /// Stopped for good: no thread is bound, no command runs.
    Stopped,
}

impl EnvironmentStatus {
    /// As printed.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Active => "active",
            Self::Idle => "idle",
            Self::Stopped => "stopped",
        }
    }
}

/// An environment, as lists show it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EnvironmentInfo {
    /// Its id.
    pub id: EnvironmentId,
    /// Its house.
    pub house: HouseId,
    /// Where it is in its life.
    pub status: EnvironmentStatus,
    /// Whether its commands run in a sandbox (false only when its house
    /// allows unsandboxed environments and the machine has no sandbox).
    pub sandboxed: bool,
    /// When it was made.
    pub created_at: DateTime<Utc>,
    /// When a command last ran (or it was made).
    pub last_used: DateTime<Utc>,
    /// The threads bound to it.
    pub threads: Vec<ThreadId>,
    /// Its workdir on the machine.
    pub workdir: PathBuf,
    /// Commands cut short by a crash of its actor, reported and not re-run.
    pub lost_commands: u64,
}

/// How a command in an environment ended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommandOutcome {
    /// The environment.
    pub environment: EnvironmentId,
    /// The exit code, when it exited.
    pub exit_code: Option<i32>,
    /// `[exit N]`, `[killed by signal N]`, `[killed: timeout after N s]`, …
    pub ending: String,
    /// Its output (standard output and error together), cut to the head
    /// and tail when long.
    pub output: String,
    /// Output bytes in all.
    pub output_bytes: u64,
    /// Whether it ran in a sandbox.
    pub sandboxed: bool,
    /// How long it ran, in milliseconds.
    pub millis: u64,
}

impl CommandOutcome {
    /// Whether it exited with 0.
    pub fn success(&self) -> bool {
        self.exit_code == Some(0)
    }
}
