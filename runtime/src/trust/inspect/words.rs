//! What a simple command's words say before the walker follows them: its
//! program, the shells, the wrappers' options that take a value, what a
//! shell is fed (`-c STRING`, a script, its input), what `echo` prints into
//! a pipe, and which programs leave the files they are given unchanged.

use std::path::Path;

use super::shell::{SimpleCommand, Word};

/// The shells whose `-c`, scripts and input are followed.
pub(super) const SHELLS: &[&str] = &["sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "yash"];

/// Options of wrappers that take a value, by wrapper.
pub(super) fn option_takes_value(wrapper: &str, option: &str) -> bool {
    let list: &[&str] = match wrapper {
        "sudo" => &[
            "-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-U", "-T", "-R",
        ],
        "doas" => &["-u", "-C"],
        "env" => &["-u", "-C", "--unset", "--chdir"],
        "exec" => &["-a"],
        "nice" => &["-n", "--adjustment"],
        "ionice" => &["-c", "-n", "-p", "-t"],
        "stdbuf" => &["-i", "-o", "-e"],
        "timeout" => &["-s", "-k", "--signal", "--kill-after"],
        "xargs" => &["-I", "-n", "-P", "-d", "-a", "-E", "-L", "-s", "-e", "-l"],
        "watch" => &["-n", "-d", "--interval"],
        _ => &[],
    };
    list.contains(&option)
}

/// Where a shell takes the code it runs from.
pub(super) enum ShellInput<'a> {
    Command(&'a Word),
    Script(&'a Word),
    Stdin,
}

/// What a shell invocation runs: `-c STRING`, a script, or its input.
pub(super) fn shell_input(args: &[Word]) -> ShellInput<'_> {
    let mut wants_command = false;
    let mut iter = args.iter();
    while let Some(w) = iter.next() {
        let t = w.text.as_str();
        if t == "--" {
            break;
        }
        if t == "-o" || t == "+o" || t == "--rcfile" || t == "--init-file" {
            iter.next();
            continue;
        }
        if t.starts_with("--") {
            continue;
        }
        if (t.starts_with('-') || t.starts_with('+')) && t.len() > 1 {
            if t[1..].contains('c') {
                wants_command = true;
            }
            if t[1..].contains('s') {
                return ShellInput::Stdin;
            }
            continue;
        }
        return if wants_command {
            ShellInput::Command(w)
        } else {
            ShellInput::Script(w)
        };
    }
    match iter.next() {
        Some(w) if wants_command => ShellInput::Command(w),
        Some(w) => ShellInput::Script(w),
        None => ShellInput::Stdin,
    }
}

/// The text `echo …` or `printf …` prints, when that is all it does.
pub(super) fn echoed_text(cmd: &SimpleCommand) -> Option<String> {
    let (first, rest) = cmd.words.split_first()?;
    match first.text.as_str() {
        "echo" | "printf" => {
            let args: Vec<Word> = rest
                .iter()
                .filter(|w| !(w.text.starts_with('-') && w.text.len() == 2))
                .cloned()
                .collect();
            Some(join(&args).replace("\\n", "\n"))
        }
        _ => None,
    }
}

/// The program a command runs: its first word that is not an assignment,
/// without its folder (`/bin/rm` is `rm`).
pub(super) fn program_of(cmd: &SimpleCommand) -> String {
    cmd.words
        .iter()
        .find(|w| !is_assignment(&w.text))
        .map(|w| w.text.rsplit('/').next().unwrap_or(&w.text).to_string())
        .unwrap_or_default()
}

/// Whether a word is `NAME=value` (or `NAME+=value`) before the program.
pub(super) fn is_assignment(text: &str) -> bool {
    match text.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '+')
                && !name.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// The words as one line, separated by spaces.
pub(super) fn join(words: &[Word]) -> String {
    let mut out = String::new();
    for (i, w) in words.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(&w.text);
    }
    out
}

/// Whether a path is under the system's own program folders.
pub(super) fn is_system_program(path: &Path) -> bool {
    ["/bin", "/sbin", "/usr", "/lib", "/opt", "/snap", "/nix"]
        .iter()
        .any(|dir| path.starts_with(dir))
}

/// Programs that do not change the content of the files they are given:
/// naming a script to one does not rewrite it.
pub(super) fn read_only_program(program: &str) -> bool {
    matches!(
        program,
        "cat"
            | "chmod"
            | "ls"
            | "head"
            | "tail"
            | "wc"
            | "file"
            | "stat"
            | "test"
            | "["
            | "echo"
            | "less"
            | "grep"
            | "bash"
            | "sh"
            | "zsh"
            | "dash"
            | "source"
            | "."
            | "shellcheck"
            | "diff"
    )
}

/// The first 256 bytes of a file (enough to see a `#!` line).
pub(super) fn read_head(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut buf = vec![0u8; 256];
    let mut file = std::fs::File::open(path)?;
    let n = file.read(&mut buf)?;
    buf.truncate(n);
    Ok(buf)
}
