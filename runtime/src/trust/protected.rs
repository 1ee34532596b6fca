//! The paths a tool may not simply write: troupe's home, and the user's
//! own settings. One definition, judged by the gate for commands and for
//! the file tools alike, and by the file tools themselves.
//!
//! - **Troupe's home** ([`home_area`]) is written only by the parts of
//!   troupe that own each piece of it: memory by `memory`, skills by
//!   `skill_manage`, the approvals by the user's answers, the settings by
//!   the user. The rule is the whole home, not a list of its files: a file
//!   planted anywhere in it (`approvals.json` naming a command, a
//!   `serve.json`) is something troupe later trusts, so `write_file` and
//!   `edit_file` refuse every path that resolves into it, in every mode,
//!   and say which part of troupe owns that data.
//! - **The user's own settings** ([`user_setting`]): their dotfiles (every
//!   file or folder at the top of their home whose name starts with `.`,
//!   so shell start-up files, `~/.ssh`, `~/.gitconfig`, `~/.config/…`), a
//!   repository's git configuration and hooks (`.git/config`,
//!   `.git/hooks/`: git runs what they name), and crontabs. What they hold
//!   runs later, unasked, as the user. A command writing one is a
//!   dangerous pattern (`dotfile-write`); a file tool writing one gets the
//!   same treatment: asked in ask mode, run in auto mode.
//!
//! Paths reach these functions already resolved ([`super::path`]).

use std::path::{Component, Path};

use crate::home::Home;

use super::path::real_or_given;

/// A part of troupe's home, and who writes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HomeArea {
    /// What it is (`` `approvals.json`, the commands the user approved for always``).
    pub what: String,
    /// Who writes it and what to do instead.
    pub owner: &'static str,
}

impl HomeArea {
    /// The refusal for a file tool writing `shown` (the path as asked and
    /// as resolved).
    pub fn refusal(&self, shown: &str) -> String {
        format!(
            "refused: {shown} is in troupe's home, and is {what}; the file tools never write \
             troupe's home. {owner}",
            what = self.what,
            owner = self.owner
        )
    }
}

/// The part of troupe's home `real` (a resolved path) is in, if it is in
/// the home at all (the home itself included).
pub fn home_area(home: &Home, real: &Path) -> Option<HomeArea> {
    let root = real_or_given(home.root());
    let rest = real
        .strip_prefix(&root)
        .or_else(|_| real.strip_prefix(home.root()))
        .ok()?;
    let first = match rest.components().next() {
        Some(Component::Normal(name)) => name.to_string_lossy().into_owned(),
        _ => String::new(),
    };
    let (what, owner) = area_of(&first);
    Some(HomeArea {
        what: what.replace("{name}", &first),
        owner,
    })
}

/// What the home's top-level entry `name` is and who writes it.
fn area_of(name: &str) -> (&'static str, &'static str) {
    const USER: &str = "Only the user changes it, with an editor or troupe's own commands; ask \
                        them to.";
    match name {
        "memory" => (
            "the agent's memory (`memory/`)",
            "Use the `memory` tool: what it writes is checked for injected instructions.",
        ),
        "skills" => (
            "the skill library (`skills/`)",
            "Use the `skill_manage` tool: what it writes is checked for injected instructions.",
        ),
        "bots" => (
            "the bots' own folders (`bots/`)",
            "Use `memory` for a bot's notes and `skill_manage` for its skills.",
        ),
        "config.toml" | "models.toml" | "mcp.json" => ("troupe's own `{name}`", USER),
        "approvals.json" => (
            "the list of commands the user approved for always (`approvals.json`)",
            "Only the user's own answer to an approval question adds to it.",
        ),
        "serve.json" => (
            "`troupe serve`'s address (`serve.json`)",
            "Only `troupe serve` writes it.",
        ),
        "serve.sock" => (
            "`troupe serve`'s owner socket (`serve.sock`)",
            "Only `troupe serve` makes it; the home's CLI talks to the server there.",
        ),
        n if n.starts_with("troupe.db") || n == "troupe.lock" => (
            "troupe's database (`{name}`)",
            "troupe's store writes it; read conversations with `conversation_search`.",
        ),
        "plugins" | "plugin-data" => ("troupe's plugins (`{name}/`)", USER),
        "spill" => (
            "where long tool results are kept (`spill/`)",
            "Read them with `read_file`; write your own files in the working folder.",
        ),
        "commands" => (
            "the background commands' output (`commands/`)",
            "`run_command` writes it; read it with `read_file`.",
        ),
        "documents" => (
            "the converted documents (`documents/`)",
            "The document tools write it; write your own files in the working folder.",
        ),
        "" => ("troupe's home folder itself", USER),
        _ => (
            "troupe's own data (`{name}`)",
            "troupe writes it itself; write your own files in the working folder.",
        ),
    }
}

