//! `[executors.NAME.accounts.ACCOUNT]`: the accounts an outside harness
//! runs on.
//!
//! A user with several Claude Code or Codex subscriptions gives each one a
//! name, and troupe runs each instance with the config (credentials,
//! sessions) folder of one of them. The target name `NAME@ACCOUNT` picks an
//! account; `NAME` alone takes the account whose `folders` hold the task's
//! folder, else `main`. Every executor has a `main` account even when none
//! is written: the folder troupe used before accounts existed
//! (`<home>/executors/NAME/sessions`). When an account reaches its plan's
//! limit, the task goes on on the next account in `hand_over` order.
//!
//! These tables are read from `config.toml` only (their names are the
//! user's own, so no environment variable can name them), and checked as a
//! whole when the file is loaded: an unknown harness, a bad account name, a
//! window with no limit, a folder or a directory claimed by two accounts,
//! or two accounts in the same hand-over place are refused, each saying
//! what to change.
//!
//! They are defined here and re-exported by [`crate::config`], not the
//! other way round: a tool call's services hold the accounts the node
//! started with ([`NodeServices::executors`](crate::tool::services::NodeServices::executors)),
//! and `config` names the tools' module (through `environment`), so the
//! tools' module cannot name `config`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::HARNESSES;
use crate::home::Home;

/// The account every executor has, used when no other one fits.
pub const MAIN: &str = "main";

/// `[executors]`: each outside harness's settings, by its name.
pub type Executors = BTreeMap<String, ExecutorSettings>;

/// `[executors.NAME]`: one harness's accounts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ExecutorSettings {
    /// `[executors.NAME.accounts.ACCOUNT]`, by the account's nickname.
    pub accounts: BTreeMap<String, Account>,
}

/// `[executors.NAME.accounts.ACCOUNT]`: one account of a harness.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Account {
    /// Its config and credentials folder (the harness's own variable points
    /// there: `CLAUDE_CONFIG_DIR`, `CODEX_HOME`); unset: under troupe's home.
    pub dir: Option<PathBuf>,
    /// Folders whose tasks start on this account when `delegate` names the
    /// executor alone (the longest match wins).
    pub folders: Vec<PathBuf>,
    /// The plan's limit windows, for a harness that does not report them.
    pub windows: Vec<Window>,
    /// Whether the plan bills past its limits (the account is then never
    /// held at a window's limit, only at one the harness reports).
    pub extra_usage: bool,
    /// Its place when a task moves on from an account at its limit: 1
    /// first, 2 next…; 0 never takes over; unset after the numbered ones,
    /// by name.
    pub hand_over: Option<u32>,
}

/// One limit window of a plan: usage over the last `hours`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Window {
    /// Its name, as the plan says it (`5h`, `week`).
    pub name: String,
    /// Its length in hours.
    pub hours: u32,
    /// The tokens it allows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<u64>,
    /// The cost it allows, in US dollars, as the harness reports cost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cost_usd: Option<f64>,
}

/// A target name: `NAME` or `NAME@ACCOUNT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The harness.
    pub executor: String,
    /// The account, when named.
    pub account: Option<String>,
}

impl Target {
    /// Reads `claude-code@work` or `claude-code`.
    ///
    /// # Examples
    ///
    /// ```
    /// use troupe_runtime::config::Target;
    /// let t = Target::parse("codex@work");
    /// assert_eq!((t.executor.as_str(), t.account.as_deref()), ("codex", Some("work")));
    /// assert_eq!(Target::parse(" pi ").account, None);
    /// ```
    pub fn parse(text: &str) -> Self {
        let text = text.trim();
        match text.split_once('@') {
            Some((executor, account)) => Self {
                executor: executor.trim().to_string(),
                account: Some(account.trim().to_string()).filter(|a| !a.is_empty()),
            },
            None => Self {
                executor: text.to_string(),
                account: None,
            },
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.account {
            Some(account) => write!(f, "{}@{account}", self.executor),
            None => f.write_str(&self.executor),
        }
    }
}

/// `~/x` as the user's home folder says, else the path as written.
fn expand(path: &Path) -> PathBuf {
    match path.strip_prefix("~") {
        Ok(rest) => match std::env::var_os("HOME") {
            Some(home) => PathBuf::from(home).join(rest),
            None => path.to_path_buf(),
        },
        Err(_) => path.to_path_buf(),
    }
}

impl ExecutorSettings {
    /// Every account, `main` included (written or not), by name.
    pub fn accounts(&self) -> BTreeMap<String, Account> {
        let mut all = self.accounts.clone();
        all.entry(MAIN.to_string()).or_default();
        all
    }

