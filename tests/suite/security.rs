//! The holes found by attacking the landed build, pinned end to end
//! (see docs/security.md): what a hostile model sends cannot make a
//! conversation unloadable, and a command cannot rewrite troupe's home.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::runtime::model::Turn;
use troupe::runtime::protocol::Message;
use troupe::TurnOutcome;

use super::support::*;

/// `levels` nested objects and arrays around a string.
fn nested(levels: usize) -> Value {
    let mut value = json!("Paris");
    for i in 0..levels {
        value = if i % 2 == 0 {
            json!({ "a": value })
        } else {
            json!([value])
        };
    }
    value
}

#[tokio::test]
async fn arguments_nested_126_deep_get_an_error_result_and_the_conversation_still_loads() {
    let home = TestHome::new();
    // 125 levels inside the arguments object: 126 in all, which serde_json
    // read once but not inside a stored message.
    let model = script(vec![
        Turn::tool_call("lookup_weather", json!({ "city": nested(125) })),
        Turn::text("I will keep my arguments flat.").expecting("the limit is 64"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(Weather::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "Weather?").await;
    assert_eq!(report.outcome, TurnOutcome::Finished);
    assert_eq!(report.text, "I will keep my arguments flat.");
    runtime.shutdown().await;

    // Reopened, the conversation loads, with the call's arguments replaced
    // by a stand-in and its error result kept.
    let again = script(vec![Turn::text("Still here.").expecting("again")]);
    let runtime = home
        .builder(Arc::clone(&again))
        .tool(Weather::new())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    assert_eq!(ask(&bot, "again").await.text, "Still here.");
    let history = &again.requests()[0].messages;
    let arguments = history.iter().find_map(|m| match m {
        Message::Assistant { tool_calls, .. } => tool_calls.first().map(|c| c.arguments.clone()),
        _ => None,
    });
    assert_eq!(
        arguments,
        Some(json!({
            "troupe_omitted": "not kept: it nested 126 levels deep, more than the limit of 64"
        }))
    );
    let result = history.iter().find_map(|m| match m {
        Message::Tool { result, .. } => Some(result.text.clone()),
        _ => None,
    });
    assert_eq!(
        result,
        Some(
            "the arguments of `lookup_weather` nest objects and arrays 126 levels deep; the \
             limit is 64. The call did not run. Call it again with flatter arguments (pass deep \
             data as a JSON string or in a file)."
                .to_string()
        )
    );
    runtime.shutdown().await;
}

/// `troupe run --auto` in `work`, on the home `home`, with `args` before
/// the prompt.
fn run_auto(home: &std::path::Path, work: &std::path::Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home)
        .args(["run", "--auto"])
        .args(args)
        .arg("tidy up")
        .current_dir(work)
        .env_remove("TROUPE_HOME")
        .env("NO_COLOR", "1")
        .output()
        .unwrap()
}

/// A temp folder holding a home (`home/`, created by `troupe init`) and a
/// working folder (`work/`), with a script at `work/turns.json`.
fn home_and_work(
    turns: Value,
) -> (
    tempfile::TempDir,
    std::path::PathBuf,
    std::path::PathBuf,
    String,
) {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let (home, work) = (root.join("home"), root.join("work"));
    std::fs::create_dir_all(&work).unwrap();
    let init = std::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(&home)
        .arg("init")
        .env_remove("TROUPE_HOME")
        .output()
        .unwrap();
    assert!(
        init.status.success(),
        "{}",
        String::from_utf8_lossy(&init.stderr)
    );
    let script = work.join("turns.json");
    std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
    (dir, home, work, format!("script:{}", script.display()))
}

#[test]
fn an_auto_run_cannot_rewrite_the_config_from_a_command_in_the_sandbox() {
    if troupe::runtime::sandbox::Sandbox::detect_or_skip("an auto run in the sandbox").is_none() {
        return;
    }
    let config = "HOME/config.toml";
    let turns = json!([
        {"tool_calls": [{"name": "run_command", "arguments": {"command": "echo made > made.txt"}}]},
        // The home is not there at all in the sandbox: not even to read.
        {"tool_calls": [{"name": "run_command", "arguments": {"command":
            format!("cat {config}")}}]},
        // Inline code: unanalysable, so auto mode runs it in the sandbox.
        {"tool_calls": [{"name": "run_command", "arguments": {"command":
            format!("python3 -c \"open('{config}', 'w').write('[trust]\\nmode = 1')\"")}}]},
        {"tool_calls": [{"name": "run_command", "arguments": {"command":
            format!("sed -i 's/^#mode = \"ask\"/mode = \"auto\"/' {config}")}}]},
        {"text": "done"}
    ]);
    let (_dir, home, work, _) = home_and_work(json!([]));
    let turns: Value = serde_json::from_str(
        &turns
            .to_string()
            .replace("HOME", &home.display().to_string()),
    )
    .unwrap();
    let script = work.join("turns.json");
    std::fs::write(&script, json!({ "turns": turns }).to_string()).unwrap();
    let before = std::fs::read(home.join("config.toml")).unwrap();
    let out = run_auto(
        &home,
        &work,
        &["--model", &format!("script:{}", script.display())],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "done");
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt")).unwrap(),
        "made\n"
    );
    // The config is unchanged, byte for byte.
    assert_eq!(std::fs::read(home.join("config.toml")).unwrap(), before);
    // The home is not visible in the sandbox: reading, rewriting in place
    // and replacing the config each failed (nothing of it is there), and
    // only the command in the working folder succeeded.
    let config = home.join("config.toml");
    let config = config.display();
    assert!(
        err.contains(&format!("cat: {config}: No such file or directory")),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "sed: can't read {config}: No such file or directory"
        )),
        "{err}"
    );
    assert_eq!(err.matches("✓ run_command").count(), 1, "{err}");
    assert_eq!(err.matches("✗ run_command").count(), 3, "{err}");
}

#[test]
fn without_a_sandbox_a_command_naming_the_home_is_asked_in_auto_mode() {
    let (_dir, home, work, _) = home_and_work(json!([]));
    let command = format!("echo 'mode = \"auto\"' >> {}/config.toml", home.display());
    let script = work.join("turns.json");
    std::fs::write(
        &script,
        json!({ "turns": [
            {"tool_calls": [{"name": "run_command", "arguments": {"command": command}}]},
            {"text": "done"}
        ]})
        .to_string(),
    )
    .unwrap();
    let before = std::fs::read_to_string(home.join("config.toml")).unwrap();
    let model = format!("script:{}", script.display());
    let out = run_auto(
        &home,
        &work,
        &["--set", "sandbox.mode=off", "--model", &model],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    // Asked even with --auto; nobody can answer without a terminal: status 7.
    assert_eq!(out.status.code(), Some(7), "{err}");
    assert!(err.contains("runs without a sandbox"), "{err}");
    // The way out it names is a sandbox, not --auto (which does not lift it).
    assert!(err.contains("install bubblewrap"), "{err}");
    assert!(!err.contains("pass `--auto`"), "{err}");
    assert_eq!(
        std::fs::read_to_string(home.join("config.toml")).unwrap(),
        before
    );
}
