//! `mcp.json`: the user's MCP servers, in Claude Code's `.mcp.json` format.
//!
//! ```json
//! {"mcpServers": {
//!   "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/notes"]},
//!   "tracker": {"type": "http", "url": "https://tracker.example/mcp",
//!               "headers": {"Authorization": "Bearer ${TRACKER_TOKEN}"},
//!               "trust": "untrusted", "bots": ["scout"]}
//! }}
//! ```
//!
//! Strings in `command`, `args`, `env`, `url` and `headers` expand
//! `${VAR}` and `${VAR:-default}`. troupe adds its own keys per server:
//! `alwaysLoad` (connect at start, tools always on), `trust` (`"untrusted"`
//! asks before every call of a tool that is not read-only), `bots` (bots that
//! get it besides those whose definition names it), `timeout` (seconds a
//! call may take) and `connectTimeout`. A server that is wrong is reported
//! with the file, its name and the key, and the others still load: one typo
//! must not take every server away.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Map, Value};

/// How long a server may take to start and answer `initialize`.
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(30);

/// How a server is reached.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Transport {
    /// A child process speaking JSON-RPC lines on stdin and stdout.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables added to its environment.
        env: BTreeMap<String, String>,
        /// Its working folder (default: troupe's).
        cwd: Option<PathBuf>,
    },
    /// Streamable HTTP at one endpoint.
    Http {
        /// The endpoint.
        url: String,
        /// Headers sent with every request (`Authorization`, …).
        headers: BTreeMap<String, String>,
    },
}

/// How far a server's tools are trusted.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerTrust {
    /// Calls pass the gate like any other tool's.
    #[default]
    Trusted,
    /// Every call of a tool that is not read-only is asked, in every mode.
    Untrusted,
}

/// One server of `mcp.json`, expanded and checked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ServerConfig {
    /// Its name: the `<server>` of `mcp__<server>__<tool>`.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// Connect at start and offer its tools in every model call.
    pub always_load: bool,
    /// How far its tools are trusted.
    pub trust: ServerTrust,
    /// Bots that get it besides those whose definition names it.
    pub bots: Vec<String>,
    /// How long one call may take (default: the dispatcher's).
    pub call_timeout: Option<Duration>,
    /// How long starting and `initialize` may take.
    pub connect_timeout: Duration,
}

/// What was wrong in `mcp.json`: the file, the server and the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize)]
#[error("{}: {}{}{message}", file.display(), server.as_ref().map(|s| format!("server `{s}`: ")).unwrap_or_default(), key.as_ref().map(|k| format!("`{k}`: ")).unwrap_or_default())]
pub struct McpConfigError {
    /// The file.
    pub file: PathBuf,
    /// The server, when the problem is in one.
    pub server: Option<String>,
    /// The key, when the problem is in one.
    pub key: Option<String>,
    /// What was wrong and what to do.
    pub message: String,
}

/// `mcp.json` read: the servers that are right, and what was wrong with the others.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct McpConfig {
    /// The servers, in the file's order.
    pub servers: Vec<ServerConfig>,
    /// One error per server left out (or for the whole file).
    pub problems: Vec<McpConfigError>,
}

impl McpConfig {
    /// Reads `file`; no file means no servers.
    pub fn load(file: &Path, env: &dyn Fn(&str) -> Option<String>) -> McpConfig {
        match std::fs::read_to_string(file) {
            Ok(text) => Self::parse(file, &text, env),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => McpConfig::default(),
            Err(e) => McpConfig {
                servers: Vec::new(),
                problems: vec![problem(file, None, None, format!("cannot be read: {e}"))],
            },
        }
    }

    /// Parses the text of `file`.
    pub fn parse(file: &Path, text: &str, env: &dyn Fn(&str) -> Option<String>) -> McpConfig {
        let mut out = McpConfig::default();
        let root: Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                out.problems.push(problem(
                    file,
                    None,
                    None,
                    format!("is not valid JSON ({e}); fix it, or move it away to start without MCP servers"),
                ));
                return out;
            }
        };
        let Some(servers) = root.get("mcpServers") else {
            if !root.is_object() {
                out.problems.push(problem(
                    file,
                    None,
                    None,
                    "must be an object with an `mcpServers` object".into(),
                ));
            }
            return out;
        };
        let Some(servers) = servers.as_object() else {
            out.problems.push(problem(
                file,
                None,
                Some("mcpServers"),
                "must be an object of servers by name".into(),
            ));
            return out;
        };
        for (name, body) in servers {
            match server(file, name, body, env) {
                Ok(s) => out.servers.push(s),
                Err(e) => out.problems.push(e),
            }
        }
        out
    }

    /// The server called `name`.
    pub fn get(&self, name: &str) -> Option<&ServerConfig> {
        self.servers.iter().find(|s| s.name == name)
    }
}

fn problem(
    file: &Path,
    server: Option<&str>,
    key: Option<&str>,
    message: String,
) -> McpConfigError {
    McpConfigError {
        file: file.to_path_buf(),
        server: server.map(str::to_string),
        key: key.map(str::to_string),
        message,
    }
}

/// Whether `name` may name a server (it becomes part of tool names).
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        && !name.contains("__")
}

const KEYS: &[&str] = &[
    "type",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "alwaysLoad",
    "trust",
    "bots",
    "timeout",
    "connectTimeout",
];

