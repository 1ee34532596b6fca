//! Claude Code (`@anthropic-ai/claude-code`), as troupe drives it.
//!
//! It runs long-lived in its print mode with JSON on both sides
//! (`claude -p --input-format stream-json --output-format stream-json
//! --verbose`): each line of its input is a user message (the task, then
//! any steer) or a control request (`interrupt`, the stop); each line of its
//! output is a record — `system`/`init` (its session id), `assistant` (text
//! and tool calls), `user` (tool results), `result` (the task's end, with
//! its usage and cost). Its model calls go to troupe's relay in Anthropic's
//! messages API (`ANTHROPIC_BASE_URL`, the relay's secret as its key, the
//! harness's name in `ANTHROPIC_CUSTOM_HEADERS`); every model alias it has
//! (haiku, sonnet, opus, its subagents') is the one model troupe gives it.
//! Its config and sessions live in `CLAUDE_CONFIG_DIR`, the harness's
//! sessions folder, so `resume` continues a session by its id
//! (`--resume`). File edits in its folder are accepted (`acceptEdits`) and
//! its commands allowed (`--allowedTools Bash`): it runs in troupe's
//! sandbox, like pi, which runs commands unasked. What else it would ask
//! about (tried on 2.1.332 in `acceptEdits`: a write outside its folder, a
//! web fetch or search, an MCP tool) it asks troupe's user: its
//! `--permission-prompt-tool` is the MCP tool its relay serves
//! (`relay::prompts`), named in an `--mcp-config` file of its own
//! (`--strict-mcp-config`: no other server is loaded). Where no relay serves
//! them, such calls are denied, and its report names them.

use serde_json::{json, Value};
use troupe_runtime::model::Api;

use crate::environment::relay::prompts;

use super::harness::{
    bounded, compact, text_of, wrong_api, Event, Harness, Setup, Start, Stopping,
};
use super::limit::RateLimit;

/// Claude Code on the machine.
#[derive(Debug, Clone, Copy)]
pub struct ClaudeCode;

/// The header naming the harness to the relay.
const EXECUTOR_HEADER: &str = "x-troupe-executor";

impl Harness for ClaudeCode {
    fn name(&self) -> &'static str {
        "claude-code"
    }

    fn long_lived(&self) -> bool {
        true
    }

    fn start(&self, setup: &Setup<'_>) -> Result<Start, String> {
        if setup.api == Some(Api::Openai) {
            return Err(wrong_api(self.name(), "Anthropic messages", Api::Openai));
        }
        let mut args: Vec<String> = [
            "-p",
            "--input-format",
            "stream-json",
            "--output-format",
            "stream-json",
            "--verbose",
            "--permission-mode",
            "acceptEdits",
            "--allowedTools",
            "Bash",
            "--model",
        ]
        .into_iter()
        .map(String::from)
        .collect();
        args.push(setup.model.to_string());
        let mut files = Vec::new();
        if setup.prompts {
            // Its permission prompts go to the relay's MCP tool, behind the
            // relay's key; the file holds the key, so it is the owner's alone.
            let config = setup.dir.join("mcp.json");
            let servers = json!({"mcpServers": {prompts::SERVER: {
                "type": "http",
                "url": format!("http://{}{}", setup.relay, prompts::PATH),
                "headers": {"Authorization": format!("Bearer {}", setup.key)},
            }}});
            files.push((config.clone(), servers.to_string()));
            args.extend([
                "--mcp-config".to_string(),
                config.display().to_string(),
                "--strict-mcp-config".to_string(),
                "--permission-prompt-tool".to_string(),
                format!("mcp__{}__{}", prompts::SERVER, prompts::TOOL),
            ]);
        }
        if let Some(session) = setup.session {
            args.push("--resume".into());
            args.push(session.to_string());
        }
        let model = setup.model.to_string();
        let mut env: Vec<(String, String)> = vec![
            (
                "CLAUDE_CONFIG_DIR".into(),
                setup.sessions.display().to_string(),
            ),
            (
                "ANTHROPIC_BASE_URL".into(),
                format!("http://{}", setup.relay),
            ),
            ("ANTHROPIC_API_KEY".into(), setup.key.to_string()),
            (
                "ANTHROPIC_CUSTOM_HEADERS".into(),
                format!("{EXECUTOR_HEADER}: {}", self.name()),
            ),
        ];
        for alias in [
            "ANTHROPIC_MODEL",
            "ANTHROPIC_DEFAULT_HAIKU_MODEL",
            "ANTHROPIC_DEFAULT_SONNET_MODEL",
            "ANTHROPIC_DEFAULT_OPUS_MODEL",
            "ANTHROPIC_SMALL_FAST_MODEL",
            "CLAUDE_CODE_SUBAGENT_MODEL",
        ] {
            env.push((alias.into(), model.clone()));
        }
        for off in [
            "DISABLE_AUTOUPDATER",
            "DISABLE_TELEMETRY",
            "DISABLE_ERROR_REPORTING",
            "DISABLE_BUG_COMMAND",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC",
        ] {
            env.push((off.into(), "1".into()));
        }
        env.push(("NO_COLOR".into(), "1".into()));
        env.push(("TERM".into(), "dumb".into()));
        Ok(Start {
            args,
            env,
            files,
            input: vec![user_message(setup.prompt)],
        })
    }

    fn steer(&self, message: &str) -> Option<String> {
        Some(user_message(message))
    }

    fn stop(&self) -> Stopping {
        let interrupt = json!({
            "type": "control_request",
            "request_id": "troupe-stop",
            "request": {"subtype": "interrupt"},
        });
        Stopping::Line(format!("{interrupt}\n"))
    }

    fn parse(&self, line: &str) -> Vec<Event> {
        parse(line)
    }
}

