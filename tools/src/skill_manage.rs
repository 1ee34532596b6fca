//! `skill_manage`: creates, patches and deletes an agent's skills.
//!
//! A call is a list of operations applied atomically: under the lock of the
//! agent's `skills/` folder, each touched skill is copied to
//! `skills/.staging/<id>/<name>/`, the operations run on the copies, every
//! resulting `SKILL.md` is checked (frontmatter, its `name` the folder's) and
//! every written text scanned ([`crate::scan`]); only then is each live
//! folder moved to `skills/.versions/<name>/<n>/` (the previous version, see
//! [`crate::skills`]) and the staged copy renamed into its place. A failure at
//! any point leaves the library as it was. `delete` stands alone in its call
//! and moves the skill to `skills/.archive/<name>-<timestamp>/`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use crate::file_lock;
use crate::scan;
use crate::skills::{self, SkillError, KEPT_VERSIONS, SKILL_FILE};

/// What one operation does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SkillAction {
    /// Makes a new skill from `content`, its whole SKILL.md.
    Create,
    /// Changes a file: `old_string` → `new_string`, or `content` for all of it.
    Patch,
    /// Writes `file_content` to `file_path` under references/, templates/, scripts/ or assets/.
    WriteFile,
    /// Removes `file_path`.
    RemoveFile,
    /// Archives the skill (alone in its call).
    Delete,
}

impl SkillAction {
    fn name(self) -> &'static str {
        match self {
            Self::Create => "create",
            Self::Patch => "patch",
            Self::WriteFile => "write_file",
            Self::RemoveFile => "remove_file",
            Self::Delete => "delete",
        }
    }
}

/// One operation on one skill.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillOperation {
    /// The skill: lowercase letters, digits, '-' and '_'.
    pub name: String,
    /// `create`, `patch`, `write_file`, `remove_file` or `delete`.
    pub action: SkillAction,
    /// create: the whole SKILL.md (frontmatter `name` and `description`, then
    /// the instructions). patch: the whole new text of the file.
    #[serde(default)]
    pub content: Option<String>,
    /// patch: the exact text to replace.
    #[serde(default)]
    pub old_string: Option<String>,
    /// patch: its replacement.
    #[serde(default)]
    pub new_string: Option<String>,
    /// patch: replace every occurrence (default: it must occur once).
    #[serde(default)]
    pub replace_all: bool,
    /// patch (default SKILL.md), write_file, remove_file: the file, relative to
    /// the skill's folder, under references/, templates/, scripts/ or assets/.
    #[serde(default)]
    pub file_path: Option<String>,
    /// write_file: the file's text.
    #[serde(default)]
    pub file_content: Option<String>,
}

/// The arguments of `skill_manage`.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SkillManageParams {
    /// The operations, applied together or not at all.
    pub operations: Vec<SkillOperation>,
}

/// A skill changed by a call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    /// The skill.
    pub name: String,
    /// Where its previous version is kept, if it had one.
    pub previous: Option<PathBuf>,
}

/// What a successful call did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Skills created or changed.
    Changed(Vec<Changed>),
    /// A skill archived to this folder.
    Archived(PathBuf),
}

/// Applies `ops` to `agent`'s skills, atomically.
pub async fn apply(home: &Home, agent: &str, ops: Vec<SkillOperation>) -> Result<Outcome, String> {
    skills::validate_name(agent).map_err(|e| format!("agent: {e}"))?;
    if ops.is_empty() {
        return Err("`operations` is empty: list at least one operation".into());
    }
    if ops.len() > 1 && ops.iter().any(|o| o.action == SkillAction::Delete) {
        return Err("`delete` must be alone in its call: make one call for the delete and another for the rest".into());
    }
    let root = home.skills_dir(agent);
    let guard = file_lock::lock(&root).await.map_err(|e| e.to_string())?;
    let home = home.clone();
    let agent = agent.to_string();
    tokio::task::spawn_blocking(move || {
        let _held = guard;
        if let [op] = ops.as_slice() {
            if op.action == SkillAction::Delete {
                return archive(&home, &agent, &op.name).map(Outcome::Archived);
            }
        }
        let staging = root
            .join(".staging")
            .join(uuid::Uuid::now_v7().simple().to_string());
        let result = stage_and_commit(&home, &agent, &root, &staging, &ops);
        let _ = std::fs::remove_dir_all(&staging);
        result.map(Outcome::Changed)
    })
    .await
    .map_err(|e| format!("the skill task stopped: {e}"))?
}

fn archive(home: &Home, agent: &str, name: &str) -> Result<PathBuf, String> {
    skills::validate_name(name).map_err(|e| format!("operations[0] (delete): {e}"))?;
    let live = home.skills_dir(agent).join(name);
    if !live.is_dir() {
        return Err(format!("operations[0] (delete): no skill named {name:?}"));
    }
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.3fZ");
    let dest = skills::archive_dir(home, agent).join(format!("{name}-{stamp}"));
    std::fs::create_dir_all(skills::archive_dir(home, agent)).map_err(|e| e.to_string())?;
    std::fs::rename(&live, &dest).map_err(|e| format!("archiving {name}: {e}"))?;
    Ok(dest)
}

