//! The sections of `config.toml`, each with its defaults.
//!
//! Every section is `#[serde(deny_unknown_fields, default)]`: a misspelt key
//! is an error that lists the accepted keys, and a missing key takes its
//! default, so an empty file is a complete configuration. Values that have a
//! shape beyond their type (a timezone, a log filter, a share between 0 and 1)
//! are checked while deserializing, so their errors carry the same location as
//! a type error. `docs/configuration.md` and `default_config.toml` describe the
//! same keys; tests keep the three in step.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[agent]`: how an agent runs its turns.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Agent {
    /// The model used when a bot names none, as `provider:model` or the name
    /// of an entry of `models.toml`.
    pub model: String,
    /// The folder tools start in; unset means the folder troupe was started in.
    pub working_dir: Option<PathBuf>,
    /// The most model calls one turn may make before it stops.
    pub max_steps_per_turn: u32,
    /// How long one tool call may run before it is cancelled, in seconds.
    pub tool_timeout_secs: u64,
    /// A tool result longer than this many characters is written to `spill/`
    /// and the model gets its head and a pointer.
    pub spill_limit_chars: u32,
    /// How many identical failing tool calls in a row stop the turn.
    pub repeated_failure_limit: u32,
    /// The IANA timezone agents and routines see, e.g. `Europe/Paris`.
    #[serde(with = "timezone")]
    pub timezone: chrono_tz::Tz,
}

impl Default for Agent {
    fn default() -> Self {
        Self {
            model: "openai:gpt-4o-mini".to_owned(),
            working_dir: None,
            max_steps_per_turn: 50,
            tool_timeout_secs: 120,
            spill_limit_chars: 30_000,
            repeated_failure_limit: 3,
            timezone: chrono_tz::Tz::UTC,
        }
    }
}

impl Agent {
    /// [`Agent::tool_timeout_secs`] as a duration.
    pub fn tool_timeout(&self) -> Duration {
        Duration::from_secs(self.tool_timeout_secs)
    }
}

/// One budget: every limit is optional; an unset limit does not apply.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budget {
    /// Input plus output tokens.
    pub tokens: Option<u64>,
    /// Money, in US dollars, from the prices in `models.toml`.
    pub cost_usd: Option<f64>,
    /// Tool calls.
    pub tool_calls: Option<u32>,
    /// Wall-clock time, in seconds.
    pub wall_time_secs: Option<u64>,
}

/// `[budgets]`: limits per turn, per bot per day and per delegation subtree.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Budgets {
    /// `[budgets.per_turn]`: one turn of one conversation.
    pub per_turn: Budget,
    /// `[budgets.per_bot_day]`: everything one bot does in a day (in
    /// [`Agent::timezone`]).
    pub per_bot_day: Budget,
    /// `[budgets.per_delegation]`: a delegation and all its subagents.
    pub per_delegation: Budget,
}

/// `[compaction]`: when and how a long history is summarized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Compaction {
    /// The share of the model's context window (above 0, at most 1) past
    /// which the history is compacted.
    #[serde(deserialize_with = "share")]
    pub threshold: f64,
    /// How many of the latest messages are kept verbatim.
    pub keep_recent_messages: u32,
}

impl Default for Compaction {
    fn default() -> Self {
        Self {
            threshold: 0.8,
            keep_recent_messages: 12,
        }
    }
}

/// How the trust gate treats a tool call no pattern decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrustMode {
    /// Ask the user before any call that is not read-only.
    #[default]
    Ask,
    /// Run calls without asking; `deny` still applies.
    Auto,
}

/// `[trust]`: the approval gate every tool call passes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Trust {
    /// What happens to a call that no pattern decides.
    pub mode: TrustMode,
    /// Patterns of calls that are always refused.
    pub deny: Vec<String>,
    /// Patterns of calls that run without asking.
    pub allow: Vec<String>,
}

/// `[delegation]`: limits on subagents.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Delegation {
    /// How deep delegations may nest (1: subagents cannot delegate).
    pub max_depth: u32,
    /// How many subagents one delegation may start.
    pub max_children: u32,
    /// How many subagents of one bot may run at once.
    pub max_concurrent_per_bot: u32,
    /// How many subagents may run at once on this node.
    pub max_concurrent_per_node: u32,
    /// How long a subagent may run before it is stopped, in seconds.
    pub child_timeout_secs: u64,
}

impl Default for Delegation {
    fn default() -> Self {
        Self {
            max_depth: 1,
            max_children: 10,
            max_concurrent_per_bot: 10,
            max_concurrent_per_node: 64,
            child_timeout_secs: 600,
        }
    }
}

impl Delegation {
    /// [`Delegation::child_timeout_secs`] as a duration.
    pub fn child_timeout(&self) -> Duration {
        Duration::from_secs(self.child_timeout_secs)
    }
}

