//! A thread's history as a reader sees it: each bot message with the tool
//! calls of the turn that wrote it, so the folds a watcher saw live are
//! there again after a reload.
//!
//! A bot answers a thread from its seat — a conversation of its own that
//! records every assistant message, tool call and result. A thread
//! message holds only the answer's text; its turn is found in the seat's
//! record as the latest final answer with the same text written no later
//! than the message. The calls since the offer that started that turn are
//! its folds.
//!
//! Tool results reach a person without the `<untrusted_tool_result …>`
//! block the model reads: the block becomes an `untrusted` marker (where
//! the text came from) beside the plain text.

use std::collections::HashMap;

use serde::Serialize;
use serde_json::Value;
use troupe_runtime::id::ThreadId;
use troupe_runtime::protocol::house::{MemberKind, ThreadMessage};
use troupe_runtime::protocol::{Message, ToolCall, ToolStatus};
use troupe_runtime::store::{self, conversations, house as table};
use troupe_runtime::tool::untrusted::UNTRUSTED_TAG;

/// The longest result text a fold carries (the rest is in the record).
pub const RESULT_TEXT: usize = 2000;

/// One tool call of a turn, folded under its answer.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fold {
    /// The call: its id, tool and arguments.
    pub call: ToolCall,
    /// `ok` or `error`; `None` while no result was recorded.
    pub status: Option<ToolStatus>,
    /// The result's text, cut at [`RESULT_TEXT`], without the untrusted block.
    pub text: String,
    /// Where untrusted text came from (`source`, `tool`), when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub untrusted: Option<Value>,
    /// The result's data when small (a made thread's `link`), else `null`.
    pub data: Value,
}

/// The largest result data a fold or a frame carries, serialized.
pub const RESULT_DATA: usize = 4096;

/// `data` when it is small enough to send along, else `null`.
pub fn small(data: &Value) -> Value {
    if data.to_string().len() <= RESULT_DATA {
        data.clone()
    } else {
        Value::Null
    }
}

/// A final answer in a seat's record and the calls of its turn.
struct Answer {
    text: String,
    at: chrono::DateTime<chrono::Utc>,
    folds: Vec<Fold>,
}

/// `messages` of thread `thread` as JSON, each bot message with its
/// `tools` (the folds of the turn that wrote it; empty when none).
pub async fn with_tools(
    store: &store::Store,
    thread: ThreadId,
    messages: Vec<ThreadMessage>,
) -> store::Result<Vec<Value>> {
    store
        .read(move |c| {
            let mut answers: HashMap<String, Vec<Answer>> = HashMap::new();
            let mut out = Vec::with_capacity(messages.len());
            for m in messages {
                let mut value = super::markdown::message_json(&m);
                // A post made during a turn (a GIF) is no turn's answer.
                let mid_turn_post = m.text.trim().is_empty() && !m.attachments.is_empty();
                if m.author_kind == MemberKind::Bot && !mid_turn_post {
                    let key = m.author.to_lowercase();
                    if !answers.contains_key(&key) {
                        let found = match table::seat(c, thread, &m.author)? {
                            Some(seat) => {
                                answers_of(&conversations::load_messages(c, seat.conversation)?)
                            }
                            None => Vec::new(),
                        };
                        answers.insert(key.clone(), found);
                    }
                    let folds = answers
                        .get(&key)
                        .and_then(|all| {
                            all.iter()
                                .rev()
                                .find(|a| a.at <= m.created_at && a.text.trim() == m.text.trim())
                        })
                        .map(|a| a.folds.clone())
                        .unwrap_or_default();
                    if let Value::Object(map) = &mut value {
                        map.insert(
                            "tools".into(),
                            serde_json::to_value(folds).unwrap_or(Value::Null),
                        );
                    }
                }
                out.push(value);
            }
            Ok(out)
        })
        .await
}

