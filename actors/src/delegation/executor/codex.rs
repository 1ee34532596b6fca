//! Codex (`@openai/codex`, its native program), as troupe drives it.
//!
//! Codex runs one task per process: `codex exec --json TASK`, continued
//! by a new process with `codex exec resume --json SESSION MESSAGE`. Its
//! input is closed; it is stopped by an interrupt. Each line of its output
//! is an event — `thread.started` (its session id), `item.started` /
//! `item.completed` (its messages, the commands it runs, its file changes,
//! its errors), `turn.completed` (the task's end, with its usage) or
//! `turn.failed`. Its model calls go to troupe's relay in OpenAI's
//! Responses API, through a provider given on its command line (`-c
//! model_providers.troupe…`: the relay's address, the secret read from
//! `TROUPE_RELAY_KEY`, the harness's name in a header), so no config file
//! is shared between instances. Its home (`CODEX_HOME`) is the harness's
//! sessions folder. Its commands run in troupe's sandbox, which confines
//! the whole harness (`sandbox_mode = "danger-full-access"` inside it):
//! Codex's own `workspace-write` sandbox cannot nest there (tried on
//! 0.171.0, `codex sandbox -c sandbox_mode="workspace-write"`): it runs its
//! commands in a bubblewrap of its own, whose user namespace cannot be set
//! up inside troupe's (`bwrap: setting up uid map: Operation not
//! permitted`), and its landlock-only fallback (`use_legacy_landlock`)
//! refuses to restrict files without bubblewrap. (Under a `/tmp` home it
//! also refuses to make its `codex-linux-sandbox` helper, and fails even
//! bare.) troupe's sandbox gives the same confinement: its folder writable,
//! the rest read-only, troupe's home hidden.

use serde_json::Value;
use troupe_runtime::model::Api;

use super::harness::{bounded, compact, wrong_api, Event, Harness, Setup, Start, Stopping};

/// Codex on the machine.
#[derive(Debug, Clone, Copy)]
pub struct Codex;

/// The variable its provider reads the relay's secret from.
const KEY_VARIABLE: &str = "TROUPE_RELAY_KEY";

impl Harness for Codex {
    fn name(&self) -> &'static str {
        "codex"
    }

    fn long_lived(&self) -> bool {
        false
    }

    fn start(&self, setup: &Setup<'_>) -> Result<Start, String> {
        if setup.api == Some(Api::Anthropic) {
            return Err(wrong_api(
                self.name(),
                "OpenAI's Responses API",
                Api::Anthropic,
            ));
        }
        let mut args: Vec<String> = vec!["exec".into()];
        if setup.session.is_some() {
            args.push("resume".into());
        }
        args.push("--json".into());
        args.push("--skip-git-repo-check".into());
        let config = [
            format!("model={}", toml_string(setup.model)),
            "model_provider=\"troupe\"".into(),
            "model_providers.troupe.name=\"troupe\"".into(),
            format!(
                "model_providers.troupe.base_url={}",
                toml_string(&format!("http://{}/v1", setup.relay))
            ),
            format!("model_providers.troupe.env_key=\"{KEY_VARIABLE}\""),
            "model_providers.troupe.wire_api=\"responses\"".into(),
            format!(
                "model_providers.troupe.http_headers={{\"x-troupe-executor\"={}}}",
                toml_string(self.name())
            ),
            "sandbox_mode=\"danger-full-access\"".into(),
            "approval_policy=\"never\"".into(),
            "check_for_update_on_startup=false".into(),
            "analytics.enabled=false".into(),
            "feedback.enabled=false".into(),
        ];
        for c in config {
            args.push("-c".into());
            args.push(c);
        }
        if let Some(session) = setup.session {
            args.push(session.to_string());
        }
        args.push("--".into());
        args.push(setup.prompt.to_string());
        Ok(Start {
            args,
            env: vec![
                ("CODEX_HOME".into(), setup.sessions.display().to_string()),
                (KEY_VARIABLE.into(), setup.key.to_string()),
                ("NO_COLOR".into(), "1".into()),
                ("TERM".into(), "dumb".into()),
            ],
            files: Vec::new(),
            input: Vec::new(),
        })
    }

    fn steer(&self, _message: &str) -> Option<String> {
        None
    }

    fn stop(&self) -> Stopping {
        Stopping::Interrupt
    }

    fn parse(&self, line: &str) -> Vec<Event> {
        parse(line)
    }
}

/// `text` as a TOML string.
fn toml_string(text: &str) -> String {
    Value::String(text.to_string()).to_string()
}

