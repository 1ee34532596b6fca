//! `troupe init`: a new home with commented settings files and its folders.
//!
//! The files written are documentation as much as settings: every key is
//! present, commented out, with its default and a line of explanation, so a
//! user edits by uncommenting. A file already there is the user's and is kept;
//! with `force` it is moved aside to `<name>.bak` rather than lost.
//!
//! A home can be cut short while it is being created (a crash, a full disk,
//! Ctrl-C between two files). So every start completes what is missing
//! ([`ensure_home`]) instead of only creating a home that is not there, and
//! each file is published whole: written to a temporary file beside it,
//! then linked into place under its name, which fails rather than replace a
//! file that appeared meanwhile. A reader never sees half a file.
//!
//! The files are not flushed to disk (`fsync`): they are troupe's defaults,
//! every key commented out, not the user's settings, and waiting for four
//! flushes (each file and its folder) was a third of a new home's cold
//! start. A power loss right after may leave a file missing, which the next
//! start writes again, or empty, which reads as the same settings (the
//! defaults). A user's own edits are never at risk: troupe never writes
//! over a file that exists (the link fails instead; `init --force` moves
//! the old file aside first).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use super::ConfigError;
use crate::home::{Home, MAIN_AGENT};

/// The commented default `config.toml`. Parsed as it is, it gives
/// [`Config::default`](super::Config::default); so does every key uncommented.
pub const DEFAULT_CONFIG: &str = include_str!("default_config.toml");

/// The commented example `models.toml`. The model registry owns its format;
/// this only shows it.
pub const MODELS_EXAMPLE: &str = r#"# troupe models.
#
# Name a model here to use it as `agent.model = "NAME"` in config.toml or in a
# bot's definition. Without an entry, a model is named "provider:model", e.g.
# "openai:gpt-4o-mini", with the provider's defaults.
#
# Each entry is a [models.NAME] table:
#   api             "openai" (chat completions, also for compatible servers) or "anthropic"
#   base_url        the API's address
#   key_env         the environment variable holding the API key (never the key itself)
#   model           the provider's name of the model
#   context_window  the model's context window, in tokens
#   sees_images     whether the model takes images (unset: known model names decide)
#   [models.NAME.prices]  US dollars per million tokens: input, output, cache_read, cache_write

# [models.fast]
# api = "openai"
# base_url = "https://api.openai.com/v1"
# key_env = "OPENAI_API_KEY"
# model = "gpt-4o-mini"
# context_window = 128000
#
# [models.fast.prices]
# input = 0.15
# output = 0.60
# cache_read = 0.075
# cache_write = 0.0

# [models.deep]
# api = "anthropic"
# base_url = "https://api.anthropic.com"
# key_env = "ANTHROPIC_API_KEY"
# model = "claude-sonnet-4-5"
# context_window = 200000
#
# [models.deep.prices]
# input = 3.0
# output = 15.0
# cache_read = 0.30
# cache_write = 3.75

# [models.local]
# api = "openai"
# base_url = "http://127.0.0.1:11434/v1"
# key_env = "OLLAMA_API_KEY"
# model = "qwen2.5:7b"
# context_window = 32768
"#;

/// What [`init_home`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InitReport {
    /// Files and folders that were created.
    pub created: Vec<PathBuf>,
    /// Files that were already there and were left as they are.
    pub kept: Vec<PathBuf>,
    /// Files that were replaced (with `force`), each with where the old one
    /// was moved.
    pub replaced: Vec<(PathBuf, PathBuf)>,
}

/// Creates `home` with a commented `config.toml`, an example `models.toml`
/// and the folders `memory/`, `skills/`, `bots/`, `spill/` and `commands/`.
///
/// A file already there is kept (and listed in [`InitReport::kept`]); with
/// `force` it is moved to `<name>.bak` and written anew.
///
/// # Errors
///
/// [`ConfigError::Write`] if a folder or file cannot be created.
pub fn init_home(home: &Home, force: bool) -> Result<InitReport, ConfigError> {
    let mut report = InitReport::default();
    let folders = [
        home.root().to_owned(),
        home.memory_dir(MAIN_AGENT),
        home.skills_dir(MAIN_AGENT),
        home.root().join("bots"),
        home.spill_dir(),
        home.commands_dir(),
    ];
    for folder in folders {
        if !folder.is_dir() {
            std::fs::create_dir_all(&folder).map_err(|source| ConfigError::Write {
                path: folder.clone(),
                source,
            })?;
            report.created.push(folder);
        }
    }
    for (path, text) in [
        (home.config_file(), DEFAULT_CONFIG),
        (home.models_file(), MODELS_EXAMPLE),
    ] {
        write_file(&path, text, force, &mut report)?;
    }
    Ok(report)
}

/// Creates `home`, or completes one whose creation was cut short: every
/// missing folder and file is created, none that exists is touched. Every
/// command that needs a home calls it on start. Returns what was done, or
/// `None` when the home was already complete.
///
/// # Errors
///
/// As [`init_home`].
pub fn ensure_home(home: &Home) -> Result<Option<InitReport>, ConfigError> {
    let report = init_home(home, false)?;
    Ok((!report.created.is_empty()).then_some(report))
}

/// Writes `text` to a new file at `path`, keeping or moving aside one that is
/// already there.
fn write_file(
    path: &Path,
    text: &str,
    force: bool,
    report: &mut InitReport,
) -> Result<(), ConfigError> {
    let write_error = |source| ConfigError::Write {
        path: path.to_owned(),
        source,
    };
    let mut backup = None;
    if path.exists() {
        if !force {
            report.kept.push(path.to_owned());
            return Ok(());
        }
        let mut name = path.file_name().unwrap_or_default().to_owned();
        name.push(".bak");
        let aside = path.with_file_name(name);
        std::fs::rename(path, &aside).map_err(write_error)?;
        backup = Some(aside);
    }
    publish(path, text).map_err(write_error)?;
    match backup {
        Some(aside) => report.replaced.push((path.to_owned(), aside)),
        None => report.created.push(path.to_owned()),
    }
    Ok(())
}

/// Writes `text` to `path` whole or not at all: into a temporary file in the
/// same folder, then hard-linked under its name (which fails with
/// [`std::io::ErrorKind::AlreadyExists`] instead of replacing a file that
/// appeared meanwhile). The temporary name is removed either way.
///
/// Not flushed to disk: what it writes are defaults, regenerated if lost
/// (see the module's documentation).
fn publish(path: &Path, text: &str) -> std::io::Result<()> {
    let mut name = std::ffi::OsString::from(".");
    name.push(path.file_name().unwrap_or_default());
    name.push(format!(".{}.tmp", std::process::id()));
    let temp = path.with_file_name(name);
    let written = (|| {
        let mut file = std::fs::File::create(&temp)?;
        file.write_all(text.as_bytes())?;
        std::fs::hard_link(&temp, path)
    })();
    let _ = std::fs::remove_file(&temp);
    written
}
