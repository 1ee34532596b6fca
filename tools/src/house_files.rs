//! The house files tools: `search_files`, `list_files`, `delete_file`, and
//! what `read_file` and `write_file` mean in a house turn.
//!
//! A conversation that works for a house (its services hold a
//! [`HouseScope`]: a seat in a thread, or what a seated conversation
//! started) is offered the house's shared files: `read_file` and
//! `write_file` then read and write those (their local-file form is not on
//! offer there), and the three others appear. Outside a house nothing here
//! is offered and `read_file`/`write_file` stay the local-file tools.
//! Every call is scoped to that house through the store
//! ([`troupe_runtime::store::house_files`]).

pub mod delete_file;
pub mod list_files;
mod prepare;
pub mod search_files;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_runtime::house::HouseScope;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files::{self as files, FileLimits, NewFile};
use troupe_runtime::store::{Store, StoreError};
use troupe_runtime::tool::{parse_args, schema_for, ToolContext, ToolSpec};

pub use prepare::{prepare, strip_html};

/// Characters `read_file` returns by default.
pub const DEFAULT_READ_CHARS: usize = 20_000;
/// The most characters one `read_file` call returns.
pub const MAX_READ_CHARS: usize = 100_000;

/// The house scope and the store of `ctx`, or the error result to return.
fn scope(ctx: &ToolContext) -> Result<(HouseScope, Store), ToolResult> {
    let seat = HouseScope::of(ctx).ok_or_else(|| {
        ToolResult::error("this conversation is not in a house thread; house files are there.")
    })?;
    let store = ctx
        .services
        .get::<Store>()
        .ok_or_else(|| ToolResult::error("the store is not available to this conversation."))?;
    Ok((seat, (*store).clone()))
}

/// The limits set in `[files]` (defaults when the node gave none).
fn limits(ctx: &ToolContext) -> FileLimits {
    ctx.services
        .get::<FileLimits>()
        .map(|l| *l)
        .unwrap_or_default()
}

/// A store failure as the tool's error: a refusal says what to do.
fn failed(e: StoreError) -> ToolResult {
    ToolResult::error(e.to_string())
}

/// Arguments of `read_file` in a house.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadParams {
    /// The file's path in the house, such as `plans/launch.md`; a search
    /// citation `path#N` opens its chunk N.
    pub path: String,
    /// The first character to read, counting from 0 (default 0).
    pub offset: Option<usize>,
    /// How many characters to read (default 20,000, at most 100,000).
    pub length: Option<usize>,
    /// Read the file as it was at this version (default: the newest).
    pub version: Option<i64>,
}

/// `read_file`'s spec in a house turn.
pub fn read_spec() -> ToolSpec {
    ToolSpec::new(
        "read_file",
        "Read one of the house's shared files by path: up to 20,000 characters by default (at most \
         100,000), from `offset` (a character count); a longer file ends with a note giving the offset \
         to go on from. `version` reads it as it was at that version. A citation `path#N` from \
         search_files opens chunk N. Documents (PDF, Word, …) are read as their text.",
        schema_for::<ReadParams>(),
    )
    .read_only()
    .pages_own_output()
}

/// `read_file` in a house turn.
pub async fn read(args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
    let p: ReadParams = match parse_args("read_file", args) {
        Ok(p) => p,
        Err(e) => return e,
    };
    let (seat, store) = match scope(ctx) {
        Ok(s) => s,
        Err(e) => return e,
    };
    let (path, chunk) = split_citation(&p.path);
    let (asked, version) = (path.to_string(), p.version);
    let house = seat.house;
    let found = store
        .read(move |c| files::read(c, house, &asked, version))
        .await;
    let file = match found {
        Ok(Some(f)) => f,
        Ok(None) => {
            let when = version
                .map(|v| format!(" at version {v}"))
                .unwrap_or_default();
            return ToolResult::error(format!(
                "there is no file `{path}` in this house{when}; list_files shows the files and their versions."
            ));
        }
        Err(e) => return failed(e),
    };
    let Some(text) = file.text.as_deref() else {
        let why = if file.kind == "document" {
            "its text could not be read (list_files shows why)"
        } else {
            "it is a binary file"
        };
        return ToolResult::error(format!(
            "`{}` (version {}, {} bytes) cannot be shown as text: {why}.",
            file.path,
            file.version,
            file.bytes.len()
        ));
    };
    let total = text.chars().count();
    let (start, length, label) = match chunk {
        Some(n) => match files::chunks(text).get(n.wrapping_sub(1)) {
            Some((start, part)) => (*start, part.chars().count(), format!(", chunk {n}")),
            None => {
                return ToolResult::error(format!(
                    "`{}` version {} has no chunk {n}; read it without `#{n}`.",
                    file.path, file.version
                ))
            }
        },
        None => (
            p.offset.unwrap_or(0),
            p.length
                .unwrap_or(DEFAULT_READ_CHARS)
                .clamp(1, MAX_READ_CHARS),
            String::new(),
        ),
    };
    if start > total || (start == total && total > 0) {
        return ToolResult::error(format!(
            "`{}` has {total} characters; offset {start} is past its end.",
            file.path
        ));
    }
    let shown: String = text.chars().skip(start).take(length).collect();
    let end = start + shown.chars().count();
    let newest = if file.version == file.latest {
        String::new()
    } else {
        format!("; the newest is version {}", file.latest)
    };
    let as_text = if file.kind == "document" {
        " (its text)"
    } else {
        ""
    };
    let mut out = format!(
        "`{}`{as_text} version {}{newest}{label}, characters {start}–{end} of {total}:\n{shown}",
        file.path, file.version
    );
    if end < total {
        out.push_str(&format!(
            "\n[… {} more characters: read_file with offset={end} to go on]",
            total - end
        ));
    }
    ToolResult::ok_with(
        out,
        json!({"path": file.path, "version": file.version, "latest": file.latest,
               "offset": start, "end": end, "total_chars": total}),
    )
}

/// `path#N` → (`path`, Some(N)); anything else → (`path`, None).
fn split_citation(raw: &str) -> (&str, Option<usize>) {
    match raw.rsplit_once('#') {
        Some((path, n)) if !path.is_empty() => match n.parse::<usize>() {
            Ok(n) if n > 0 => (path, Some(n)),
            _ => (raw, None),
        },
        _ => (raw, None),
    }
}

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

/// `write_file`'s spec in a house turn.
pub fn write_spec() -> ToolSpec {
    ToolSpec::new(
        "write_file",
        "Save one or more text files into the house's shared files as ONE new version (all or none), \
         creating or replacing each whole. `files`: [{path, content}]; `message`: what changed, kept in \
         the log. Paths are relative (`plans/launch.md`), compared without case. Earlier versions stay \
         readable with read_file's `version`.",
        schema_for::<WriteParams>(),
    )
}

/// `write_file` in a house turn.
pub async fn write(args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
    let p: WriteParams = match parse_args("write_file", args) {
        Ok(p) => p,
        Err(e) => return e,
    };
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

#[cfg(test)]
#[path = "house_files_tests.rs"]
mod tests;
