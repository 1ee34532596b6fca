//! pi's machine protocol, as troupe speaks it.
//!
//! pi (`@mariozechner/pi-coding-agent`) runs its own agent loop on a folder
//! with four tools (`read`, `bash`, `edit`, `write`). In `--mode rpc` it
//! reads one JSON command per line on standard input (`prompt`, `steer`,
//! `abort`, `get_state`) and writes responses and events, one JSON object
//! per line, on standard output; in `--mode json -p TASK` it runs one task
//! and writes the same events. Records are split on `\n` only: U+2028 may
//! occur inside its JSON strings, so no generic line reader is used.
//!
//! This module knows pi's words and nothing of actors: the command lines
//! it is started with, the `models.json` that points it at troupe's model
//! relay, the commands written to it, and what each of its events means
//! for the delegation record ([`Event`]) — [`Pi`], its [`Harness`].

use std::path::Path;

use serde_json::{json, Value};

/// The provider name troupe's relay has in pi's `models.json`.
pub const PROVIDER: &str = "troupe";

/// The header that tells the relay which harness calls (a script's
/// `executors` section answers it).
pub const EXECUTOR_HEADER: &str = "x-troupe-executor";

pub use super::harness::{bounded, Event, MAX_EVENT_TEXT};
use super::harness::{compact, text_of, Harness, Setup, Start, Stopping};

/// The variables pi runs with (besides `PATH`, `HOME` and the locale):
/// its own config dir, no network of its own, no telemetry.
pub fn environment(agent_dir: &Path) -> Vec<(String, String)> {
    vec![
        (
            "PI_CODING_AGENT_DIR".into(),
            agent_dir.display().to_string(),
        ),
        ("PI_OFFLINE".into(), "1".into()),
        ("PI_SKIP_VERSION_CHECK".into(), "1".into()),
        ("PI_TELEMETRY".into(), "0".into()),
        ("NO_COLOR".into(), "1".into()),
        ("TERM".into(), "dumb".into()),
    ]
}

/// How pi reaches the relay: `api` is pi's name for the wire format
/// (`openai-completions` or `anthropic-messages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelAccess {
    /// The relay's base URL as pi's client wants it.
    pub base_url: String,
    /// pi's API name.
    pub api: &'static str,
    /// What pi sends as its key (the relay's per-instance secret, or a
    /// placeholder inside an environment).
    pub key: String,
    /// The model's id in the file (and on `--model`).
    pub model: String,
    /// The harness's name, sent in [`EXECUTOR_HEADER`].
    pub executor: String,
}

/// pi's `models.json`: one provider, troupe's relay, with one model.
pub fn models_json(access: &ModelAccess) -> Value {
    json!({
        "providers": {
            PROVIDER: {
                "baseUrl": access.base_url,
                "api": access.api,
                "apiKey": access.key,
                "headers": { EXECUTOR_HEADER: access.executor },
                "compat": {
                    "supportsDeveloperRole": false,
                    "supportsReasoningEffort": false,
                },
                "models": [{ "id": access.model }],
            }
        }
    })
}

pub use crate::environment::relay::model_id;

/// The arguments after pi's entry point for a long-lived RPC session
/// (`session`: a session file to continue).
pub fn rpc_args(model: &str, sessions: &Path, session: Option<&Path>) -> Vec<String> {
    let mut args = vec![
        "--mode".into(),
        "rpc".into(),
        "--provider".into(),
        PROVIDER.into(),
        "--model".into(),
        model.into(),
        "--session-dir".into(),
        sessions.display().to_string(),
    ];
    if let Some(file) = session {
        args.push("--session".into());
        args.push(file.display().to_string());
    }
    args
}

/// One command line for pi.
pub fn command(kind: &str, message: Option<&str>, id: Option<&str>) -> String {
    let mut c = json!({ "type": kind });
    if let Some(m) = message {
        c["message"] = json!(m);
    }
    if let Some(id) = id {
        c["id"] = json!(id);
    }
    format!("{c}\n")
}

