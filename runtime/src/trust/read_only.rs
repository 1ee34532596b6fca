//! Without a sandbox, in ask mode: which commands are provably read-only.
//!
//! Pattern rules name what is known to be dangerous, and an attacker needs
//! one form they miss: `awk 'BEGIN{system("…")}'`, `python3 /dev/stdin`,
//! `tar --remove-files`, `sqlite3 … .shell`, `git -c alias.x='!…' x`, `gdb
//! -ex shell`, `tclsh`, a path computed when it runs (`$(printenv HOME)`,
//! `xargs -I{}`). In a sandbox the kernel holds what the rules miss; without
//! one nothing does. So there ask mode turns the rule round: a command runs
//! unasked only when every program it runs is on a short list of programs
//! that neither write files nor run other programs, in a form without the
//! options that would make them; everything else is asked
//! ([`writer`] says why).
//!
//! Every program the command runs counts — after `|`, `;`, `&&`, inside
//! `$(…)`, `sh -c '…'`, `find -exec`, `xargs`, function bodies — and it is
//! not read-only when:
//!
//! - it is not on the list below, or is given one of the options that
//!   disqualify it;
//! - it is named by a path outside the system's program folders (`./ls`);
//! - a variable is set in front of it (`PATH=. ls`, `LD_PRELOAD=… cat`);
//! - it runs elevated (`sudo`), or its name or code is computed;
//! - a redirection writes a file (`> x`, `>> x`, `<> x`; `/dev/null`,
//!   `/dev/stdout`, `/dev/stderr` and `/dev/tty` excepted).
//!
//! The list (the options in brackets disqualify):
//!
//! - reading and printing: `cat`, `head`, `tail`, `wc`, `nl`, `tac`,
//!   `rev`, `cut`, `tr`, `fold`, `column`, `od`, `hexdump`, `cmp`, `comm`,
//!   `diff`, `grep`, `egrep`, `fgrep`, `jq`, `sort` [`-o`, `--output`,
//!   `--compress-program`], `uniq` [an output file], `rg` [`--pre`],
//!   `md5sum`, `sha1sum`, `sha256sum`, `sha512sum`, `b2sum`, `cksum`;
//! - files and folders: `ls`, `stat`, `file` [`-C`], `du`, `df`, `tree`
//!   [`-o`, `-R`], `find` [`-exec`, `-execdir`, `-ok`, `-okdir`,
//!   `-delete`, `-fprint`, `-fprint0`, `-fprintf`, `-fls`], `realpath`,
//!   `readlink`, `basename`, `dirname`, `pwd`, `cd`;
//! - the shell and the machine: `echo`, `printf`, `true`, `false`, `test`,
//!   `[`, `seq`, `sleep`, `which`, `type`, `env` and `printenv` (printing),
//!   `whoami`, `id`, `uname`, `nproc`, `uptime`, `free`, `ps`, `date`
//!   [`-s`, `--set`];
//! - git: `status`, `log`, `diff`, `show`, `rev-parse`, `ls-files`,
//!   `ls-tree`, `cat-file`, `blame`, `describe`, `shortlog`, `grep`, and
//!   `branch`, `tag`, `remote` only to list [any operand or option that
//!   is not a listing one]; never with `-c`, `--config-env`,
//!   `--exec-path`, `--git-dir`, `--work-tree`, `--output`, `--ext-diff`,
//!   `--textconv`, nor in a repository whose own config names programs
//!   git would run (`fsmonitor`, `textconv`, a diff driver, a filter, a
//!   pager, `sshCommand`, `hooksPath`, an `include`).

use std::path::{Path, PathBuf};

use super::inspect::{Analysis, Env, Invocation};
use super::shell::RedirectKind;

/// Devices a read-only command may write to.
const HARMLESS_OUTPUTS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