    /// The account a task in `folder` starts on when the executor alone is
    /// named: the one with the longest folder holding it, else `main`.
    pub fn account_for(&self, folder: &Path) -> String {
        self.accounts
            .iter()
            .flat_map(|(name, a)| a.folders.iter().map(move |f| (name, expand(f))))
            .filter(|(_, f)| folder.starts_with(f))
            .max_by_key(|(_, f)| f.components().count())
            .map(|(name, _)| name.clone())
            .unwrap_or_else(|| MAIN.to_string())
    }

    /// The accounts that take over, in order (`hand_over`: numbered
    /// first, then unnumbered by name; 0 never).
    pub fn hand_over_order(&self) -> Vec<String> {
        let mut order: Vec<(u32, String)> = self
            .accounts()
            .into_iter()
            .filter_map(|(name, a)| match a.hand_over {
                Some(0) => None,
                Some(n) => Some((n, name)),
                None => Some((u32::MAX, name)),
            })
            .collect();
        order.sort();
        order.into_iter().map(|(_, name)| name).collect()
    }
}

/// The config folder of account `account` of harness `executor`: its
/// `dir`, else `<home>/executors/NAME/sessions` for `main` (where troupe
/// kept it before accounts) and `<home>/executors/NAME/accounts/ACCOUNT`
/// for the others.
pub fn account_dir(home: &Home, executor: &str, account: &str, settings: &Account) -> PathBuf {
    if let Some(dir) = &settings.dir {
        return expand(dir);
    }
    let root = home.root().join("executors").join(executor);
    if account == MAIN {
        root.join("sessions")
    } else {
        root.join("accounts").join(account)
    }
}

/// Whether `name` is an account's name: 1-32 of `a-z 0-9 - _`.
fn good_name(name: &str) -> bool {
    (1..=32).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Checks `[executors]` as a whole; the error says what to change.
pub fn check(executors: &Executors) -> Result<(), String> {
    for (name, settings) in executors {
        if !HARNESSES.iter().any(|h| h.name == name) {
            let known: Vec<&str> = HARNESSES.iter().map(|h| h.name).collect();
            return Err(format!(
                "[executors.{name}]: troupe drives no executor called `{name}`; the known ones are {}",
                known.join(", ")
            ));
        }
        let mut dirs: BTreeMap<PathBuf, &str> = BTreeMap::new();
        let mut folders: BTreeMap<PathBuf, &str> = BTreeMap::new();
        let mut places: BTreeMap<u32, &str> = BTreeMap::new();
        for (account, a) in &settings.accounts {
            let at = format!("[executors.{name}.accounts.{account}]");
            if !good_name(account) {
                return Err(format!(
                    "{at}: an account's name is 1 to 32 of a-z, 0-9, `-` and `_` (it is written \
                     `{name}@ACCOUNT`); rename it"
                ));
            }
            if let Some(dir) = &a.dir {
                let dir = expand(dir);
                if !dir.is_absolute() {
                    return Err(format!(
                        "{at}: `dir` must be an absolute path or start with `~/`, not `{}`",
                        dir.display()
                    ));
                }
                if let Some(other) = dirs.insert(dir.clone(), account) {
                    return Err(format!(
                        "{at}: `dir` {} is also account `{other}`'s; each account has a folder of \
                         its own (its credentials are in it)",
                        dir.display()
                    ));
                }
            }
            for folder in &a.folders {
                let folder = expand(folder);
                if !folder.is_absolute() {
                    return Err(format!(
                        "{at}: each of `folders` must be an absolute path or start with `~/`, not `{}`",
                        folder.display()
                    ));
                }
                if let Some(other) = folders.insert(folder.clone(), account) {
                    return Err(format!(
                        "{at}: folder {} also starts on account `{other}`; name it under one account",
                        folder.display()
                    ));
                }
            }
            let mut windows: Vec<&str> = Vec::new();
            for w in &a.windows {
                if w.name.trim().is_empty() || windows.contains(&w.name.as_str()) {
                    return Err(format!(
                        "{at}: each window needs a name of its own (`name = \"5h\"`)"
                    ));
                }
                windows.push(&w.name);
                if w.hours == 0 {
                    return Err(format!(
                        "{at}: window `{}` lasts 0 hours; give `hours` of 1 or more",
                        w.name
                    ));
                }
                if w.tokens.is_none() && w.cost_usd.is_none() {
                    return Err(format!(
                        "{at}: window `{}` has no limit; give `tokens` or `cost_usd` (or drop it)",
                        w.name
                    ));
                }
            }
            if let Some(n @ 1..) = a.hand_over {
                if let Some(other) = places.insert(n, account) {
                    return Err(format!(
                        "{at}: `hand_over = {n}` is also account `{other}`'s place; give each \
                         account its own (0 never takes over)"
                    ));
                }
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Executors {
        #[derive(Deserialize)]
        struct File {
            executors: Executors,
        }
        toml::from_str::<File>(text).unwrap().executors
    }

    #[test]
    fn a_folder_starts_on_its_account_and_the_rest_on_main() {
        let e = parse(
            r#"
            [executors.claude-code.accounts.work]
            folders = ["/w", "/w/deep/er"]
            hand_over = 2
            [executors.claude-code.accounts.deep]
            folders = ["/w/deep"]
            hand_over = 1
            [executors.claude-code.accounts.never]
            hand_over = 0
            "#,
        );
        check(&e).unwrap();
        let cc = &e["claude-code"];
        assert_eq!(cc.account_for(Path::new("/w/x")), "work");
        assert_eq!(cc.account_for(Path::new("/w/deep/x")), "deep");
        assert_eq!(cc.account_for(Path::new("/w/deep/er/x")), "work");
        assert_eq!(cc.account_for(Path::new("/elsewhere")), MAIN);
        assert_eq!(cc.hand_over_order(), vec!["deep", "work", "main"]);
    }

    #[test]
    fn a_wrong_account_table_is_refused_saying_what_to_change() {
        let cases = [
            ("[executors.vi.accounts.a]", "drives no executor called `vi`"),
            ("[executors.codex.accounts.Work]", "1 to 32 of a-z"),
            (
                "[executors.codex.accounts.a]\ndir = \"rel\"",
                "`dir` must be an absolute path",
            ),
            (
                "[executors.codex.accounts.a]\ndir = \"/d\"\n[executors.codex.accounts.b]\ndir = \"/d\"",
                "also account `a`'s",
            ),
            (
                "[executors.codex.accounts.a]\nfolders = [\"/p\"]\n[executors.codex.accounts.b]\nfolders = [\"/p\"]",
                "also starts on account `a`",
            ),
            (
                "[executors.codex.accounts.a]\nwindows = [{ name = \"5h\", hours = 5 }]",
                "has no limit",
            ),
            (
                "[executors.codex.accounts.a]\nwindows = [{ name = \"5h\", hours = 0, tokens = 1 }]",
                "lasts 0 hours",
            ),
            (
                "[executors.codex.accounts.a]\nhand_over = 1\n[executors.codex.accounts.b]\nhand_over = 1",
                "also account `a`'s place",
            ),
        ];
        for (text, says) in cases {
            let err = check(&parse(text)).unwrap_err();
            assert!(err.contains(says), "{text}: {err}");
        }
    }

    #[test]
    fn target_names_and_account_folders() {
        assert_eq!(
            Target::parse("claude-code@work"),
            Target {
                executor: "claude-code".into(),
                account: Some("work".into())
            }
        );
        assert_eq!(Target::parse("codex@").account, None);
        assert_eq!(Target::parse("codex@work").to_string(), "codex@work");
        let home = Home::new("/h");
        let plain = Account::default();
        assert_eq!(
            account_dir(&home, "codex", MAIN, &plain),
            PathBuf::from("/h/executors/codex/sessions")
        );
        assert_eq!(
            account_dir(&home, "codex", "work", &plain),
            PathBuf::from("/h/executors/codex/accounts/work")
        );
        let own = Account {
            dir: Some("/c".into()),
            ..Account::default()
        };
        assert_eq!(
            account_dir(&home, "codex", "work", &own),
            PathBuf::from("/c")
        );
    }
}
