//! `ask_thread`: one question answered from a whole thread.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::in_thread;

/// Arguments of `ask_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AskParams {
    /// The thread: its id, name or link; this thread when left out.
    #[serde(rename = "ref")]
    pub reference: Option<String>,
    /// The one question to answer from the thread.
    pub question: String,
}

/// Answer one question by reading a whole thread, later corrections included (one model call).
/// Posts nothing: to ask the people in a thread, use post_to_thread. `ref`: a thread id, name or
/// link (this thread when left out).
#[tool(read_only, offered = in_thread)]
pub async fn ask_thread(p: AskParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    Ok(Houses::of(ctx)?
        .0
        .ask_thread(ctx, p.reference.as_deref(), &p.question)
        .await)
}
