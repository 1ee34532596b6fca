//! The `troupe` binary driven as a user would: init, run with a script,
//! run --json, tools --json, search, bad input.

use std::process::{Command, Output};

use serde_json::json;

use super::support::TestHome;

/// `troupe --home HOME ARGS`, run in the home, with no `TROUPE_HOME` from
/// the test's own environment; callers add what else they need.
pub(super) fn command(home: &TestHome, args: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_troupe"));
    command
        .arg("--home")
        .arg(home.path())
        .args(args)
        .current_dir(home.path())
        .env_remove("TROUPE_HOME");
    command
}

/// Removes the model and its keys the test's environment may hold.
pub(super) fn without_model(command: &mut Command) -> &mut Command {
    command
        .env_remove("TROUPE_MODEL")
        .env_remove("OPENAI_API_KEY")
        .env_remove("ANTHROPIC_API_KEY")
}

pub(super) fn troupe(home: &TestHome, args: &[&str]) -> Output {
    command(home, args)
        .env("NO_COLOR", "1")
        .output()
        .expect("the troupe binary runs")
}

/// House `acme` with person `ada`, bot `assistant` listening to all, and
/// thread `general`, made through the CLI.
pub(super) fn house_with_assistant(home: &TestHome) {
    for args in [
        &["house", "create", "acme"][..],
        &["house", "add", "acme", "--human", "ada"],
        &[
            "house",
            "add",
            "acme",
            "--bot",
            "assistant",
            "--listen",
            "all",
        ],
        &["thread", "create", "acme", "general"],
    ] {
        let out = troupe(home, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
}

pub(super) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(super) fn write_script(home: &TestHome, name: &str, turns: serde_json::Value) -> String {
    let path = home.path().join(name);
    std::fs::write(&path, json!({ "turns": turns }).to_string()).unwrap();
    format!("script:{}", path.display())
}

#[test]
fn init_writes_a_commented_home_and_keeps_it() {
    let home = TestHome::new();
    let out = troupe(&home, &["init"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let config = std::fs::read_to_string(home.path().join("config.toml")).unwrap();
    assert!(
        config.lines().any(|l| l.starts_with('#')),
        "the config is commented"
    );
    let again = troupe(&home, &["init"]);
    assert!(
        text(&again.stdout).contains("kept"),
        "{}",
        text(&again.stdout)
    );
}

/// `troupe run "When is the launch?"` in a new home: the model's first step
/// (`first`, with its `read_file` of the notes) and then the answer.
fn ask_about_the_launch(mut first: serde_json::Value) -> (TestHome, Output) {
    let home = TestHome::new();
    std::fs::write(home.path().join("notes.txt"), "the launch is on friday\n").unwrap();
    first["tool_calls"] = json!([{"name": "read_file", "arguments": {"path": "notes.txt"}}]);
    let model = write_script(
        &home,
        "turns.json",
        json!([
            first,
            {"text": "The launch is on Friday.", "expect": "the launch is on friday"}
        ]),
    );
    let out = troupe(&home, &["run", "--model", &model, "When is the launch?"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    (home, out)
}

#[test]
fn run_prints_the_answer_and_progress_separately() {
    let (home, out) = ask_about_the_launch(json!({}));
    assert_eq!(text(&out.stdout), "The launch is on Friday.\n");
    assert!(
        text(&out.stderr).contains("→ read_file"),
        "{}",
        text(&out.stderr)
    );
    // The conversation is searchable afterwards, by words quoted or not.
    let cases: [(&[&str], &str); 3] = [
        (&["launch"], "When is the [launch]?"),
        (&["launch", "friday"], "The [launch] is on [Friday]."),
        (&["launch friday"], "The [launch] is on [Friday]."),
    ];
    for (words, hit) in cases {
        let found = troupe(&home, &[&["search"][..], words].concat());
        assert!(found.status.success(), "{}", text(&found.stderr));
        assert!(
            text(&found.stdout).contains(hit),
            "{words:?}: {}",
            text(&found.stdout)
        );
    }
}

#[test]
fn conversations_lists_them_and_show_prints_one_whole() {
    let (home, _) = ask_about_the_launch(json!({"text": "Let me look."}));

    let listed = troupe(&home, &["conversations"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));
    let listing = text(&listed.stdout);
    let row = listing.lines().next().unwrap();
    assert!(row.contains("assistant"), "{listing}");
    assert!(row.contains("4 msgs"), "{listing}");
    assert!(row.contains("When is the launch?"), "{listing}");
    let id = row.split_whitespace().next().unwrap();

    let shown = troupe(&home, &["show", id]);
    assert!(shown.status.success(), "{}", text(&shown.stderr));
    let transcript = text(&shown.stdout);
    let order = [
        "user",
        "When is the launch?",
        "Let me look.",
        "→ read_file {\"path\":\"notes.txt\"}",
        "tool read_file",
        "the launch is on friday",
        "The launch is on Friday.",
    ];
    let mut from = 0;
    for part in order {
        let at = transcript[from..]
            .find(part)
            .unwrap_or_else(|| panic!("`{part}` missing or out of order in:\n{transcript}"));
        from += at + part.len();
    }

    let json_out = troupe(&home, &["show", id, "--json"]);
    let roles: Vec<String> = text(&json_out.stdout)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["role"].to_string())
        .collect();
    assert_eq!(
        roles,
        ["\"user\"", "\"assistant\"", "\"tool\"", "\"assistant\""]
    );

    let malformed = troupe(&home, &["show", "conv_123"]);
    assert!(!malformed.status.success());
    assert!(
        text(&malformed.stderr).contains("expected `conv_` followed by 32 hex digits"),
        "{}",
        text(&malformed.stderr)
    );
    let unknown = troupe(&home, &["show", "conv_0123456789abcdef0123456789abcdef"]);
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("no conversation conv_0123456789abcdef0123456789abcdef"),
        "{}",
        text(&unknown.stderr)
    );
    let nobody = troupe(&home, &["conversations", "--bot", "nobody"]);
    assert!(!nobody.status.success());
    assert!(text(&nobody.stderr).contains("no bot named `nobody`"));

    // `run --conversation` goes on with it rather than starting another.
    let again = write_script(&home, "again.json", json!([{"text": "Still Friday."}]));
    let out = troupe(
        &home,
        &[
            "run",
            "--conversation",
            id,
            "--model",
            &again,
            "And the launch?",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Still Friday.\n");
    let listing = text(&troupe(&home, &["conversations"]).stdout);
    assert_eq!(listing.lines().count(), 1, "{listing}");
    assert!(
        listing.contains(&format!("{id}  ")) && listing.contains("6 msgs"),
        "{listing}"
    );
    let both = troupe(
        &home,
        &["run", "--conversation", id, "--bot", "assistant", "x"],
    );
    assert!(!both.status.success());
    assert!(
        text(&both.stderr).contains("cannot be used with"),
        "{}",
        text(&both.stderr)
    );
}

#[test]
fn run_json_streams_events_as_json_lines() {
    let home = TestHome::new();
    let model = write_script(&home, "t.json", json!([{"text": "hi"}]));
    let out = troupe(&home, &["run", "--json", "--model", &model, "hello"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let events: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // The actor tree's events come with the turn's.
    assert!(
        events
            .iter()
            .any(|e| e["event"] == "actor_started" && e["kind"] == "conversation"),
        "{events:?}"
    );
    let events: Vec<_> = events
        .into_iter()
        .filter(|e| !e["event"].as_str().unwrap().starts_with("actor_"))
        .collect();
    assert_eq!(events.first().unwrap()["event"], "turn_started");
    let last = events.last().unwrap();
    assert_eq!(last["event"], "turn_finished");
    assert_eq!(last["outcome"]["status"], "finished");
    assert_eq!(last["text"], "hi");
}

#[test]
fn a_turn_that_does_not_finish_exits_non_zero_with_the_reason() {
    let home = TestHome::new();
    let model = write_script(
        &home,
        "t.json",
        json!([{"tool_calls": [{"name": "read_file", "arguments": {"path": "x"}}]}]),
    );
    let out = troupe(&home, &["run", "--max-steps", "1", "--model", &model, "go"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "a guard ends with 3: {}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stderr).contains("stopped by a guard: the turn reached its cap of 1 model calls"),
        "{}",
        text(&out.stderr)
    );
    let exhausted = troupe(
        &home,
        &["run", "--model", &model, "--tools", "none", "again"],
    );
    assert_eq!(exhausted.status.code(), Some(1));
    assert!(
        text(&exhausted.stderr).contains("the turn failed: script"),
        "{}",
        text(&exhausted.stderr)
    );
}

#[test]
fn tools_json_lists_every_tool_with_its_flags_and_kinds() {
    let home = TestHome::new();
    let out = troupe(&home, &["tools", "--json"]);
    assert!(out.status.success());
    let tools: Vec<serde_json::Value> = serde_json::from_slice(&out.stdout).unwrap();
    let read = tools.iter().find(|t| t["name"] == "read_file").unwrap();
    assert_eq!(read["flags"]["read_only"], true);
    assert_eq!(read["exposure"], "always_on");
    let cron = tools
        .iter()
        .find(|t| t["name"] == "cronjob_manage")
        .unwrap();
    assert_eq!(cron["exposure"], "deferred");
    assert_eq!(
        cron["kinds"][2],
        json!({"kind": "routine_run", "offer": "no"})
    );
}

#[test]
fn bad_configuration_is_one_clear_paragraph() {
    let home = TestHome::new();
    assert!(troupe(&home, &["init"]).status.success());
    std::fs::write(home.path().join("config.toml"), "[agent]\nmodle = \"x\"\n").unwrap();
    let out = troupe(&home, &["bots"]);
    // Exit status 2: the configuration cannot be used (docs/getting-started.md).
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(err.starts_with("error: "), "{err}");
    assert!(
        err.contains("config.toml:2:1: unknown key `modle` in [agent]"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let bad_set = troupe(&home, &["--set", "nonsense", "bots"]);
    assert!(text(&bad_set.stderr).contains("needs the form section.key=value"));
    assert_eq!(bad_set.status.code(), Some(2));
}

#[test]
fn the_demo_leaves_troupe_home_untouched() {
    let real = TestHome::new();
    let out = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("demo")
        .current_dir(real.path())
        .env("TROUPE_HOME", real.path())
        .env("NO_COLOR", "1")
        .output()
        .expect("the troupe binary runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed: Vec<_> = std::fs::read_dir(real.path()).unwrap().collect();
    assert!(
        listed.is_empty(),
        "the demo wrote into TROUPE_HOME: {listed:?}"
    );
    // It said where it worked: a home of its own, removed here.
    let stderr = text(&out.stderr);
    let at = stderr
        .lines()
        .find_map(|l| l.strip_prefix("troupe demo: working in "))
        .and_then(|l| l.split(" (").next())
        .unwrap_or_else(|| panic!("the demo says where: {stderr}"));
    assert!(text(&out.stdout).contains(&format!("Everything above is in {at}")));
    assert_ne!(std::path::Path::new(at), real.path());
    std::fs::remove_dir_all(at).unwrap();
}

#[test]
fn the_demo_runs_offline_and_says_where_its_data_is() {
    let home = TestHome::new();
    let out = troupe(&home, &["demo"]);
    assert!(
        out.status.success(),
        "{}\n{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let shown = text(&out.stdout);
    for part in [
        "→ delegate",
        "notice (delegation)",
        "notice (reply)",
        "notice (routine)",
        "→ memory",
    ] {
        assert!(shown.contains(part), "`{part}` missing from:\n{shown}");
    }
    assert!(shown.contains(&format!("Everything above is in {}", home.path().display())));
    let profile = std::fs::read_to_string(home.path().join("memory/USER.md")).unwrap();
    assert!(profile.contains("vegetarian"));
}

#[test]
fn bench_activation_brings_stored_conversations_back_after_a_restart() {
    let home = TestHome::new();
    let out = troupe(&home, &["bench", "activation", "--n", "20"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let line: serde_json::Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(line["workload"], "activation");
    assert_eq!(line["conversations"], 20);
    assert_eq!(line["messages_each"], 12);
    let (cold, live) = (&line["activate"]["p50_us"], &line["live"]["p50_us"]);
    assert!(
        cold.as_f64().unwrap() > 0.0 && live.as_f64().unwrap() > 0.0,
        "{line}"
    );
}

#[test]
fn chat_goes_on_with_a_conversation_given_by_id() {
    let home = TestHome::new();
    let first = write_script(&home, "first.json", json!([{"text": "Noted: Friday."}]));
    let out = troupe(
        &home,
        &["run", "--model", &first, "The launch is on Friday."],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listing = text(&troupe(&home, &["conversations"]).stdout);
    let id = listing.split_whitespace().next().unwrap().to_string();

    let model = write_script(
        &home,
        "chat.json",
        json!([{"text": "It is on Friday.", "expect": "when is it"}]),
    );
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .args(["--home"])
        .arg(home.path())
        .args(["chat", "--conversation", &id, "--model", &model])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"when is it?\n")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("It is on Friday."),
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).contains(&id), "{}", text(&out.stderr));

    let listing = text(&troupe(&home, &["conversations"]).stdout);
    assert_eq!(listing.lines().count(), 1, "{listing}");
    assert!(listing.contains("4 msgs"), "{listing}");
    let transcript = text(&troupe(&home, &["show", &id]).stdout);
    let (first, second) = (
        transcript.find("Noted: Friday.").unwrap(),
        transcript.find("It is on Friday.").unwrap(),
    );
    assert!(first < second, "{transcript}");

    let unknown = troupe(
        &home,
        &[
            "chat",
            "--conversation",
            "conv_0123456789abcdef0123456789abcdef",
        ],
    );
    assert!(!unknown.status.success());
    assert!(
        text(&unknown.stderr).contains("there is no conversation"),
        "{}",
        text(&unknown.stderr)
    );
}

#[tokio::test]
async fn tools_cost_estimates_each_always_on_definition_per_kind_and_per_bot() {
    let home = TestHome::new();
    let runtime = home
        .builder(super::support::script(vec![]))
        .build()
        .await
        .unwrap();
    let mut scout = troupe::BotSpec::new("scout", "Scout", "Reads things.");
    scout.tools = vec!["read_file".into()];
    runtime.spawn_bot(scout).await.unwrap();
    runtime.shutdown().await;

    let out = troupe(&home, &["tools", "--cost", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let cost: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    // The estimate is the sent definition's characters over four, rounded up.
    let read_file = troupe::tools::builtin()
        .get("read_file")
        .unwrap()
        .spec()
        .definition();
    let sent = json!({"type": "function", "function": {
        "name": read_file.name,
        "description": read_file.description,
        "parameters": troupe::runtime::tool::sort_keys((*read_file.parameters).clone()),
    }});
    let expected = (sent.to_string().chars().count() as u64).div_ceil(4);
    let conversation = &cost["kinds"][0];
    assert_eq!(conversation["who"], "conversation");
    assert_eq!(conversation["tools"][0], json!(["read_file", expected]));
    let sum: u64 = conversation["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t[1].as_u64().unwrap())
        .sum();
    assert_eq!(conversation["tokens"], sum);
    let bots = cost["bots"].as_array().unwrap();
    let scout = bots.iter().find(|b| b["who"] == "scout").unwrap();
    assert_eq!(scout["tools"], json!([["read_file", expected]]));
    assert_eq!(scout["tokens"], expected);

    let out = troupe(&home, &["tools", "--cost"]);
    let shown = text(&out.stdout);
    assert!(shown.contains("total tokens"), "{shown}");
    let line = shown
        .lines()
        .find(|l| l.trim_start().starts_with("scout"))
        .unwrap();
    assert!(
        line.ends_with(&format!(" {expected} tokens in 1 tool")),
        "{shown}"
    );
}

#[test]
fn completions_are_printed_for_a_shell_and_complete_in_bash() {
    let home = TestHome::new();
    let out = troupe(&home, &["completions", "bash"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let script = home.path().join("troupe.bash");
    std::fs::write(&script, &out.stdout).unwrap();
    // bash itself completes `troupe thr` from the script.
    let completed = Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {}; COMP_WORDS=(troupe thr); COMP_CWORD=1; _troupe troupe thr troupe; echo \"${{COMPREPLY[@]}}\"",
            script.display()
        ))
        .output()
        .unwrap();
    assert_eq!(
        text(&completed.stdout).trim(),
        "thread",
        "{}",
        text(&completed.stderr)
    );
    for shell in ["zsh", "fish", "elvish", "powershell"] {
        let out = troupe(&home, &["completions", shell]);
        assert!(out.status.success() && !out.stdout.is_empty(), "{shell}");
    }
    let out = troupe(&home, &["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("possible values: bash"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn every_listing_prints_one_json_object_per_line_with_json() {
    let home = TestHome::new();
    let model = write_script(
        &home,
        "hi.json",
        json!([{"text": "the launch is on Friday"}]),
    );
    let out = troupe(&home, &["run", "--model", &model, "when is the launch?"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let lines = |args: &[&str]| -> Vec<serde_json::Value> {
        let out = troupe(&home, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{args:?}: {l}: {e}")))
            .collect()
    };
    let bots = lines(&["bots", "--json"]);
    assert!(bots.iter().any(|b| b["name"] == "assistant"), "{bots:?}");
    let conversations = lines(&["conversations", "--json"]);
    assert_eq!(conversations[0]["bot"], "assistant", "{conversations:?}");
    assert!(conversations[0]["id"]
        .as_str()
        .unwrap()
        .starts_with("conv_"));
    let hits = lines(&["search", "launch", "--json"]);
    assert!(
        !hits.is_empty() && hits[0]["snippet"].is_string(),
        "{hits:?}"
    );
    let usage = lines(&["usage", "--json"]);
    assert!(usage.iter().all(|u| u["calls"].is_u64()), "{usage:?}");
    assert!(lines(&["routines", "--json"]).is_empty());
}
