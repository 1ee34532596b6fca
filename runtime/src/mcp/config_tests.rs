use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

fn env(var: &str) -> Option<String> {
    match var {
        "TOKEN" => Some("s3cret".into()),
        "EMPTY" => Some(String::new()),
        _ => None,
    }
}

fn parse(text: &str) -> McpConfig {
    McpConfig::parse(Path::new("/h/mcp.json"), text, &env)
}

#[test]
fn variables_expand_with_and_without_defaults() {
    assert_eq!(expand("a ${TOKEN} b", &env).unwrap(), "a s3cret b");
    assert_eq!(expand("${MISSING:-x/y}", &env).unwrap(), "x/y");
    assert_eq!(expand("${EMPTY:-d}", &env).unwrap(), "d");
    assert_eq!(expand("${EMPTY}", &env).unwrap(), "");
    assert_eq!(expand("no vars $HOME", &env).unwrap(), "no vars $HOME");
    let err = expand("${MISSING}", &env).unwrap_err();
    assert!(err.contains("`${MISSING}` is not set"), "{err}");
    assert!(expand("${TOKEN", &env)
        .unwrap_err()
        .contains("without a closing"));
    assert!(expand("${1X}", &env)
        .unwrap_err()
        .contains("does not name a variable"));
}

#[test]
fn a_claude_code_file_with_troupes_keys_is_read() {
    let config = parse(
        r#"{"mcpServers": {
            "files": {"command": "npx", "args": ["-y", "srv", "${TOKEN}"], "env": {"K": "${MISSING:-v}"}},
            "tracker": {"type": "http", "url": "http://127.0.0.1:9/mcp", "headers": {"Authorization": "Bearer ${TOKEN}"},
                        "alwaysLoad": true, "trust": "untrusted", "bots": ["scout"], "timeout": 5}
        }}"#,
    );
    assert_eq!(config.problems, vec![]);
    assert_eq!(
        config.servers[0].transport,
        Transport::Stdio {
            command: "npx".into(),
            args: vec!["-y".into(), "srv".into(), "s3cret".into()],
            env: [("K".to_string(), "v".to_string())].into(),
            cwd: None,
        }
    );
    let tracker = &config.servers[1];
    assert_eq!(
        tracker.transport,
        Transport::Http {
            url: "http://127.0.0.1:9/mcp".into(),
            headers: [("Authorization".to_string(), "Bearer s3cret".to_string())].into(),
        }
    );
    assert!(tracker.always_load);
    assert_eq!(tracker.trust, ServerTrust::Untrusted);
    assert_eq!(tracker.bots, vec!["scout".to_string()]);
    assert_eq!(tracker.call_timeout, Some(Duration::from_secs(5)));
    assert!(!config.servers[0].always_load);
}

#[test]
fn a_malformed_server_names_file_server_and_key_and_the_others_still_load() {
    let config = parse(
        r#"{"mcpServers": {
            "good": {"command": "srv"},
            "typo": {"command": "srv", "alwaysload": true},
            "badtrust": {"command": "srv", "trust": "maybe"},
            "unset": {"command": "srv", "args": ["${MISSING}"]},
            "old": {"type": "sse", "url": "http://127.0.0.1:1/sse"},
            "nocommand": {"args": []}
        }}"#,
    );
    assert_eq!(
        config
            .servers
            .iter()
            .map(|s| s.name.as_str())
            .collect::<Vec<_>>(),
        vec!["good"]
    );
    let texts: Vec<String> = config.problems.iter().map(ToString::to_string).collect();
    assert!(
        texts[0].starts_with("/h/mcp.json: server `typo`: `alwaysload`: is not a known key"),
        "{}",
        texts[0]
    );
    assert!(
        texts[1].contains("server `badtrust`: `trust`: `maybe` is not a trust level"),
        "{}",
        texts[1]
    );
    assert!(
        texts[2].contains("server `unset`: `args`: `${MISSING}` is not set"),
        "{}",
        texts[2]
    );
    assert!(
        texts[3].contains("server `old`: `type`: the legacy HTTP+SSE transport"),
        "{}",
        texts[3]
    );
    assert!(
        texts[4].contains("server `nocommand`: `command`: is missing"),
        "{}",
        texts[4]
    );
}

#[test]
fn a_file_that_is_not_json_is_one_error_naming_it() {
    let config = parse("{\"mcpServers\": {");
    assert!(config.servers.is_empty());
    assert_eq!(config.problems.len(), 1);
    assert!(
        config.problems[0]
            .to_string()
            .starts_with("/h/mcp.json: is not valid JSON"),
        "{}",
        config.problems[0]
    );
    assert_eq!(
        McpConfig::load(Path::new("/nonexistent/mcp.json"), &env),
        McpConfig::default()
    );
}