/// A user message on its input.
fn user_message(text: &str) -> String {
    let line = json!({
        "type": "user",
        "message": {"role": "user", "content": [{"type": "text", "text": text}]},
        "parent_tool_use_id": null,
    });
    format!("{line}\n")
}

/// Reads one line of Claude Code's output.
pub fn parse(line: &str) -> Vec<Event> {
    let Ok(value) = serde_json::from_str::<Value>(line) else {
        return vec![Event::Garbage];
    };
    let Some(kind) = value.get("type").and_then(Value::as_str) else {
        return vec![Event::Garbage];
    };
    match kind {
        "system" => match value["subtype"].as_str() {
            Some("init") => match value["session_id"].as_str() {
                Some(id) => vec![Event::Session(id.to_string())],
                None => vec![Event::Ignored],
            },
            Some("api_retry" | "compact_boundary") => vec![Event::Record {
                kind: "note",
                text: bounded(&format!("{}: {}", value["subtype"], compact(&value))),
            }],
            _ => vec![Event::Ignored],
        },
        "assistant" => {
            // Its subagents' messages are theirs, not the task's answer.
            if !value["parent_tool_use_id"].is_null() {
                return vec![Event::Ignored];
            }
            let content = &value["message"]["content"];
            let mut events = Vec::new();
            let text = text_of(content);
            if !text.trim().is_empty() {
                events.push(Event::Assistant {
                    text,
                    tokens: 0,
                    stop: value["message"]["stop_reason"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string(),
                    error: None,
                });
            }
            for call in content.as_array().into_iter().flatten() {
                if call["type"].as_str() == Some("tool_use") {
                    let name = call["name"].as_str().unwrap_or("tool");
                    events.push(Event::ToolStarted(bounded(&format!(
                        "{name} {}",
                        describe_input(&call["input"])
                    ))));
                }
            }
            if events.is_empty() {
                events.push(Event::Ignored);
            }
            events
        }
        "user" => {
            if !value["parent_tool_use_id"].is_null() {
                return vec![Event::Ignored];
            }
            let results: Vec<Event> = value["message"]["content"]
                .as_array()
                .into_iter()
                .flatten()
                .filter(|part| part["type"].as_str() == Some("tool_result"))
                .map(|part| {
                    let failed = part["is_error"].as_bool() == Some(true);
                    Event::ToolEnded(bounded(&format!(
                        "{}: {}",
                        if failed { "failed" } else { "returned" },
                        text_of(&part["content"]).trim()
                    )))
                })
                .collect();
            if results.is_empty() {
                vec![Event::Ignored]
            } else {
                results
            }
        }
        "result" => {
            let usage = &value["usage"];
            let tokens = ["input_tokens", "output_tokens", "cache_read_input_tokens"]
                .iter()
                .map(|k| usage[*k].as_u64().unwrap_or(0))
                .sum();
            let subtype = value["subtype"].as_str().unwrap_or_default().to_string();
            let failed = value["is_error"].as_bool() == Some(true);
            let said = value["result"].as_str().unwrap_or_default().to_string();
            let error = failed.then(|| {
                let denials = value["permission_denials"]
                    .as_array()
                    .filter(|d| !d.is_empty())
                    .map(|d| format!(" (permissions it was denied: {})", compact(&json!(d))))
                    .unwrap_or_default();
                match said.trim() {
                    "" => format!("{subtype}{denials}"),
                    text => format!("{text}{denials}"),
                }
            });
            // Its text is the last message's, already recorded.
            let mut events = vec![Event::Assistant {
                text: String::new(),
                tokens,
                stop: subtype,
                error,
            }];
            // The running total of this process's calls (cumulative across
            // the turns of a streaming-input session).
            if let Some(usd) = value["total_cost_usd"].as_f64() {
                events.push(Event::Cost { usd, running: true });
            }
            events.push(Event::AgentEnd);
            events
        }
        "rate_limit_event" => match RateLimit::of(&value["rate_limit_info"]) {
            Some(state) => vec![Event::RateLimit(state)],
            None => vec![Event::Ignored],
        },
        "control_response" => match value["response"]["subtype"].as_str() {
            Some("error") => vec![Event::Refused {
                command: value["response"]["request_id"]
                    .as_str()
                    .unwrap_or("control request")
                    .to_string(),
                error: value["response"]["error"]
                    .as_str()
                    .unwrap_or("refused")
                    .to_string(),
            }],
            _ => vec![Event::Ignored],
        },
        _ => vec![Event::Ignored],
    }
}

/// A tool call's input in a line: the command, the file, else the whole.
fn describe_input(input: &Value) -> String {
    ["command", "file_path", "path", "pattern", "url"]
        .iter()
        .find_map(|k| input[*k].as_str())
        .map_or_else(|| compact(input), str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    // Lines as Claude Code 2.1.332 printed them against troupe's relay.
    #[test]
    fn its_records_are_read_as_the_record_needs_them() {
        assert_eq!(
            parse(
                r#"{"type":"system","subtype":"init","cwd":"/p","session_id":"7573864b-d29d","tools":["Bash"],"model":"m","permissionMode":"acceptEdits"}"#
            ),
            vec![Event::Session("7573864b-d29d".into())]
        );
        assert_eq!(
            parse(
                r#"{"type":"assistant","message":{"id":"msg_1","role":"assistant","content":[{"type":"text","text":"Writing it."},{"type":"tool_use","id":"toolu_1","name":"Write","input":{"file_path":"/p/hello.txt","content":"hi"}}],"stop_reason":null},"parent_tool_use_id":null,"session_id":"s"}"#
            ),
            vec![
                Event::Assistant {
                    text: "Writing it.".into(),
                    tokens: 0,
                    stop: String::new(),
                    error: None
                },
                Event::ToolStarted("Write /p/hello.txt".into())
            ]
        );
        assert_eq!(
            parse(
                r#"{"type":"user","message":{"role":"user","content":[{"tool_use_id":"toolu_1","type":"tool_result","content":"File created successfully at: /p/hello.txt"}]},"parent_tool_use_id":null,"session_id":"s"}"#
            ),
            vec![Event::ToolEnded(
                "returned: File created successfully at: /p/hello.txt".into()
            )]
        );
        assert_eq!(
            parse(
                r#"{"type":"result","subtype":"success","is_error":false,"duration_ms":900,"num_turns":2,"result":"Wrote hello.txt.","session_id":"s","total_cost_usd":0.0001,"usage":{"input_tokens":5,"cache_read_input_tokens":0,"output_tokens":3},"permission_denials":[]}"#
            ),
            vec![
                Event::Assistant {
                    text: String::new(),
                    tokens: 8,
                    stop: "success".into(),
                    error: None
                },
                Event::Cost {
                    usd: 0.0001,
                    running: true
                },
                Event::AgentEnd
            ]
        );
        assert_eq!(parse("Error: something"), vec![Event::Garbage]);
        assert_eq!(
            parse(r#"{"type":"stream_event","event":{}}"#),
            vec![Event::Ignored]
        );
    }

    #[test]
    fn a_failed_task_says_why_and_what_it_was_denied() {
        let events = parse(
            r#"{"type":"result","subtype":"error_during_execution","is_error":true,"result":"","usage":{},"permission_denials":[{"tool_name":"Bash","tool_input":{"command":"rm -rf x"}}]}"#,
        );
        let Event::Assistant { error: Some(e), .. } = &events[0] else {
            panic!("{events:?}")
        };
        assert!(
            e.starts_with("error_during_execution (permissions it was denied:"),
            "{e}"
        );
        assert!(e.contains("rm -rf x"), "{e}");
        assert_eq!(events[1], Event::AgentEnd);
    }

    // `rate_limit_event` as 2.1.332's SDK schema writes it (`rate_limit_info`:
    // status, resetsAt, rateLimitType, utilization, isUsingOverage).
    #[test]
    fn its_rate_limit_events_say_the_window_its_state_and_reset() {
        let rejected = parse(
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1800003600,"rateLimitType":"five_hour","utilization":1.0,"isUsingOverage":false},"uuid":"u","session_id":"s"}"#,
        );
        let [Event::RateLimit(state)] = &rejected[..] else {
            panic!("{rejected:?}")
        };
        assert!(state.rejected());
        assert_eq!(state.window.as_deref(), Some("five_hour"));
        assert_eq!(state.resets_at, Some(1_800_003_600));
        assert_eq!(
            state.describe(),
            "Claude Code's five_hour limit reached, 100% used (rate_limit_event)"
        );
        let warned = parse(
            r#"{"type":"rate_limit_event","rate_limit_info":{"status":"allowed_warning","resetsAt":1800600000,"rateLimitType":"seven_day","utilization":0.8},"uuid":"u","session_id":"s"}"#,
        );
        let [Event::RateLimit(state)] = &warned[..] else {
            panic!("{warned:?}")
        };
        assert!(!state.rejected());
        assert_eq!(
            state.describe(),
            "Claude Code's seven_day limit near, 80% used (rate_limit_event)"
        );
        assert_eq!(
            parse(r#"{"type":"rate_limit_event","rate_limit_info":{}}"#),
            vec![Event::Ignored]
        );
    }

    #[test]
    fn it_is_pointed_at_the_relay_and_given_its_task_on_its_input() {
        let dir = std::path::Path::new("/tmp/i");
        let setup = Setup {
            dir,
            sessions: std::path::Path::new("/tmp/s"),
            folder: std::path::Path::new("/tmp/p"),
            relay: "127.0.0.1:4000".into(),
            key: "k",
            model: "m",
            api: None,
            prompt: "do it",
            session: Some("abc"),
            prompts: true,
        };
        let start = ClaudeCode.start(&setup).unwrap();
        assert!(start.args.ends_with(&["--resume".into(), "abc".into()]));
        assert!(start
            .env
            .contains(&("ANTHROPIC_BASE_URL".into(), "http://127.0.0.1:4000".into())));
        assert!(start.input[0].contains(r#""text":"do it""#));
        let openai = Setup {
            api: Some(Api::Openai),
            ..setup
        };
        assert!(ClaudeCode
            .start(&openai)
            .unwrap_err()
            .contains("Anthropic messages"));
    }
}
