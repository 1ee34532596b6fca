//! `read_file` in a house: one of the house's shared files, by path, as
//! it is or as it was at a version.
//!
//! A house's conversation is offered this `read_file` instead of the one
//! that reads this machine's files ([`crate::read_file`]).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::store::house_files as files;
use troupe_runtime::tool::ToolContext;

use super::{failed, scope};

/// Characters `read_file` returns by default.
pub const DEFAULT_READ_CHARS: usize = 20_000;
/// The most characters one `read_file` call returns.
pub const MAX_READ_CHARS: usize = 100_000;

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

/// Read one of the house's shared files by path: up to 20,000 characters by default (at most
/// 100,000), from `offset` (a character count); a longer file ends with a note giving the
/// offset to go on from. `version` reads it as it was at that version. A citation `path#N` from
/// search_files opens chunk N. Documents (PDF, Word, …) are read as their text.
#[tool(read_only, pages_own_output)]
pub async fn read_file(p: ReadParams, ctx: &ToolContext) -> ToolResult {
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