/// `[messaging]`: messages between agents and loop protection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Messaging {
    /// The longest message one agent may send another, in characters.
    pub max_message_chars: u32,
    /// How many exchanges two bots may have within the window before they
    /// are paused.
    pub loop_max_exchanges: u32,
    /// The window exchanges are counted in, in seconds.
    pub loop_window_secs: u64,
    /// How long a pair of bots caught in a loop stays paused, in seconds.
    pub loop_cooldown_secs: u64,
}

impl Default for Messaging {
    fn default() -> Self {
        Self {
            max_message_chars: 16_000,
            loop_max_exchanges: 10,
            loop_window_secs: 600,
            loop_cooldown_secs: 600,
        }
    }
}

/// What a routine does about the runs it missed while troupe was down.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// Forget missed runs; wait for the next scheduled time.
    Skip,
    /// Run once for all the missed runs, then keep the schedule.
    #[default]
    RunOnce,
}

/// `[routines]`: scheduled work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Routines {
    /// What to do about runs missed while troupe was down.
    pub catch_up: CatchUp,
    /// How long the scheduler's lease lasts before another node may take
    /// over, in seconds.
    pub lease_secs: u64,
}

impl Default for Routines {
    fn default() -> Self {
        Self {
            catch_up: CatchUp::RunOnce,
            lease_secs: 60,
        }
    }
}

/// `[review]`: the background review that updates memory and skills.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Review {
    /// Whether the review runs at all.
    pub enabled: bool,
    /// How many turns pass between two reviews of a conversation.
    pub every_n_turns: u32,
}

impl Default for Review {
    fn default() -> Self {
        Self {
            enabled: true,
            every_n_turns: 5,
        }
    }
}

/// `[providers]`: how model providers are called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Providers {
    /// How many requests may be in flight to one provider at once.
    pub max_concurrent_requests: u32,
    /// How long connecting may take, in seconds.
    pub connect_timeout_secs: u64,
    /// How long the first byte of a response may take, in seconds.
    pub first_byte_timeout_secs: u64,
    /// How long the stream may stay silent between two chunks, in seconds.
    pub chunk_timeout_secs: u64,
    /// How many times a failed request is retried (with backoff).
    pub max_retries: u32,
}

impl Default for Providers {
    fn default() -> Self {
        Self {
            max_concurrent_requests: 8,
            connect_timeout_secs: 10,
            first_byte_timeout_secs: 120,
            chunk_timeout_secs: 90,
            max_retries: 4,
        }
    }
}

impl Providers {
    /// [`Providers::connect_timeout_secs`] as a duration.
    pub fn connect_timeout(&self) -> Duration {
        Duration::from_secs(self.connect_timeout_secs)
    }

    /// [`Providers::first_byte_timeout_secs`] as a duration.
    pub fn first_byte_timeout(&self) -> Duration {
        Duration::from_secs(self.first_byte_timeout_secs)
    }

    /// [`Providers::chunk_timeout_secs`] as a duration.
    pub fn chunk_timeout(&self) -> Duration {
        Duration::from_secs(self.chunk_timeout_secs)
    }
}

/// SQLite's `synchronous` setting for the store.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    /// Sync at checkpoints: with WAL, a power loss may lose the last commits
    /// but never corrupts the database.
    #[default]
    Normal,
    /// Sync every commit: slower, loses nothing committed.
    Full,
}

/// `[store]`: the SQLite database.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Store {
    /// How hard commits are pushed to the disk.
    pub synchronous: Synchronous,
}

/// `[log]`: diagnostics written to stderr.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Log {
    /// A `tracing` filter: a level (`error` … `trace`) or directives such as
    /// `info,troupe_runtime=debug`.
    #[serde(deserialize_with = "log_filter")]
    pub filter: String,
    /// One JSON object per line instead of text.
    pub json: bool,
    /// Append the log to this file instead of stderr (relative to the
    /// home); empty: stderr.
    pub file: String,
}

impl Default for Log {
    fn default() -> Self {
        Self {
            filter: "warn".to_owned(),
            json: false,
            file: String::new(),
        }
    }
}

/// `[router]`: activation and passivation of actors.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Router {
    /// How long an actor may sit idle before it is passivated, in seconds.
    pub idle_secs: u64,
}

impl Default for Router {
    fn default() -> Self {
        Self { idle_secs: 600 }
    }
}

impl Router {
    /// [`Router::idle_secs`] as a duration.
    pub fn idle(&self) -> Duration {
        Duration::from_secs(self.idle_secs)
    }
}

/// `[limits]`: the largest inputs troupe accepts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Limits {
    /// The largest user message, in bytes of UTF-8 (`run`, `chat`, the
    /// Rust API's `send` and `steer`); a larger one is refused before
    /// anything is stored.
    pub max_user_message_bytes: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_user_message_bytes: 256 * 1024,
        }
    }
}

