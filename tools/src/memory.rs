//! `memory`: the two small files an agent reads at the start of every
//! conversation — the user's profile, shared by every agent, and the agent's
//! own notes.
//!
//! They are small on purpose (1,375 and 2,200 characters): they sit in every
//! system prompt. A change that would overflow is refused with how much to
//! free, never cut silently. Several changes go in one call and land together
//! or not at all, checked against the limit once all are applied.
//!
//! **File format.** Entries are separated by a line holding only `§`
//! ([`DELIMITER`]). The size counted against the limit is the number of
//! characters (Unicode scalar values) of the entries joined by `\n§\n`, which
//! is the file's text without its final newline.
//!
//! **Safety.** What is written here is later read as instructions, so every
//! write passes the threat scanner ([`crate::scan`]); a file poisoned on disk
//! shows each flagged entry to the model as `[blocked: …]` in the
//! [`snapshot`], while the user still sees it as it is. Paths come only from
//! the [`Home`] and the calling agent's name, so a bot never writes another
//! bot's notes. Writes go through [`crate::file_lock::edit`], so two
//! conversations editing at once both land.

pub mod review;

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use troupe_macros::tool;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use crate::file_lock::{self, EditError};
use crate::scan::{self, Threat};
use crate::skills::validate_name;
use crate::stamp::{Kept, Stamp};

/// The line that separates two entries in a memory file.
pub const DELIMITER: &str = "§";

/// The user profile's limit, in characters.
pub const USER_LIMIT: usize = 1_375;

/// The agent notes' limit, in characters.
pub const NOTES_LIMIT: usize = 2_200;

/// Which memory file a call changes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryTarget {
    /// `memory/USER.md`: who the user is, shared by every agent of the home.
    User,
    /// The agent's own `MEMORY.md`: its notes.
    Memory,
}

impl MemoryTarget {
    /// The file's path for `agent`.
    pub fn path(self, home: &Home, agent: &str) -> PathBuf {
        match self {
            Self::User => home.user_profile(),
            Self::Memory => home.agent_notes(agent),
        }
    }

    /// The file's limit in characters.
    pub fn limit(self) -> usize {
        match self {
            Self::User => USER_LIMIT,
            Self::Memory => NOTES_LIMIT,
        }
    }

    /// The name the model uses for it.
    pub fn name(self) -> &'static str {
        match self {
            Self::User => "user",
            Self::Memory => "memory",
        }
    }
}

/// What one change does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MemoryAction {
    /// Adds `content` as a new entry.
    Add,
    /// Replaces the entry containing `old_text` with `content`.
    Replace,
    /// Removes the entry containing `old_text`.
    Remove,
}

impl MemoryAction {
    /// The action's name, as the model writes it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Add => "add",
            Self::Replace => "replace",
            Self::Remove => "remove",
        }
    }
}

/// One change to a memory file.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryOperation {
    /// `add`, `replace` or `remove`.
    pub action: MemoryAction,
    /// The new entry's text (add, replace). `new_text` is accepted too.
    #[serde(default, alias = "new_text", skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// A piece of the entry to replace or remove; it must match exactly one entry.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub old_text: Option<String>,
}

/// The arguments of `memory`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct MemoryParams {
    /// `user` (who the user is, shared) or `memory` (your own notes).
    pub target: MemoryTarget,
    /// The changes, applied together or not at all (preferred).
    #[serde(default)]
    pub operations: Option<Vec<MemoryOperation>>,
    /// A single change instead of `operations`: its action.
    #[serde(default)]
    pub action: Option<MemoryAction>,
    /// A single change: the new entry's text. `new_text` is accepted too.
    #[serde(default, alias = "new_text")]
    pub content: Option<String>,
    /// A single change: a piece of the entry to replace or remove.
    #[serde(default)]
    pub old_text: Option<String>,
}

