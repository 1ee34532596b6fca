//! `post_to_thread`: a message into another thread, as yourself.

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::house::Houses;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use super::{in_thread, MAX_POST_CHARS};

/// Arguments of `post_to_thread`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PostParams {
    /// The other thread: its id, name or link.
    pub thread: String,
    /// The message, at most 16,000 characters; @mention a member to ask them.
    pub text: String,
}

/// Post a message into a different thread of this house, as yourself; its director then decides who
/// answers there (an @mention asks a member; it does not oblige a bot). Your answer in this thread
/// is posted here anyway — do not use this for this thread. `text` at most 16,000 characters.
#[tool(offered = in_thread)]
pub async fn post_to_thread(p: PostParams, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let houses = Houses::of(ctx)?;
    let chars = p.text.chars().count();
    if chars > MAX_POST_CHARS {
        return Err(ToolResult::error(format!(
            "the post is {chars} characters; the limit is {MAX_POST_CHARS}. Shorten it."
        )));
    }
    Ok(houses.0.post_to_thread(ctx, &p.thread, &p.text).await)
}
