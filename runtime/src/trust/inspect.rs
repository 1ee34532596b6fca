//! From a parsed command line to the programs it actually runs.
//!
//! [`shell`](super::shell) finds the simple commands; this module sees
//! through what stands in front of the program (`sudo`, `env X=1`, `command`,
//! `nohup`, `timeout 5`, `xargs`, `/bin/` in `/bin/rm`) and follows what runs
//! more code: `sh -c '…'`, `bash -c "…"`, `eval`, `su -c`, `watch '…'`,
//! `find -exec …`, a shell fed by a here-document or by `echo … |`, and the
//! scripts a command runs (`bash x.sh`, `sh x.sh`, `./x.sh`, `source x.sh`,
//! `. x.sh`), which are read and judged on their content. The result is a flat
//! list of [`Invocation`]s every rule is matched against.
//!
//! What it cannot see through it marks ([`Opaque`]): a program whose name is
//! computed when it runs (`$(printf 'rm')`, `$R`), code generated when it
//! runs (decoded text piped to a shell, `sh -c "$x"`, `eval "$x"`), code
//! given inline to an interpreter (`python3 -c`, `perl -e`, a here-document)
//! and code fetched from outside the machine (`curl … | sh`). The gate never
//! lets such a command run unasked.
//!
//! It fails closed: a command too long, nested too deep, a script that
//! cannot be read, or a script the same command writes before running it is an
//! [`AnalysisError`], never a pass.

use std::path::{Component, Path, PathBuf};

mod interpreters;
pub mod patterns;
mod walker;
mod words;

use super::shell::{self, FunctionDef, Redirect, RedirectKind, Word};
use walker::Walker;

/// Where a command runs: the paths rules resolve words against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Env {
    /// The user's home folder (`~`, `$HOME`), as the gate's context gives it.
    pub home: PathBuf,
    /// The folder the command runs in; empty when it is not known (after
    /// `cd "$DIR"`), and then relative paths do not resolve.
    pub cwd: PathBuf,
    /// The troupe home (its database, plugins, settings).
    pub troupe_home: PathBuf,
}

impl Env {
    /// The fixed place rule examples are checked in.
    pub fn example() -> Self {
        Self {
            home: PathBuf::from("/home/user"),
            cwd: PathBuf::from("/home/user/project"),
            troupe_home: PathBuf::from("/home/user/.troupe"),
        }
    }

    /// Resolves a word to an absolute, lexically normal path: `~` and
    /// `$HOME` become the home, relative paths join the working folder.
    /// `None` when the word depends on something only known when it runs.
    pub fn resolve(&self, text: &str) -> Option<PathBuf> {
        // The gate's one expansion of `~` and `$HOME` (shared with the file
        // tools), then `..` applied to the text: a command word is judged
        // as written.
        let relative = !text.starts_with(['/', '~', '$']);
        if relative && self.cwd.as_os_str().is_empty() {
            return None;
        }
        let expanded = super::path::expand(text, &self.home, &self.cwd).ok()?;
        Some(normalize(&expanded))
    }
}

/// Removes `.`, `..` and repeated separators without touching the disk.
pub fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for part in path.components() {
        match part {
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(p) => out.push(p),
        }
    }
    out
}

/// One program a command line runs, with what stood in front of it removed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    /// The program's file name (`rm` for `/bin/rm` or `\rm`).
    pub program: String,
    /// The program as written (`/bin/rm`, `./x.sh`).
    pub path: String,
    /// Its arguments.
    pub args: Vec<Word>,
    /// Its redirections.
    pub redirects: Vec<Redirect>,
    /// Whether it runs through `sudo`, `doas` or `su`.
    pub elevated: bool,
    /// The program of the command piped into it, if any.
    pub piped_from: Option<String>,
    /// Code it runs that the gate cannot read, if any.
    pub opaque: Option<Opaque>,
    /// The script file it was read from, if any.
    pub script: Option<PathBuf>,
    /// Every word of the simple command, wrappers included, space-joined.
    pub full_text: String,
    /// The folder it runs in, as far as `cd` earlier in the command shows
    /// (empty when not known).
    pub cwd: PathBuf,
}

impl Invocation {
    /// `env` with this invocation's working folder.
    pub fn env_in(&self, env: &Env) -> Env {
        Env {
            cwd: self.cwd.clone(),
            ..env.clone()
        }
    }

    /// The program and its arguments, space-joined (`rm -rf /tmp/x`): what
    /// text rules and the user's patterns match.
    pub fn text(&self) -> String {
        let mut out = self.program.clone();
        for a in &self.args {
            out.push(' ');
            out.push_str(&a.text);
        }
        out
    }