fn server(
    file: &Path,
    name: &str,
    body: &Value,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, McpConfigError> {
    let err = |key: Option<&str>, message: String| problem(file, Some(name), key, message);
    if !valid_server_name(name) {
        return Err(err(
            None,
            "is not a valid server name: use 1 to 40 letters, digits, `-` or single `_`".into(),
        ));
    }
    let Some(map) = body.as_object() else {
        return Err(err(None, "must be an object".into()));
    };
    if let Some(key) = map.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(err(
            Some(key),
            format!("is not a known key; the keys are {}", KEYS.join(", ")),
        ));
    }
    let fields = Fields {
        map,
        env,
        err: &err,
    };
    let kind = fields.string("type")?;
    let kind = kind.as_deref().unwrap_or(if map.contains_key("url") {
        "http"
    } else {
        "stdio"
    });
    let transport = match kind {
        "stdio" => {
            let Some(command) = fields.string("command")? else {
                return Err(err(
                    Some("command"),
                    "is missing: a stdio server needs the program to start".into(),
                ));
            };
            Transport::Stdio {
                command,
                args: fields.strings("args")?,
                env: fields.table("env")?,
                cwd: fields.string("cwd")?.map(PathBuf::from),
            }
        }
        "http" => {
            let Some(url) = fields.string("url")? else {
                return Err(err(
                    Some("url"),
                    "is missing: an http server needs its endpoint".into(),
                ));
            };
            if !(url.starts_with("http://") || url.starts_with("https://")) {
                return Err(err(
                    Some("url"),
                    format!("`{url}` is not an http:// or https:// address"),
                ));
            }
            Transport::Http {
                url,
                headers: fields.table("headers")?,
            }
        }
        "sse" => return Err(err(
            Some("type"),
            "the legacy HTTP+SSE transport is not supported; use `\"type\": \"http\"` with the \
                 server's streamable HTTP endpoint (most servers serve both)"
                .into(),
        )),
        other => {
            return Err(err(
                Some("type"),
                format!("`{other}` is not a transport; use \"stdio\", \"http\" or \"sse\""),
            ))
        }
    };
    let trust = match fields.string("trust")?.as_deref() {
        None | Some("trusted") => ServerTrust::Trusted,
        Some("untrusted") => ServerTrust::Untrusted,
        Some(other) => {
            return Err(err(
                Some("trust"),
                format!("`{other}` is not a trust level; use \"trusted\" or \"untrusted\""),
            ))
        }
    };
    Ok(ServerConfig {
        name: name.to_string(),
        transport,
        always_load: fields.bool("alwaysLoad")?.unwrap_or(false),
        trust,
        bots: fields.strings("bots")?,
        call_timeout: fields.seconds("timeout")?,
        connect_timeout: fields
            .seconds("connectTimeout")?
            .unwrap_or(DEFAULT_CONNECT_TIMEOUT),
    })
}

struct Fields<'a> {
    map: &'a Map<String, Value>,
    env: &'a dyn Fn(&str) -> Option<String>,
    err: &'a dyn Fn(Option<&str>, String) -> McpConfigError,
}

impl Fields<'_> {
    fn expand(&self, key: &str, text: &str) -> Result<String, McpConfigError> {
        expand(text, self.env).map_err(|m| (self.err)(Some(key), m))
    }

    fn string(&self, key: &str) -> Result<Option<String>, McpConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => self.expand(key, s).map(Some),
            Some(_) => Err((self.err)(Some(key), "must be a string".into())),
        }
    }

    fn strings(&self, key: &str) -> Result<Vec<String>, McpConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(Vec::new()),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| match v {
                    Value::String(s) => self.expand(key, s),
                    _ => Err((self.err)(Some(key), "must be a list of strings".into())),
                })
                .collect(),
            Some(_) => Err((self.err)(Some(key), "must be a list of strings".into())),
        }
    }

    fn table(&self, key: &str) -> Result<BTreeMap<String, String>, McpConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(BTreeMap::new()),
            Some(Value::Object(items)) => items
                .iter()
                .map(|(k, v)| match v {
                    Value::String(s) => Ok((k.clone(), self.expand(key, s)?)),
                    _ => Err((self.err)(Some(key), format!("`{k}` must be a string"))),
                })
                .collect(),
            Some(_) => Err((self.err)(Some(key), "must be an object of strings".into())),
        }
    }

    fn bool(&self, key: &str) -> Result<Option<bool>, McpConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(_) => Err((self.err)(Some(key), "must be true or false".into())),
        }
    }

    fn seconds(&self, key: &str) -> Result<Option<Duration>, McpConfigError> {
        match self.map.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_f64() {
                Some(s) if s > 0.0 && s <= 86_400.0 => Ok(Some(Duration::from_secs_f64(s))),
                _ => Err((self.err)(
                    Some(key),
                    "must be a number of seconds between 0 and 86400".into(),
                )),
            },
        }
    }
}

/// Expands `${VAR}` and `${VAR:-default}` in `text`. A variable that is not
/// set and has no default is an error naming it.
pub fn expand(text: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`{text}` opens `${{` without a closing `}}`"));
        };
        let inner = &after[..end];
        let (var, default) = match inner.split_once(":-") {
            Some((v, d)) => (v, Some(d)),
            None => (inner, None),
        };
        let valid = !var.is_empty()
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !var.starts_with(|c: char| c.is_ascii_digit());
        if !valid {
            return Err(format!("`${{{inner}}}` does not name a variable"));
        }
        match default {
            Some(default) => match env(var).filter(|v| !v.is_empty()) {
                Some(value) => out.push_str(&value),
                None => out.push_str(default),
            },
            None => match env(var) {
                Some(value) => out.push_str(&value),
                None => {
                    return Err(format!(
                        "`${{{var}}}` is not set; set it, or write `${{{var}:-default}}`"
                    ))
                }
            },
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
#[path = "config_tests.rs"]
mod tests;
