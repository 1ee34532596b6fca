//! Hand-over: a task whose account reached its plan's limit goes on on the
//! next account instead of failing.
//!
//! Where it goes is the instance's `route` (the target names `delegate`
//! gave, in order) or else its executor's own `hand_over` order, skipping
//! the account it was on and every account at its limit now
//! (`troupe_runtime::executors::accounts`). Another account of the same
//! harness goes on in a **copy of the session**: the harness's session
//! files are copied into that account's folder, so the next instance
//! resumes it there. Another harness cannot read the session, so it starts
//! a session of its own from a **handoff packet**: the task, what was done
//! (the instance's latest summary), the files changed (from git in the
//! folder, or modification times where there is no git), its last commands
//! and their results, and what is left. Either way the same instance (its
//! row, its delegation, its report) goes on: its row names the new
//! executor and account, and the record says what moved where — the
//! packet whole — so `delegation_search` reads it.
//!
//! A hand-over is on the task's way (its target: the limit to the next
//! instance's first event within 50 ms, most of it the next harness's own
//! start), so the accounts come from the node's settings, not from
//! `config.toml` again, and the next harness is started while the move is
//! recorded ([`HeadStart`], as `delegate` does): it gets its task from its
//! actor once the move has committed, and is killed if it did not.

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use troupe_runtime::config::{Executors, Target};
use troupe_runtime::executors::accounts;
use troupe_runtime::home::Home;
use troupe_runtime::store::executor_usage;

use super::actor::ExecutorArgs;
use super::{HeadStart, Launch, Place};
use crate::delegation::{record, DelegationMsg};

/// The last commands a handoff packet shows.
const COMMANDS_SHOWN: usize = 10;
/// The most changed files a handoff packet lists.
const FILES_SHOWN: usize = 200;
/// The most entries looked at when finding changed files by time.
const FILES_WALKED: usize = 5_000;

/// Where a task goes on: a harness, an account and its folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Next {
    /// The harness.
    pub executor: String,
    /// The account.
    pub account: String,
    /// The account's config folder.
    pub dir: PathBuf,
}

/// The first account of `route` (or, with none, of `executor`'s own
/// hand-over order in `executors`) that is not `(executor, account)`, is
/// installed, and is not at its limit at `now`.
pub fn next(
    home: &Home,
    executors: &Executors,
    conn: &troupe_runtime::rusqlite::Connection,
    (executor, account): (&str, &str),
    route: &[String],
    now: chrono::DateTime<chrono::Utc>,
) -> Option<Next> {
    let candidates: Vec<Target> = if route.is_empty() {
        executors
            .get(executor)
            .cloned()
            .unwrap_or_default()
            .hand_over_order()
            .into_iter()
            .map(|a| Target {
                executor: executor.to_string(),
                account: Some(a),
            })
            .collect()
    } else {
        // In a route an executor alone is its main account.
        route
            .iter()
            .map(|t| {
                let mut t = Target::parse(t);
                t.account = t
                    .account
                    .or_else(|| Some(troupe_runtime::config::MAIN_ACCOUNT.to_string()));
                t
            })
            .collect()
    };
    candidates.into_iter().find_map(|t| {
        let wanted = t.account.clone().unwrap_or_default();
        if t.executor == executor && wanted == account {
            return None;
        }
        let view = accounts::view(home, executors, Some(conn), now, Some(&t.to_string())).ok()?;
        let a = view.into_iter().next()?;
        (a.installed && a.at_limit.is_none()).then_some(Next {
            executor: a.executor,
            account: a.account,
            dir: a.dir,
        })
    })
}

/// Copies session `session` of an account's folder `from` into `to`: a
/// file path under `from` (pi's) to the same place under `to`; an id
/// (Claude Code's, Codex's) as every file under `from` whose name holds
/// it. Returns the copies, and the session as the next instance names it.
pub fn copy_session(
    from: &Path,
    to: &Path,
    session: &str,
) -> std::io::Result<(Vec<PathBuf>, String)> {
    let as_path = Path::new(session);
    if as_path.is_absolute() {
        let relative = as_path.strip_prefix(from).map_err(|_| {
            std::io::Error::other(format!(
                "the session {session} is not in the account's folder {}",
                from.display()
            ))
        })?;
        let target = to.join(relative);
        copy_one(as_path, &target)?;
        let named = target.display().to_string();
        return Ok((vec![target], named));
    }
    let mut copied = Vec::new();
    let mut stack = vec![from.to_path_buf()];
    let mut walked = 0;
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir)?.flatten() {
            walked += 1;
            if walked > FILES_WALKED {
                break;
            }
            let path = entry.path();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            if kind.is_dir() {
                stack.push(path);
            } else if kind.is_file() && entry.file_name().to_string_lossy().contains(session) {
                let Ok(relative) = path.strip_prefix(from) else {
                    continue;
                };
                let target = to.join(relative);
                copy_one(&path, &target)?;
                copied.push(target);
            }
        }
    }
    if copied.is_empty() {
        return Err(std::io::Error::other(format!(
            "no file of session {session} was found in {}",
            from.display()
        )));
    }
    Ok((copied, session.to_string()))
}

