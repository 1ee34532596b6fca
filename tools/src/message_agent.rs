//! `message_agent`: a message into another agent's own conversation.
//!
//! It returns at once with a delivery id; the message is committed before
//! that. The reply, or the failure, arrives later as a notice in the
//! sender's conversation.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::agents::Agents;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// The longest message, in characters.
pub const MAX_CHARS: usize = 16_000;

/// Arguments of `message_agent`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// The agent's name, from the roster in your instructions.
    pub target: String,
    /// The message, at most 16,000 characters.
    pub message: String,
}

/// Send a message to another agent of this home, into its own conversation. Returns at once
/// with a delivery id; its reply (or a failure) arrives later as a notice. `target` is a name
/// from the roster; `message` at most 16,000 characters.
#[tool]
pub async fn message_agent(params: Params, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let chars = params.message.chars().count();
    if chars > MAX_CHARS {
        return Err(ToolResult::error(format!(
            "the message is {chars} characters; the limit is {MAX_CHARS}. Shorten it, or put the details in a file and send its path."
        )));
    }
    if params.message.trim().is_empty() {
        return Err(ToolResult::error("the message is empty."));
    }
    if params.target == ctx.agent {
        return Err(ToolResult::error(
            "you cannot message yourself; pick another agent from the roster.",
        ));
    }
    Ok(Agents::of(ctx)?
        .message_agent(ctx, params.target.trim(), &params.message)
        .await)
}