/// pi on the machine: long-lived, in its RPC mode.
#[derive(Debug, Clone, Copy)]
pub struct Pi;

impl Harness for Pi {
    fn name(&self) -> &'static str {
        "pi"
    }

    fn long_lived(&self) -> bool {
        true
    }

    fn start(&self, setup: &Setup<'_>) -> Result<Start, String> {
        let api = match setup.api {
            Some(troupe_runtime::model::Api::Anthropic) => "anthropic-messages",
            _ => "openai-completions",
        };
        let base_url = match api {
            "anthropic-messages" => format!("http://{}", setup.relay),
            _ => format!("http://{}/v1", setup.relay),
        };
        let access = ModelAccess {
            base_url,
            api,
            key: setup.key.to_string(),
            model: setup.model.to_string(),
            executor: self.name().to_string(),
        };
        let session = setup.session.map(Path::new);
        Ok(Start {
            args: rpc_args(setup.model, setup.sessions, session),
            env: environment(setup.dir),
            files: vec![(
                setup.dir.join("models.json"),
                models_json(&access).to_string(),
            )],
            input: vec![
                command("prompt", Some(setup.prompt), Some("task")),
                command("get_state", None, Some("state")),
            ],
        })
    }

    fn steer(&self, message: &str) -> Option<String> {
        Some(command("steer", Some(message), Some("steer")))
    }

    fn stop(&self) -> Stopping {
        Stopping::Line(command("abort", None, None))
    }

    fn parse(&self, line: &str) -> Vec<Event> {
        let event = parse(line);
        // What the call cost, when pi knows the model's prices.
        let cost = match &event {
            Event::Assistant { .. } => cost_of(line),
            _ => None,
        };
        match cost {
            Some(usd) => vec![
                event,
                Event::Cost {
                    usd,
                    running: false,
                },
            ],
            None => vec![event],
        }
    }
}

/// The cost pi gives an assistant message (`usage.cost.total`, from the
/// prices in its `models.json`), when above 0.
pub fn cost_of(line: &str) -> Option<f64> {
    let value: Value = serde_json::from_str(line).ok()?;
    value["message"]["usage"]["cost"]["total"]
        .as_f64()
        .filter(|usd| *usd > 0.0)
}

/// Reads one line of pi's output.
pub fn parse(line: &str) -> Event {
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return Event::Garbage;
    };
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return Event::Garbage;
    };
    match kind {
        "response" => {
            let command = value["command"].as_str().unwrap_or_default().to_string();
            if value["success"].as_bool() == Some(false) {
                return Event::Refused {
                    command,
                    error: value["error"].as_str().unwrap_or("refused").to_string(),
                };
            }
            match value["data"]["sessionFile"].as_str() {
                Some(file) if command == "get_state" => Event::Session(file.to_string()),
                _ => Event::Ignored,
            }
        }
        "agent_end" => Event::AgentEnd,
        // JSON mode's first line: the session it writes.
        "session" => match value["id"].as_str() {
            Some(id) => Event::Session(id.to_string()),
            None => Event::Ignored,
        },
        "message_end" => {
            let message = &value["message"];
            if message["role"].as_str() != Some("assistant") {
                return Event::Ignored;
            }
            let usage = &message["usage"];
            let tokens =
                usage["input"].as_u64().unwrap_or(0) + usage["output"].as_u64().unwrap_or(0);
            Event::Assistant {
                text: text_of(&message["content"]),
                tokens,
                stop: message["stopReason"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                error: message["errorMessage"].as_str().map(str::to_string),
            }
        }
        "tool_execution_start" => {
            let name = value["toolName"].as_str().unwrap_or("tool");
            Event::ToolStarted(bounded(&format!(
                "{name} {}",
                describe_args(name, &value["args"])
            )))
        }
        "tool_execution_end" => {
            let name = value["toolName"].as_str().unwrap_or("tool");
            let failed = value["isError"].as_bool() == Some(true);
            let output = text_of(&value["result"]["content"]);
            Event::ToolEnded(bounded(&format!(
                "{name} {}: {}",
                if failed { "failed" } else { "returned" },
                output.trim()
            )))
        }
        "auto_retry_start" | "auto_retry_end" | "compaction_start" | "compaction_end"
        | "extension_error" => Event::Record {
            kind: "note",
            text: bounded(&format!("{kind}: {}", compact(&value))),
        },
        _ => Event::Ignored,
    }
}