/// One staged skill: its copy and whether a live folder exists.
struct Staged {
    dir: PathBuf,
    existed: bool,
}

fn stage_and_commit(
    home: &Home,
    agent: &str,
    root: &Path,
    staging: &Path,
    ops: &[SkillOperation],
) -> Result<Vec<Changed>, String> {
    let mut staged: BTreeMap<String, Staged> = BTreeMap::new();
    for (index, op) in ops.iter().enumerate() {
        let fail = |m: String| {
            format!(
                "operations[{index}] ({} {:?}): {m}",
                op.action.name(),
                op.name
            )
        };
        run_op(root, staging, &mut staged, op).map_err(fail)?;
    }
    for (name, s) in &staged {
        skills::read_doc(&s.dir, name).map_err(|e| format!("skill {name:?}: {e}"))?;
    }
    commit(home, agent, root, &staged)
}

fn run_op(
    root: &Path,
    staging: &Path,
    staged: &mut BTreeMap<String, Staged>,
    op: &SkillOperation,
) -> Result<(), String> {
    skills::validate_name(&op.name).map_err(|e| e.to_string())?;
    let live = root.join(&op.name);
    let io = |e: std::io::Error| e.to_string();
    if op.action == SkillAction::Create {
        if live.exists() || staged.contains_key(&op.name) {
            return Err("it exists already: patch it instead".into());
        }
        let content = required(&op.content, "content", "the whole SKILL.md")?;
        let doc = skills::parse_skill_md(content).map_err(|e| e.to_string())?;
        if doc.name != op.name {
            return Err(SkillError::Frontmatter(format!(
                "its `name` is {:?} but the operation names {:?}; they must match",
                doc.name, op.name
            ))
            .to_string());
        }
        let dir = staging.join(&op.name);
        write_scanned(&dir.join(SKILL_FILE), content)?;
        staged.insert(
            op.name.clone(),
            Staged {
                dir,
                existed: false,
            },
        );
        return Ok(());
    }
    if !staged.contains_key(&op.name) {
        if !live.is_dir() {
            return Err("no such skill: create it first".into());
        }
        let dir = staging.join(&op.name);
        skills::copy_dir(&live, &dir).map_err(io)?;
        staged.insert(op.name.clone(), Staged { dir, existed: true });
    }
    let dir = staged
        .get(&op.name)
        .map(|s| s.dir.clone())
        .ok_or("staging lost the skill")?;
    match op.action {
        SkillAction::Patch => {
            let rel = match &op.file_path {
                Some(p) => skills::check_file_path(p, true).map_err(|e| e.to_string())?,
                None => PathBuf::from(SKILL_FILE),
            };
            let path = dir.join(&rel);
            let new_text = if let Some(content) = &op.content {
                if op.old_string.is_some() || op.new_string.is_some() {
                    return Err("give `content` or `old_string`/`new_string`, not both".into());
                }
                content.clone()
            } else {
                let old = required(&op.old_string, "old_string", "the exact text to replace")?;
                let new = op
                    .new_string
                    .as_deref()
                    .ok_or("`new_string` is required with `old_string`")?;
                let text = std::fs::read_to_string(&path)
                    .map_err(|e| format!("{}: {e}", rel.display()))?;
                let count = text.matches(old).count();
                match (count, op.replace_all) {
                    (0, _) => {
                        return Err(format!(
                            "`old_string` is not in {}; copy it exactly from the file",
                            rel.display()
                        ))
                    }
                    (1, _) | (_, true) => text.replace(old, new),
                    (n, false) => {
                        return Err(format!(
                            "`old_string` occurs {n} times in {}; give more context to match one, or set replace_all",
                            rel.display()
                        ))
                    }
                }
            };
            write_scanned(&path, &new_text)
        }
        SkillAction::WriteFile => {
            let rel = file_path(op)?;
            let content = op
                .file_content
                .as_deref()
                .ok_or("`file_content` is required: the file's text")?;
            write_scanned(&dir.join(rel), content)
        }
        SkillAction::RemoveFile => {
            let rel = file_path(op)?;
            let path = dir.join(&rel);
            if !path.is_file() {
                return Err(format!("{} does not exist", rel.display()));
            }
            std::fs::remove_file(&path).map_err(io)?;
            // Leave no empty folders behind.
            let mut parent = path.parent();
            while let Some(p) = parent.filter(|p| *p != dir) {
                if std::fs::remove_dir(p).is_err() {
                    break;
                }
                parent = p.parent();
            }
            Ok(())
        }
        SkillAction::Create | SkillAction::Delete => {
            Err("`delete` must be alone in its call".into())
        }
    }
}

