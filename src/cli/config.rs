//! `troupe config show`: the effective configuration, every key with its
//! value and the layer it came from.
//!
//! The layers are those [`Config::load`] merges, the later winning:
//! the defaults, the home's `config.toml`, the environment
//! (`TROUPE_<SECTION>__<KEY>`, `TROUPE_MODEL`, `TROUPE_LOG`) and `--set`.
//! Where a value came from is found by loading the layers one more at a
//! time and seeing which one changed it, so the answer is the loader's own,
//! not a second reading of the rules. String values of keys named like a
//! secret are masked.

use std::process::ExitCode;

use troupe_runtime::config::Config;
use troupe_runtime::home::Home;

/// `troupe config …`.
#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the effective configuration and where each value came from.
    #[command(after_help = "Examples:
  troupe config show                         every key, its value and its layer
  troupe --set agent.max_steps_per_turn=5 config show
  TROUPE_MODEL=anthropic:claude-sonnet-4-5 troupe config show --json")]
    Show {
        /// One JSON object: each key's `value` and `source`.
        #[arg(long)]
        json: bool,
    },
}

/// Runs `troupe config …`.
pub fn config(
    home: Option<std::path::PathBuf>,
    overrides: &[(String, String)],
    command: ConfigCommand,
) -> anyhow::Result<ExitCode> {
    let ConfigCommand::Show { json } = command;
    let home = home.map_or_else(Home::from_env, Home::new);
    let env = |key: &str| std::env::var(key).ok().filter(|v| !v.is_empty());
    let rows = effective(&home, &env, overrides)?;
    if json {
        let mut out = serde_json::Map::new();
        for row in &rows {
            out.insert(
                row.key.clone(),
                serde_json::json!({"value": row.value, "source": row.source}),
            );
        }
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!(
        "# {} (the home's config file)",
        home.config_file().display()
    );
    let width = rows
        .iter()
        .map(|r| r.key.rsplit_once('.').map_or(0, |(_, k)| k.len()) + r.shown.len())
        .max()
        .unwrap_or(20)
        + 3;
    let mut section = String::new();
    for row in &rows {
        let (head, leaf) = row.key.rsplit_once('.').unwrap_or(("", &row.key));
        if head != section {
            println!("\n[{head}]");
            section = head.to_owned();
        }
        let pair = format!("{leaf} = {}", row.shown);
        println!("{pair:<width$} # {}", row.source);
    }
    Ok(ExitCode::SUCCESS)
}

/// One key of the effective configuration.
#[derive(Debug, PartialEq)]
struct Row {
    /// `section.key` (nested tables joined by dots).
    key: String,
    /// The value (masked for a secret).
    value: toml::Value,
    /// The value as TOML text.
    shown: String,
    /// `default`, `config.toml`, `env TROUPE_…` or `--set`.
    source: String,
}

/// Every key of the configuration `home`, `env` and `overrides` give, with
/// the layer each value came from.
fn effective(
    home: &Home,
    env: &dyn Fn(&str) -> Option<String>,
    overrides: &[(String, String)],
) -> anyhow::Result<Vec<Row>> {
    let nothing = |_: &str| -> Option<String> { None };
    let path = home.config_file();
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => anyhow::bail!("{} cannot be read: {e}", path.display()),
    };
    let in_file: toml::Table = match &text {
        Some(t) => t.parse().unwrap_or_default(),
        None => toml::Table::new(),
    };
    let layers = [
        Config::default(),
        Config::from_layers(&path, text.as_deref(), &nothing, &[])?,
        Config::from_layers(&path, text.as_deref(), env, &[])?,
        Config::from_layers(&path, text.as_deref(), env, overrides)?,
    ];
    let flat: Vec<Vec<(String, toml::Value)>> =
        layers.iter().map(flatten).collect::<anyhow::Result<_>>()?;
    let maps: Vec<std::collections::HashMap<&str, &toml::Value>> = flat
        .iter()
        .map(|layer| layer.iter().map(|(k, v)| (k.as_str(), v)).collect())
        .collect();
    let mut rows = Vec::new();
    for (key, value) in &flat[3] {
        let at = |layer: usize| maps[layer].get(key.as_str()).copied();
        let source = if at(2) != Some(value) {
            "--set".to_owned()
        } else if at(1) != Some(value) {
            env_source(key, env)
        } else if at(0) != Some(value) || lookup(&in_file, key).is_some() {
            "config.toml".to_owned()
        } else {
            "default".to_owned()
        };
        let value = mask(key, value.clone());
        let shown = shown(&value);
        rows.push(Row {
            key: key.clone(),
            value,
            shown,
            source,
        });
    }
    Ok(rows)
}