fn copy_one(from: &Path, to: &Path) -> std::io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to).map(|_| ())
}

/// The files changed in `folder`: `git status` where it is a repository,
/// else the files modified since `since`.
pub fn files_changed(folder: &Path, since: SystemTime) -> Vec<String> {
    let git = std::process::Command::new("git")
        .arg("-C")
        .arg(folder)
        .args(["status", "--porcelain", "--untracked-files=all"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output();
    if let Ok(out) = git {
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout)
                .lines()
                .map(|l| l.trim_end().to_string())
                .filter(|l| !l.is_empty())
                .take(FILES_SHOWN)
                .collect();
        }
    }
    let mut found = Vec::new();
    let mut stack = vec![folder.to_path_buf()];
    let mut walked = 0;
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            walked += 1;
            if walked > FILES_WALKED || found.len() >= FILES_SHOWN {
                return found;
            }
            let path = entry.path();
            let name = entry.file_name();
            if name == ".git" || name == "node_modules" {
                continue;
            }
            let Ok(meta) = entry.metadata() else { continue };
            if meta.is_dir() {
                stack.push(path);
            } else if meta.modified().is_ok_and(|m| m >= since) {
                let shown = path.strip_prefix(folder).unwrap_or(&path);
                found.push(format!("modified {}", shown.display()));
            }
        }
    }
    found.sort();
    found
}

/// What a handoff packet holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Packet {
    /// The task as it was given.
    pub task: String,
    /// Where it was.
    pub from: String,
    /// Why it moves.
    pub why: String,
    /// Where it goes on.
    pub to: String,
    /// The instance's latest summary.
    pub summary: String,
    /// The files changed.
    pub files: Vec<String>,
    /// Its last commands and their results, oldest first.
    pub commands: Vec<String>,
    /// What is left to do.
    pub left: String,
}

impl Packet {
    /// The packet as text: the record keeps it, and the next harness
    /// starts from it.
    pub fn text(&self) -> String {
        let list = |items: &[String], none: &str| {
            if items.is_empty() {
                format!("{none}\n")
            } else {
                items.iter().map(|i| format!("- {i}\n")).collect()
            }
        };
        format!(
            "Handoff packet: this task moves from {from} to {to} ({why}).\n\n## Task\n{task}\n\n\
             ## What was done\n{summary}\n\n## Files changed\n{files}\n## Last commands and \
             their results\n{commands}\n## What is left\n{left}\n\nWork on your own in this \
             folder; nobody can answer questions. When you are done, end with a short summary of \
             what you did: it is all the delegating agent will see.",
            from = self.from,
            to = self.to,
            why = self.why,
            task = self.task.trim(),
            summary = if self.summary.trim().is_empty() {
                "(it gave no summary before it stopped)"
            } else {
                self.summary.trim()
            },
            files = list(&self.files, "(none found)"),
            commands = list(&self.commands, "(none recorded)"),
            left = self.left.trim(),
        )
    }
}