/// Programs that read and print whatever options they are given.
const ALWAYS: &[&str] = &[
    "cat",
    "head",
    "tail",
    "wc",
    "nl",
    "tac",
    "rev",
    "cut",
    "tr",
    "fold",
    "column",
    "od",
    "hexdump",
    "cmp",
    "comm",
    "diff",
    "grep",
    "egrep",
    "fgrep",
    "jq",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "b2sum",
    "cksum",
    "ls",
    "stat",
    "du",
    "df",
    "realpath",
    "readlink",
    "basename",
    "dirname",
    "pwd",
    "cd",
    "echo",
    "printf",
    "true",
    "false",
    "test",
    "[",
    "seq",
    "sleep",
    "which",
    "type",
    "env",
    "printenv",
    "whoami",
    "id",
    "uname",
    "nproc",
    "uptime",
    "free",
    "ps",
];

/// Git subcommands that only read.
const GIT_READS: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "rev-parse",
    "ls-files",
    "ls-tree",
    "cat-file",
    "blame",
    "describe",
    "shortlog",
    "grep",
];

/// Words in a repository's config that make git run a program.
const GIT_CONFIG_PROGRAMS: &[&str] = &[
    "fsmonitor",
    "textconv",
    "external",
    "command",
    "filter",
    "pager",
    "sshcommand",
    "hookspath",
    "editor",
    "askpass",
    "include",
    "process",
];

/// Why the command `analysis` describes is not provably read-only: the
/// first program that may write or run something, and what makes it so;
/// `None` when every program it runs is read-only.
pub fn writer(analysis: &Analysis, env: &Env) -> Option<String> {
    analysis.invocations.iter().find_map(|inv| {
        let why = not_read_only(inv, &inv.env_in(env))?;
        let text = super::rules::shorten(&inv.text(), 80);
        Some(if text.is_empty() {
            why
        } else {
            format!("`{text}` {why}")
        })
    })
}

fn not_read_only(inv: &Invocation, env: &Env) -> Option<String> {
    if let Some(target) = inv
        .redirects
        .iter()
        .filter(|r| {
            matches!(
                r.kind,
                RedirectKind::Write | RedirectKind::Append | RedirectKind::ReadWrite
            )
        })
        .map(|r| r.target.text.as_str())
        .find(|t| !HARMLESS_OUTPUTS.contains(t))
    {
        return Some(format!("writes the file `{target}`"));
    }
    if inv.program.is_empty() {
        return None;
    }
    if inv.opaque.is_some() {
        return Some("runs code the gate cannot read".into());
    }
    if inv.elevated {
        return Some("runs as another user".into());
    }
    if inv.path.contains('/') {
        let system = env.resolve(&inv.path).is_some_and(|p| {
            ["/bin", "/sbin", "/usr/bin", "/usr/sbin", "/usr/local/bin"]
                .iter()
                .any(|d| p.parent() == Some(Path::new(d)))
        });
        if !system {
            return Some("is a program of its own, not the system's".into());
        }
    }
    if let Some(var) = inv
        .full_text
        .split_whitespace()
        .take_while(|w| *w != inv.path)
        .find(|w| is_assignment(w))
    {
        return Some(format!("runs with `{var}` set in front of it"));
    }
    let program = inv.program.as_str();
    let refuse = |options: &[&str]| -> Option<String> {
        inv.arg_texts()
            .take_while(|a| *a != "--")
            .find(|a| {
                options.iter().any(|o| {
                    *a == *o
                        || (o.starts_with("--") && a.starts_with(&format!("{o}=")))
                        || (!o.starts_with("--")
                            && o.len() == 2
                            && a.starts_with('-')
                            && !a.starts_with("--")
                            && a[1..].contains(&o[1..]))
                })
            })
            .map(|a| format!("is given `{a}`, which writes or runs something"))
    };
    match program {
        p if ALWAYS.contains(&p) => None,
        "sort" => refuse(&["-o", "--output", "--compress-program"]),
        "uniq" => (inv.operands().len() > 1).then(|| "writes its output file".into()),
        "rg" => refuse(&["--pre"]),
        "file" => refuse(&["-C", "--compile"]),
        "tree" => refuse(&["-o", "-R"]),
        "date" => refuse(&["-s", "--set"]),
        "find" => {
            const WRITES: &[&str] = &[
                "-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf",
                "-fls",
            ];
            inv.arg_texts()
                .find(|a| WRITES.contains(a))
                .map(|a| format!("is given `{a}`, which writes or runs something"))
        }
        "git" => git(inv, env),
        _ => Some("is not on the list of read-only programs".into()),
    }
}

