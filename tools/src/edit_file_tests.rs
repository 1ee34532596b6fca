use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe_runtime::home::Home;

use super::*;
use crate::read_file::read_file;
use troupe_runtime::tool::Tool as _;

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    cwd: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let ctx = ToolContext::standalone(Home::new(root.join(".troupe")), cwd.clone());
    Fixture {
        _dir: dir,
        ctx,
        cwd,
    }
}

/// Writes `content` to `name` and reads it through read_file.
async fn given(f: &Fixture, name: &str, content: &str) {
    std::fs::write(f.cwd.join(name), content).unwrap();
    let result = read_file::tool().call(json!({"path": name}), &f.ctx).await;
    assert!(!result.is_error(), "{}", result.text);
}

async fn edit(f: &Fixture, args: serde_json::Value) -> ToolResult {
    edit_file::tool().call(args, &f.ctx).await
}

#[tokio::test]
async fn a_unique_match_is_replaced_and_the_diff_returned() {
    let f = fixture();
    given(&f, "f.txt", "one\ntwo\nthree\n").await;
    let result = edit(
        &f,
        json!({"path": "f.txt", "old_string": "two", "new_string": "2"}),
    )
    .await;
    assert!(!result.is_error(), "{}", result.text);
    assert_eq!(
        result.text,
        "Edited `f.txt`: replaced 1 occurrence.\n--- f.txt\n+++ f.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n"
    );
    assert_eq!(
        std::fs::read_to_string(f.cwd.join("f.txt")).unwrap(),
        "one\n2\nthree\n"
    );
    // The edit counts as a read: a second edit needs no new read.
    let second = edit(
        &f,
        json!({"path": "f.txt", "old_string": "one", "new_string": "1"}),
    )
    .await;
    assert!(!second.is_error(), "{}", second.text);
}

#[tokio::test]
async fn several_matches_need_replace_all() {
    let f = fixture();
    given(&f, "f.txt", "a x a x a\n").await;
    let ambiguous = edit(
        &f,
        json!({"path": "f.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert!(ambiguous.is_error());
    assert_eq!(
        ambiguous.text,
        "`old_string` occurs 3 times in `f.txt`; add surrounding lines to make it unique, or set replace_all to replace every one"
    );
    let all = edit(
        &f,
        json!({"path": "f.txt", "old_string": "a", "new_string": "b", "replace_all": true}),
    )
    .await;
    assert!(
        all.text
            .starts_with("Edited `f.txt`: replaced 3 occurrences.\n"),
        "{}",
        all.text
    );
    assert_eq!(
        std::fs::read_to_string(f.cwd.join("f.txt")).unwrap(),
        "b x b x b\n"
    );
}

#[tokio::test]
async fn a_missing_string_is_an_error_with_a_hint_when_close() {
    let f = fixture();
    given(&f, "f.txt", "fn main() {\n    println!(\"hi\");\n}\n").await;
    let missing = edit(
        &f,
        json!({"path": "f.txt", "old_string": "nothing", "new_string": "x"}),
    )
    .await;
    assert!(missing.is_error());
    assert_eq!(
        missing.text,
        "`old_string` was not found in `f.txt`; copy the text exactly as read_file shows it, without the line numbers"
    );
    let close = edit(
        &f,
        json!({"path": "f.txt", "old_string": "FN main() {\n  println!(\"hi\");", "new_string": "x"}),
    )
    .await;
    assert_eq!(
        close.text,
        "`old_string` was not found in `f.txt`, but a passage differing only in whitespace or letter case was; copy the text exactly as read_file shows it, without the line numbers"
    );
}

#[tokio::test]
async fn lf_matches_in_a_crlf_file_and_crlf_is_kept() {
    let f = fixture();
    given(&f, "win.txt", "one\r\ntwo\r\nthree\r\n").await;
    let result = edit(
        &f,
        json!({"path": "win.txt", "old_string": "one\ntwo", "new_string": "1\n2\nextra"}),
    )
    .await;
    assert!(!result.is_error(), "{}", result.text);
    assert_eq!(
        std::fs::read_to_string(f.cwd.join("win.txt")).unwrap(),
        "1\r\n2\r\nextra\r\nthree\r\n"
    );
    assert_eq!(
        result.text,
        "Edited `win.txt`: replaced 1 occurrence.\n--- win.txt\n+++ win.txt\n@@ -1,3 +1,4 @@\n-one\n-two\n+1\n+2\n+extra\n three\n"
    );
}

#[tokio::test]
async fn edits_follow_the_read_before_write_rule() {
    let f = fixture();
    std::fs::write(f.cwd.join("f.txt"), "abc\n").unwrap();
    let unread = edit(
        &f,
        json!({"path": "f.txt", "old_string": "abc", "new_string": "x"}),
    )
    .await;
    assert_eq!(
        unread.text,
        format!(
            "`{}` already exists and has not been read in this conversation; read it with read_file first, then write",
            f.cwd.join("f.txt").display()
        )
    );
    given(&f, "f.txt", "abc\n").await;
    std::fs::write(f.cwd.join("f.txt"), "abc changed\n").unwrap();
    let changed = edit(
        &f,
        json!({"path": "f.txt", "old_string": "abc", "new_string": "x"}),
    )
    .await;
    assert!(
        changed.text.contains("has changed since it was last read"),
        "{}",
        changed.text
    );
    assert_eq!(
        std::fs::read_to_string(f.cwd.join("f.txt")).unwrap(),
        "abc changed\n"
    );
    let absent = edit(
        &f,
        json!({"path": "none.txt", "old_string": "a", "new_string": "b"}),
    )
    .await;
    assert_eq!(
        absent.text,
        "`none.txt` does not exist; create it with write_file"
    );
}

#[test]
fn replace_tolerates_only_line_endings() {
    assert_eq!(
        replace("a\nb\n", "a\r\nb", "c\r\nd", false),
        Ok(Edit {
            after: "c\nd\n".into(),
            count: 1
        })
    );
    assert_eq!(
        replace("a  b\n", "a b", "c", false),
        Err(EditError::NotFound { near: true })
    );
}

#[tokio::test]
async fn edit_file_on_a_bots_memory_is_refused_and_names_the_memory_tool() {
    let f = fixture();
    let notes = f.ctx.home.agent_notes("scout");
    std::fs::create_dir_all(notes.parent().unwrap()).unwrap();
    std::fs::write(&notes, "Scout notes.\n").unwrap();
    std::os::unix::fs::symlink(notes.parent().unwrap(), f.cwd.join("scout-memory")).unwrap();
    let result = read_file::tool()
        .call(json!({"path": "scout-memory/MEMORY.md"}), &f.ctx)
        .await;
    assert!(!result.is_error(), "{}", result.text);
    let result = edit(
        &f,
        json!({"path": "scout-memory/MEMORY.md", "old_string": "Scout", "new_string": "Evil"}),
    )
    .await;
    assert!(result.is_error());
    assert!(
        result.text.contains("bot `scout`'s memory")
            && result.text.contains("use `memory` instead"),
        "{}",
        result.text
    );
    assert_eq!(std::fs::read_to_string(&notes).unwrap(), "Scout notes.\n");
}
