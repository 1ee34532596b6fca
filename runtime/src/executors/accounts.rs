//! The executors' accounts as the user and the agent see them: each by its
//! target name, who it is logged in as, its usage per limit window and when
//! each resets, whether it is at its limit now (and why), whether it bills
//! past its limits, the folders that start on it, and its place when a
//! task moves on.
//!
//! Everything is read from `config.toml`, the store and the accounts'
//! folders: no model is called and no harness is started, so the agent can
//! look before it picks an account, and the view costs a few milliseconds
//! (`troupe bench accounts`). `executor_accounts`, `troupe executors
//! accounts` and the API's `GET /api/executors/accounts` all show this one
//! view.

use std::path::{Path, PathBuf};

use chrono::{DateTime, TimeZone, Utc};
use rusqlite::Connection;
use serde::Serialize;

use super::settings::{account_dir, Executors, Target};
use crate::home::Home;
use crate::store::executor_usage;
use crate::store::StoreError;

/// One account of one harness.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AccountView {
    /// The name `delegate` takes: `NAME@ACCOUNT`.
    pub target: String,
    /// The harness.
    pub executor: String,
    /// The account's nickname.
    pub account: String,
    /// Whether the harness is installed here.
    pub installed: bool,
    /// Its config and credentials folder.
    pub dir: PathBuf,
    /// The email it is logged in as, when its folder says.
    pub logged_in_as: Option<String>,
    /// Usage per configured limit window.
    pub windows: Vec<WindowUse>,
    /// What it used in the last [`RECENT_DAYS`] days, windows or not: the
    /// tokens and the cost its harness reported.
    pub recent: Recent,
    /// Why it is at its limit now, if it is.
    pub at_limit: Option<AtLimit>,
    /// Whether its plan bills past its limits.
    pub extra_usage: bool,
    /// The folders whose tasks start on it.
    pub folders: Vec<PathBuf>,
    /// Its place when a task moves on from an account at its limit (1
    /// first), `None` when it never takes over.
    pub hand_over: Option<usize>,
}

/// How far back [`AccountView::recent`] looks.
pub const RECENT_DAYS: i64 = 7;

/// What an account used lately.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Recent {
    /// Tokens.
    pub tokens: u64,
    /// Cost in US dollars, as its harness reported it (Claude Code's
    /// `total_cost_usd`, pi's `usage.cost`; Codex reports none).
    pub cost_usd: f64,
}

/// Usage within one limit window.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WindowUse {
    /// The window's name (`5h`).
    pub name: String,
    /// Its length in hours.
    pub hours: u32,
    /// Tokens used within it.
    pub tokens: u64,
    /// Tokens it allows.
    pub tokens_limit: Option<u64>,
    /// Cost within it, in US dollars.
    pub cost_usd: f64,
    /// Cost it allows.
    pub cost_limit: Option<f64>,
    /// When its oldest use falls out of it (nothing used: `None`).
    pub resets_at: Option<DateTime<Utc>>,
}

impl WindowUse {
    /// Whether its usage reached a limit.
    pub fn reached(&self) -> bool {
        self.tokens_limit.is_some_and(|l| self.tokens >= l)
            || self.cost_limit.is_some_and(|l| self.cost_usd >= l)
    }
}

/// Why an account is at its limit.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AtLimit {
    /// `harness` (it said so) or `window` (troupe's count reached one).
    pub by: &'static str,
    /// What was reached.
    pub why: String,
    /// When it frees up, when known.
    pub until: Option<DateTime<Utc>>,
}

fn at(seconds: i64) -> Option<DateTime<Utc>> {
    Utc.timestamp_opt(seconds, 0).single()
}