/// Why a memory change was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MemoryError {
    /// One operation is wrong; nothing was changed.
    #[error("operations[{index}] ({action}): {message}. Nothing was changed.")]
    Operation {
        /// Its index in `operations` (0 for the single-change form).
        index: usize,
        /// Its action.
        action: &'static str,
        /// What was wrong and what to do.
        message: String,
    },
    /// The call names no change, or both shapes at once.
    #[error("{0}")]
    Shape(String),
    /// The file would pass its limit.
    #[error("{target} memory is full: after these changes it would hold {needed} characters of {limit}; free {free} character{plural} by replacing or removing entries (or shortening the new text), then try again. Nothing was changed.", plural = if *free == 1 { "" } else { "s" })]
    Full {
        /// The target's name.
        target: &'static str,
        /// The size the changes would reach.
        needed: usize,
        /// The limit.
        limit: usize,
        /// How many characters must go.
        free: usize,
    },
}

/// The entries of a memory file's text.
pub fn parse_entries(text: &str) -> Vec<String> {
    let mut entries = Vec::new();
    let mut current: Vec<&str> = Vec::new();
    for line in text.lines() {
        if line.trim() == DELIMITER {
            push_entry(&mut entries, &current);
            current.clear();
        } else {
            current.push(line);
        }
    }
    push_entry(&mut entries, &current);
    entries
}

fn push_entry(entries: &mut Vec<String>, lines: &[&str]) {
    let entry = lines.join("\n").trim().to_string();
    if !entry.is_empty() {
        entries.push(entry);
    }
}

/// The text of `entries` as it is counted against the limit (the file holds
/// it followed by a newline).
pub fn render_entries(entries: &[String]) -> String {
    entries.join(&format!("\n{DELIMITER}\n"))
}

/// The size of `entries` in characters, as counted against the limit.
pub fn size_of(entries: &[String]) -> usize {
    render_entries(entries).chars().count()
}

/// Applies `ops` to `entries`, all or nothing, then checks the limit.
/// Answers the new entries and a note per operation.
pub fn apply(
    target: MemoryTarget,
    entries: &[String],
    ops: &[MemoryOperation],
) -> Result<(Vec<String>, Vec<String>), MemoryError> {
    let mut out = entries.to_vec();
    let mut notes = Vec::new();
    for (index, op) in ops.iter().enumerate() {
        let fail = |message: String| MemoryError::Operation {
            index,
            action: op.action.name(),
            message,
        };
        match op.action {
            MemoryAction::Add => {
                let content = checked_content(op).map_err(fail)?;
                if out.contains(&content) {
                    notes.push(format!("operations[{index}]: already present, kept once"));
                } else {
                    out.push(content);
                    notes.push(format!("operations[{index}]: added"));
                }
            }
            MemoryAction::Replace => {
                let content = checked_content(op).map_err(fail)?;
                let at = find_one(&out, op.old_text.as_deref()).map_err(fail)?;
                out[at] = content;
                notes.push(format!("operations[{index}]: replaced"));
            }
            MemoryAction::Remove => {
                let at = find_one(&out, op.old_text.as_deref()).map_err(fail)?;
                out.remove(at);
                notes.push(format!("operations[{index}]: removed"));
            }
        }
    }
    let needed = size_of(&out);
    let limit = target.limit();
    if needed > limit {
        return Err(MemoryError::Full {
            target: target.name(),
            needed,
            limit,
            free: needed - limit,
        });
    }
    Ok((out, notes))
}

fn checked_content(op: &MemoryOperation) -> Result<String, String> {
    let content = op.content.as_deref().map(str::trim).unwrap_or_default();
    if content.is_empty() {
        return Err("`content` is required: the entry's text".into());
    }
    if content.lines().any(|l| l.trim() == DELIMITER) {
        return Err(format!(
            "an entry cannot hold a line with only `{DELIMITER}` (it separates entries)"
        ));
    }
    if let Some(threat) = scan::scan(content) {
        return Err(format!(
            "refused: the text holds {threat}; memory is read as instructions, so write the fact plainly without it"
        ));
    }
    Ok(content.to_string())
}

fn find_one(entries: &[String], old_text: Option<&str>) -> Result<usize, String> {
    let old = old_text.map(str::trim).unwrap_or_default();
    if old.is_empty() {
        return Err("`old_text` is required: a piece of the entry to change".into());
    }
    let hits: Vec<usize> = (0..entries.len())
        .filter(|&i| entries[i].contains(old))
        .collect();
    match hits.as_slice() {
        [one] => Ok(*one),
        [] => Err(format!(
            "no entry contains {old:?}; copy a piece of the entry exactly as it is"
        )),
        many => {
            let candidates: Vec<String> = many
                .iter()
                .map(|&i| format!("  - {}", preview(&entries[i], 80)))
                .collect();
            Err(format!(
                "{} entries contain {old:?}; give a longer piece that matches one of:\n{}",
                many.len(),
                candidates.join("\n")
            ))
        }
    }
}

