//! Oversized tool results go whole to a file in the home's `spill/` folder;
//! the model reads their head, their size and where the rest is.

use crate::home::Home;
use crate::protocol::ToolResult;

/// Where the whole output of call `call_id` of `conversation` is kept:
/// `spill/<conversation>/<call_id>.txt` (the id made safe for a file name).
pub fn spill_path(home: &Home, conversation: &str, call_id: &str) -> std::path::PathBuf {
    let safe_id: String = call_id
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    home.spill_dir()
        .join(conversation)
        .join(format!("{safe_id}.txt"))
}

/// Writes `result`'s text to `spill/<conversation>/<call_id>.txt` and returns
/// a result holding its first `keep_chars` characters and a pointer to the
/// file. When the file cannot be written the text is cut instead, and the
/// result says so.
pub fn spill(
    home: &Home,
    conversation: &str,
    call_id: &str,
    result: ToolResult,
    keep_chars: usize,
) -> ToolResult {
    let total_chars = result.text.chars().count();
    let total_lines = result.text.lines().count();
    let head: String = result.text.chars().take(keep_chars).collect();
    let path = spill_path(home, conversation, call_id);
    let dir = path
        .parent()
        .map(std::path::Path::to_path_buf)
        .unwrap_or_default();
    let written = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, &result.text));
    let note = match written {
        Ok(()) => format!(
            "\n\n[output cut: {total_chars} characters, {total_lines} lines in all; the whole output is in {} — read it with read_file (offset/limit) or search it with find_files]",
            path.display()
        ),
        Err(e) => format!("\n\n[output cut: {total_chars} characters in all; it could not be saved ({e})]"),
    };
    let mut data = result.data;
    if let serde_json::Value::Object(map) = &mut data {
        map.insert(
            "spill_path".into(),
            serde_json::Value::String(path.display().to_string()),
        );
    } else if data.is_null() {
        data = serde_json::json!({"spill_path": path.display().to_string(), "total_chars": total_chars});
    }
    ToolResult {
        status: result.status,
        text: head + &note,
        data,
    }
}
