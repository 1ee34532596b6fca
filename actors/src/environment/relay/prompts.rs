//! The permission prompts of a harness, served on its relay as one MCP tool.
//!
//! Claude Code asks before a tool call its permission mode does not settle
//! (in `acceptEdits`: a write outside its folder, a web fetch, an MCP
//! tool). In print mode nobody is at its terminal, so it asks a tool named
//! by `--permission-prompt-tool` instead: here `mcp__troupe__permission`,
//! on an MCP server its `--mcp-config` points at this relay's `/mcp`,
//! behind the relay's per-instance key. The tool is given `{tool_name,
//! input, tool_use_id}` and answers, as a text item, Claude Code's decision
//! (`{"behavior":"allow","updatedInput":{…}}` or `{"behavior":"deny",
//! "message":"…"}`); who decides is the relay's [`Prompter`] (the user,
//! asked through troupe's questions channel).
//!
//! The server speaks MCP's streamable HTTP in its plainest form: each
//! JSON-RPC request is one `POST` answered with one JSON body, a
//! notification with `202`, and `GET` (a stream of the server's own
//! messages) is not offered (`405`), which the transport allows. rmcp is
//! built into troupe as a client only; one tool with three methods does not
//! need its server.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use serde_json::{json, Value};

use super::forward::read_json;
use super::refusal::{whole, Refusal};
use super::Body;

/// The MCP server's name in the harness's `--mcp-config`.
pub const SERVER: &str = "troupe";

/// The tool's name on that server.
pub const TOOL: &str = "permission";

/// The path the relay serves it at.
pub const PATH: &str = "/mcp";

/// What the user decided about one tool call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// It runs, with its input as it was.
    Allow,
    /// It does not run; the harness is told why.
    Deny(String),
}

/// Who decides a harness's permission prompts.
pub trait Prompter: Send + Sync + 'static {
    /// Decides about `tool` called with `input` (the harness's call id is
    /// `call`, when it gave one).
    fn decide(
        self: Arc<Self>,
        tool: String,
        input: Value,
        call: Option<String>,
    ) -> Pin<Box<dyn Future<Output = Decision> + Send>>;
}

/// The harness's answer for `decision` on a call with `input`, in Claude
/// Code's shape.
pub fn answer(decision: &Decision, input: &Value) -> Value {
    match decision {
        Decision::Allow => json!({"behavior": "allow", "updatedInput": input}),
        Decision::Deny(message) => json!({"behavior": "deny", "message": message}),
    }
}

/// Serves one request to [`PATH`].
pub(super) async fn serve(
    prompter: Arc<dyn Prompter>,
    request: Request<Incoming>,
) -> Result<Response<Body>, Refusal> {
    if request.method() != Method::POST {
        return Err(Refusal::new(
            StatusCode::METHOD_NOT_ALLOWED,
            "method_not_allowed",
            format!(
                "{PATH} takes JSON-RPC requests by POST, each answered in its response; \
                 it offers no stream of its own"
            ),
        ));
    }
    let (parts, body) = request.into_parts();
    let message = read_json(&parts.headers, body).await?;
    let Some(id) = message.get("id").cloned() else {
        // A notification (`notifications/initialized`, a cancel): taken.
        return Ok(accepted());
    };
    let method = message["method"].as_str().unwrap_or_default();
    let params = &message["params"];
    let outcome = match method {
        "initialize" => Ok(json!({
            "protocolVersion": params["protocolVersion"].as_str().unwrap_or("2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": SERVER, "version": env!("CARGO_PKG_VERSION")},
            "instructions": "troupe asks its user about the tool calls this harness needs permission for.",
        })),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(json!({"tools": [tool()]})),
        "tools/call" => call(prompter, params).await,
        other => Err((
            -32601,
            format!("{other:?} is not served here; this MCP server offers only the tool {TOOL:?}"),
        )),
    };
    let reply = match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err((code, message)) => {
            json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
        }
    };
    Ok(whole(StatusCode::OK, &reply))
}

/// `tools/call`: the decision, as a text item.
async fn call(prompter: Arc<dyn Prompter>, params: &Value) -> Result<Value, (i64, String)> {
    if params["name"].as_str() != Some(TOOL) {
        return Err((
            -32602,
            format!(
                "no tool {:?} here; the one tool is {TOOL:?}",
                params["name"]
            ),
        ));
    }
    let arguments = &params["arguments"];
    let Some(tool) = arguments["tool_name"].as_str() else {
        return Err((
            -32602,
            "the call gives no \"tool_name\": name the tool that asks for permission".into(),
        ));
    };
    let input = arguments.get("input").cloned().unwrap_or_else(|| json!({}));
    let id = arguments["tool_use_id"].as_str().map(str::to_string);
    let decision = prompter.decide(tool.to_string(), input.clone(), id).await;
    Ok(json!({
        "content": [{"type": "text", "text": answer(&decision, &input).to_string()}],
    }))
}

/// The tool as `tools/list` names it.
fn tool() -> Value {
    json!({
        "name": TOOL,
        "description": "Asks troupe's user whether a tool call may run.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "tool_name": {"type": "string", "description": "The tool that asks."},
                "input": {"type": "object", "description": "Its input."},
                "tool_use_id": {"type": "string", "description": "Its call's id."},
            },
            "required": ["tool_name", "input"],
        },
    })
}

/// `202 Accepted`, no body.
fn accepted() -> Response<Body> {
    use http_body_util::BodyExt;
    let mut response = Response::new(
        http_body_util::Empty::<bytes::Bytes>::new()
            .map_err(|never: std::convert::Infallible| match never {})
            .boxed_unsync(),
    );
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_decision_is_written_as_claude_code_reads_it() {
        let input = json!({"file_path": "/x", "content": "hi"});
        assert_eq!(
            answer(&Decision::Allow, &input),
            json!({"behavior": "allow", "updatedInput": {"file_path": "/x", "content": "hi"}})
        );
        assert_eq!(
            answer(&Decision::Deny("no".into()), &input),
            json!({"behavior": "deny", "message": "no"})
        );
    }
}
