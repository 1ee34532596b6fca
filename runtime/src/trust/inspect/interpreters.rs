//! Interpreters, and where they take the code they run.
//!
//! `python3 -c "import shutil; shutil.rmtree('/')"` deletes as surely as
//! `rm -rf /`, and the gate reads shell, not Python, Perl, Ruby or
//! JavaScript. So an interpreter given its code inline (`python -c`, `perl
//! -e`/`-E`/`-M…`, `ruby -e`, `node -e`/`-p`, `php -r`, …) or on its input
//! (`python3 -`, a pipe, a here-document) runs code the gate cannot
//! analyse. A script file is different: it exists before the command runs
//! and the user can read it, unless the same command writes it (see
//! `check_self_written_scripts`).

use super::super::shell::Word;

/// Where an interpreter invocation takes its code from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Code<'a> {
    /// From an argument (`-c CODE`, `-e CODE`); the word, when it is a
    /// separate one.
    Inline(Option<&'a Word>),
    /// From its standard input (`-`, or no script at all).
    Stdin,
    /// From a script file.
    Script(&'a Word),
    /// From an installed module (`python -m pytest`): nothing to read here.
    Module,
}

/// How one interpreter's options are read.
struct Options {
    /// Short option letters, alone or clustered (`-Bc`), whose value is code.
    inline_letters: &'static str,
    /// Whole options whose value is code (`--eval`, `-r` for php).
    inline_words: &'static [&'static str],
    /// Short letters whose value follows (attached, or the next word).
    value_letters: &'static str,
    /// Whole options that take the next word as their value.
    value_words: &'static [&'static str],
    /// Whether a short letter's value is only ever attached (`-I/dir`).
    attached_only: bool,
    /// Short letters that run an installed module instead of a script.
    module_letters: &'static str,
    /// Whether short options cluster (`-lane`).
    clusters: bool,
    /// Whether options compare without case (PowerShell).
    ignore_case: bool,
}

const NONE: &[&str] = &[];

/// The options of the interpreter `program`, when it is one.
fn options(program: &str) -> Option<Options> {
    let family = program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
    let opts = |inline_letters, inline_words, value_letters, value_words| Options {
        inline_letters,
        inline_words,
        value_letters,
        value_words,
        attached_only: false,
        module_letters: "",
        clusters: true,
        ignore_case: false,
    };
    Some(match family {
        "python" | "pypy" => Options {
            module_letters: "m",
            ..opts("c", NONE, "WXQ", NONE)
        },
        // -M and -m import a module with code of the caller's choosing.
        "perl" => Options {
            attached_only: true,
            ..opts("eEMm", NONE, "IxdDi", NONE)
        },
        "ruby" | "jruby" => opts("e", NONE, "IrCEF", NONE),
        "node" | "nodejs" | "bun" => Options {
            clusters: false,
            ..opts(
                "",
                &["-e", "--eval", "-p", "--print"],
                "",
                &[
                    "-r",
                    "--require",
                    "--import",
                    "--loader",
                    "--input-type",
                    "-C",
                ],
            )
        },
        "php" => Options {
            clusters: false,
            ..opts(
                "",
                &["-r", "-B", "-R", "-E"],
                "",
                &["-c", "-d", "-z", "-F", "-t"],
            )
        },
        "lua" | "luajit" => opts("e", NONE, "l", NONE),
        "Rscript" | "osascript" => Options {
            clusters: false,
            ..opts("", &["-e"], "", NONE)
        },
        "pwsh" | "powershell" => Options {
            clusters: false,
            ignore_case: true,
            ..opts(
                "",
                &["-c", "-command", "-ec", "-encodedcommand", "-e"],
                "",
                &[
                    "-executionpolicy",
                    "-ep",
                    "-workingdirectory",
                    "-wd",
                    "-configurationname",
                ],
            )
        },
        _ => return None,
    })
}

/// Where interpreter `program` called with `args` takes its code; `None`
/// when `program` is no interpreter troupe knows.
pub(super) fn code<'a>(program: &str, args: &'a [Word]) -> Option<Code<'a>> {
    let opts = options(program)?;
    let mut i = 0;
    while let Some(word) = args.get(i) {
        let raw = word.text.as_str();
        let lowered;
        let text = if opts.ignore_case {
            lowered = raw.to_ascii_lowercase();
            lowered.as_str()
        } else {
            raw
        };
        if text == "--" {
            return Some(args.get(i + 1).map_or(Code::Stdin, Code::Script));
        }
        if text == "-" {
            return Some(Code::Stdin);
        }
        if !text.starts_with('-') {
            return Some(Code::Script(word));
        }
        if let Some((name, _)) = text.split_once('=') {
            if opts.inline_words.contains(&name) {
                return Some(Code::Inline(None));
            }
            i += 1;
            continue;
        }
        if opts.inline_words.contains(&text) {
            return Some(Code::Inline(args.get(i + 1)));
        }
        if opts.value_words.contains(&text) {
            i += 2;
            continue;
        }
        if opts.clusters && !text.starts_with("--") {
            let letters: Vec<char> = text.chars().skip(1).collect();
            for (at, letter) in letters.iter().enumerate() {
                let last = at + 1 == letters.len();
                if opts.inline_letters.contains(*letter) {
                    return Some(Code::Inline(if last { args.get(i + 1) } else { None }));
                }
                if opts.module_letters.contains(*letter) {
                    return Some(Code::Module);
                }
                if opts.value_letters.contains(*letter) {
                    if last && !opts.attached_only {
                        i += 1; // the value is the next word
                    }
                    break;
                }
            }
        }
        i += 1;
    }
    Some(Code::Stdin)
}

/// Programs that fetch from outside the machine.
pub(super) const FETCHERS: &[&str] = &[
    "curl",
    "wget",
    "wget2",
    "fetch",
    "aria2c",
    "http",
    "https",
    "xh",
    "httpie",
    "lwp-request",
    "lwp-download",
    "GET",
];
