//! `executor_accounts`: the outside executors' accounts, before the agent
//! picks one.
//!
//! A user with several Claude Code or Codex subscriptions wants a task to
//! go to an account with room left. This tool shows each account by the
//! target name `delegate` takes (`claude-code@work`), who it is logged in
//! as, its usage per limit window and when each frees up, whether it is at
//! its limit now and why, whether it bills past its limits, the folders
//! that start on it, and its place when a task moves on — read from the
//! accounts the node started with (`config.toml`'s, which a call does not
//! read again), the store and the accounts' folders
//! ([`troupe_runtime::executors::accounts`]): no model call, no process.

use chrono::Utc;
use schemars::JsonSchema;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::config::Config;
use troupe_runtime::executors::accounts;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// The tool's name.
pub const NAME: &str = "executor_accounts";

/// Arguments of `executor_accounts`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// Only this executor's accounts (`claude-code`), or one account (`claude-code@work`).
    pub executor: Option<String>,
}

/// Show the outside executors' accounts before you pick one for `delegate`: each by its target
/// name (`claude-code@work`), who it is logged in as, its usage per limit window and when each
/// frees up, whether it is at its limit now and why, whether it bills past its limits (extra
/// usage), the folders that start on it, and its place when a task moves on from an account at
/// its limit. `executor`: only that executor's accounts. Reads only; starts nothing.
#[tool(read_only, deferred)]
pub async fn executor_accounts(params: Params, ctx: &ToolContext) -> ToolResult {
    // The node's accounts; a context without a node reads the file.
    let executors = match ctx.services.node().executors() {
        Some(executors) => executors,
        None => match Config::load(&ctx.home, &|_| None, &[]) {
            Ok(config) => std::sync::Arc::new(config.executors),
            Err(e) => {
                return ToolResult::error(format!(
                    "the executors' accounts could not be read from config.toml: {e}"
                ))
            }
        },
    };
    let Some(store) = ctx.services.store() else {
        return ToolResult::error(
            "executor_accounts has no store in this conversation; it cannot read usage here.",
        );
    };
    let home = ctx.home.clone();
    let only = params
        .executor
        .map(|e| e.trim().to_string())
        .filter(|e| !e.is_empty());
    let filter = only.clone();
    let read = store
        .read(move |conn| {
            accounts::view(&home, &executors, Some(conn), Utc::now(), filter.as_deref())
        })
        .await;
    match read {
        Ok(found) if found.is_empty() && only.is_some() => ToolResult::error(format!(
            "no account of `{}` is installed or configured here; call without `executor` to see \
             them all.",
            only.unwrap_or_default()
        )),
        Ok(found) => {
            let data = serde_json::to_value(&found).unwrap_or_default();
            ToolResult::ok_with(accounts::render(&found), data)
        }
        Err(e) => ToolResult::error(format!("the accounts' usage could not be read: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use troupe_runtime::home::Home;
    use troupe_runtime::store::executor_usage::{self, Limit};
    use troupe_runtime::store::Store;
    use troupe_runtime::tool::Tool as _;

    use super::*;

    #[tokio::test]
    async fn the_accounts_are_shown_with_the_one_at_its_limit_and_filtered_by_executor() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        std::fs::write(
            home.config_file(),
            "[executors.codex.accounts.work]\nhand_over = 0\n",
        )
        .unwrap();
        let store = Store::open(&home.database()).unwrap();
        let resets = chrono::Utc::now().timestamp() + 600;
        store
            .write(move |tx| {
                executor_usage::reach(
                    tx,
                    ("codex", "work"),
                    &Limit {
                        reached_at: resets - 1200,
                        resets_at: Some(resets),
                        why: "usage_limit_reached".into(),
                    },
                    None,
                )
            })
            .await
            .unwrap();
        let ctx = ToolContext::standalone(home, dir.path().to_path_buf());
        ctx.services.node().set_store(store);
        let call = |args: serde_json::Value| {
            let ctx = ctx.clone();
            async move { executor_accounts::tool().call(args, &ctx).await }
        };
        let all = call(serde_json::json!({})).await;
        assert!(!all.is_error(), "{}", all.text);
        assert!(
            all.text.starts_with("codex@main (not installed)\n")
                && all.text.contains("codex@work (not installed)\n  logged in as: unknown\n  at its limit: yes, usage_limit_reached (until ")
                && all.text.contains("  takes over: never\n"),
            "{}",
            all.text
        );
        let none = call(serde_json::json!({"executor": "pi"})).await;
        assert!(
            none.is_error() && none.text.contains("no account of `pi`"),
            "{}",
            none.text
        );
    }

    #[tokio::test]
    async fn a_node_s_accounts_are_read_from_its_settings_not_from_the_file_again() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        // The file names `work`; the node started with `spare`.
        std::fs::write(home.config_file(), "[executors.codex.accounts.work]\n").unwrap();
        let started: troupe_runtime::config::Executors =
            serde_json::from_value(serde_json::json!({"codex": {"accounts": {"spare": {}}}}))
                .unwrap();
        let store = Store::open(&home.database()).unwrap();
        let ctx = ToolContext::standalone(home, dir.path().to_path_buf());
        ctx.services.node().set_store(store);
        ctx.services.node().set_executors(started);
        let shown = executor_accounts::tool()
            .call(serde_json::json!({"executor": "codex"}), &ctx)
            .await;
        assert!(!shown.is_error(), "{}", shown.text);
        assert!(shown.text.contains("codex@spare"), "{}", shown.text);
        assert!(!shown.text.contains("codex@work"), "{}", shown.text);
    }
}