/// Every account of every harness installed here or named in
/// `executors`, or only `only`'s (a harness, or one target name); with no
/// store yet (`conn` is `None`), nothing is used.
///
/// # Errors
///
/// The store could not be read.
pub fn view(
    home: &Home,
    executors: &Executors,
    conn: Option<&Connection>,
    now: DateTime<Utc>,
    only: Option<&str>,
) -> Result<Vec<AccountView>, StoreError> {
    let only = only.map(Target::parse);
    let mut out = Vec::new();
    for harness in super::HARNESSES {
        if only.as_ref().is_some_and(|t| t.executor != harness.name) {
            continue;
        }
        let installed = super::installed(home, harness.name).is_some();
        let settings = executors.get(harness.name).cloned().unwrap_or_default();
        if !installed && settings.accounts.is_empty() {
            continue;
        }
        let order = settings.hand_over_order();
        for (account, a) in settings.accounts() {
            if only
                .as_ref()
                .and_then(|t| t.account.as_ref())
                .is_some_and(|wanted| *wanted != account)
            {
                continue;
            }
            let key = (harness.name, account.as_str());
            let dir = account_dir(home, harness.name, &account, &a);
            let mut windows = Vec::with_capacity(a.windows.len());
            for w in &a.windows {
                let hours = i64::from(w.hours);
                let (tokens, cost_usd, oldest) = match conn {
                    Some(conn) => executor_usage::since(conn, key, now.timestamp() - hours * 3600)?,
                    None => (0, 0.0, None),
                };
                windows.push(WindowUse {
                    name: w.name.clone(),
                    hours: w.hours,
                    tokens,
                    tokens_limit: w.tokens,
                    cost_usd,
                    cost_limit: w.cost_usd,
                    resets_at: oldest.and_then(|o| at(o + hours * 3600)),
                });
            }
            // A window as long as the recent use (a week) has counted it.
            let week = windows
                .iter()
                .find(|w| i64::from(w.hours) == RECENT_DAYS * 24);
            let recent = match (week, conn) {
                (Some(w), _) => Recent {
                    tokens: w.tokens,
                    cost_usd: w.cost_usd,
                },
                (None, Some(conn)) => {
                    let (tokens, cost_usd, _) = executor_usage::since(
                        conn,
                        key,
                        now.timestamp() - RECENT_DAYS * 24 * 3600,
                    )?;
                    Recent { tokens, cost_usd }
                }
                (None, None) => Recent {
                    tokens: 0,
                    cost_usd: 0.0,
                },
            };
            let reported = match conn {
                Some(conn) => executor_usage::holding(conn, key, now.timestamp())?,
                None => None,
            };
            let at_limit = match reported {
                Some(limit) => Some(AtLimit {
                    by: "harness",
                    why: limit.why,
                    until: limit.resets_at.and_then(at),
                }),
                None if !a.extra_usage => windows.iter().find(|w| w.reached()).map(|w| AtLimit {
                    by: "window",
                    why: format!("its {} window is used up ({})", w.name, usage_of(w)),
                    until: w.resets_at,
                }),
                None => None,
            };
            out.push(AccountView {
                target: format!("{}@{account}", harness.name),
                executor: harness.name.to_string(),
                logged_in_as: logged_in_as(harness.name, &dir),
                installed,
                dir,
                windows,
                recent,
                at_limit,
                extra_usage: a.extra_usage,
                folders: a.folders.clone(),
                hand_over: order.iter().position(|n| *n == account).map(|p| p + 1),
                account,
            });
        }
    }
    Ok(out)
}

/// `812000 of 800000 tokens`, `$3.10 of $3.00`.
fn usage_of(w: &WindowUse) -> String {
    let mut parts = Vec::new();
    match w.tokens_limit {
        Some(limit) => parts.push(format!("{} of {limit} tokens", w.tokens)),
        None => parts.push(format!("{} tokens", w.tokens)),
    }
    match w.cost_limit {
        Some(limit) => parts.push(format!("${:.2} of ${limit:.2}", w.cost_usd)),
        None if w.cost_usd > 0.0 => parts.push(format!("${:.2}", w.cost_usd)),
        None => {}
    }
    parts.join(", ")
}

