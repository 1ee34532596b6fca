//! `search_files`: keyword search over the house's files; offered only in a house's conversations.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files as files;
use troupe_runtime::tool::ToolContext;

use super::{failed, scope};
use crate::host::in_house;

/// Arguments of `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// Words to look for (all of them; any of them when no file has all).
    pub query: String,
    /// How many citations to return (default 5, at most 20).
    pub top_k: Option<usize>,
}

/// Keyword-search the house's shared files (text files and the text of documents). Returns numbered
/// citations `[1] path#chunk, version N` with the matching passage; open one with read_file (path
/// `path#chunk`). `top_k`: default 5, at most 20.
#[tool(read_only, offered = in_house)]
pub async fn search_files(p: SearchParams, ctx: &ToolContext) -> ToolResult {
    let (seat, store) = match scope(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    if p.query.trim().is_empty() {
        return ToolResult::error("`query` is empty: give the words to look for.");
    }
    let (house, query, k) = (
        seat.house,
        p.query.clone(),
        p.top_k.unwrap_or(5).clamp(1, 20),
    );
    if let Err(e) = files::catch_up(&store, house).await {
        return failed(e);
    }
    let hits = match store
        .read(move |c| files::search(c, house, &query, k))
        .await
    {
        Ok(h) => h,
        Err(e) => return failed(e),
    };
    if hits.is_empty() {
        return ToolResult::ok_with(
            format!("No house file mentions `{}`.", p.query),
            json!({"hits": []}),
        );
    }
    let mut out = String::new();
    for (i, h) in hits.iter().enumerate() {
        let snippet = h.snippet.split_whitespace().collect::<Vec<_>>().join(" ");
        out.push_str(&format!(
            "[{}] {}#{}, version {} — {snippet}\n",
            i + 1,
            h.path,
            h.chunk,
            h.version
        ));
    }
    out.push_str("Open a citation with read_file, e.g. path \"");
    out.push_str(&format!("{}#{}\".", hits[0].path, hits[0].chunk));
    ToolResult::ok_with(out, json!({"hits": hits}))
}
