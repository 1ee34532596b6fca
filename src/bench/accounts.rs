//! Executors' accounts: what reading `executor_accounts` costs.
//!
//! - `view`: 3 harnesses × 5 accounts, each with two limit windows and
//!   usage rows over the last week (`rows` in all), Claude Code's and
//!   Codex's accounts logged in (their files read), one account at a limit
//!   the harness reported: `config.toml` loaded and the whole view read
//!   from the store, as the tool does each call — no model, no process.
//!   The target is ≤ 5 ms.

use std::time::Instant;

use serde_json::json;
use troupe_runtime::config::Config;
use troupe_runtime::executors::accounts;
use troupe_runtime::home::Home;
use troupe_runtime::store::executor_usage::{self, Limit};
use troupe_runtime::store::Store;

use super::percentiles;

/// The harnesses and accounts measured.
const HARNESSES: [&str; 3] = ["pi", "claude-code", "codex"];
const ACCOUNTS: [&str; 5] = ["main", "work", "personal", "spare", "team"];
/// Usage rows per account.
const ROWS_EACH: i64 = 2_000;

/// Reads the view `reads` times.
pub async fn accounts(reads: usize) -> anyhow::Result<serde_json::Value> {
    let dir = tempfile::tempdir()?;
    let home = Home::new(dir.path());
    let mut config = String::new();
    for harness in HARNESSES {
        for (i, account) in ACCOUNTS.iter().enumerate() {
            config.push_str(&format!(
                "[executors.{harness}.accounts.{account}]\nfolders = [\"/srv/{harness}/{account}\"]\n\
                 windows = [{{ name = \"5h\", hours = 5, tokens = 2000000 }}, \
                 {{ name = \"week\", hours = 168, tokens = 20000000 }}]\nhand_over = {}\n\n",
                i + 1
            ));
            let settings = troupe_runtime::config::Account::default();
            let folder = troupe_runtime::config::account_dir(&home, harness, account, &settings);
            std::fs::create_dir_all(&folder)?;
            std::fs::write(
                folder.join(".claude.json"),
                json!({"oauthAccount": {"emailAddress": format!("{account}@example.com")}})
                    .to_string(),
            )?;
        }
    }
    std::fs::write(home.config_file(), config)?;
    let store = Store::open(&home.database())?;
    let now = chrono::Utc::now().timestamp();
    store
        .write(move |tx| {
            for harness in HARNESSES {
                for account in ACCOUNTS {
                    for i in 0..ROWS_EACH {
                        let at = now - i * (7 * 24 * 3600 / ROWS_EACH);
                        executor_usage::add(tx, (harness, account), at, 1_000, 0.01, None)?;
                    }
                }
            }
            executor_usage::reach(
                tx,
                ("claude-code", "work"),
                &Limit {
                    reached_at: now,
                    resets_at: Some(now + 3600),
                    why: "usage limit reached".into(),
                },
                None,
            )
        })
        .await?;
    let mut samples = Vec::with_capacity(reads);
    let mut shown = 0;
    for _ in 0..reads {
        let start = Instant::now();
        let config = Config::load(&home, &|_| None, &[])?;
        let h = home.clone();
        let found = store
            .read(move |c| accounts::view(&h, &config.executors, Some(c), chrono::Utc::now(), None))
            .await?;
        samples.push(start.elapsed());
        shown = found.len();
    }
    Ok(json!({
        "workload": "accounts",
        "accounts": shown,
        "usage_rows": ROWS_EACH as usize * HARNESSES.len() * ACCOUNTS.len(),
        "view": percentiles(samples),
        "target_ms": 5,
    }))
}
