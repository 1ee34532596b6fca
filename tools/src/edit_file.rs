//! `edit_file`: replaces exact text in a file and answers with the diff.
//!
//! Matching is exact on purpose: a fuzzy match edits a place the model did
//! not mean. The one tolerance is line endings, since a model writes `\n`
//! whatever the file uses: in a CRLF file an `old_string` with LF matches,
//! and the replacement is written with CRLF. The same read-before-write rule
//! and atomic write as `write_file` apply.

use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{GateSubject, ToolContext};

use crate::ledger::{FileStamp, ReadLedger};
use crate::paths::{self, Access};
use crate::write_file::read_existing;

/// The arguments of `edit_file`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EditFileParams {
    /// The file: an absolute path, `~/…` in the user's home, or relative to the working folder.
    pub path: String,
    /// The exact text to replace (without read_file's line numbers).
    pub old_string: String,
    /// The text to put in its place.
    pub new_string: String,
    /// Replace every occurrence instead of requiring exactly one (default false).
    #[serde(default)]
    pub replace_all: bool,
}

/// Replace exact text in a file and answer with the diff. `old_string` must occur exactly once
/// unless `replace_all` is set; give enough surrounding lines to make it unique. Only LF versus
/// CRLF line endings are tolerated, nothing else. The file must have been read with read_file
/// in this conversation and be unchanged since. Anything in troupe's home is refused: use the
/// memory and skill_manage tools for memory and skills.
#[tool(gated_by = GateSubject::WritePath("path".into()), offered = crate::host::not_in_house)]
pub async fn edit_file(params: EditFileParams, ctx: &ToolContext) -> ToolResult {
    if crate::host::in_house(ctx) {
        return crate::host::refused("edit_file");
    }
    if params.old_string.is_empty() {
        return ToolResult::error(
            "`old_string` is empty; give the exact text to replace (use write_file to fill a new file)",
        );
    }
    if params.old_string == params.new_string {
        return ToolResult::error(
            "`old_string` and `new_string` are the same; nothing would change",
        );
    }
    let real = match paths::confine(ctx, &params.path, Access::Write) {
        Ok(real) => real,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let ledger = ReadLedger::of(&ctx.services);
    let conversation = ctx.conversation;
    let done = tokio::task::spawn_blocking(move || {
        let shown = params.path.as_str();
        let existing = read_existing(&real)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| format!("`{shown}` does not exist; create it with write_file"))?;
        ledger
            .check_unchanged(conversation, &real, &existing.stamp)
            .map_err(|e| e.to_string())?;
        let before = String::from_utf8(existing.bytes).map_err(|_| {
            format!("`{shown}` is not UTF-8 text; edit_file changes text files only")
        })?;
        let edit = replace(
            &before,
            &params.old_string,
            &params.new_string,
            params.replace_all,
        )
        .map_err(|e| e.message(shown))?;
        paths::write_atomic(&real, edit.after.as_bytes(), Some(existing.permissions))
            .map_err(|e| e.to_string())?;
        let modified = std::fs::metadata(&real).and_then(|m| m.modified()).ok();
        ledger.record(
            conversation,
            &real,
            FileStamp::of(edit.after.as_bytes(), modified),
        );
        let diff = unified_diff(shown, &before, &edit.after);
        let count = edit.count;
        let noun = if count == 1 {
            "occurrence"
        } else {
            "occurrences"
        };
        Ok::<_, String>(ToolResult::ok_with(
            format!("Edited `{shown}`: replaced {count} {noun}.\n{diff}"),
            serde_json::json!({"path": real, "replacements": count}),
        ))
    })
    .await;
    match done {
        Ok(Ok(result)) => result,
        Ok(Err(message)) => ToolResult::error(message),
        Err(e) => ToolResult::error(format!("edit_file failed: {e}")),
    }
}

/// A replacement made in memory.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Edit {
    /// The new content.
    pub after: String,
    /// How many occurrences were replaced.
    pub count: usize,
}

/// Why a replacement could not be made.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum EditError {
    /// No occurrence; `near` when one differs only in whitespace or case.
    NotFound { near: bool },
    /// More than one occurrence without `replace_all`.
    Ambiguous(usize),
}

impl EditError {
    fn message(&self, shown: &str) -> String {
        match self {
            Self::NotFound { near: false } => format!(
                "`old_string` was not found in `{shown}`; copy the text exactly as read_file shows it, without the line numbers"
            ),
            Self::NotFound { near: true } => format!(
                "`old_string` was not found in `{shown}`, but a passage differing only in whitespace or letter case was; copy the text exactly as read_file shows it, without the line numbers"
            ),
            Self::Ambiguous(count) => format!(
                "`old_string` occurs {count} times in `{shown}`; add surrounding lines to make it unique, or set replace_all to replace every one"
            ),
        }
    }
}

/// Replaces `old` with `new` in `content`, tolerating LF against CRLF.
pub(crate) fn replace(content: &str, old: &str, new: &str, all: bool) -> Result<Edit, EditError> {
    let mut candidates = vec![(old.to_string(), new.to_string())];
    if content.contains("\r\n") {
        candidates.push((to_crlf(old), to_crlf(new)));
    } else {
        candidates.push((old.replace("\r\n", "\n"), new.replace("\r\n", "\n")));
    }
    for (old, new) in candidates {
        let count = content.matches(old.as_str()).count();
        match count {
            0 => continue,
            1 => {}
            n if !all => return Err(EditError::Ambiguous(n)),
            _ => {}
        }
        let after = if all {
            content.replace(old.as_str(), &new)
        } else {
            content.replacen(old.as_str(), &new, 1)
        };
        return Ok(Edit { after, count });
    }
    let squash = |s: &str| -> String {
        s.split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
            .to_lowercase()
    };
    let wanted = squash(old);
    let near = !wanted.is_empty() && squash(content).contains(&wanted);
    Err(EditError::NotFound { near })
}

fn to_crlf(text: &str) -> String {
    text.replace("\r\n", "\n").replace('\n', "\r\n")
}

/// The unified diff of an edit, with LF line endings for reading.
pub(crate) fn unified_diff(name: &str, before: &str, after: &str) -> String {
    let before = before.replace("\r\n", "\n");
    let after = after.replace("\r\n", "\n");
    similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .context_radius(3)
        .header(name, name)
        .to_string()
}

#[cfg(test)]
#[path = "edit_file_tests.rs"]
mod tests;
