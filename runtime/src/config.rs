//! Layered configuration: `config.toml`, then the environment, then flags.
//!
//! Settings come from three places and the later wins: the home's
//! `config.toml`, environment variables (`TROUPE_<SECTION>__<KEY>`, plus
//! `TROUPE_MODEL` and `TROUPE_LOG`), and `section.key=value` overrides from
//! the command line. All three are merged into one TOML table and
//! deserialized once, so a value is checked the same way wherever it came
//! from, and an error says where it came from: the file with its line and
//! column, the variable, or the flag. Loading never writes; `troupe init`
//! ([`init_home`]) writes the commented defaults, and never over a file that
//! is already there unless asked.
//!
//! # Examples
//!
//! Loading from a home with no `config.toml` gives the defaults, with the
//! environment and flags on top:
//!
//! ```
//! use troupe_runtime::config::Config;
//! use troupe_runtime::Home;
//!
//! let home = Home::new("/nonexistent/troupe-home");
//! let env = |var: &str| (var == "TROUPE_LOG").then(|| "debug".to_owned());
//! let flags = [("agent.max_steps_per_turn".to_owned(), "20".to_owned())];
//! let config = Config::load(&home, &env, &flags)?;
//! assert_eq!(config.log.filter, "debug");
//! assert_eq!(config.agent.max_steps_per_turn, 20);
//! assert_eq!(config.agent.model, "openai:gpt-4o-mini");
//! # Ok::<(), troupe_runtime::config::ConfigError>(())
//! ```

mod browser;
mod cluster;
mod init;
mod keys;
mod layers;
mod sections;
mod web;

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::home::Home;

pub use crate::executors::settings::{
    account_dir, Account, ExecutorSettings, Executors, Target, Window, MAIN as MAIN_ACCOUNT,
};
pub use browser::Browser;
pub use cluster::Cluster;
pub use init::{ensure_home, init_home, InitReport, DEFAULT_CONFIG, MODELS_EXAMPLE};
pub use keys::{env_var, KEYS, SHORT_ENV};
pub use sections::{
    Agent, Budget, Budgets, CatchUp, Compaction, Delegation, Files, Limits, Log, Messaging,
    Providers, Review, Router, Routines, Server, Store, Synchronous, Telemetry, Tools, Trust,
    TrustMode,
};
pub use web::Web;

/// The whole of `config.toml`. Every section and key is optional in the
/// file; [`Config::default`] is what an empty file means.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// `[agent]`: how an agent runs its turns.
    pub agent: Agent,
    /// `[budgets]`: limits per turn, per bot per day and per delegation.
    pub budgets: Budgets,
    /// `[compaction]`: when and how a long history is summarized.
    pub compaction: Compaction,
    /// `[trust]`: the approval gate.
    pub trust: Trust,
    /// `[sandbox]`: where local commands run.
    pub sandbox: crate::sandbox::SandboxSettings,
    /// `[delegation]`: limits on subagents.
    pub delegation: Delegation,
    /// `[messaging]`: messages between agents and loop protection.
    pub messaging: Messaging,
    /// `[routines]`: scheduled work.
    pub routines: Routines,
    /// `[review]`: the background review of memory and skills.
    pub review: Review,
    /// `[providers]`: how model providers are called.
    pub providers: Providers,
    /// `[store]`: the SQLite database.
    pub store: Store,
    /// `[log]`: diagnostics on stderr.
    pub log: Log,
    /// `[router]`: activation and passivation of actors.
    pub router: Router,
    /// `[limits]`: the largest inputs troupe accepts.
    pub limits: Limits,
    /// `[tools]`: settings of the built-in tools.
    pub tools: Tools,
    /// `[web]`: how the web tools reach the web.
    pub web: Web,
    /// `[browser]`: the browser `browser_exec` drives.
    pub browser: Browser,
    /// `[files]`: the size limit and quota of house files.
    pub files: Files,
    /// `[server]`: how `troupe serve` listens and whom it lets in.
    pub server: Server,
    /// `[environments]`: the limits and lifetime of house environments.
    pub environments: crate::environment::EnvironmentSettings,
    /// `[telemetry]`: Prometheus metrics and OpenTelemetry traces.
    pub telemetry: Telemetry,
    /// `[executors.NAME.accounts.ACCOUNT]`: the accounts each outside
    /// harness runs on (from the file only).
    pub executors: Executors,
    /// `[cluster]`: this home's node in a cluster (docs/cluster.md).
    pub cluster: Cluster,
}