/// `[tools]`: settings of the built-in tools.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Tools {
    /// The most bytes of one `run_command` output kept in its output file
    /// (the result itself shows the first and last 15,000 bytes); `0` keeps
    /// no file.
    pub command_output_cap: u64,
}

impl Default for Tools {
    fn default() -> Self {
        Self {
            command_output_cap: 64 * 1024 * 1024,
        }
    }
}

/// `[files]`: how big a house's shared files may grow.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Files {
    /// The largest house file, in bytes; a larger one is refused whole.
    pub max_file_bytes: u64,
    /// The most bytes of current files one house may hold (earlier
    /// versions are not counted); a write past it is refused whole.
    pub house_quota_bytes: u64,
}

impl Default for Files {
    fn default() -> Self {
        let limits = crate::store::house_files::FileLimits::default();
        Self {
            max_file_bytes: limits.max_file_bytes,
            house_quota_bytes: limits.house_quota_bytes,
        }
    }
}

impl Files {
    /// As the store takes them.
    pub fn limits(&self) -> crate::store::house_files::FileLimits {
        crate::store::house_files::FileLimits {
            max_file_bytes: self.max_file_bytes,
            house_quota_bytes: self.house_quota_bytes,
        }
    }
}

/// An IANA timezone, written as its name.
mod timezone {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(super) fn serialize<S: Serializer>(tz: &chrono_tz::Tz, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(tz.name())
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<chrono_tz::Tz, D::Error> {
        let name = String::deserialize(d)?;
        name.parse().map_err(|_| {
            D::Error::custom(format!(
                "unknown timezone `{name}`; expected an IANA name such as \"UTC\" or \"Europe/Paris\""
            ))
        })
    }
}

/// A share of a whole: above 0, at most 1.
fn share<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    let value = f64::deserialize(d)?;
    if value > 0.0 && value <= 1.0 {
        Ok(value)
    } else {
        Err(serde::de::Error::custom(format!(
            "{value} is out of range; expected a number above 0 and at most 1, such as 0.8"
        )))
    }
}

/// A `tracing` filter that `EnvFilter` accepts.
fn log_filter<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    let filter = String::deserialize(d)?;
    match crate::telemetry::env_filter(&filter) {
        Ok(_) => Ok(filter),
        Err(error) => Err(serde::de::Error::custom(format!(
            "`{filter}` is not a log filter ({error}); expected a level (error, warn, info, debug, trace) or directives such as \"info,troupe_runtime=debug\""
        ))),
    }
}

/// `[server]`: how `troupe serve` listens and whom it lets in (docs/api.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Server {
    /// The address to listen on; an address beyond loopback needs tokens.
    pub listen: String,
    /// `tokens` (every request presents a member's token) or `open` (no
    /// tokens, every request acts as the home's owner; loopback only).
    pub auth: String,
    /// Requests per second one token may make, sustained.
    pub requests_per_second: f64,
    /// Requests one token may make at once.
    pub burst: u32,
    /// The largest request body, in bytes.
    pub max_body_bytes: u64,
    /// Seconds one request may take (event streams excepted).
    pub request_timeout_secs: u64,
    /// Seconds a connection may take to send a request's head, and may sit
    /// idle between requests, before it is closed.
    pub header_timeout_secs: u64,
    /// Connections open at once, from everyone; past it, 503.
    pub max_connections: u32,
    /// Connections open at once from one address; past it, 503.
    pub max_connections_per_address: u32,
    /// Host names (`name` or `name:port`) requests may name besides the
    /// loopback names and the listen address.
    pub allowed_hosts: Vec<String>,
}

impl Default for Server {
    fn default() -> Self {
        Self {
            listen: "127.0.0.1:7878".into(),
            auth: "tokens".into(),
            requests_per_second: 50.0,
            burst: 200,
            max_body_bytes: 16 * 1024 * 1024,
            request_timeout_secs: 60,
            header_timeout_secs: 10,
            max_connections: 1024,
            max_connections_per_address: 128,
            allowed_hosts: Vec::new(),
        }
    }
}

/// `[telemetry]`: metrics and traces for an operator (docs/operating.md).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Telemetry {
    /// Whether `troupe serve` keeps Prometheus metrics, served at
    /// `GET /api/metrics` to the home's owner.
    pub metrics: bool,
    /// Where OpenTelemetry traces go over OTLP/HTTP (protobuf): a base URL
    /// such as `http://127.0.0.1:4318`, to which `/v1/traces` is added;
    /// empty: no traces (unless `OTEL_EXPORTER_OTLP_ENDPOINT` or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is set, which win over it).
    pub otlp_endpoint: String,
    /// The `service.name` the traces carry.
    pub service_name: String,
}

impl Default for Telemetry {
    fn default() -> Self {
        Self {
            metrics: true,
            otlp_endpoint: String::new(),
            service_name: "troupe".to_owned(),
        }
    }
}
