//! Compaction: when the history nears the context window, the older part is
//! summarized by the model and the recent tail kept verbatim.
//!
//! The tail always starts at a user or assistant message, never at a tool
//! result, so every result in it still answers a call in it. What carried
//! tools hold (the plan, the skills in use) is appended to the summary. A
//! summary that fails is retried and, failing again, the history is kept as
//! it is: it is never replaced by a placeholder.

use troupe_runtime::model::ModelRequest;
use troupe_runtime::protocol::Message;

/// The marker that opens a summary message.
pub const SUMMARY_HEADER: &str = "[Summary of the earlier part of this conversation]";

/// A rough token count of a history (four characters a token, plus a
/// little per message), kept up as the history grows: a turn asks before
/// every model call, and counting the whole history each time (serializing
/// every tool call's arguments) made a turn's cost grow with the conversation.
/// Only messages appended since the last count are counted; the owner calls
/// [`HistorySize::reset`] when it replaces the history.
#[derive(Debug, Default, Clone)]
pub struct HistorySize {
    counted: usize,
    chars: usize,
}

impl HistorySize {
    /// The estimate for `system` and `history`, which must be the history
    /// last counted with messages appended (or a shorter one: counted anew).
    pub fn tokens(&mut self, system: &str, history: &[Message]) -> u64 {
        if history.len() < self.counted {
            self.reset();
        }
        self.chars += history[self.counted..].iter().map(chars).sum::<usize>();
        self.counted = history.len();
        ((system.len() + self.chars) / 4 + history.len() * 4) as u64
    }

    /// Forgets the count: the next [`HistorySize::tokens`] counts anew.
    pub fn reset(&mut self) {
        *self = Self::default();
    }
}

fn chars(message: &Message) -> usize {
    match message {
        Message::Assistant {
            content,
            tool_calls,
        } => {
            content.len()
                + tool_calls
                    .iter()
                    .map(|c| c.name.len() + c.arguments.to_string().len())
                    .sum::<usize>()
        }
        other => other.text().len(),
    }
}

/// Where the verbatim tail starts, keeping at least `keep_recent` messages;
/// `None` when there is nothing before it to summarize.
pub fn split_point(history: &[Message], keep_recent: usize) -> Option<usize> {
    let mut i = history.len().saturating_sub(keep_recent.max(1));
    while i > 0 && matches!(history[i], Message::Tool { .. }) {
        i -= 1;
    }
    (i > 0).then_some(i)
}

/// The request asking the model to summarize `head`.
pub fn summary_request(model: &str, head: &[Message]) -> ModelRequest {
    let transcript = head
        .iter()
        .map(|m| super::history::as_text(m, None, 2_000))
        .collect::<Vec<_>>()
        .join("\n\n");
    ModelRequest {
        model: model.to_string(),
        system: "You summarize conversations between a user and an AI agent so the agent can go on \
                 working with only the summary. Keep every fact, decision, file path, command, \
                 open question and unfinished task; drop pleasantries. Write plain prose and lists, \
                 no preamble."
            .into(),
        messages: vec![Message::user(format!(
            "Summarize this part of the conversation:\n\n{transcript}"
        ))]
        .into(),
        tools: Vec::new().into(),
        max_tokens: Some(2_000),
        temperature: None,
    }
}

/// The summary message that replaces the head.
pub fn summary_message(summary: &str, carried: &[String]) -> Message {
    let mut text = format!("{SUMMARY_HEADER}\n{}", summary.trim());
    for item in carried {
        text.push_str("\n\n");
        text.push_str(item.trim());
    }
    Message::user(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_runtime::protocol::{ToolCall, ToolResult};

    fn step(i: usize) -> Vec<Message> {
        vec![
            Message::Assistant {
                content: String::new(),
                tool_calls: vec![ToolCall {
                    id: format!("c{i}"),
                    name: "t".into(),
                    arguments: serde_json::json!({}),
                }],
            },
            Message::Tool {
                call_id: format!("c{i}"),
                name: "t".into(),
                result: ToolResult::ok("r"),
            },
        ]
    }

    #[test]
    fn the_tail_never_starts_at_a_tool_result() {
        let mut history = vec![Message::user("start")];
        for i in 0..5 {
            history.extend(step(i));
        }
        // Keeping 3 would start at a tool result; it moves back to its call.
        let at = split_point(&history, 3).unwrap();
        assert!(matches!(history[at], Message::Assistant { .. }));
        assert_eq!(at, 7);
        assert_eq!(split_point(&history, 100), None);
    }

    #[test]
    fn a_running_size_matches_a_count_from_scratch() {
        let mut full = vec![Message::user("start")];
        for i in 0..20 {
            full.extend(step(i));
        }
        let fresh = |history: &[Message]| HistorySize::default().tokens("sys", history);
        let mut running = HistorySize::default();
        for n in [0, 1, 7, 8, 25, 41] {
            assert_eq!(running.tokens("sys", &full[..n]), fresh(&full[..n]), "{n}");
        }
        // A shorter history (compacted) is counted anew; so is one put in
        // place explicitly.
        assert_eq!(running.tokens("sys", &full[..3]), fresh(&full[..3]));
        running.reset();
        assert_eq!(running.tokens("sys", &full), fresh(&full));
    }

    #[test]
    fn the_summary_carries_items() {
        let m = summary_message("We fixed the build.", &["Plan:\n- [ ] ship".into()]);
        assert_eq!(
            m.text(),
            format!("{SUMMARY_HEADER}\nWe fixed the build.\n\nPlan:\n- [ ] ship")
        );
    }
}
