//! A house file's path: what is accepted and how it is written down.
//!
//! A path is relative, `/`-separated, in Unicode NFC. An absolute path is
//! refused, not made relative, so a caller never writes somewhere else
//! than it meant. Also refused: `..` and `.` segments, empty paths, backslashes, drive letters, control and
//! invisible characters (zero-width, direction overrides), segments that
//! begin or end with a space, segments over 255 bytes and paths over 1024.
//! Doubled slashes collapse. Paths keep their case but compare without it:
//! `Plans/A.md` and `plans/a.md` are the same file (its key is the
//! lower-cased path).

use unicode_normalization::UnicodeNormalization;

/// The longest path, in bytes.
pub const MAX_PATH_BYTES: usize = 1024;
/// The longest segment, in bytes.
pub const MAX_SEGMENT_BYTES: usize = 255;

/// Invisible or direction-changing characters refused in paths.
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180E}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{206F}'
        | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFF0}'..='\u{FFFF}'
        | '\u{E0000}'..='\u{E0FFF}')
}

/// `raw` as a house path, or why it is refused.
pub fn normalize(raw: &str) -> Result<String, String> {
    let refuse = |why: &str| {
        Err(format!(
            "`{}` is not a valid file path: {why}. Use a relative path such as `plans/launch.md`.",
            raw.escape_debug()
        ))
    };
    if let Some(c) = raw.chars().find(|c| c.is_control()) {
        return refuse(&format!("it holds the control character {:?}", c));
    }
    if let Some(c) = raw.chars().find(|&c| invisible(c)) {
        return refuse(&format!(
            "it holds the invisible character U+{:04X}",
            c as u32
        ));
    }
    if raw.contains('\\') {
        return refuse("it holds a backslash (separate folders with `/`)");
    }
    let nfc: String = raw.nfc().collect();
    if nfc.starts_with('/') {
        return refuse("it is absolute (house paths start inside the house)");
    }
    if nfc.len() >= 2 && nfc.as_bytes()[1] == b':' && nfc.as_bytes()[0].is_ascii_alphabetic() {
        return refuse("it starts with a drive letter");
    }
    let mut segments = Vec::new();
    for segment in nfc.split('/') {
        match segment {
            "" => continue,
            "." | ".." => return refuse("`.` and `..` segments are not allowed"),
            s if s.starts_with(char::is_whitespace) || s.ends_with(char::is_whitespace) => {
                return refuse("a segment begins or ends with a space")
            }
            s if s.len() > MAX_SEGMENT_BYTES => {
                return refuse(&format!("a segment is over {MAX_SEGMENT_BYTES} bytes"))
            }
            s => segments.push(s),
        }
    }
    if segments.is_empty() {
        return refuse("it is empty");
    }
    let path = segments.join("/");
    if path.len() > MAX_PATH_BYTES {
        return refuse(&format!("it is over {MAX_PATH_BYTES} bytes"));
    }
    Ok(path)
}

/// The key two paths that differ only in case share.
pub fn key(path: &str) -> String {
    path.to_lowercase()
}

/// `folder` as a listing prefix (`plans/`), or `None` for the whole house.
pub fn folder_prefix(folder: Option<&str>) -> Result<Option<String>, String> {
    match folder
        .map(str::trim)
        .filter(|f| !f.is_empty() && *f != "/" && *f != ".")
    {
        None => Ok(None),
        Some(f) => Ok(Some(format!("{}/", key(&normalize(f.trim_matches('/'))?)))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_normalized_or_refused() {
        assert_eq!(normalize("plans//a.md").unwrap(), "plans/a.md");
        assert_eq!(normalize("plans/a.md/").unwrap(), "plans/a.md");
        // "é" decomposed becomes the composed form.
        assert_eq!(normalize("cafe\u{301}.md").unwrap(), "caf\u{e9}.md");
        for bad in [
            "../etc/passwd",
            "a/../../b",
            "/etc/passwd",
            "./a",
            "C:/x",
            "a\\b",
            "a\u{0}b",
            "new\nline",
            "a\u{202E}gpj.exe",
            "zero\u{200B}width",
            " lead/x",
            "",
            "//",
        ] {
            let err = normalize(bad).unwrap_err();
            assert!(err.contains("not a valid file path"), "{bad:?}: {err}");
        }
        assert!(normalize(&"a".repeat(256)).is_err());
        assert_eq!(key("Plans/A.md"), "plans/a.md");
        assert_eq!(
            folder_prefix(Some("/plans/")).unwrap().as_deref(),
            Some("plans/")
        );
        assert_eq!(folder_prefix(Some("")).unwrap(), None);
    }
}
