//! The environment and command-line layers over `config.toml`.
//!
//! Every layer is merged into one `toml::Table` that is deserialized once, so
//! a value from `TROUPE_AGENT__MAX_STEPS_PER_TURN` or `--set` is checked
//! exactly like the same value in the file. Each value is also checked on its
//! own as it is added, so an error names the variable or flag it came from.

use super::keys::{env_var, KEYS, SHORT_ENV};
use super::{Config, ConfigError};
use crate::diagnostic::describe;

/// Where a layered value came from, to name it in errors.
#[derive(Debug, Clone)]
pub(crate) enum Source {
    /// An environment variable.
    Env(String),
    /// A `section.key=value` override from the command line.
    Override(String),
}

impl Source {
    fn error(&self, message: String) -> ConfigError {
        match self {
            Self::Env(var) => ConfigError::Env {
                var: var.clone(),
                message,
            },
            Self::Override(key) => ConfigError::Override {
                key: key.clone(),
                message,
            },
        }
    }
}

/// The values the environment sets, as (key, value, source), short forms
/// first so the long forms win. Empty variables are skipped.
pub(crate) fn from_env(env: &dyn Fn(&str) -> Option<String>) -> Vec<(String, String, Source)> {
    let short = SHORT_ENV
        .iter()
        .map(|(var, key)| ((*var).to_owned(), (*key).to_owned()));
    let long = KEYS.iter().map(|key| (env_var(key), (*key).to_owned()));
    short
        .chain(long)
        .filter_map(|(var, key)| {
            // An empty variable counts as unset, as for `TROUPE_HOME`.
            let value = env(&var).filter(|value| !value.is_empty())?;
            Some((key, value, Source::Env(var)))
        })
        .collect()
}

/// The command-line overrides, as (key, value, source).
pub(crate) fn from_overrides(overrides: &[(String, String)]) -> Vec<(String, String, Source)> {
    overrides
        .iter()
        .map(|(key, value)| {
            (
                key.trim().to_owned(),
                value.clone(),
                Source::Override(key.trim().to_owned()),
            )
        })
        .collect()
}

/// Sets `key` to `raw` in `table`, after checking the value on its own.
///
/// `raw` is read as a TOML value when it is one (`10`, `true`, `["a"]`,
/// `"quoted"`), else as a string (`openai:gpt-4o`, `Europe/Paris`). When the
/// TOML reading has the wrong type but the string reading fits (a model
/// named `2024-05-01`), the string is kept.
pub(crate) fn apply(
    table: &mut toml::Table,
    key: &str,
    raw: &str,
    source: &Source,
) -> Result<(), ConfigError> {
    let path: Vec<&str> = key.split('.').collect();
    if path.len() < 2 || path.iter().any(|part| part.is_empty()) {
        return Err(source.error(format!(
            "`{key}` is not a key; write it as section.key, such as agent.model"
        )));
    }
    let string = toml::Value::String(raw.to_owned());
    let candidates = match parse_value(raw) {
        Some(value) if value != string => vec![value, string],
        _ => vec![string],
    };
    let mut first_error = None;
    for value in candidates {
        let single = nest(&path, value.clone());
        match toml::Value::Table(single).try_into::<Config>() {
            Ok(_) => {
                insert(table, &path, value);
                return Ok(());
            }
            Err(error) => {
                first_error.get_or_insert(error);
            }
        }
    }
    let message = first_error.map_or_else(
        || format!("`{key}` could not be set"),
        |error| describe(&error, None, super::keys::home_of).message,
    );
    Err(source.error(message))
}

/// `raw` as a TOML value, if it is exactly one.
fn parse_value(raw: &str) -> Option<toml::Value> {
    let mut table: toml::Table = format!("value = {raw}").parse().ok()?;
    if table.len() != 1 {
        return None;
    }
    table.remove("value")
}

/// A table holding `value` at `path`.
fn nest(path: &[&str], value: toml::Value) -> toml::Table {
    let mut table = toml::Table::new();
    insert(&mut table, path, value);
    table
}

/// Puts `value` at `path` in `table`, creating (or replacing non-table)
/// tables on the way.
fn insert(table: &mut toml::Table, path: &[&str], value: toml::Value) {
    let Some((last, parents)) = path.split_last() else {
        return;
    };
    let mut current = table;
    for part in parents {
        let entry = current
            .entry((*part).to_owned())
            .or_insert_with(|| toml::Value::Table(toml::Table::new()));
        if !entry.is_table() {
            *entry = toml::Value::Table(toml::Table::new());
        }
        let toml::Value::Table(next) = entry else {
            return;
        };
        current = next;
    }
    current.insert((*last).to_owned(), value);
}
