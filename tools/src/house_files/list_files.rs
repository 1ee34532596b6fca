//! `list_files`: the house's files with their versions and search state; offered only in a house's conversations.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files as files;
use troupe_runtime::tool::ToolContext;

use super::{failed, scope};
use crate::host::in_house;

/// Files `list_files` shows before it asks for a folder.
pub const MAX_LISTED: usize = 500;

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only the files under this folder, such as `plans`.
    pub folder: Option<String>,
}

/// List the house's shared files (under `folder` when given): each with its version, size, kind and
/// search-reading state (indexed, pending, failed with why, not indexable).
#[tool(read_only, offered = in_house)]
pub async fn list_files(p: ListParams, ctx: &ToolContext) -> ToolResult {
    let (seat, store) = match scope(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (house, folder) = (seat.house, p.folder.clone());
    let found = store
        .read(move |c| {
            Ok((
                files::list(c, house, folder.as_deref())?,
                files::latest_version(c, house)?,
            ))
        })
        .await;
    let (all, latest) = match found {
        Ok(x) => x,
        Err(e) => return failed(e),
    };
    let place = p
        .folder
        .as_deref()
        .map(|f| format!(" under `{f}`"))
        .unwrap_or_default();
    if all.is_empty() {
        return ToolResult::ok_with(
            format!("The house has no files{place} (files version {latest})."),
            json!({"files": [], "version": latest}),
        );
    }
    let mut out = format!(
        "{} file{}{place} (files version {latest}):\n",
        all.len(),
        if all.len() == 1 { "" } else { "s" }
    );
    for f in all.iter().take(MAX_LISTED) {
        out.push_str(&format!(
            "- {} — version {}, {} bytes, {}, {}\n",
            f.path,
            f.version,
            f.size,
            f.kind,
            f.state.label()
        ));
    }
    if all.len() > MAX_LISTED {
        out.push_str(&format!(
            "[… {} more: give a folder to narrow the list]\n",
            all.len() - MAX_LISTED
        ));
    }
    let shown: Vec<_> = all.into_iter().take(MAX_LISTED).collect();
    ToolResult::ok_with(out, json!({"files": shown, "version": latest}))
}