/// Hands the instance's task on, if its account reached its limit and
/// another account can take it: the next instance is launched under the
/// same row and delegation, and `true` says the caller's instance ends
/// without a report. `false`: it ends as it would have.
pub(super) async fn go_on(
    args: &ExecutorArgs,
    error: &str,
    summary: &str,
    started: SystemTime,
) -> bool {
    let now = chrono::Utc::now();
    let t = std::time::Instant::now();
    let Some(limit) = super::limit::usage_limit(error, now) else {
        return false;
    };
    let launch = &args.launch;
    if launch.place != Place::Host {
        return false;
    }
    let node = &args.node;
    let home = node.home().clone();
    let settings = node.settings().clone();
    let id = launch.sub.to_string();
    let sub = launch.sub;
    let (executor, account) = (launch.executor.clone(), launch.account.clone());
    // Read through the writer: what the harness printed before its end
    // (its session) is committed first.
    let found = node
        .store()
        .write(move |c| {
            let route = executor_usage::route_of(c, &id)?;
            let executors = &settings.executors;
            let next = next(&home, executors, c, (&executor, &account), &route, now);
            let row = record::instance(c, &id)?;
            let tools: Vec<String> = record::events_of(c, sub, 0, usize::MAX)?
                .into_iter()
                .filter(|(_, kind, ..)| kind == "tool")
                .map(|(_, _, text, _)| text)
                .collect();
            Ok((next, row, tools))
        })
        .await;
    let found_us = t.elapsed().as_micros() as u64;
    let Ok((Some(next), Some(row), tools)) = found else {
        return false;
    };
    if next.dir == launch.account_dir && next.executor == launch.executor {
        return false;
    }
    let from = format!("{}@{}", launch.executor, launch.account);
    let to = format!("{}@{}", next.executor, next.account);
    let (prompt, session, note) = if next.executor == launch.executor {
        let copied = row
            .session
            .as_deref()
            .map(|s| copy_session(&launch.account_dir, &next.dir, s));
        match copied {
            Some(Ok((files, session))) => (
                format!(
                    "Your previous account reached its usage limit; this session goes on on \
                     another account. Continue the task where you left off: {}",
                    row.goal.trim()
                ),
                Some(session),
                format!(
                    "hand-over: {from} reached its plan's limit ({}); the task goes on on {to} \
                     in a copy of its session ({})",
                    limit.why,
                    files
                        .iter()
                        .map(|f| f.display().to_string())
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            ),
            Some(Err(e)) => {
                tracing::warn!(instance = %launch.sub, error = %e, "the session could not be copied for a hand-over");
                return false;
            }
            None => return false,
        }
    } else {
        let folder = launch.folder.clone();
        let files = tokio::task::spawn_blocking(move || files_changed(&folder, started))
            .await
            .unwrap_or_default();
        let skip = tools.len().saturating_sub(COMMANDS_SHOWN * 2);
        let packet = Packet {
            task: row.goal.clone(),
            from: from.clone(),
            why: format!("{from} reached its plan's limit: {}", limit.why),
            to: to.clone(),
            summary: summary.to_string(),
            files,
            commands: tools.into_iter().skip(skip).collect(),
            left: format!(
                "{from} stopped at its usage limit before it said the task was done. Check the \
                 files changed above, then finish the task."
            ),
        };
        let text = packet.text();
        (text.clone(), None, text)
    };
    let prepared_us = t.elapsed().as_micros() as u64;
    let (d, id) = (launch.delegation, launch.sub.to_string());
    let (executor, account, kept) = (next.executor.clone(), next.account.clone(), session.clone());
    let queued = node
        .store()
        .submit(move |tx| {
            executor_usage::move_to(tx, &id, (&executor, &account), kept.as_deref())?;
            record::event(tx, d, Some(sub), "note", &note)
        })
        .await;
    let next_launch = Launch {
        executor: next.executor.clone(),
        prompt,
        session: session.map(PathBuf::from),
        account: next.account,
        account_dir: next.dir,
        ..launch.clone()
    };
    // The next harness starts while the move commits; its actor gives it
    // the task once it has.
    let head = match &queued {
        Ok(_) => Some(Box::new(HeadStart::begin(node, &next_launch, None).await)),
        Err(_) => None,
    };
    let begun_us = t.elapsed().as_micros() as u64;
    let written = match queued {
        Ok(pending) => pending.wait().await,
        Err(e) => Err(e),
    };
    if let Err(e) = written {
        // Dropped, its process group is killed and its relay stops; its
        // folder (the instance's, holding what the first harness printed)
        // stays.
        drop(head);
        tracing::warn!(instance = %launch.sub, error = %e, "a hand-over could not be recorded");
        return false;
    }
    args.delegations.record_grew();
    tracing::debug!(
        instance = %launch.sub,
        found_us,
        prepared_us,
        begun_us,
        recorded_us = t.elapsed().as_micros() as u64,
        "hand-over timed"
    );
    tracing::info!(instance = %launch.sub, from = %from, to = %to, "executor instance handed over");
    args.delegations.send(
        launch.delegation,
        DelegationMsg::Launch {
            launch: Box::new(next_launch),
            head,
        },
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_file_or_id_is_copied_to_the_same_place_in_the_other_account() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(a.join("projects/p")).unwrap();
        std::fs::write(a.join("projects/p/abc-123.jsonl"), "{}\n").unwrap();
        std::fs::write(a.join("projects/p/other.jsonl"), "{}\n").unwrap();
        let (copied, named) = copy_session(&a, &b, "abc-123").unwrap();
        assert_eq!(copied, vec![b.join("projects/p/abc-123.jsonl")]);
        assert_eq!(named, "abc-123");
        assert!(!b.join("projects/p/other.jsonl").exists());
        let file = a.join("projects/p/other.jsonl");
        let (copied, named) = copy_session(&a, &b, &file.display().to_string()).unwrap();
        assert_eq!(copied, vec![b.join("projects/p/other.jsonl")]);
        assert_eq!(
            named,
            b.join("projects/p/other.jsonl").display().to_string()
        );
        assert!(copy_session(&a, &b, "missing").is_err());
    }

    #[test]
    fn files_changed_without_git_are_those_modified_since_the_start() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("old.txt"), "x").unwrap();
        let since = SystemTime::now() + std::time::Duration::from_secs(3600);
        assert!(files_changed(dir.path(), since).is_empty());
        let found = files_changed(dir.path(), SystemTime::UNIX_EPOCH);
        assert_eq!(found, vec!["modified old.txt".to_string()]);
    }
}
