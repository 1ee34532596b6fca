//! Without a sandbox: which commands could touch troupe's home.
//!
//! In a sandbox ([`crate::sandbox`]) troupe's home is read-only and no
//! command can rewrite `config.toml` or the database, however it names
//! them. Without one (bubblewrap missing, or `[sandbox] mode = "off"`) only
//! the gate stands between a command and the home, and a reading of a
//! command cannot prove it leaves a folder alone. So the gate is
//! conservative there: a command is asked, in auto mode too, when its text
//!
//! - names troupe's home (its path, as given or through its links);
//! - uses `~`, `$HOME`, `$TROUPE_HOME` or `$OLDPWD`;
//! - goes up with `..`;
//! - names an absolute path outside the working folder (`/dev/null` and the
//!   like excepted), since a link, a mount or the home itself may be there;
//! - changes folder with `cd`, `pushd` or `popd` to anything but a plain
//!   relative folder (`cd` alone goes to the user's home);
//! - computes a word when it runs: a command substitution (`$(…)`,
//!   backticks, `<(…)`), or `xargs`, `printenv` or `$PWD`, any of which
//!   can produce the home's path (`rm -rf "$(printenv HOME)"`, `echo ~ |
//!   xargs -I{} rm -rf {}`);
//!
//! and every command is asked when the working folder holds the home or
//! lies inside it (a relative path is then enough). Commands the gate cannot
//! read at all are [unanalysable](super::unanalysable) and asked anyway.
//!
//! What this does not see: a program that finds the home by itself (a
//! script file that builds the path, a compiled program). That is why the
//! sandbox is the default, and why troupe says at start when there is none.

use std::path::Path;

use super::inspect::{normalize, Env};

/// Devices a command may name without touching anything of troupe's.
const HARMLESS: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
];

/// Variables that hold the user's or troupe's home, or a folder visited.
const HOME_VARIABLES: &[&str] = &["HOME", "TROUPE_HOME", "OLDPWD"];

/// Characters that end a path inside a command's text.
fn ends_path(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '\'' | '"' | '`' | ';' | '|' | '&' | ')' | '(' | '<' | '>' | ','
        )
}

/// Why `text`, run without a sandbox in `env.cwd`, could touch troupe's
/// home (`env.troupe_home`); `None` when nothing in it points there.
pub fn could_touch_home(text: &str, env: &Env) -> Option<String> {
    let home = normalize(&env.troupe_home);
    let real_home = std::fs::canonicalize(&home).ok();
    let cwd = normalize(&env.cwd);
    let real_cwd = std::fs::canonicalize(&cwd).ok();
    let homes: Vec<&Path> = std::iter::once(home.as_path())
        .chain(real_home.as_deref())
        .collect();
    let cwds: Vec<&Path> = std::iter::once(cwd.as_path())
        .chain(real_cwd.as_deref())
        .collect();
    if env.cwd.as_os_str().is_empty() {
        return Some("its working folder is not known".into());
    }
    for h in &homes {
        for c in &cwds {
            if c.starts_with(h) || h.starts_with(c) {
                return Some(format!(
                    "its working folder {} holds troupe's home {} or lies inside it, so any \
                     path may reach the home",
                    cwd.display(),
                    home.display()
                ));
            }
        }
        if text.contains(&*h.to_string_lossy()) {
            return Some(format!("it names troupe's home {}", h.display()));
        }
    }
    if let Some(var) = HOME_VARIABLES
        .iter()
        .find(|v| text.contains(&format!("${v}")) || text.contains(&format!("${{{v}")))
    {
        return Some(format!("it uses `${var}`"));
    }
    if let Some(at) = tilde(text) {
        let end = text[at..].find(ends_path).map_or(text.len(), |n| at + n);
        return Some(format!("it names `{}` in the user's home", &text[at..end]));
    }
    if text.contains("..") {
        return Some("it goes up a folder with `..`".into());
    }
    if let Some(path) = absolute_paths(text).find(|p| !inside(p, &cwds)) {
        return Some(format!(
            "it names {path}, outside the working folder {}",
            cwd.display()
        ));
    }
    if let Some(word) = changes_folder(text) {
        return Some(format!("it changes folder with `{word}`"));
    }
    if let Some(form) = computes_words(text) {
        return Some(format!(
            "it computes a word when it runs (`{form}`), which may be a path into the home"
        ));
    }
    None
}

/// `text` with what single quotes hold (outside double quotes) blanked:
/// the shell expands nothing there.
fn without_single_quoted(text: &str) -> String {
    let (mut single, mut double, mut escaped) = (false, false, false);
    text.chars()
        .map(|c| {
            let keep = !single;
            match c {
                _ if escaped => escaped = false,
                '\\' if !single => escaped = true,
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                _ => {}
            }
            if keep && !single {
                c
            } else {
                ' '
            }
        })
        .collect()
}