/// A tool call's arguments in a line: the command for `bash`, the path
/// for the file tools.
fn describe_args(tool: &str, args: &Value) -> String {
    match (tool, args) {
        ("bash", a) => a["command"].as_str().map(str::to_string),
        (_, a) => a["path"].as_str().map(str::to_string),
    }
    .unwrap_or_else(|| compact(args))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn events_are_read_as_the_record_needs_them() {
        assert_eq!(
            parse(
                r#"{"type":"tool_execution_start","toolCallId":"c1","toolName":"bash","args":{"command":"ls -la"}}"#
            ),
            Event::ToolStarted("bash ls -la".into())
        );
        assert_eq!(
            parse(
                r#"{"type":"tool_execution_end","toolName":"write","result":{"content":[{"type":"text","text":"Wrote 2 bytes"}]},"isError":false}"#
            ),
            Event::ToolEnded("write returned: Wrote 2 bytes".into())
        );
        assert_eq!(
            parse(
                r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"usage":{"input":10,"output":2},"stopReason":"stop"}}"#
            ),
            Event::Assistant {
                text: "Done.".into(),
                tokens: 12,
                stop: "stop".into(),
                error: None
            }
        );
        assert_eq!(
            parse(
                r#"{"id":"s","type":"response","command":"get_state","success":true,"data":{"sessionFile":"/x/s.jsonl"}}"#
            ),
            Event::Session("/x/s.jsonl".into())
        );
        assert_eq!(
            parse(r#"{"type":"agent_end","messages":[]}"#),
            Event::AgentEnd
        );
        assert_eq!(parse("npm WARN something"), Event::Garbage);
        assert_eq!(parse(r#"{"type":"message_update"}"#), Event::Ignored);
    }

    #[test]
    fn a_line_separator_inside_a_string_is_part_of_the_record() {
        let line = "{\"type\":\"message_end\",\"message\":{\"role\":\"assistant\",\"content\":\"a\u{2028}b\"}}";
        assert!(matches!(parse(line), Event::Assistant { text, .. } if text == "a\u{2028}b"));
    }

    #[test]
    fn model_ids_are_what_pi_s_command_line_takes() {
        assert_eq!(model_id("script:/tmp/s.json"), "script--tmp-s.json");
        assert_eq!(model_id("sonnet"), "sonnet");
        assert_eq!(model_id("::"), "model");
    }

    // A `message_end` as pi 0.x prints it with prices in its `models.json`
    // (pi-ai's `Usage`: `cost.total` in dollars).
    #[test]
    fn its_cost_is_read_when_it_knows_the_prices() {
        let line = r#"{"type":"message_end","message":{"role":"assistant","content":[{"type":"text","text":"Done."}],"usage":{"input":10,"output":2,"cacheRead":0,"cacheWrite":0,"totalTokens":12,"cost":{"input":0.00003,"output":0.00003,"cacheRead":0,"cacheWrite":0,"total":0.00006}},"stopReason":"stop"}}"#;
        assert_eq!(cost_of(line), Some(0.00006));
        let events = Pi.parse(line);
        assert_eq!(
            events[1],
            Event::Cost {
                usd: 0.00006,
                running: false
            }
        );
        let free = r#"{"type":"message_end","message":{"role":"assistant","content":[],"usage":{"input":1,"output":1,"cost":{"total":0}},"stopReason":"stop"}}"#;
        assert_eq!(Pi.parse(free).len(), 1);
    }
}
