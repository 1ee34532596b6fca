//! A conversation's history as the model sees it, and its repair after a
//! crash.
//!
//! Each step commits the assistant message (with its tool calls) before the
//! calls run, and all of the step's results together once they are done. A
//! crash between the two leaves calls without results: on resume, read-only
//! calls are run again and the others are answered "outcome unknown", so no
//! completed tool is run twice and every call still has its answer.

use troupe_runtime::protocol::{Message, ToolCall, ToolResult};

/// The calls of the last assistant message that no tool result answers.
pub fn unanswered_calls(history: &[Message]) -> Vec<ToolCall> {
    let Some(pos) = history
        .iter()
        .rposition(|m| matches!(m, Message::Assistant { .. }))
    else {
        return Vec::new();
    };
    let Message::Assistant { tool_calls, .. } = &history[pos] else {
        return Vec::new();
    };
    tool_calls
        .iter()
        .filter(|call| {
            !history[pos + 1..]
                .iter()
                .any(|m| matches!(m, Message::Tool { call_id, .. } if *call_id == call.id))
        })
        .cloned()
        .collect()
}

/// The answer to a call that was running when troupe stopped.
pub fn outcome_unknown(call: &ToolCall) -> ToolResult {
    ToolResult::error_with(
        format!(
            "outcome unknown: troupe stopped while `{}` was running, so it may or may not have taken effect. \
             Check its effects before you run it again.",
            call.name
        ),
        serde_json::json!({"outcome": "unknown"}),
    )
}

/// Whether the history ends mid-turn: a message or results the model has
/// not answered yet.
pub fn awaits_model(history: &[Message]) -> bool {
    matches!(
        history.last(),
        Some(Message::User { .. } | Message::Tool { .. })
    )
}

/// One message as a transcript shows it to a model (a compaction's
/// summary, a background review): `[user] …`, `[assistant] …` and a
/// `[call NAME] ARGUMENTS` line per call, `[NAME result] …` (`[NAME error]`
/// for a failure). Call arguments and tool output are cut at `output_chars`;
/// the user's and the assistant's words at `words_chars` (whole when `None`).
pub fn as_text(message: &Message, words_chars: Option<usize>, output_chars: usize) -> String {
    let words = |text: &str| match words_chars {
        Some(max) => clip(text, max),
        None => text.trim().to_string(),
    };
    match message {
        Message::User { content } => format!("[user] {}", words(content)),
        Message::Assistant {
            content,
            tool_calls,
        } => {
            let mut lines = Vec::new();
            if !content.trim().is_empty() || tool_calls.is_empty() {
                lines.push(format!("[assistant] {}", words(content)));
            }
            for call in tool_calls {
                lines.push(format!(
                    "[call {}] {}",
                    call.name,
                    clip(&call.arguments.to_string(), output_chars)
                ));
            }
            lines.join("\n")
        }
        Message::Tool { name, result, .. } => {
            let how = if result.is_error() { "error" } else { "result" };
            format!("[{name} {how}] {}", clip(&result.text, output_chars))
        }
    }
}

/// `text` trimmed, and cut to `max` bytes (at a character boundary) with a
/// `[…]` mark when longer.
pub fn clip(text: &str, max: usize) -> String {
    let text = text.trim();
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{} […]", &text[..end])
}

/// The names of the tools `history` called with success.
pub fn tools_called(history: &[Message]) -> std::collections::BTreeSet<String> {
    history
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } if !result.is_error() => Some(name.clone()),
            _ => None,
        })
        .collect()
}

/// The final text of the turn: the last assistant message's text.
pub fn last_assistant_text(history: &[Message]) -> String {
    history
        .iter()
        .rev()
        .find_map(|m| match m {
            Message::Assistant { content, .. } if !content.is_empty() => Some(content.clone()),
            _ => None,
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "run_command".into(),
            arguments: json!({}),
        }
    }

    #[test]
    fn unanswered_calls_are_found_after_the_last_assistant_message() {
        let history = vec![
            Message::user("go"),
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![call("a"), call("b")],
            },
            Message::Tool {
                call_id: "a".into(),
                name: "run_command".into(),
                result: ToolResult::ok("done"),
            },
        ];
        assert_eq!(unanswered_calls(&history), vec![call("b")]);
        assert!(awaits_model(&history));
        assert!(unanswered_calls(&history[..1]).is_empty());
        assert!(outcome_unknown(&call("b"))
            .text
            .starts_with("outcome unknown: troupe stopped while `run_command`"));
    }
}
