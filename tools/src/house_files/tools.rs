//! `search_files`, `list_files` and `delete_file`: offered only in a house
//! turn.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files as files;
use troupe_runtime::tool::{parse_args, schema_for, Tool, ToolContext, ToolSpec};

use super::{failed, scope, seated};

/// Files `list_files` shows before it asks for a folder.
pub const MAX_LISTED: usize = 500;

/// Defines a tool offered only in a house turn.
macro_rules! seated_tool {
    ($(#[$doc:meta])* $ty:ident, $name:literal, $params:ty, $description:expr, |$s:ident| $spec:expr, $call:path) => {
        $(#[$doc])*
        #[derive(Debug)]
        pub struct $ty {
            spec: ToolSpec,
        }

        impl Default for $ty {
            fn default() -> Self {
                Self::new()
            }
        }

        impl $ty {
            /// The tool.
            pub fn new() -> Self {
                let $s = ToolSpec::new($name, $description, schema_for::<$params>());
                Self { spec: $spec }
            }
        }

        #[async_trait::async_trait]
        impl Tool for $ty {
            fn spec(&self) -> &ToolSpec {
                &self.spec
            }

            fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
                seated(ctx).then(|| self.spec.clone())
            }

            async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
                let p: $params = match parse_args($name, args) {
                    Ok(p) => p,
                    Err(e) => return e,
                };
                $call(p, ctx).await
            }
        }
    };
}

/// Arguments of `search_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SearchParams {
    /// Words to look for (all of them; any of them when no file has all).
    pub query: String,
    /// How many citations to return (default 5, at most 20).
    pub top_k: Option<usize>,
}

seated_tool!(
    /// `search_files`: keyword search over the house's files.
    SearchFiles, "search_files", SearchParams,
    "Keyword-search the house's shared files (text files and the text of documents). Returns numbered \
     citations `[1] path#chunk, version N` with the matching passage; open one with read_file (path \
     `path#chunk`). `top_k`: default 5, at most 20.",
    |s| s.read_only(),
    search
);

async fn search(p: SearchParams, ctx: &ToolContext) -> ToolResult {
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

/// Arguments of `list_files`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListParams {
    /// Only the files under this folder, such as `plans`.
    pub folder: Option<String>,
}

seated_tool!(
    /// `list_files`: the house's files with versions and search state.
    ListFiles, "list_files", ListParams,
    "List the house's shared files (under `folder` when given): each with its version, size, kind and \
     search-reading state (indexed, pending, failed with why, not indexable).",
    |s| s.read_only(),
    list
);

async fn list(p: ListParams, ctx: &ToolContext) -> ToolResult {
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

seated_tool!(
    /// `delete_file`: removes house files and all their versions.
    DeleteFile, "delete_file", DeleteParams,
    "Irreversibly delete files from the house's shared files, with all their earlier versions. Each \
     entry names the version you saw (`files`: [{path, version}]); if any of them changed since, the \
     whole call is refused and nothing is deleted. `message`: why, kept in the log.",
    |s| s,
    delete
);

async fn delete(p: DeleteParams, ctx: &ToolContext) -> ToolResult {
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