/// A form that computes a word when the command runs (single-quoted text
/// is data, and skipped).
fn computes_words(text: &str) -> Option<&'static str> {
    let unquoted = without_single_quoted(text);
    let text = unquoted.as_str();
    if text.contains("$(") || text.contains("<(") || text.contains(">(") {
        return Some("$(…)");
    }
    if text.contains('`') {
        return Some("`…`");
    }
    if text.contains("$PWD") || text.contains("${PWD") {
        return Some("$PWD");
    }
    text.split(|c: char| c.is_whitespace() || matches!(c, ';' | '|' | '&' | '(' | ')'))
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .find_map(|w| match w {
            "xargs" => Some("xargs"),
            "printenv" => Some("printenv"),
            _ => None,
        })
}

/// Where a `~` that the shell (or a program) would take for the home
/// starts: at the start of a word, after `=` or `:`, or in quotes.
fn tilde(text: &str) -> Option<usize> {
    let mut prev = ' ';
    for (i, c) in text.char_indices() {
        if c == '~' && (ends_path(prev) || matches!(prev, '=' | ':' | '{' | '[')) {
            return Some(i);
        }
        prev = c;
    }
    None
}

/// The absolute paths a command's text names (URLs' `//` excepted), minus
/// harmless devices.
fn absolute_paths(text: &str) -> impl Iterator<Item = String> + '_ {
    let mut out = Vec::new();
    let mut prev = ' ';
    let mut skip_until = 0;
    for (i, c) in text.char_indices() {
        if i < skip_until {
            prev = c;
            continue;
        }
        let starts = c == '/' && (ends_path(prev) || matches!(prev, '=' | ':' | '{' | '[' | '@'));
        if starts {
            let end = text[i..].find(ends_path).map_or(text.len(), |n| i + n);
            let word = &text[i..end];
            skip_until = end;
            let url = prev == ':' && word.starts_with("//");
            if !url && !HARMLESS.contains(&word) && !word.starts_with("/dev/fd/") {
                out.push(word.to_string());
            }
        }
        prev = c;
    }
    out.into_iter()
}

/// Whether `path` lies inside one of `folders` (lexically, or through the
/// links of its existing part).
fn inside(path: &str, folders: &[&Path]) -> bool {
    let lexical = normalize(Path::new(path));
    let real = super::gate::real_path(&lexical);
    folders.iter().any(|f| lexical.starts_with(f)) && folders.iter().any(|f| real.starts_with(f))
}

/// A `cd`, `pushd` or `popd` whose target is not a plain relative folder.
fn changes_folder(text: &str) -> Option<String> {
    let spaced: String = text
        .chars()
        .flat_map(|c| match c {
            ';' | '|' | '&' | '(' | ')' | '{' | '}' | '\n' => [' ', ';', ' '],
            c => [c, '\0', '\0'],
        })
        .filter(|c| *c != '\0')
        .collect();
    let words: Vec<&str> = spaced.split_whitespace().collect();
    for (i, word) in words.iter().enumerate() {
        if !matches!(*word, "cd" | "pushd" | "popd") {
            continue;
        }
        let target = words.get(i + 1).copied().unwrap_or("");
        let plain = !target.is_empty()
            && !target.starts_with('-')
            && target
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '.' | '_' | '-' | '/' | '+' | '@'));
        if *word == "popd" || !plain {
            return Some(format!("{word} {target}").trim().to_string());
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    fn env() -> Env {
        Env::example()
    }

    #[test]
    fn commands_that_could_reach_the_home_are_found_and_plain_ones_are_not() {
        let touching = [
            "echo x > /home/user/.troupe/config.toml",
            "sed -i s/ask/auto/ ~/.troupe/config.toml",
            "cp x \"$HOME/.troupe/config.toml\"",
            "python3 -c \"open('/home/user/.troupe/config.toml','w')\"",
            "cd .. && echo x > .troupe/config.toml",
            "cd && tee .troupe/config.toml",
            "cd $D; dd of=config.toml",
            "cat ${TROUPE_HOME}/troupe.db",
            "ls /etc",
            "ln -s / root",
            "x=~/.troupe; echo > $x/config.toml",
            "rm -rf \"$(printenv HOME)/.troupe\"",
            "echo ~ | xargs -I{} rm -rf {}/.troupe",
            "printenv HOME | xargs -I{} sh -c 'echo x > {}/.troupe/config.toml'",
            "d=`printenv TROUPE_HOME`; echo > $d/config.toml",
            "cp evil.toml \"$PWD/../.troupe/config.toml\"",
            "tee <(cat) > out",
            "echo \"it's\" $(printenv HOME)",
        ];
        for text in touching {
            assert!(could_touch_home(text, &env()).is_some(), "{text}");
        }
        let plain = [
            "cargo test 2>/dev/null",
            "ls -la src",
            "cd src && make",
            "git diff HEAD~1",
            "curl -s https://example.com/x.json > x.json",
            "echo $PATH",
            "sed 's/a/b/' file.txt",
            "cat /home/user/project/README.md",
            "git commit -m 'fix $(curl x) and `x`'",
        ];
        for text in plain {
            assert_eq!(could_touch_home(text, &env()), None, "{text}");
        }
    }

    #[test]
    fn a_working_folder_holding_the_home_makes_every_command_touch_it() {
        let env = Env {
            cwd: PathBuf::from("/home/user"),
            ..Env::example()
        };
        let why = could_touch_home("ls", &env).unwrap();
        assert!(why.contains("holds troupe's home"), "{why}");
    }
}