fn preview(text: &str, max: usize) -> String {
    let flat = text.replace('\n', " ");
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max).collect();
        format!("{cut}…")
    }
}

/// An entry the scanner flags in a file on disk.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BlockedEntry {
    /// The file it is in.
    pub target: MemoryTarget,
    /// The entry as it is on disk, for the user.
    pub entry: String,
    /// What the scanner found.
    pub threat: Threat,
}

/// The memory as the system prompt shows it, frozen at a conversation's start.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemorySnapshot {
    /// The user profile for the model: flagged entries as `[blocked: …]`.
    pub user: String,
    /// The agent's notes for the model: flagged entries as `[blocked: …]`.
    pub notes: String,
    /// The flagged entries, as they are on disk (for the user).
    pub blocked: Vec<BlockedEntry>,
}

impl MemorySnapshot {
    /// The system prompt's memory section; empty when both files are.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for (title, limit, text) in [
            ("User profile", USER_LIMIT, &self.user),
            ("Your notes", NOTES_LIMIT, &self.notes),
        ] {
            if text.is_empty() {
                continue;
            }
            if !out.is_empty() {
                out.push_str("\n\n");
            }
            let used = text.chars().count();
            out.push_str(&format!("## {title} ({used}/{limit} characters)\n{text}"));
        }
        out
    }
}

/// Reads `agent`'s memory for a conversation's system prompt. Missing files
/// are empty; an unreadable one is logged and shown empty.
pub fn snapshot(home: &Home, agent: &str) -> MemorySnapshot {
    let mut snap = MemorySnapshot::default();
    for target in [MemoryTarget::User, MemoryTarget::Memory] {
        let (rendered, blocked) = shown(&SHOWN, &target.path(home, agent), target);
        snap.blocked.extend(blocked);
        match target {
            MemoryTarget::User => snap.user = rendered,
            MemoryTarget::Memory => snap.notes = rendered,
        }
    }
    snap
}

/// What each memory file showed, kept while it is as it was
/// ([`crate::stamp`]): a new conversation reads and scans a file again
/// only after a change.
static SHOWN: std::sync::LazyLock<Kept<Shown>> = std::sync::LazyLock::new(Kept::default);

/// A memory file as the system prompt shows it, and its flagged entries.
type Shown = (String, Vec<BlockedEntry>);

/// What the file at `path` shows, kept in `kept`.
fn shown(kept: &Kept<Shown>, path: &std::path::Path, target: MemoryTarget) -> Shown {
    // What is kept is checked with one `stat`; only a miss takes another.
    if let Some(shown) = kept.get(path) {
        return shown;
    }
    let stamp = match Stamp::read(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Default::default(),
        stamp => stamp.ok(),
    };
    let text = match file_lock::read_versioned(path) {
        Ok((text, _)) => text,
        Err(e) => {
            tracing::warn!(error = %e, "memory file unreadable");
            String::new()
        }
    };
    let mut blocked = Vec::new();
    let shown: Vec<String> = parse_entries(&text)
        .into_iter()
        .map(|entry| match scan::scan(&entry) {
            Some(threat) => {
                let line = format!("[blocked: {threat}]");
                blocked.push(BlockedEntry {
                    target,
                    entry,
                    threat,
                });
                line
            }
            None => entry,
        })
        .collect();
    let shown = (render_entries(&shown), blocked);
    if stamp.is_some() {
        kept.keep(path, vec![(path.to_path_buf(), stamp)], shown.clone());
    }
    shown
}