    /// The arguments' texts.
    pub fn arg_texts(&self) -> impl Iterator<Item = &str> {
        self.args.iter().map(|w| w.text.as_str())
    }

    /// The arguments that are not options (after `--`, everything).
    pub fn operands(&self) -> Vec<&str> {
        let mut out = Vec::new();
        let mut ended = false;
        for a in self.arg_texts() {
            if ended {
                out.push(a);
            } else if a == "--" {
                ended = true;
            } else if !(a.starts_with('-') && a.len() > 1) {
                out.push(a);
            }
        }
        out
    }

    /// Whether a short flag letter or a long option is given
    /// (`has_flag('r', "--recursive")` is true for `-rf`, `-R`? no: letters
    /// are case-sensitive).
    pub fn has_flag(&self, letter: char, long: &str) -> bool {
        for a in self.arg_texts() {
            if a == "--" {
                return false;
            }
            if a == long || (a.starts_with(long) && a[long.len()..].starts_with('=')) {
                return true;
            }
            if a.starts_with('-') && !a.starts_with("--") && a[1..].contains(letter) {
                return true;
            }
        }
        false
    }

    /// The files its redirections write (truncate, append or read-write).
    pub fn redirect_writes(&self) -> impl Iterator<Item = &str> {
        self.redirects
            .iter()
            .filter(|r| {
                matches!(
                    r.kind,
                    RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite
                )
            })
            .map(|r| r.target.text.as_str())
    }
}

/// Code an invocation runs that the gate cannot read.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Opaque {
    /// Its program's name is computed when it runs: `$(printf 'rm') -rf /`,
    /// `R='rm -rf'; $R /`, `$a$b`.
    ComputedProgram,
    /// It runs code generated when it runs: a shell or `eval` fed decoded or
    /// computed text (`… | base64 -d | sh`, `sh -c "$x"`, `source <(…)`).
    GeneratedCode,
    /// An interpreter given its code inline or on its input: `python3 -c`,
    /// `perl -e`, `node -e`, `php -r`, `python3 - <<EOF`.
    InlineCode,
    /// It runs code fetched from outside the machine: `curl … | sh`,
    /// `bash <(wget -O- …)`, `python3 -c "$(curl …)"`.
    Fetched,
}

/// Everything a command line runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Analysis {
    /// Every program run, nested ones and those in scripts included.
    pub invocations: Vec<Invocation>,
    /// The functions defined.
    pub functions: Vec<FunctionDef>,
}

/// How far analysis goes before it gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// The longest command analysed, in characters.
    pub max_chars: usize,
    /// How deep commands may nest (substitutions, `sh -c`, scripts).
    pub max_depth: u32,
    /// The largest script file read, in bytes.
    pub max_script_bytes: u64,
    /// Whether scripts are read from disk (off when rule examples are checked).
    pub read_scripts: bool,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            max_chars: 10_000,
            max_depth: 8,
            max_script_bytes: 256 * 1024,
            read_scripts: true,
        }
    }
}

/// Why a command could not be analysed; the gate never allows such a command.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AnalysisError {
    /// Longer than the limit.
    #[error("it is {chars} characters long, more than the {max} the gate analyses")]
    TooLong {
        /// Its length.
        chars: usize,
        /// The limit.
        max: usize,
    },
    /// The shell syntax could not be followed.
    #[error("{0}")]
    Parse(#[from] shell::ParseError),
    /// A script it runs could not be judged.
    #[error("it runs the script {path}, which {problem}")]
    Script {
        /// The script.
        path: PathBuf,
        /// What was wrong.
        problem: String,
    },
}

/// Analyses a command line run in `env`.
pub fn analyse(text: &str, env: &Env, limits: &Limits) -> Result<Analysis, AnalysisError> {
    let (analysis, outcome) = analyse_partly(text, env, limits);
    outcome.map(|()| analysis)
}

/// Like [`analyse`], but also returns what was found before analysis
/// stopped, so a command that cannot be read whole is still matched
/// against the rules that block (`./missing.sh; rm -rf /`).
pub fn analyse_partly(
    text: &str,
    env: &Env,
    limits: &Limits,
) -> (Analysis, Result<(), AnalysisError>) {
    let chars = text.chars().count();
    if chars > limits.max_chars {
        let error = AnalysisError::TooLong {
            chars,
            max: limits.max_chars,
        };
        return (Analysis::default(), Err(error));
    }
    let mut walker = Walker::new(env, limits);
    let outcome = walker
        .text(text, 0, false, None)
        .and_then(|()| walker.check_self_written_scripts());
    (walker.out, outcome)
}
