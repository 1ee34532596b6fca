//! Words the shell expands before a program sees them: brace lists and
//! globs.
//!
//! `{rm,-rf,~}` runs `rm -rf ~`, and `/???/r? -rf /[a-z]*` runs `/bin/rm`
//! over every top-level folder. A rule that matched the words as written
//! would see neither. So before rules match, brace lists are expanded the
//! way bash expands them (bounded: a word that would become more than
//! [`MAX_WORDS`] words is kept as written, and marked a computed program
//! when it is the program), and a glob is read as every path it could
//! match, on any machine: the rules ask whether a pattern *could* match
//! the root, the home or a system folder ([`could_match`]), never what it
//! matches on this disk today. A glob in the program's name is a name
//! computed when it runs; the names the rules know that it could be are
//! judged as well ([`program_candidates`]).

use std::path::{Component, Path};

/// The most words one brace expansion may produce before the gate stops
/// expanding it.
pub(super) const MAX_WORDS: usize = 256;

/// The programs the blocking rules name: a glob that could be one of them
/// is judged as it.
const RULED_PROGRAMS: &[&str] = &[
    "rm",
    "rmdir",
    "unlink",
    "shred",
    "find",
    "dd",
    "cp",
    "mv",
    "tee",
    "truncate",
    "mkfs",
    "mke2fs",
    "wipefs",
    "mkswap",
    "chmod",
    "chown",
    "chgrp",
    "shutdown",
    "reboot",
    "halt",
    "poweroff",
    "init",
    "telinit",
    "systemctl",
    "loginctl",
    "sh",
    "bash",
    "dash",
    "zsh",
    "busybox",
    "toybox",
    "sudo",
    "perl",
];

/// Whether `text` holds a glob character (`*`, `?`, `[`).
pub fn has_glob(text: &str) -> bool {
    text.contains(['*', '?', '['])
}

/// The words bash's brace expansion makes of `text` (`{rm,-rf,~}` is `rm`,
/// `-rf`, `~`; `/{bin,usr}` is `/bin`, `/usr`; `{1..3}` is `1`, `2`, `3`);
/// `None` when there is nothing to expand or it would make more than
/// [`MAX_WORDS`] words.
pub(super) fn expand_braces(text: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    match expand_into(text, &mut out) {
        Expansion::Expanded => Some(out),
        Expansion::Plain | Expansion::TooMany => None,
    }
}

/// What [`expand_into`] made of a text.
enum Expansion {
    /// Nothing to expand: the text is one word as it is.
    Plain,
    /// Its words were added.
    Expanded,
    /// Past [`MAX_WORDS`]: everything stops, at every level (else each
    /// level would go on with its next item, and nested lists of a few items
    /// each would take exponential time before giving up).
    TooMany,
}

/// Adds the words `text` expands to onto `out`.
fn expand_into(text: &str, out: &mut Vec<String>) -> Expansion {
    let Some((open, close, items)) = first_brace(text) else {
        return Expansion::Plain;
    };
    let (prefix, suffix) = (&text[..open], &text[close + 1..]);
    for item in items {
        let joined = format!("{prefix}{item}{suffix}");
        match expand_into(&joined, out) {
            Expansion::Plain => out.push(joined),
            Expansion::Expanded => {}
            Expansion::TooMany => return Expansion::TooMany,
        }
        if out.len() > MAX_WORDS {
            return Expansion::TooMany;
        }
    }
    Expansion::Expanded
}

/// The first `{…}` that expands: its bounds and its items.
fn first_brace(text: &str) -> Option<(usize, usize, Vec<String>)> {
    let bytes = text.as_bytes();
    let mut start = 0;
    while let Some(offset) = text[start..].find('{') {
        let open = start + offset;
        // `${…}` is a parameter, not a list.
        let parameter = open > 0 && bytes[open - 1] == b'$';
        let mut depth = 0;
        let mut commas = Vec::new();
        let mut close = None;
        for (i, &b) in bytes.iter().enumerate().skip(open) {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        close = Some(i);
                        break;
                    }
                }
                b',' if depth == 1 => commas.push(i),
                _ => {}
            }
        }
        let close = close?;
        if !parameter {
            if !commas.is_empty() {
                let mut items = Vec::new();
                let mut from = open + 1;
                for at in commas.into_iter().chain([close]) {
                    items.push(text[from..at].to_string());
                    from = at + 1;
                }
                return Some((open, close, items));
            }
            if let Some(items) = sequence(&text[open + 1..close]) {
                return Some((open, close, items));
            }
        }
        start = open + 1;
    }
    None
}

