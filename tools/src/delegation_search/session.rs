//! An outside executor's own session, as `delegation_search` shows it: the
//! start and the end of the harness's session file (pi keeps its sessions
//! as JSON lines: a header, then one entry per message).

use std::io::{BufRead, BufReader};
use std::path::Path;

use serde_json::Value;

/// The most lines of a session file read (its start and its end are kept).
const MAX_LINES: usize = 100_000;

/// One message of a session, in a line.
fn describe(entry: &Value, include_tools: bool, chars: usize) -> Option<String> {
    if entry["type"].as_str() != Some("message") {
        return None;
    }
    let message = &entry["message"];
    let role = message["role"].as_str().unwrap_or("?");
    let mut parts = Vec::new();
    match &message["content"] {
        Value::String(text) => parts.push(text.clone()),
        Value::Array(items) => {
            for item in items {
                match item["type"].as_str() {
                    Some("text") => {
                        parts.push(item["text"].as_str().unwrap_or_default().to_string())
                    }
                    Some("toolCall") if include_tools => parts.push(format!(
                        "[calls {} {}]",
                        item["name"].as_str().unwrap_or("?"),
                        item["arguments"]
                    )),
                    _ => {}
                }
            }
        }
        _ => {}
    }
    if role == "toolResult" && !include_tools {
        return None;
    }
    let text = parts.join(" ");
    let text = text.trim();
    if text.is_empty() {
        return None;
    }
    let shown: String = text.chars().take(chars).collect();
    let cut = if shown.len() < text.len() { "…" } else { "" };
    let role = if role == "toolResult" {
        format!(
            "result of {}",
            message["toolName"].as_str().unwrap_or("a tool")
        )
    } else {
        role.to_string()
    };
    Some(format!("  {role}: {shown}{cut}\n"))
}

/// The first and last `ends` messages of the session at `path`, or what
/// became of it.
pub fn ends(path: &Path, ends: usize, include_tools: bool, chars: usize) -> String {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return format!(
                "  (its session file {} is gone: the harness or someone deleted it)\n",
                path.display()
            )
        }
        Err(e) => {
            return format!(
                "  (its session file {} cannot be read: {e})\n",
                path.display()
            )
        }
    };
    let lines: Vec<String> = BufReader::new(file)
        .lines()
        .take(MAX_LINES)
        .map_while(Result::ok)
        .filter_map(|line| serde_json::from_str::<Value>(&line).ok())
        .filter_map(|entry| describe(&entry, include_tools, chars))
        .collect();
    if lines.is_empty() {
        return "  (its session has no message yet)\n".into();
    }
    if lines.len() <= ends * 2 {
        return lines.concat();
    }
    format!(
        "{}  … {} messages …\n{}",
        lines[..ends].concat(),
        lines.len() - ends * 2,
        lines[lines.len() - ends..].concat()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_shows_its_start_and_end_and_says_when_it_is_gone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.jsonl");
        let mut text = String::from("{\"type\":\"session\",\"id\":\"x\"}\n");
        for i in 0..10 {
            text.push_str(&format!(
                "{{\"type\":\"message\",\"message\":{{\"role\":\"assistant\",\"content\":[{{\"type\":\"text\",\"text\":\"m{i}\"}},{{\"type\":\"toolCall\",\"name\":\"bash\",\"arguments\":{{\"command\":\"ls\"}}}}]}}}}\n"
            ));
        }
        std::fs::write(&path, text).unwrap();
        let shown = ends(&path, 2, false, 100);
        assert_eq!(
            shown,
            "  assistant: m0\n  assistant: m1\n  … 6 messages …\n  assistant: m8\n  assistant: m9\n"
        );
        assert!(ends(&path, 2, true, 100).contains("[calls bash {\"command\":\"ls\"}]"));
        assert!(ends(&dir.path().join("gone.jsonl"), 2, false, 100).contains("is gone"));
    }
}
