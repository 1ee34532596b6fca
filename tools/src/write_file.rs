//! `write_file`: creates a file or replaces all of it, atomically.
//!
//! An existing file is replaced only when this conversation has read it and
//! it still holds what was read (see [`ReadLedger`]); the new content goes to
//! a temporary file in the same folder that is renamed over the old one, so
//! a reader never sees half a file, and the old file's permissions are kept.

use std::fs::Permissions;
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{GateSubject, ToolContext};

use crate::ledger::{FileStamp, ReadLedger};
use crate::paths::{self, Access, PathError};

/// The arguments of `write_file`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteFileParams {
    /// The file: an absolute path, `~/…` in the user's home, or relative to the working folder.
    pub path: String,
    /// The file's whole new content.
    pub content: String,
}

/// Create a file or replace all of its content, creating missing folders. An existing file must
/// have been read with read_file in this conversation and be unchanged since. The write is
/// atomic and keeps the file's permissions. To change part of a file, prefer edit_file. System
/// folders and anything in troupe's home are refused (use the memory and skill_manage tools for
/// memory and skills); writing the user's dotfiles, ~/.ssh, git configuration or crontabs is
/// asked like a command writing them.
#[tool(gated_by = GateSubject::WritePath("path".into()))]
pub async fn write_file(params: WriteFileParams, ctx: &ToolContext) -> ToolResult {
    let real = match paths::confine(ctx, &params.path, Access::Write) {
        Ok(real) => real,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let ledger = ReadLedger::of(&ctx.services);
    let conversation = ctx.conversation;
    let shown = params.path;
    let content = params.content;
    let done = tokio::task::spawn_blocking(move || {
        let existing = read_existing(&real).map_err(|e| e.to_string())?;
        let created = existing.is_none();
        let permissions = match existing {
            Some(existing) => {
                ledger
                    .check_unchanged(conversation, &real, &existing.stamp)
                    .map_err(|e| e.to_string())?;
                Some(existing.permissions)
            }
            None => None,
        };
        paths::write_atomic(&real, content.as_bytes(), permissions).map_err(|e| e.to_string())?;
        let modified = std::fs::metadata(&real).and_then(|m| m.modified()).ok();
        ledger.record(
            conversation,
            &real,
            FileStamp::of(content.as_bytes(), modified),
        );
        let lines = content.lines().count();
        let verb = if created { "Created" } else { "Replaced" };
        Ok::<_, String>(ToolResult::ok_with(
            format!("{verb} `{shown}` ({lines} lines, {} bytes).", content.len()),
            serde_json::json!({"path": real, "bytes": content.len(), "created": created}),
        ))
    })
    .await;
    match done {
        Ok(Ok(result)) => result,
        Ok(Err(message)) => ToolResult::error(message),
        Err(e) => ToolResult::error(format!("write_file failed: {e}")),
    }
}

/// An existing file's content, stamp and permissions.
pub(crate) struct Existing {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its stamp, to compare with the ledger.
    pub stamp: FileStamp,
    /// Its permissions, kept by the replacement.
    pub permissions: Permissions,
}

/// Reads the file at `real` (already confined) without following a link,
/// or `None` when there is none.
pub(crate) fn read_existing(real: &Path) -> Result<Option<Existing>, PathError> {
    match std::fs::symlink_metadata(real) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(PathError::Io {
                path: real.to_path_buf(),
                source: e,
            })
        }
        Ok(meta) if meta.is_dir() => {
            return Err(PathError::Io {
                path: real.to_path_buf(),
                source: std::io::Error::new(
                    std::io::ErrorKind::IsADirectory,
                    "it is a folder; give a file's path",
                ),
            })
        }
        Ok(_) => {}
    }
    let mut file = paths::open_checked(real)?;
    let io = |source| PathError::Io {
        path: real.to_path_buf(),
        source,
    };
    let meta = file.metadata().map_err(io)?;
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    file.read_to_end(&mut bytes).map_err(io)?;
    Ok(Some(Existing {
        stamp: FileStamp::of(&bytes, meta.modified().ok()),
        bytes,
        permissions: meta.permissions(),
    }))
}

#[cfg(test)]
#[path = "write_file_tests.rs"]
mod tests;