/// Applies `ops` to `target`'s file of `agent` under the file's lock.
/// Answers the entries after the change and a note per operation.
pub async fn change(
    home: &Home,
    agent: &str,
    target: MemoryTarget,
    ops: Vec<MemoryOperation>,
) -> Result<(Vec<String>, Vec<String>), ChangeError> {
    validate_name(agent).map_err(|e| ChangeError::Agent(e.to_string()))?;
    let path = target.path(home, agent);
    file_lock::edit(&path, move |text: &str| {
        let entries = parse_entries(text);
        let (new, notes) = apply(target, &entries, &ops)?;
        let write = (new != entries).then(|| {
            let mut body = render_entries(&new);
            if !body.is_empty() {
                body.push('\n');
            }
            body
        });
        Ok((write, (new, notes)))
    })
    .await
    .map_err(|e| match e {
        EditError::Rejected(e) => ChangeError::Refused(e),
        other => ChangeError::File(other.to_string()),
    })
}

/// Why [`change`] did not land.
#[derive(Debug, thiserror::Error)]
pub enum ChangeError {
    /// The change itself was refused.
    #[error(transparent)]
    Refused(#[from] MemoryError),
    /// The agent name cannot name a folder.
    #[error("{0}")]
    Agent(String),
    /// The file could not be read, locked or written.
    #[error("memory file: {0}")]
    File(String),
}

fn operations_of(params: MemoryParams) -> Result<Vec<MemoryOperation>, MemoryError> {
    let single = params.action.is_some() || params.content.is_some() || params.old_text.is_some();
    match (params.operations, params.action) {
        (Some(_), _) if single => Err(MemoryError::Shape(
            "give either `operations` or a single `action` with `content`/`old_text`, not both"
                .into(),
        )),
        (Some(ops), _) if ops.is_empty() => Err(MemoryError::Shape(
            "`operations` is empty: list at least one change".into(),
        )),
        (Some(ops), _) => Ok(ops),
        (None, Some(action)) => Ok(vec![MemoryOperation {
            action,
            content: params.content,
            old_text: params.old_text,
        }]),
        (None, None) => Err(MemoryError::Shape(
            "no change given: pass `operations`, or `action` with `content`/`old_text`".into(),
        )),
    }
}

/// What the model reads of `memory`.
fn description() -> String {
    format!(
        "Adds, replaces and removes entries in your two memory files, read at the start of every conversation (this conversation keeps the copy it started with). \
`target`: `user` (who the user is, shared with every agent; {USER_LIMIT} characters) or `memory` (your own notes; {NOTES_LIMIT} characters). \
Prefer `operations`: a list of {{action: add|replace|remove, content, old_text}} applied together and checked against the limit at the end; or give one change with `action`, `content` (alias `new_text`) and `old_text`. \
`old_text` is a piece of the entry to replace or remove and must match exactly one entry. Keep entries short and factual; a full file is refused with how much to free. \
Text with injection patterns or invisible characters is refused."
    )
}

/// Adds, replaces and removes entries in the agent's two memory files; the model reads
/// [`description`].
#[tool(description = description(), alias("new_text", "content"))]
pub async fn memory(params: MemoryParams, ctx: &ToolContext) -> ToolResult {
    let target = params.target;
    if target == MemoryTarget::User && troupe_runtime::house::HouseScope::foreign(ctx) {
        return ToolResult::error(
            "the user profile (`user`) belongs to the home's owner, not to this house; keep what you \
             learn here in your own notes (`target: memory`).",
        );
    }
    let ops = match operations_of(params) {
        Ok(ops) => ops,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    if ctx.services.proposes_removals() {
        return review::propose(ctx, target, ops).await;
    }
    match change(&ctx.home, &ctx.agent, target, ops).await {
        Ok((entries, notes)) => saved(target, &entries, &notes),
        Err(e) => ToolResult::error(e.to_string()),
    }
}

/// The answer to a change that landed: the entries now and their size.
pub(crate) fn saved(target: MemoryTarget, entries: &[String], notes: &[String]) -> ToolResult {
    let used = size_of(entries);
    let limit = target.limit();
    let mut text = format!(
        "{} memory saved: {} entr{}, {used}/{limit} characters.\n{}",
        target.name(),
        entries.len(),
        if entries.len() == 1 { "y" } else { "ies" },
        notes.join("\n")
    );
    if !entries.is_empty() {
        text.push_str("\n\nEntries now:\n");
        text.push_str(&render_entries(entries));
    }
    ToolResult::ok_with(
        text,
        serde_json::json!({
            "target": target.name(),
            "entries": entries,
            "used": used,
            "limit": limit,
        }),
    )
}

#[cfg(test)]
#[path = "memory_tests.rs"]
mod tests;