/// The variable that set `key`: its long form, else its short one.
fn env_source(key: &str, env: &dyn Fn(&str) -> Option<String>) -> String {
    let long = format!("TROUPE_{}", key.replace('.', "__").to_ascii_uppercase());
    let short = match key {
        "agent.model" => Some("TROUPE_MODEL"),
        "log.filter" => Some("TROUPE_LOG"),
        _ => None,
    };
    match short {
        Some(short) if env(&long).is_none() => format!("env {short}"),
        _ => format!("env {long}"),
    }
}

/// The configuration's keys in order, nested tables flattened to dotted keys.
fn flatten(config: &Config) -> anyhow::Result<Vec<(String, toml::Value)>> {
    let value = toml::Value::try_from(config)?;
    let mut out = Vec::new();
    if let Some(table) = value.as_table() {
        walk(table, "", &mut out);
    }
    Ok(out)
}

fn walk(table: &toml::Table, prefix: &str, out: &mut Vec<(String, toml::Value)>) {
    for (key, value) in table {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        match value {
            toml::Value::Table(inner) if !prefix.is_empty() || !inner.is_empty() => {
                walk(inner, &path, out)
            }
            other => out.push((path, other.clone())),
        }
    }
}

fn lookup<'a>(table: &'a toml::Table, key: &str) -> Option<&'a toml::Value> {
    let mut parts = key.split('.');
    let mut value = table.get(parts.next()?)?;
    for part in parts {
        value = value.as_table()?.get(part)?;
    }
    Some(value)
}

/// A secret's value hidden: a non-empty string under a key named like one.
fn mask(key: &str, value: toml::Value) -> toml::Value {
    let leaf = key.rsplit('.').next().unwrap_or(key).to_ascii_lowercase();
    let secret = ["key", "secret", "password", "cookie", "token"]
        .iter()
        .any(|word| leaf.contains(word));
    match value {
        toml::Value::String(s) if secret && !s.is_empty() => {
            toml::Value::String("(set, hidden)".into())
        }
        other => other,
    }
}

fn shown(value: &toml::Value) -> String {
    let mut table = toml::Table::new();
    table.insert("v".into(), value.clone());
    toml::to_string(&table)
        .ok()
        .and_then(|t| t.strip_prefix("v = ").map(|s| s.trim_end().to_owned()))
        .unwrap_or_else(|| value.to_string())
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn each_value_names_the_layer_that_set_it() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        std::fs::write(
            home.config_file(),
            "[agent]\nmax_steps_per_turn = 30\n[log]\njson = false\n",
        )
        .unwrap();
        let env = |k: &str| match k {
            "TROUPE_MODEL" => Some("script:x.json".to_owned()),
            "TROUPE_COMPACTION__THRESHOLD" => Some("0.5".to_owned()),
            _ => None,
        };
        let overrides = [("agent.max_steps_per_turn".to_owned(), "7".to_owned())];
        let rows = effective(&home, &env, &overrides).unwrap();
        let of = |key: &str| {
            let row = rows.iter().find(|r| r.key == key).unwrap();
            (row.shown.clone(), row.source.clone())
        };
        assert_eq!(of("agent.max_steps_per_turn"), ("7".into(), "--set".into()));
        assert_eq!(
            of("agent.model"),
            ("\"script:x.json\"".into(), "env TROUPE_MODEL".into())
        );
        assert_eq!(of("log.json"), ("false".into(), "config.toml".into()));
        assert_eq!(of("log.filter").1, "default");
        let threshold = rows
            .iter()
            .find(|r| r.key.starts_with("compaction.threshold"));
        if let Some(row) = threshold {
            assert_eq!(row.source, "env TROUPE_COMPACTION__THRESHOLD");
        }
    }

    #[test]
    fn secrets_are_masked_and_other_strings_are_not() {
        assert_eq!(
            mask("web.api_key", toml::Value::String("sk-123".into())),
            toml::Value::String("(set, hidden)".into())
        );
        assert_eq!(
            mask("agent.model", toml::Value::String("openai:gpt".into())),
            toml::Value::String("openai:gpt".into())
        );
        assert_eq!(
            mask("budgets.per_turn.tokens", toml::Value::Integer(5)),
            toml::Value::Integer(5)
        );
    }
}
