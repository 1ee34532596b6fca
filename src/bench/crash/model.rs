//! The crash harness's model and its side-effecting tool.
//!
//! The model is a pure function of the request: a worker restarted at any
//! point asks it again and gets the same answer, so a resumed turn goes on
//! as the interrupted one would have. It reads the latest message:
//!
//! - a user task `<<task tool T>>` calls `ledger_append` twice in one step;
//!   `<<task msg T>>` sends `ping T` to `beta` with `message_agent`;
//!   `<<task delegate T>>` hands three tasks to subagents;
//! - a ping from another bot, a subagent's task and a routine run each call
//!   `ledger_append` once;
//! - a tool result ends the turn with text (`pong T` after a ping, so the
//!   sender's reply notice names what it answers; `answered T…` in a house
//!   thread, naming the person's posts it was offered); a notice is
//!   answered with text and nothing else, so nothing loops.
//! - a turn offered in a house thread calls `ledger_append` once, like a ping.
//!
//! `ledger_append` appends its call id to the ledger file with `O_APPEND`
//! and `fsync` before it returns: a call run twice shows up twice (a line
//! a kill cut off is set aside by the next worker, see [`super::records`]). Call ids
//! are a hash of the history that asked for them, so the same step asked
//! again after a restart carries the same ids.

use std::hash::{Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;
use troupe_runtime::model::{ModelRequest, ScriptedCall, ScriptedProvider, Turn};
use troupe_runtime::protocol::{Message, ToolResult};
use troupe_runtime::tool::{Tool, ToolContext, ToolSpec};

use super::records::append_synced;

/// The side-effecting tool's name.
pub const LEDGER_TOOL: &str = "ledger_append";

/// The bot that gets pinged.
pub const PEER: &str = "beta";

/// The scripted model of the crash workload.
pub fn provider() -> ScriptedProvider {
    ScriptedProvider::from_fn(respond).recording(false)
}

/// The marker a user task carries: `<<task KIND TOKEN>>`.
pub fn task(kind: &str, token: &str) -> String {
    format!("<<task {kind} {token}>>")
}

fn respond(request: &ModelRequest) -> Turn {
    match request.messages.last() {
        Some(Message::Tool { .. }) => Turn::text(final_text(request.last_user_text())),
        Some(Message::User { content }) => answer(content, request),
        _ => Turn::text("ok"),
    }
}

/// The step answering the user message `content`.
fn answer(content: &str, request: &ModelRequest) -> Turn {
    if content.starts_with("[notice: ") {
        return Turn::text("noted");
    }
    if let Some(token) = marked(content, "<<task msg ") {
        return Turn::tool_call(
            "message_agent",
            json!({"target": PEER, "message": format!("ping {token}")}),
        );
    }
    if let Some(token) = marked(content, "<<task delegate ") {
        let tasks: Vec<_> = (0..3)
            .map(|i| json!({"goal": format!("sub {token} #{i}"), "context": "record it"}))
            .collect();
        return Turn::tool_call("delegate", json!({ "tasks": tasks }));
    }
    let id = history_hash(request);
    let calls = if content.contains("<<task tool ") {
        2
    } else {
        1
    };
    Turn {
        tool_calls: (0..calls)
            .map(|i| {
                let id = format!("L{id:016x}-{i}");
                ScriptedCall {
                    name: LEDGER_TOOL.into(),
                    arguments: json!({"note": id}),
                    id: Some(id),
                }
            })
            .collect(),
        ..Turn::default()
    }
}

/// The marker of a person's post in the crash house's thread.
pub fn thread_post(token: &str) -> String {
    format!("<<thread {token}>>")
}

/// The tokens of the person's posts a thread's offer shows.
pub fn offered_posts(offer: &str) -> Vec<&str> {
    offer
        .lines()
        .filter_map(|l| l.strip_prefix("[ada] <<thread "))
        .filter_map(|rest| rest.split_once(">>").map(|(token, _)| token))
        .collect()
}

/// The text ending a turn whose latest user message is `content`.
fn final_text(content: &str) -> String {
    if content.starts_with("[thread `") {
        return format!("answered {}", offered_posts(content).join(" "));
    }
    match content.split_once("\nping ") {
        Some((_, token)) => format!("pong {}", token.trim()),
        None => "done".into(),
    }
}

/// The token after `prefix` up to `>>`.
fn marked<'a>(content: &'a str, prefix: &str) -> Option<&'a str> {
    let rest = &content[content.find(prefix)? + prefix.len()..];
    rest.split_once(">>").map(|(token, _)| token)
}

fn history_hash(request: &ModelRequest) -> u64 {
    let mut hasher = std::collections::hash_map::DefaultHasher::new();
    serde_json::to_string(&*request.messages)
        .unwrap_or_default()
        .hash(&mut hasher);
    hasher.finish()
}

/// `ledger_append(note)`: one line, `CALL_ID\tCONVERSATION\tNOTE\tWORKER`
/// (the worker's incarnation: which kill it ran before), appended and
/// synced before the result.
pub struct Ledger {
    spec: ToolSpec,
    path: PathBuf,
    incarnation: u64,
}

impl Ledger {
    /// The tool of worker `incarnation`, appending to `path`.
    pub fn new(path: PathBuf, incarnation: u64) -> Arc<Self> {
        let schema = json!({
            "type": "object",
            "additionalProperties": false,
            "required": ["note"],
            "properties": {"note": {"type": "string", "description": "What to record."}}
        });
        Arc::new(Self {
            spec: ToolSpec::new(LEDGER_TOOL, "Records a note in the ledger.", schema),
            path,
            incarnation,
        })
    }
}

#[async_trait::async_trait]
impl Tool for Ledger {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        let note = args["note"].as_str().unwrap_or_default().to_string();
        let line = format!(
            "{}\t{}\t{note}\t{}\n",
            ctx.call_id, ctx.conversation, self.incarnation
        );
        let path = self.path.clone();
        let written = tokio::task::spawn_blocking(move || append_synced(&path, &line)).await;
        match written {
            Ok(Ok(())) => ToolResult::ok("recorded"),
            Ok(Err(e)) => ToolResult::error(format!("the ledger could not be written: {e}")),
            Err(e) => ToolResult::error(format!("the ledger write stopped: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(messages: Vec<Message>) -> ModelRequest {
        ModelRequest {
            model: "m".into(),
            system: "".into(),
            messages: Arc::new(messages),
            tools: Arc::new(Vec::new()),
            max_tokens: None,
            temperature: None,
        }
    }

    #[test]
    fn the_same_history_asks_for_the_same_call_ids() {
        let ask = || respond(&request(vec![Message::user(task("tool", "i1-4"))]));
        let (a, b) = (ask(), ask());
        assert_eq!(a, b);
        assert_eq!(a.tool_calls.len(), 2);
        let other = respond(&request(vec![Message::user(task("tool", "i1-5"))]));
        assert_ne!(a.tool_calls[0].id, other.tool_calls[0].id);
    }

    #[test]
    fn a_ping_is_answered_with_its_token() {
        let ping =
            "[message from alpha (they expect a reply: answer with message_agent)]\nping i2-7";
        assert_eq!(final_text(ping), "pong i2-7");
        assert_eq!(
            marked(&task("delegate", "i3-1"), "<<task delegate "),
            Some("i3-1")
        );
    }
}