/// `a..e` or `1..5` (with an optional step): the items, bounded.
fn sequence(inner: &str) -> Option<Vec<String>> {
    let mut parts = inner.split("..");
    let (from, to) = (parts.next()?, parts.next()?);
    let step: i64 = match parts.next() {
        Some(s) => s.parse::<i64>().ok()?.abs().max(1),
        None => 1,
    };
    if parts.next().is_some() {
        return None;
    }
    let numbers = from.parse::<i64>().ok().zip(to.parse::<i64>().ok());
    let letters = single_char(from).zip(single_char(to));
    let (a, b) = match (numbers, letters) {
        (Some(n), _) => n,
        (None, Some((x, y))) => (i64::from(u32::from(x)), i64::from(u32::from(y))),
        (None, None) => return None,
    };
    let count = (a - b).unsigned_abs() / step.unsigned_abs() + 1;
    if count > MAX_WORDS as u64 {
        return None;
    }
    let dir = if b >= a { step } else { -step };
    let items = (0..count as i64).map(|k| a + k * dir).map(|v| {
        if numbers.is_some() {
            v.to_string()
        } else {
            u32::try_from(v)
                .ok()
                .and_then(char::from_u32)
                .map(String::from)
                .unwrap_or_default()
        }
    });
    Some(items.collect())
}

fn single_char(text: &str) -> Option<char> {
    let mut chars = text.chars();
    let c = chars.next()?;
    (chars.next().is_none() && c.is_ascii_alphabetic()).then_some(c)
}

/// Whether the glob `pattern` (one path component) could match `name`:
/// `*` any run, `?` one character, `[…]` a class (`!` or `^` negates it).
pub(super) fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // What was tried and failed, by (pattern left, name left): each pair is
    // tried once, so many `*` cost |pattern|·|name| steps, not exponential.
    let mut failed = std::collections::HashSet::new();
    match_from(&p, &n, &mut failed)
}

fn match_from(
    p: &[char],
    n: &[char],
    failed: &mut std::collections::HashSet<(usize, usize)>,
) -> bool {
    let key = (p.len(), n.len());
    if failed.contains(&key) {
        return false;
    }
    let Some((&first, rest)) = p.split_first() else {
        return n.is_empty();
    };
    let matched = match first {
        '*' => (0..=n.len()).any(|skip| match_from(rest, &n[skip..], failed)),
        '?' => !n.is_empty() && match_from(rest, &n[1..], failed),
        '[' => match class(rest) {
            Some((set, after)) => {
                n.first().is_some_and(|c| set.contains(*c)) && match_from(after, &n[1..], failed)
            }
            None => n.first() == Some(&'[') && match_from(rest, &n[1..], failed),
        },
        '\\' if !rest.is_empty() => {
            n.first() == rest.first() && match_from(&rest[1..], &n[1..], failed)
        }
        c => n.first() == Some(&c) && match_from(rest, &n[1..], failed),
    };
    if !matched {
        failed.insert(key);
    }
    matched
}

/// A bracket class and what follows it, the `[` already read.
struct Class {
    negated: bool,
    ranges: Vec<(char, char)>,
}

impl Class {
    fn contains(&self, c: char) -> bool {
        self.ranges.iter().any(|&(a, b)| a <= c && c <= b) != self.negated
    }
}