/// The view as text, an account a paragraph, times in UTC.
pub fn render(accounts: &[AccountView]) -> String {
    if accounts.is_empty() {
        return "No executor is installed or configured here: `troupe executors install NAME` \
                installs one, and `[executors.NAME.accounts.ACCOUNT]` in config.toml names its \
                accounts."
            .to_string();
    }
    let when = |t: &Option<DateTime<Utc>>| match t {
        Some(t) => t.format("%Y-%m-%d %H:%M UTC").to_string(),
        None => "unknown".to_string(),
    };
    let mut text = String::new();
    for a in accounts {
        text.push_str(&a.target);
        if !a.installed {
            text.push_str(" (not installed)");
        }
        text.push('\n');
        text.push_str(&format!(
            "  logged in as: {}\n",
            a.logged_in_as.as_deref().unwrap_or("unknown")
        ));
        match &a.at_limit {
            Some(l) => text.push_str(&format!(
                "  at its limit: yes, {} (until {})\n",
                l.why,
                when(&l.until)
            )),
            None => text.push_str("  at its limit: no\n"),
        }
        for w in &a.windows {
            text.push_str(&format!(
                "  window {} ({} h): {}; frees up {}\n",
                w.name,
                w.hours,
                usage_of(w),
                match w.resets_at {
                    Some(_) => when(&w.resets_at),
                    None => "(nothing used)".to_string(),
                }
            ));
        }
        text.push_str(&format!(
            "  used in the last {RECENT_DAYS} days: {} tokens, ${:.2}\n",
            a.recent.tokens, a.recent.cost_usd
        ));
        text.push_str(&format!(
            "  extra usage: {}\n",
            if a.extra_usage {
                "yes, it bills past its limits"
            } else {
                "no"
            }
        ));
        if !a.folders.is_empty() {
            let folders: Vec<String> = a.folders.iter().map(|f| f.display().to_string()).collect();
            text.push_str(&format!("  folders: {}\n", folders.join(", ")));
        }
        match a.hand_over {
            Some(n) => text.push_str(&format!("  takes over: {n}\n")),
            None => text.push_str("  takes over: never\n"),
        }
    }
    text
}

/// The email the harness's folder says it is logged in as: Claude Code's
/// `.claude.json` (`oauthAccount.emailAddress`), Codex's `auth.json` (the
/// email in its ID token). pi keeps none.
pub fn logged_in_as(executor: &str, dir: &Path) -> Option<String> {
    let json = |name: &str| -> Option<serde_json::Value> {
        serde_json::from_slice(&std::fs::read(dir.join(name)).ok()?).ok()
    };
    match executor {
        "claude-code" => json(".claude.json")?["oauthAccount"]["emailAddress"]
            .as_str()
            .map(str::to_string),
        "codex" => {
            let auth = json("auth.json")?;
            let token = auth["tokens"]["id_token"].as_str()?;
            let payload = token.split('.').nth(1)?;
            use base64::Engine;
            let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
                .decode(payload.trim_end_matches('='))
                .ok()?;
            let claims: serde_json::Value = serde_json::from_slice(&bytes).ok()?;
            claims["email"].as_str().map(str::to_string)
        }
        _ => None,
    }
}

/// Another account of `executor` already logged in as `email`, if one is.
pub fn logged_in_elsewhere(
    home: &Home,
    executors: &Executors,
    executor: &str,
    account: &str,
    email: &str,
) -> Option<String> {
    let settings = executors.get(executor).cloned().unwrap_or_default();
    settings
        .accounts()
        .into_iter()
        .filter(|(name, _)| name != account)
        .find(|(name, a)| {
            logged_in_as(executor, &account_dir(home, executor, name, a))
                .is_some_and(|e| e.eq_ignore_ascii_case(email.trim()))
        })
        .map(|(name, _)| format!("{executor}@{name}"))
}