fn required<'a>(value: &'a Option<String>, key: &str, what: &str) -> Result<&'a str, String> {
    value
        .as_deref()
        .filter(|v| !v.is_empty())
        .ok_or_else(|| format!("`{key}` is required: {what}"))
}

fn file_path(op: &SkillOperation) -> Result<PathBuf, String> {
    let p = required(
        &op.file_path,
        "file_path",
        "a path under references/, templates/, scripts/ or assets/",
    )?;
    skills::check_file_path(p, false).map_err(|e| e.to_string())
}

fn write_scanned(path: &Path, text: &str) -> Result<(), String> {
    if let Some(threat) = scan::scan(text) {
        return Err(format!(
            "refused: the text holds {threat}; skills are read as instructions, so write the procedure without it"
        ));
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
    }
    std::fs::write(path, text).map_err(|e| e.to_string())
}

/// Moves each live folder to its next version and each staged copy into
/// place; on a failure, undoes the moves already made.
fn commit(
    home: &Home,
    agent: &str,
    root: &Path,
    staged: &BTreeMap<String, Staged>,
) -> Result<Vec<Changed>, String> {
    let mut done: Vec<(PathBuf, PathBuf)> = Vec::new();
    let mut changed = Vec::new();
    let result = (|| -> std::io::Result<()> {
        for (name, s) in staged {
            let live = root.join(name);
            let mut previous = None;
            if s.existed {
                let versions = skills::versions_dir(home, agent, name);
                let n = skills::versions(home, agent, name)
                    .last()
                    .copied()
                    .unwrap_or(0)
                    + 1;
                std::fs::create_dir_all(&versions)?;
                let kept = versions.join(n.to_string());
                std::fs::rename(&live, &kept)?;
                done.push((live.clone(), kept.clone()));
                previous = Some(kept);
            }
            std::fs::rename(&s.dir, &live)?;
            done.push((s.dir.clone(), live));
            changed.push(Changed {
                name: name.clone(),
                previous,
            });
        }
        Ok(())
    })();
    if let Err(e) = result {
        for (from, to) in done.into_iter().rev() {
            if let Err(undo) = std::fs::rename(&to, &from) {
                tracing::error!(from = %to.display(), to = %from.display(), error = %undo, "skill rollback failed");
            }
        }
        return Err(format!(
            "the skills could not be swapped in, nothing changed: {e}"
        ));
    }
    for c in &changed {
        prune_versions(home, agent, &c.name);
    }
    Ok(changed)
}

fn prune_versions(home: &Home, agent: &str, name: &str) {
    let kept = skills::versions(home, agent, name);
    let extra = kept.len().saturating_sub(KEPT_VERSIONS);
    for n in &kept[..extra] {
        let _ =
            std::fs::remove_dir_all(skills::versions_dir(home, agent, name).join(n.to_string()));
    }
}

/// Creates, patches and deletes your skills: reusable procedures kept as skills/<name>/SKILL.md
/// (frontmatter `name` and `description`, then the instructions) with optional files under
/// references/, templates/, scripts/ and assets/. `operations` is a list, applied together or
/// not at all; each names the skill (`name`: lowercase letters, digits, '-', '_') and its
/// `action`: `create` with `content` (the whole SKILL.md; its frontmatter `name` must be the
/// skill's); `patch` with `old_string`/`new_string` (`replace_all`, `file_path` optional,
/// default SKILL.md) or `content` to replace the whole file; `write_file` with `file_path` and
/// `file_content`; `remove_file` with `file_path`; `delete`, alone in its call, archives the
/// skill. The previous version of a changed skill is kept.
#[tool]
pub async fn skill_manage(params: SkillManageParams, ctx: &ToolContext) -> ToolResult {
    match apply(&ctx.home, &ctx.agent, params.operations).await {
        Ok(Outcome::Archived(dest)) => ToolResult::ok_with(
            format!("Skill archived to {}.", dest.display()),
            serde_json::json!({ "archived": dest }),
        ),
        Ok(Outcome::Changed(changed)) => {
            let lines: Vec<String> = changed
                .iter()
                .map(|c| match &c.previous {
                    Some(p) => format!(
                        "- {}: updated; previous version kept in {}",
                        c.name,
                        p.display()
                    ),
                    None => format!("- {}: created", c.name),
                })
                .collect();
            let data: Vec<serde_json::Value> = changed
                .iter()
                .map(|c| serde_json::json!({ "name": c.name, "previous": c.previous }))
                .collect();
            ToolResult::ok_with(
                format!("Skills saved:\n{}", lines.join("\n")),
                serde_json::json!({ "changed": data }),
            )
        }
        Err(e) => ToolResult::error(format!("{e}. Nothing was changed.")),
    }
}

#[cfg(test)]
#[path = "skill_manage_tests.rs"]
mod tests;