fn class(p: &[char]) -> Option<(Class, &[char])> {
    let mut i = 0;
    let negated = matches!(p.first(), Some('!' | '^'));
    if negated {
        i += 1;
    }
    let mut ranges = Vec::new();
    let mut first = true;
    while let Some(&c) = p.get(i) {
        if c == ']' && !first {
            return Some((Class { negated, ranges }, &p[i + 1..]));
        }
        first = false;
        if c == '[' && p.get(i + 1) == Some(&':') {
            // A named class (`[:alpha:]`): taken as any character.
            let end = p[i + 2..].iter().position(|&x| x == ']')? + i + 2;
            ranges.push(('\0', char::MAX));
            i = end + 1;
            continue;
        }
        if p.get(i + 1) == Some(&'-') && p.get(i + 2).is_some_and(|&e| e != ']') {
            ranges.push((c, p[i + 2]));
            i += 3;
        } else {
            ranges.push((c, c));
            i += 1;
        }
    }
    None
}

/// Whether the absolute glob path `pattern` could match `candidate`,
/// component by component.
pub fn could_match(pattern: &Path, candidate: &Path) -> bool {
    let parts = |p: &Path| -> Vec<String> {
        p.components()
            .filter_map(|c| match c {
                Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect()
    };
    let (pat, cand) = (parts(pattern), parts(candidate));
    pat.len() == cand.len() && pat.iter().zip(&cand).all(|(p, c)| matches(p, c))
}

/// Whether a glob component could match nearly any name: it has no
/// character outside wildcards, classes and dots (`*`, `?*`, `[a-z]*`,
/// `.[!.]*`).
pub fn matches_anything(component: &str) -> bool {
    if !has_glob(component) {
        return false;
    }
    let mut in_class = false;
    for c in component.chars() {
        match c {
            '[' => in_class = true,
            ']' => in_class = false,
            _ if in_class => {}
            '*' | '?' | '.' => {}
            _ => return false,
        }
    }
    true
}

/// The programs the rules know that a glob program name (`r?`, `[r]m`,
/// `*sh`) could be.
pub(super) fn program_candidates(name: &str) -> Vec<&'static str> {
    RULED_PROGRAMS
        .iter()
        .copied()
        .filter(|known| matches(name, known))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn braces_expand_like_bash_and_bounded() {
        let cases: &[(&str, Option<&[&str]>)] = &[
            ("{rm,-rf,~}", Some(&["rm", "-rf", "~"])),
            ("/{bin,usr}/x", Some(&["/bin/x", "/usr/x"])),
            ("{a,{b,c}}d", Some(&["ad", "bd", "cd"])),
            ("{1..3}", Some(&["1", "2", "3"])),
            ("{a..c}", Some(&["a", "b", "c"])),
            ("{}", None),
            ("${HOME}", None),
            ("{a}", None),
            ("{1..100000}", None),
            // Twenty nested pairs: a million words; refused at once, not
            // after exploring them all.
            (&"{a,b}".repeat(20), None),
        ];
        for (text, want) in cases {
            let got = expand_braces(text);
            let want = want.map(|w| w.iter().map(|s| s.to_string()).collect::<Vec<_>>());
            assert_eq!(got, want, "{text}");
        }
    }

    #[test]
    fn many_stars_match_in_polynomial_time() {
        // Exponential by plain backtracking: C(60, 30) tries.
        let pattern = "*a".repeat(30) + "b";
        assert!(!matches(&pattern, &"a".repeat(30)));
        assert!(matches(&("*a".repeat(30) + "*"), &"a".repeat(30)));
    }

    #[test]
    fn a_glob_could_match_what_the_shell_would_match() {
        for (pattern, name, want) in [
            ("r?", "rm", true),
            ("[r]m", "rm", true),
            ("[!a-q]m", "rm", true),
            ("[a-q]m", "rm", false),
            ("*", "anything", true),
            ("b*n", "bin", true),
            ("???", "usr", true),
            ("???", "boot", false),
            ("[[:alpha:]]m", "rm", true),
        ] {
            assert_eq!(matches(pattern, name), want, "{pattern} ~ {name}");
        }
        assert!(could_match(Path::new("/???/r?"), Path::new("/bin/rm")));
        assert!(!could_match(Path::new("/???"), Path::new("/")));
        assert!(matches_anything("[a-z]*"));
        assert!(!matches_anything("*.log"));
        assert_eq!(program_candidates("r?"), vec!["rm"]);
    }
}