/// Reads one line of Codex's output.
pub fn parse(line: &str) -> Vec<Event> {
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return vec![Event::Garbage];
    };
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return vec![Event::Garbage];
    };
    let item = &value["item"];
    match (kind, item["type"].as_str()) {
        ("thread.started", _) => match value["thread_id"].as_str() {
            Some(id) => vec![Event::Session(id.to_string())],
            None => vec![Event::Ignored],
        },
        ("item.started", Some("command_execution")) => vec![Event::ToolStarted(bounded(&format!(
            "bash {}",
            item["command"].as_str().unwrap_or_default()
        )))],
        ("item.completed", Some("command_execution")) => {
            let failed = item["exit_code"].as_i64().is_some_and(|c| c != 0)
                || item["status"].as_str() == Some("failed");
            vec![Event::ToolEnded(bounded(&format!(
                "bash {}: {}",
                if failed { "failed" } else { "returned" },
                item["aggregated_output"]
                    .as_str()
                    .unwrap_or_default()
                    .trim()
            )))]
        }
        ("item.completed", Some("agent_message")) => vec![Event::Assistant {
            text: item["text"].as_str().unwrap_or_default().to_string(),
            tokens: 0,
            stop: String::new(),
            error: None,
        }],
        ("item.completed", Some("file_change")) => {
            let changes: Vec<String> = item["changes"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|c| {
                    format!(
                        "{} {}",
                        c["kind"].as_str().unwrap_or("changed"),
                        c["path"].as_str().unwrap_or("?")
                    )
                })
                .collect();
            vec![Event::ToolEnded(bounded(&format!(
                "patch {}: {}",
                item["status"].as_str().unwrap_or("applied"),
                changes.join(", ")
            )))]
        }
        ("item.completed", Some("error")) | ("error", _) => vec![Event::Record {
            kind: "note",
            text: bounded(&format!(
                "error: {}",
                item["message"]
                    .as_str()
                    .or(value["message"].as_str())
                    .unwrap_or_default()
            )),
        }],
        ("item.completed", Some("reasoning")) => vec![Event::Ignored],
        ("item.completed", Some(other)) => {
            vec![Event::ToolEnded(bounded(&format!(
                "{other}: {}",
                compact(item)
            )))]
        }
        ("turn.completed", _) => {
            let usage = &value["usage"];
            let tokens = usage["input_tokens"].as_u64().unwrap_or(0)
                + usage["output_tokens"].as_u64().unwrap_or(0);
            vec![
                Event::Assistant {
                    text: String::new(),
                    tokens,
                    stop: "completed".into(),
                    error: None,
                },
                Event::AgentEnd,
            ]
        }
        ("turn.failed", _) => vec![
            Event::Assistant {
                text: String::new(),
                tokens: 0,
                stop: "failed".into(),
                error: Some(
                    value["error"]["message"]
                        .as_str()
                        .unwrap_or("its turn failed")
                        .to_string(),
                ),
            },
            Event::AgentEnd,
        ],
        _ => vec![Event::Ignored],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    // Lines as Codex 0.171.0 printed them against troupe's relay.
    #[test]
    fn its_events_are_read_as_the_record_needs_them() {
        assert_eq!(
            parse(
                r#"{"type":"thread.started","thread_id":"01a23d3d-e262-7791-a3aa-6603ea21bef7"}"#
            ),
            vec![Event::Session(
                "01a23d3d-e262-7791-a3aa-6603ea21bef7".into()
            )]
        );
        assert_eq!(parse(r#"{"type":"turn.started"}"#), vec![Event::Ignored]);
        assert_eq!(
            parse(
                r#"{"type":"item.started","item":{"id":"item_1","type":"command_execution","command":"/bin/bash -lc 'printf hi > hello.txt'","aggregated_output":"","exit_code":null,"status":"in_progress"}}"#
            ),
            vec![Event::ToolStarted(
                "bash /bin/bash -lc 'printf hi > hello.txt'".into()
            )]
        );
        assert_eq!(
            parse(
                r#"{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls","aggregated_output":"a\nb\n","exit_code":0,"status":"completed"}}"#
            ),
            vec![Event::ToolEnded("bash returned: a\nb".into())]
        );
        assert_eq!(
            parse(
                r#"{"type":"item.completed","item":{"id":"item_2","type":"agent_message","text":"Hello from relay."}}"#
            ),
            vec![Event::Assistant {
                text: "Hello from relay.".into(),
                tokens: 0,
                stop: String::new(),
                error: None
            }]
        );
        assert_eq!(
            parse(
                r#"{"type":"item.completed","item":{"id":"item_0","type":"error","message":"Model metadata for `m` not found."}}"#
            ),
            vec![Event::Record {
                kind: "note",
                text: "error: Model metadata for `m` not found.".into()
            }]
        );
        assert_eq!(
            parse(
                r#"{"type":"turn.completed","usage":{"input_tokens":5,"cached_input_tokens":0,"output_tokens":3,"reasoning_output_tokens":0}}"#
            ),
            vec![
                Event::Assistant {
                    text: String::new(),
                    tokens: 8,
                    stop: "completed".into(),
                    error: None
                },
                Event::AgentEnd
            ]
        );
        assert_eq!(
            parse(r#"{"type":"turn.failed","error":{"message":"stream disconnected"}}"#)[0],
            Event::Assistant {
                text: String::new(),
                tokens: 0,
                stop: "failed".into(),
                error: Some("stream disconnected".into())
            }
        );
        assert_eq!(
            parse("Reading additional input from stdin..."),
            vec![Event::Garbage]
        );
    }

    #[test]
    fn a_resumed_task_names_its_session_before_the_message() {
        let setup = Setup {
            dir: std::path::Path::new("/tmp/i"),
            sessions: std::path::Path::new("/tmp/s"),
            folder: std::path::Path::new("/tmp/p"),
            relay: "127.0.0.1:4000".into(),
            key: "k",
            model: "m",
            api: None,
            prompt: "go on",
            session: Some("01a2"),
            prompts: true,
        };
        let start = Codex.start(&setup).unwrap();
        assert_eq!(&start.args[..2], &["exec", "resume"]);
        assert!(start
            .args
            .ends_with(&["01a2".into(), "--".into(), "go on".into()]));
        assert!(start
            .args
            .contains(&"model_providers.troupe.base_url=\"http://127.0.0.1:4000/v1\"".to_string()));
        assert!(start.input.is_empty());
        assert!(Codex
            .start(&Setup {
                api: Some(Api::Anthropic),
                ..setup
            })
            .unwrap_err()
            .contains("Responses API"));
    }
}
