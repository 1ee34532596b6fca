//! `delete_file`: removes house files and all their versions; offered only in a house's conversations.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files as files;
use troupe_runtime::tool::ToolContext;

use super::{failed, scope};
use crate::host::in_house;

/// One file of a `delete_file` call.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FileToDelete {
    /// Its path in the house.
    pub path: String,
    /// The version of it you saw (list_files or read_file shows it).
    pub version: i64,
}

/// Arguments of `delete_file`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DeleteParams {
    /// The files to delete, each with the version you saw.
    pub files: Vec<FileToDelete>,
    /// Why, kept in the log.
    pub message: Option<String>,
}

/// Irreversibly delete files from the house's shared files, with all their earlier versions. Each
/// entry names the version you saw (`files`: [{path, version}]); if any of them changed since, the
/// whole call is refused and nothing is deleted. `message`: why, kept in the log.
#[tool(offered = in_house)]
pub async fn delete_file(p: DeleteParams, ctx: &ToolContext) -> ToolResult {
    let (seat, store) = match scope(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let entries: Vec<(String, i64)> = p.files.into_iter().map(|f| (f.path, f.version)).collect();
    let (house, author, message) = (seat.house, ctx.agent.clone(), p.message.unwrap_or_default());
    let names: Vec<String> = entries.iter().map(|(p, _)| p.clone()).collect();
    let done = store
        .write(move |tx| files::delete(tx, house, &author, &message, &entries))
        .await;
    match done {
        Ok(version) => ToolResult::ok_with(
            format!(
                "Deleted {} with all earlier versions (files version {version}).",
                names.join(", ")
            ),
            json!({"version": version, "deleted": names}),
        ),
        Err(e) => failed(e),
    }
}
