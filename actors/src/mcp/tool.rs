//! One tool of an MCP server, as troupe's tools are: `mcp__<server>__<tool>`.
//!
//! Its schema is the server's (keys sorted, so the bytes are stable); its
//! `readOnlyHint` makes it read-only (run alongside other read-only calls,
//! never asked about on an untrusted server) and `destructiveHint` is kept
//! in its flags. It is deferred unless the server is `alwaysLoad`. A call
//! connects the server if need be, runs under the server's timeout, and a
//! dropped call (a stopped turn, the timeout) sends `notifications/cancelled`.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use troupe_runtime::mcp::client::{self, ListedTool, DEFAULT_CALL_TIMEOUT};
use troupe_runtime::mcp::result::to_tool_result;
use troupe_runtime::mcp::ServerTrust;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{sort_keys, GateSubject, Tool, ToolContext, ToolSpec};

use super::ServerSlot;

/// The longest description kept from a server.
const MAX_DESCRIPTION: usize = 2_000;

/// One tool of one server.
pub struct McpTool {
    spec: ToolSpec,
    remote: String,
    slot: Arc<ServerSlot>,
    timeout: Duration,
}

/// troupe's name for `tool` of `server`, or `None` when it cannot be one
/// (over 64 characters).
pub fn tool_name(server: &str, tool: &str) -> Option<String> {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("mcp__{server}__{clean}");
    (name.len() <= 64 && !clean.is_empty()).then_some(name)
}

impl McpTool {
    /// The tools of `listed`, in the server's order; a name that cannot be
    /// made a tool name (or repeats one) is left out with a warning.
    pub fn build_all(slot: &Arc<ServerSlot>, listed: &[ListedTool]) -> Vec<Arc<dyn Tool>> {
        let mut out: Vec<Arc<dyn Tool>> = Vec::with_capacity(listed.len());
        for tool in listed {
            let Some(name) = tool_name(&slot.config.name, &tool.name) else {
                tracing::warn!(server = %slot.config.name, tool = %tool.name, "mcp tool left out: its name does not fit in 64 characters");
                continue;
            };
            if out.iter().any(|t| t.spec().name == name) {
                tracing::warn!(server = %slot.config.name, tool = %tool.name, "mcp tool left out: two tools share a name");
                continue;
            }
            out.push(Arc::new(McpTool::new(slot, tool, name)));
        }
        out
    }

    fn new(slot: &Arc<ServerSlot>, tool: &ListedTool, name: String) -> Self {
        let config = &slot.config;
        let timeout = config.call_timeout.unwrap_or(DEFAULT_CALL_TIMEOUT);
        let mut description: String = tool.description.chars().take(MAX_DESCRIPTION).collect();
        if description.trim().is_empty() {
            description = format!(
                "The `{}` tool of the MCP server `{}`.",
                tool.name, config.name
            );
        }
        let mut schema = tool.schema.clone();
        if let Some(obj) = schema.as_object_mut() {
            obj.entry("type").or_insert_with(|| Value::from("object"));
            obj.remove("$schema");
        }
        let mut spec = ToolSpec::new(name, description, sort_keys(schema))
            // The dispatcher's cut-off comes after the call's own, which
            // says more.
            .timeout(timeout + Duration::from_secs(5));
        spec.source = format!("mcp:{}", config.name);
        spec.flags.destructive = tool.destructive;
        if tool.read_only {
            spec = spec.read_only();
        } else if config.trust == ServerTrust::Untrusted {
            spec = spec.gated_by(GateSubject::Untrusted(format!(
                "the MCP server `{}`",
                config.name
            )));
        }
        if !config.always_load {
            spec = spec.deferred();
        }
        Self {
            spec,
            remote: tool.name.clone(),
            slot: Arc::clone(slot),
            timeout,
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn offer_varies(&self) -> bool {
        false
    }

    async fn call(&self, args: Value, ctx: &ToolContext) -> ToolResult {
        let server = &self.slot.config.name;
        let peer = match self.slot.peer().await {
            Ok(peer) => peer,
            Err(e) => return ToolResult::error(e.0),
        };
        let arguments = match args {
            Value::Object(map) => map,
            _ => serde_json::Map::new(),
        };
        let call = client::call_tool(&peer, &self.remote, arguments);
        tokio::select! {
            // Dropping the call sends `notifications/cancelled`.
            () = ctx.cancel.cancelled() => ToolResult::error(format!(
                "the call of `{}` was cancelled because the turn was stopped; the MCP server `{server}` was told.",
                self.spec.name
            )),
            outcome = tokio::time::timeout(self.timeout, call) => match outcome {
                Err(_) => ToolResult::error(format!(
                    "the MCP server `{server}` did not answer the call of `{}` within {} s; the call was cancelled. Try again later or without this tool; the user can raise the server's `timeout` in mcp.json.",
                    self.remote,
                    self.timeout.as_secs_f64()
                )),
                Ok(Err(e)) => ToolResult::error(format!(
                    "the call of `{}` on the MCP server `{server}` failed: {e}. If the server stopped, it is being started again; the call's effect is unknown, so check before calling it again.",
                    self.remote
                )),
                Ok(Ok(result)) => to_tool_result(server, &self.remote, &result),
            },
        }
    }
}