/// One of the user's own settings files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UserSetting {
    /// `~/.ssh/…`: keys, known hosts, who may log in.
    Ssh,
    /// A shell's start-up file (`~/.bashrc`, `~/.profile`, …).
    ShellStartUp,
    /// Git's configuration or hooks (`~/.gitconfig`, `~/.config/git/`,
    /// a repository's `.git/config` or `.git/hooks/`).
    Git,
    /// A crontab (`/var/spool/cron/…`, `/etc/cron*`).
    Crontab,
    /// Any other dotfile or dot-folder at the top of the user's home.
    Dotfile,
}

impl UserSetting {
    /// What it is, for questions and refusals.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Ssh => "the user's SSH keys or settings (`~/.ssh`)",
            Self::ShellStartUp => "a shell start-up file, run by every new shell",
            Self::Git => "git's configuration or hooks, which git runs",
            Self::Crontab => "a crontab, run on a schedule",
            Self::Dotfile => "one of the user's own settings files (a dotfile)",
        }
    }
}

/// Shell start-up files at the top of a home.
const SHELL_START_UP: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zshenv",
    ".zprofile",
    ".zlogin",
    ".zlogout",
    ".kshrc",
    ".mkshrc",
    ".cshrc",
    ".tcshrc",
    ".login",
    ".logout",
    ".inputrc",
    ".xprofile",
    ".xinitrc",
    ".xsession",
];

/// Where crontabs live.
const CRONTABS: &[&str] = &[
    "/var/spool/cron",
    "/var/cron/tabs",
    "/etc/crontab",
    "/etc/cron.d",
    "/etc/cron.hourly",
    "/etc/cron.daily",
    "/etc/cron.weekly",
    "/etc/cron.monthly",
    "/etc/anacrontab",
];

/// Which of the user's settings `path` (resolved) is, if any; `user_home`
/// is their home folder.
pub fn user_setting(user_home: &Path, path: &Path) -> Option<UserSetting> {
    if CRONTABS.iter().any(|c| path.starts_with(c)) {
        return Some(UserSetting::Crontab);
    }
    if in_git_dir(path) {
        return Some(UserSetting::Git);
    }
    let homes = [user_home.to_path_buf(), real_or_given(user_home)];
    let rest = homes.iter().find_map(|h| path.strip_prefix(h).ok())?;
    let mut parts = rest.components().filter_map(|c| match c {
        Component::Normal(name) => name.to_str(),
        _ => None,
    });
    let first = parts.next()?;
    if !first.starts_with('.') {
        return None;
    }
    Some(match first {
        ".ssh" => UserSetting::Ssh,
        ".gitconfig" | ".git-credentials" => UserSetting::Git,
        ".config" if parts.next() == Some("git") => UserSetting::Git,
        f if SHELL_START_UP.contains(&f) => UserSetting::ShellStartUp,
        _ => UserSetting::Dotfile,
    })
}

/// Whether `path` is a repository's git configuration or hooks.
fn in_git_dir(path: &Path) -> bool {
    let parts: Vec<&std::ffi::OsStr> = path
        .components()
        .filter_map(|c| match c {
            Component::Normal(name) => Some(name),
            _ => None,
        })
        .collect();
    parts
        .windows(2)
        .any(|pair| pair[0] == ".git" && (pair[1] == "config" || pair[1] == "hooks"))
}

#[cfg(test)]
#[path = "protected_tests.rs"]
mod tests;