/// A configuration failure. Each message names where the bad value came
/// from and what was expected.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("cannot read {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A file or folder of the home could not be written.
    #[error("cannot write {}: {source}", path.display())]
    Write {
        /// The file or folder.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
    /// A configuration file is malformed or holds a wrong key or value.
    #[error("{}{}: {message}", path.display(), position.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
    File {
        /// The file.
        path: PathBuf,
        /// 1-based line and column, when known.
        position: Option<(usize, usize)>,
        /// What is wrong and what is expected.
        message: String,
    },
    /// An environment variable holds a wrong value.
    #[error("environment variable {var}: {message}")]
    Env {
        /// The variable.
        var: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// A command-line override holds a wrong key or value.
    #[error("command-line setting `{key}`: {message}")]
    Override {
        /// The dotted key, such as `agent.model`.
        key: String,
        /// What is wrong and what is expected.
        message: String,
    },
    /// Another configuration problem (used by other files of the home).
    #[error("{0}")]
    Invalid(String),
}

impl Config {
    /// Loads the configuration of `home`: its `config.toml` (defaults when
    /// there is none), then the environment as seen through `env`, then
    /// `overrides` (dotted keys such as `agent.model`, in order).
    ///
    /// Pass `&|var| std::env::var(var).ok()` for the process environment.
    ///
    /// # Errors
    ///
    /// [`ConfigError::Read`] if the file exists but cannot be read,
    /// [`ConfigError::File`] if it is malformed or holds a wrong key or
    /// value, [`ConfigError::Env`] / [`ConfigError::Override`] for a wrong
    /// variable or override.
    pub fn load(
        home: &Home,
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &[(String, String)],
    ) -> Result<Config, ConfigError> {
        let path = home.config_file();
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => Some(text),
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => None,
            Err(source) => return Err(ConfigError::Read { path, source }),
        };
        Self::from_layers(&path, text.as_deref(), env, overrides)
    }

    /// [`Config::load`] with the file's text given: `text` is the contents
    /// of `path` (`None` when there is no file), then the environment and
    /// the overrides on top.
    ///
    /// # Errors
    ///
    /// As [`Config::load`], but for reading the file.
    pub fn from_layers(
        path: &Path,
        text: Option<&str>,
        env: &dyn Fn(&str) -> Option<String>,
        overrides: &[(String, String)],
    ) -> Result<Config, ConfigError> {
        let mut table = match text {
            // The commented defaults as written: every key is commented
            // out, so the file adds nothing to the layers (a test keeps
            // it so). Parsing its comments was a tenth of a new home's
            // start.
            Some(text) if text == DEFAULT_CONFIG => toml::Table::new(),
            Some(text) => {
                Self::from_file_text(path, text)?;
                file_table(path, text)?
            }
            None => toml::Table::new(),
        };
        let layered = layers::from_env(env)
            .into_iter()
            .chain(layers::from_overrides(overrides));
        for (key, value, source) in layered {
            layers::apply(&mut table, &key, &value, &source)?;
        }
        let config: Config = toml::Value::Table(table)
            .try_into()
            .map_err(|error| ConfigError::Invalid(format!("the layered configuration: {error}")))?;
        checked(config, path)
    }

    /// Parses the text of a config file, naming `path` in errors.
    ///
    /// # Errors
    ///
    /// [`ConfigError::File`] with the line, column and key of the problem.
    pub fn from_file_text(path: &Path, text: &str) -> Result<Config, ConfigError> {
        let config: Config =
            toml::from_str(text).map_err(|error| file_error(path, text, &error))?;
        checked(config, path)
    }
}

/// `config` once what serde cannot check holds (the executors' accounts),
/// an error naming the file `path` otherwise.
fn checked(config: Config, path: &Path) -> Result<Config, ConfigError> {
    crate::executors::settings::check(&config.executors).map_err(|message| ConfigError::File {
        path: path.to_owned(),
        position: None,
        message,
    })?;
    Ok(config)
}

/// The file as a table, for the layers to merge into.
fn file_table(path: &Path, text: &str) -> Result<toml::Table, ConfigError> {
    text.parse::<toml::Table>()
        .map_err(|error| file_error(path, text, &error))
}

fn file_error(path: &Path, text: &str, error: &toml::de::Error) -> ConfigError {
    let diagnostic = crate::diagnostic::describe(error, Some(text), keys::home_of);
    ConfigError::File {
        path: path.to_owned(),
        position: diagnostic.position,
        message: diagnostic.message,
    }
}

#[cfg(test)]
#[path = "config/config_tests.rs"]
mod tests;
