//! Turning serde's and toml's error texts into messages a user can act on:
//! for `config.toml` ([`crate::config`]) and a model's spec
//! ([`crate::model`]) alike.
//!
//! serde says "unknown field `modle`, expected one of `model`, …" and
//! "invalid type: string \"x\", expected u32"; the user wrote a *key* in a
//! *section* and wants to know what to write instead. `toml::de::Error` keeps
//! the path of tables it passed through but only shows it in its `Display`
//! when it has no source text, so [`key_path`] asks for that rendering.

/// Where an error was found and what it says, in the user's words.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Diagnostic {
    /// 1-based line and column in the file, when the error has a span.
    pub position: Option<(usize, usize)>,
    /// The message, naming the key and what it expects.
    pub message: String,
}

/// Where a file's top-level key belongs instead, when it is a known key of
/// one of its sections (`config.toml`'s `model` belongs in `[agent]`).
pub(crate) type Home = fn(&str) -> Option<&'static str>;

/// A file whose keys all sit where they are read.
pub(crate) fn nowhere(_key: &str) -> Option<&'static str> {
    None
}

/// Describes `error`, raised while reading `text` (if it came from a file
/// whose misplaced keys `home` finds a section for).
pub(crate) fn describe(error: &toml::de::Error, text: Option<&str>, home: Home) -> Diagnostic {
    let position = match (text, error.span()) {
        (Some(text), Some(span)) => Some(line_column(text, span.start)),
        _ => None,
    };
    let keys = key_path(error);
    Diagnostic {
        position,
        message: rephrase(&keys, error.message().trim_end(), home),
    }
}

/// 1-based line and column (in characters) of byte `offset` in `text`.
pub(crate) fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// The tables (and key) the error was found under, outermost first.
fn key_path(error: &toml::de::Error) -> Vec<String> {
    let mut bare = error.clone();
    bare.set_input(None);
    let rendered = bare.to_string();
    rendered
        .lines()
        .last()
        .and_then(|line| line.strip_prefix("in `"))
        .and_then(|line| line.strip_suffix('`'))
        .map(|path| path.split('.').map(str::to_owned).collect())
        .unwrap_or_default()
}

/// Rewrites serde's message for a value found at `keys`.
fn rephrase(keys: &[String], message: &str, home: Home) -> String {
    if let Some(rest) = message.strip_prefix("unknown field ") {
        let (name, expected) = split_expected(rest);
        return unknown_key(keys, &name, &expected, home);
    }
    // With no key to blame, the text itself did not parse.
    let Some((key, section)) = keys.split_last() else {
        return format!("invalid TOML: {message}");
    };
    let (key, section) = (format!("`{key}`"), section.join("."));
    let subject = if section.is_empty() {
        key
    } else {
        format!("{key} in [{section}]")
    };
    if let Some(rest) = message.strip_prefix("unknown variant ") {
        let (name, expected) = split_expected(rest);
        let accepted: Vec<String> = expected.iter().map(|v| format!("\"{v}\"")).collect();
        return format!(
            "{subject} must be one of {}; found \"{name}\"",
            accepted.join(", ")
        );
    }
    for (prefix, out_of_range) in [("invalid type: ", false), ("invalid value: ", true)] {
        if let Some((found, expected)) = message
            .strip_prefix(prefix)
            .and_then(|rest| rest.rsplit_once(", expected "))
        {
            return format!(
                "{subject} expects {}, found {}",
                expected_text(expected, out_of_range),
                found_text(found)
            );
        }
    }
    format!("{subject}: {message}")
}

/// The message for an unknown key (or section, at the top level).
fn unknown_key(keys: &[String], name: &str, expected: &[String], home: Home) -> String {
    let accepted = if expected.is_empty() {
        "no keys".to_owned()
    } else {
        format!("one of {}", expected.join(", "))
    };
    if keys.is_empty() {
        let hint = match home(name) {
            Some(section) => format!(" (`{name}` belongs in [{section}])"),
            None => String::new(),
        };
        return format!(
            "unknown section or key `{name}` at the top level; expected {accepted}{hint}"
        );
    }
    format!(
        "unknown key `{name}` in [{}]; expected {accepted}",
        keys.join(".")
    )
}

/// Splits "`name`, expected `a`, `b`" into the name and the accepted names.
fn split_expected(rest: &str) -> (String, Vec<String>) {
    let (name_part, expected_part) = rest.split_once(", expected ").unwrap_or((rest, ""));
    let name = name_part.trim_matches('`').to_owned();
    let expected = expected_part
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect();
    (name, expected)
}

/// serde's name of an expected type, in the words of a config file.
fn expected_text(expected: &str, out_of_range: bool) -> String {
    let max = match expected {
        "u8" => Some(u64::from(u8::MAX)),
        "u16" => Some(u64::from(u16::MAX)),
        "u32" => Some(u64::from(u32::MAX)),
        "u64" | "usize" => Some(u64::MAX),
        _ => None,
    };
    if let Some(max) = max {
        return if out_of_range {
            format!("an integer from 0 to {max}")
        } else {
            "an integer".to_owned()
        };
    }
    match expected {
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer".to_owned(),
        "f32" | "f64" => "a number".to_owned(),
        "a sequence" => "a list".to_owned(),
        "a map" => "a table".to_owned(),
        other if other.starts_with("struct ") => "a table".to_owned(),
        other => other.to_owned(),
    }
}

/// serde's description of the value found, in the words of a config file.
fn found_text(found: &str) -> String {
    let unquote = |s: &str| s.trim_matches('`').to_owned();
    if let Some(s) = found.strip_prefix("string ") {
        format!("a string {s}")
    } else if let Some(n) = found.strip_prefix("integer ") {
        format!("the integer {}", unquote(n))
    } else if let Some(n) = found.strip_prefix("floating point ") {
        format!("the number {}", unquote(n))
    } else if let Some(b) = found.strip_prefix("boolean ") {
        format!("the boolean {}", unquote(b))
    } else if found == "map" {
        "a table".to_owned()
    } else if found == "sequence" {
        "a list".to_owned()
    } else {
        found.to_owned()
    }
}
