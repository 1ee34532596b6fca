//! Logging an executor's account in: the harness's own login (`claude auth
//! login`, `codex login`, its browser flow) run with its folder variable
//! pointing at that account's folder, so the credentials it writes are that
//! account's.
//!
//! Two places run it: `troupe executors login NAME@ACCOUNT` (in the
//! user's terminal, which shows its URL) and `delegate action: account`
//! (only once the user approved, its URL passed on to them). Both check the
//! same things through [`prepare`] before it runs and [`finish`] after: the
//! account is named in `config.toml`, the harness has a login and is
//! installed, and the email it logs in as is not another account's of the
//! same harness (before, when the caller says the email; after, otherwise,
//! and then the new credentials are removed).

use std::path::PathBuf;

use super::settings::{account_dir, Executors, Target, MAIN as MAIN_ACCOUNT};
use crate::home::Home;

use super::accounts::{logged_in_as, logged_in_elsewhere};
use super::installed;

/// A login ready to run: the harness's command, in the account's folder.
#[derive(Debug)]
pub struct Prepared {
    /// The harness.
    pub executor: String,
    /// The account.
    pub account: String,
    /// The account's folder (made).
    pub dir: PathBuf,
    /// The command (its folder variable set; stdio left to the caller).
    pub command: std::process::Command,
}

impl Prepared {
    /// `NAME@ACCOUNT`.
    pub fn target(&self) -> String {
        format!("{}@{}", self.executor, self.account)
    }
}

/// The harness's own login command, after its entry point.
pub fn login_args(executor: &str) -> Option<&'static [&'static str]> {
    match executor {
        "claude-code" => Some(&["auth", "login"]),
        "codex" => Some(&["login"]),
        _ => None,
    }
}

/// The variable that points a harness at an account's folder.
pub fn dir_variable(executor: &str) -> Option<&'static str> {
    match executor {
        "claude-code" => Some("CLAUDE_CONFIG_DIR"),
        "codex" => Some("CODEX_HOME"),
        _ => None,
    }
}

/// The files a harness keeps its credentials in, in an account's folder.
pub fn credentials(executor: &str) -> &'static [&'static str] {
    match executor {
        "claude-code" => &[".credentials.json"],
        "codex" => &["auth.json"],
        _ => &[],
    }
}

/// Checks that `target` (`NAME@ACCOUNT`; `NAME` is its main account) can
/// be logged in — as `email`, when given — and makes its command; an error
/// says what is wrong and what to do.
pub fn prepare(
    home: &Home,
    executors: &Executors,
    target: &str,
    email: Option<&str>,
) -> Result<Prepared, String> {
    let target = Target::parse(target);
    let name = target.executor.clone();
    let account = target
        .account
        .clone()
        .unwrap_or_else(|| MAIN_ACCOUNT.to_string());
    let settings = executors.get(&name).cloned().unwrap_or_default();
    let Some(settings_of) = settings.accounts().get(&account).cloned() else {
        return Err(format!(
            "{name} has no account `{account}`; name it in config.toml as \
             [executors.{name}.accounts.{account}] first (`troupe executors accounts` lists them)"
        ));
    };
    let (Some(args), Some(variable)) = (login_args(&name), dir_variable(&name)) else {
        return Err(format!(
            "troupe cannot run {name}'s login: {name} has no login command of its own; it calls \
             its model through troupe's relay and needs none"
        ));
    };
    if let Some(email) = email {
        if let Some(other) = logged_in_elsewhere(home, executors, &name, &account, email) {
            return Err(format!(
                "{email} is already logged in on {other}; delegate to `{other}` instead of \
                 logging {name}@{account} in as the same email"
            ));
        }
    }
    let Some(installed) = installed(home, &name) else {
        return Err(format!(
            "{name} is not installed here; `troupe executors install {name}` installs it"
        ));
    };
    let dir = account_dir(home, &name, &account, &settings_of);
    std::fs::create_dir_all(&dir)
        .map_err(|e| format!("{} could not be made: {e}", dir.display()))?;
    let mut command = if installed.harness.native {
        std::process::Command::new(&installed.entry)
    } else {
        let mut c = std::process::Command::new("node");
        c.arg(&installed.entry);
        c
    };
    command.args(args).env(variable, &dir);
    Ok(Prepared {
        executor: name,
        account,
        dir,
        command,
    })
}

/// After the login ran: whom the account is logged in as now (`None`:
/// its harness does not say). An email another account of the harness
/// holds is refused, naming it, and this login's credentials are removed.
pub fn finish(
    home: &Home,
    executors: &Executors,
    prepared: &Prepared,
) -> Result<Option<String>, String> {
    let (name, account) = (&prepared.executor, &prepared.account);
    let Some(now) = logged_in_as(name, &prepared.dir) else {
        return Ok(None);
    };
    if let Some(other) = logged_in_elsewhere(home, executors, name, account, &now) {
        for file in credentials(name) {
            let _ = std::fs::remove_file(prepared.dir.join(file));
        }
        return Err(format!(
            "{now} is already logged in on {other}, so this login was undone; delegate to \
             `{other}`, or log {name}@{account} in as another email"
        ));
    }
    Ok(Some(now))
}

/// The first `http://` or `https://` address in `line`: a login's URL.
pub fn url_in(line: &str) -> Option<&str> {
    let start = line.find("https://").or_else(|| line.find("http://"))?;
    let rest = &line[start..];
    let end = rest
        .find(|c: char| c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | ')'))
        .unwrap_or(rest.len());
    Some(&rest[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_is_found_in_a_logins_words() {
        assert_eq!(
            url_in("Browser didn't open? Use the url below: https://claude.ai/oauth?x=1&y=2 "),
            Some("https://claude.ai/oauth?x=1&y=2")
        );
        assert_eq!(url_in("no address here"), None);
    }
}