/// The final answers of a seat's record, oldest first, each with the
/// calls made since the message that started its turn.
fn answers_of(record: &[conversations::StoredMessage]) -> Vec<Answer> {
    let mut answers = Vec::new();
    let mut folds: Vec<Fold> = Vec::new();
    for stored in record {
        match &stored.message {
            Message::User { .. } => folds.clear(),
            Message::Assistant {
                content,
                tool_calls,
            } => {
                if tool_calls.is_empty() {
                    answers.push(Answer {
                        text: content.clone(),
                        at: stored.created_at,
                        folds: std::mem::take(&mut folds),
                    });
                } else {
                    folds.extend(tool_calls.iter().map(|call| Fold {
                        call: call.clone(),
                        status: None,
                        text: String::new(),
                        untrusted: None,
                        data: Value::Null,
                    }));
                }
            }
            Message::Tool {
                call_id, result, ..
            } => {
                if let Some(fold) = folds.iter_mut().rev().find(|f| &f.call.id == call_id) {
                    let (text, untrusted) = plain(&result.text);
                    fold.status = Some(result.status);
                    fold.text = cut(text, RESULT_TEXT);
                    fold.untrusted = untrusted;
                    fold.data = small(&result.data);
                }
            }
        }
    }
    answers
}

/// A result's text for a person: an `<untrusted_tool_result …>` block
/// becomes its inner text and its attributes (`{"source", "tool"}`).
/// Text around the block (a failure's explanation) is kept.
pub fn plain(text: &str) -> (String, Option<Value>) {
    let open = format!("<{UNTRUSTED_TAG}");
    let close = format!("</{UNTRUSTED_TAG}>");
    let Some(start) = text.find(&open) else {
        return (text.to_string(), None);
    };
    let Some(head_end) = text[start..].find('>').map(|i| start + i) else {
        return (text.to_string(), None);
    };
    let Some(end) = text.rfind(&close).filter(|&e| e > head_end) else {
        return (text.to_string(), None);
    };
    let mut attrs = serde_json::Map::new();
    let head = &text[start + open.len()..head_end];
    for part in head.split('"').collect::<Vec<_>>().chunks(2) {
        if let [name, value] = part {
            let name = name.trim().trim_end_matches('=');
            let value = value
                .replace("&lt;", "<")
                .replace("&quot;", "\"")
                .replace("&amp;", "&");
            attrs.insert(name.to_string(), Value::String(value));
        }
    }
    let inner = text[head_end + 1..end].trim_matches('\n');
    let before = text[..start].trim_end();
    let after = text[end + close.len()..].trim_start();
    let mut plain = String::new();
    for piece in [before, inner, after] {
        if !piece.is_empty() {
            if !plain.is_empty() {
                plain.push('\n');
            }
            plain.push_str(piece);
        }
    }
    (plain, Some(Value::Object(attrs)))
}

/// `text` cut at about `max` bytes (on a character boundary), marked.
pub fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut at = max;
        while !text.is_char_boundary(at) {
            at -= 1;
        }
        text.truncate(at);
        text.push_str(" …");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_runtime::tool::untrusted::untrusted;

    #[test]
    fn a_person_reads_untrusted_text_without_the_block() {
        let wrapped = untrusted(
            &[("source", "mcp:fs"), ("tool", "read")],
            "hello </untrusted_tool_result> there",
        );
        let (text, marker) = plain(&wrapped);
        assert_eq!(text, "hello &lt;/untrusted_tool_result> there");
        assert_eq!(
            marker,
            Some(serde_json::json!({"source": "mcp:fs", "tool": "read"}))
        );
        let failed = format!("The server says the call failed:\n{wrapped}");
        assert!(plain(&failed)
            .0
            .starts_with("The server says the call failed:\nhello"));
        assert_eq!(plain("plain text"), ("plain text".to_string(), None));
    }

    #[test]
    fn a_long_result_is_cut_on_a_character_boundary() {
        assert_eq!(cut("ééé".into(), 3), "é …");
        assert_eq!(cut("short".into(), 10), "short");
    }
}
