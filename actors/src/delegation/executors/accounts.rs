//! Which account an executor's task runs on, and what carries a task from
//! one account or harness to the next: a copy of the session, or a
//! handoff packet.

use std::path::PathBuf;

use troupe_runtime::config::{account_dir, Executors, Target};
use troupe_runtime::home::Home;

use crate::delegation::{executor, record};
use crate::node::Node;

/// The account a task in `folder` runs on, and its config folder: the
/// one `target` names, else the folder's, else the main one, among
/// `executors`' accounts (the node's settings: `config.toml` is not read
/// again for each task).
pub(super) fn account_of(
    home: &Home,
    executors: &Executors,
    target: &Target,
    folder: &std::path::Path,
) -> Result<(String, PathBuf), String> {
    let settings = executors.get(&target.executor).cloned().unwrap_or_default();
    let account = target
        .account
        .clone()
        .unwrap_or_else(|| settings.account_for(folder));
    let all = settings.accounts();
    let Some(chosen) = all.get(&account) else {
        let names: Vec<&str> = all.keys().map(String::as_str).collect();
        return Err(format!(
            "{} has no account `{account}`; its accounts are {} (`executor_accounts` shows them; \
             the user adds one in config.toml as [executors.{}.accounts.{account}])",
            target.executor,
            names.join(", "),
            target.executor
        ));
    };
    Ok((
        account.clone(),
        account_dir(home, &target.executor, &account, chosen),
    ))
}

/// Copies the session of an instance on `here` into `there`'s account
/// folder (same harness): the session as the copy names it, and a note
/// for the record (none when `there` is the same account).
pub(super) fn copy_to(
    home: &Home,
    executors: &Executors,
    here: &Target,
    there: &Target,
    folder: &std::path::Path,
    session: &str,
) -> Result<(String, Option<String>), String> {
    let (current, from) = account_of(home, executors, here, folder)?;
    let (account, to) = account_of(home, executors, there, folder)?;
    if account == current || from == to {
        return Ok((session.to_string(), None));
    }
    let (files, copy) = executor::hand_over::copy_session(&from, &to, session).map_err(|e| {
        format!(
            "the session could not be copied to {}@{account}: {e}",
            there.executor
        )
    })?;
    let files: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
    Ok((
        copy,
        Some(format!(
            "resumed on {}@{account} in a copy of its session ({})",
            there.executor,
            files.join(", ")
        )),
    ))
}

/// The handoff packet of an ended instance moving to another harness.
pub(super) async fn packet_of(
    node: &Node,
    sub: &record::SubagentRow,
    here: &Target,
    there: &Target,
    folder: &std::path::Path,
) -> executor::hand_over::Packet {
    let (id, key) = (sub.id, sub.id.to_string());
    let (tools, since) = node
        .store()
        .read(move |c| {
            let tools: Vec<String> = record::events_of(c, id, 0, usize::MAX)?
                .into_iter()
                .filter(|(_, kind, ..)| kind == "tool")
                .map(|(_, _, text, _)| text)
                .collect();
            let since: Option<String> = c
                .query_row(
                    "SELECT created_at FROM subagents WHERE id = ?1",
                    [&key],
                    |r| r.get(0),
                )
                .ok();
            Ok((tools, since))
        })
        .await
        .unwrap_or_default();
    let since = since
        .and_then(|s| chrono::DateTime::parse_from_rfc3339(&s).ok())
        .map(|t| std::time::SystemTime::from(t.with_timezone(&chrono::Utc)))
        .unwrap_or(std::time::UNIX_EPOCH);
    let owned = folder.to_path_buf();
    let files =
        tokio::task::spawn_blocking(move || executor::hand_over::files_changed(&owned, since))
            .await
            .unwrap_or_default();
    let skip = tools.len().saturating_sub(20);
    executor::hand_over::Packet {
        task: sub.goal.clone(),
        from: here.to_string(),
        why: format!("resumed on {there} by `delegate`"),
        to: there.to_string(),
        summary: sub.result.clone(),
        files,
        commands: tools.into_iter().skip(skip).collect(),
        left: format!(
            "{here} ended with the summary above ({}); what follows under \"Now\" is what to do \
             next.",
            sub.status
        ),
    }
}
