//! `write_file` in a house: saves files into the house's shared files as
//! one new version, all or none.
//!
//! A house's conversation is offered this `write_file` instead of the one
//! that writes this machine's files ([`crate::write_file`]).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files::{self as files, NewFile};
use troupe_runtime::tool::ToolContext;

use super::{failed, limits, prepare, scope};

/// One file of a `write_file` call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileToWrite {
    /// Its path in the house, such as `plans/launch.md`.
    pub path: String,
    /// Its whole new text.
    pub content: String,
}

/// Arguments of `write_file` in a house.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteParams {
    /// The files to create or replace, all saved as one new version.
    pub files: Vec<FileToWrite>,
    /// What this version changes, kept in the log.
    pub message: Option<String>,
}

/// Save one or more text files into the house's shared files as ONE new version (all or none),
/// creating or replacing each whole. `files`: [{path, content}]; `message`: what changed, kept
/// in the log. Paths are relative (`plans/launch.md`), compared without case. Earlier versions
/// stay readable with read_file's `version`.
#[tool]
pub async fn write_file(p: WriteParams, ctx: &ToolContext) -> ToolResult {
    let (seat, store) = match scope(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let prepared = tokio::task::spawn_blocking(move || {
        p.files
            .into_iter()
            .map(|f| prepare(&f.path, f.content.into_bytes()))
            .collect::<Vec<NewFile>>()
    })
    .await;
    let new = match prepared {
        Ok(n) => n,
        Err(e) => return ToolResult::error(format!("preparing the files failed: {e}")),
    };
    let (house, author, message, lim) = (
        seat.house,
        ctx.agent.clone(),
        p.message.unwrap_or_default(),
        limits(ctx),
    );
    let done = files::write_files(&store, house, &author, &message, new, lim).await;
    match done {
        Ok((version, written)) => {
            let list: Vec<String> = written
                .iter()
                .map(|f| format!("{} ({} bytes, {})", f.path, f.size, f.state.label()))
                .collect();
            ToolResult::ok_with(
                format!(
                    "Wrote {} file{} as version {version}: {}.",
                    written.len(),
                    if written.len() == 1 { "" } else { "s" },
                    list.join(", ")
                ),
                json!({"version": version, "files": written}),
            )
        }
        Err(e) => failed(e),
    }
}