fn git(inv: &Invocation, env: &Env) -> Option<String> {
    const GLOBAL_REFUSED: &[&str] = &[
        "-c",
        "--config-env",
        "--exec-path",
        "--git-dir",
        "--work-tree",
        "--namespace",
    ];
    const REFUSED: &[&str] = &["--output", "--ext-diff", "--textconv", "--exec", "-o"];
    let mut args = inv.arg_texts();
    let mut folder = env.cwd.clone();
    let sub = loop {
        let a = args.next()?;
        if GLOBAL_REFUSED
            .iter()
            .any(|o| a == *o || a.starts_with(&format!("{o}=")))
        {
            return Some(format!("is given `{a}`, which can make git run a program"));
        }
        if a == "-C" {
            let dir = args.next()?;
            folder = env
                .resolve(dir)
                .map_or_else(PathBuf::new, |d| folder.join(d));
            continue;
        }
        if !a.starts_with('-') {
            break a;
        }
    };
    let rest: Vec<&str> = args.collect();
    if let Some(a) = rest.iter().find(|a| {
        REFUSED
            .iter()
            .any(|o| **a == *o || a.starts_with(&format!("{o}=")))
    }) {
        return Some(format!("is given `{a}`, which writes or runs something"));
    }
    let lists_only = |listing: &[&str]| rest.iter().all(|a| listing.contains(a));
    let reads = GIT_READS.contains(&sub)
        || (sub == "branch" && lists_only(&["-a", "-r", "-v", "-vv", "--list", "--show-current"]))
        || (sub == "tag" && lists_only(&["-l", "--list"]))
        || (sub == "remote" && lists_only(&["-v", "--verbose"]));
    if !reads {
        return Some(format!(
            "(`git {sub}`) is not a git command that only reads"
        ));
    }
    repository_runs_programs(&folder).map(|config| {
        format!(
            "runs in a repository whose config {} names programs git runs",
            config.display()
        )
    })
}

/// The config file of the repository holding `folder`, when it names a
/// program git would run (or cannot be read).
fn repository_runs_programs(folder: &Path) -> Option<PathBuf> {
    if folder.as_os_str().is_empty() {
        return Some(PathBuf::from("(a folder the gate cannot locate)"));
    }
    let dot_git = folder
        .ancestors()
        .map(|d| d.join(".git"))
        .find(|g| g.exists())?;
    let mut configs = Vec::new();
    if dot_git.is_dir() {
        configs.push(dot_git.join("config"));
    } else {
        // A worktree: `gitdir: …/.git/worktrees/NAME`.
        let text = std::fs::read_to_string(&dot_git).ok()?;
        let gitdir = PathBuf::from(text.trim().strip_prefix("gitdir:")?.trim());
        let gitdir = if gitdir.is_absolute() {
            gitdir
        } else {
            dot_git.parent()?.join(gitdir)
        };
        configs.push(gitdir.join("config.worktree"));
        configs.push(gitdir.join("../../config"));
    }
    configs
        .into_iter()
        .find(|config| match std::fs::read_to_string(config) {
            Ok(text) => {
                let text = text.to_ascii_lowercase();
                GIT_CONFIG_PROGRAMS.iter().any(|w| text.contains(w))
            }
            Err(e) => e.kind() != std::io::ErrorKind::NotFound,
        })
}

/// `NAME=value` in front of a program.
fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        !name.is_empty()
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            && !name.starts_with(|c: char| c.is_ascii_digit())
    })
}
