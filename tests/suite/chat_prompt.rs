//! `troupe chat`'s prompt from a pipe, as a script drives it: the slash
//! commands answered locally (never sent to the model: the scripted model
//! would fail a turn it did not expect), a line continued with `\`, the
//! tokens line after each turn, `/new` and `/model` switching mid-session.

use std::io::Write as _;
use std::process::{Command, Stdio};

use serde_json::json;

use super::cli::{text, troupe, write_script};
use super::support::TestHome;

#[test]
fn piped_chat_answers_slash_commands_itself_and_reports_each_turn() {
    let home = TestHome::new();
    let model = write_script(
        &home,
        "chat.json",
        json!([
            {"tool_calls": [{"name": "tool_search", "arguments": {"query": "plan", "limit": 1}}],
             "expect": "hello\nthere", "usage": {"input_tokens": 1200, "output_tokens": 34}},
            {"tool_calls": [{"name": "plan", "arguments": {"todos": [{"id": "1", "content": "Pack the tent"}]}}]},
            {"text": "Hi.", "usage": {"input_tokens": 1300, "output_tokens": 3}},
            {"text": "Second.", "expect": "again"}
        ]),
    );
    let other = write_script(
        &home,
        "other.json",
        json!([{"text": "From the other model.", "expect": "switched"}]),
    );
    let typed = format!(
        "/help\n/frobnicate\nhello\\\nthere\n/cost\n/plan\n/tools\n/model\n/new\nagain\n\
         /model nonsense:x\n/model {other}\nswitched\n/quit\nafter the quit\n"
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["chat", "--new", "--model", &model])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(typed.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert!(out.status.success(), "{stderr}\n{stdout}");
    for shown in [
        "Commands (answered here, never sent to the model)",
        "/frobnicate is not a command",
        "Hi.",
        "this conversation: 2,500 tokens in, 37 out · $0 · 3 model calls",
        "[ ] 1: Pack the tent",
        "`assistant` has",
        "read_file",
        "`assistant` uses the default model: script:",
        "a new conversation with `assistant`",
        "Second.",
        "the model is unchanged",
        &format!("the next turns use {other}"),
        "From the other model.",
    ] {
        assert!(stdout.contains(shown), "`{shown}` not on stdout:\n{stdout}");
    }
    assert!(!stdout.contains("after the quit"), "{stdout}");
    // The tokens line, on stderr so stdout keeps the answers.
    assert!(
        stderr.contains("· 2,500 tokens in, 37 out · $0 · 3 model calls ·"),
        "{stderr}"
    );
    // No spinner from a pipe.
    assert!(!stderr.contains("the model is working"), "{stderr}");
    // `/new` made a second conversation; nothing typed went to a third.
    let listing = text(&troupe(&home, &["conversations"]).stdout);
    assert_eq!(listing.lines().count(), 2, "{listing}");
}
