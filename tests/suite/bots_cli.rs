//! `troupe bots create` with the real binary: on the home itself, and
//! through the API of a running `troupe serve`; bad input refused in one
//! line that says what to do.

use pretty_assertions::assert_eq;
use serde_json::{json, Value};

use super::cli::{command, text, write_script};
use super::support::TestHome;

fn troupe(home: &TestHome, args: &[&str]) -> std::process::Output {
    command(home, args)
        .env("NO_COLOR", "1")
        .env("TROUPE_MODEL", "script:none.json")
        .output()
        .unwrap()
}

fn listed(home: &TestHome) -> Vec<Value> {
    let out = troupe(home, &["bots", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn bots_create_makes_a_bot_and_refuses_bad_input_in_one_line() {
    let home = TestHome::new();
    let out = troupe(
        &home,
        &[
            "bots",
            "create",
            "scout",
            "--description",
            "Finds sources",
            "--tools",
            "web_search,web_fetch",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let made: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(made["title"], "Scout");
    assert_eq!(made["tools"], json!(["web_search", "web_fetch"]));
    let names: Vec<_> = listed(&home).iter().map(|b| b["name"].clone()).collect();
    assert_eq!(names, [json!("assistant"), json!("scout")]);

    for (args, says) in [
        (
            &["bots", "create", "scout", "--description", "again"][..],
            "a bot named `scout` exists already",
        ),
        (
            &["bots", "create", "Scout2", "--description", "x"],
            "is not a valid bot name",
        ),
        (
            &[
                "bots",
                "create",
                "x",
                "--description",
                "x",
                "--tools",
                "nope",
            ],
            "no tool named `nope`; `troupe tools` lists",
        ),
    ] {
        let out = troupe(&home, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}

#[test]
fn bots_create_beside_a_running_server_goes_through_its_api() {
    let home = TestHome::new();
    let model = write_script(&home, "turns.json", json!([{"text": "on it"}]));
    let (mut server, _url) = super::telemetry::serve(&home, &model);
    let out = troupe(
        &home,
        &[
            "bots",
            "create",
            "notes",
            "--description",
            "Keeps the notes",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("through the server"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("made bot `notes`"),
        "{}",
        text(&out.stdout)
    );
    // The server's node knows it at once: a turn of it runs there.
    let out = command(&home, &["run", "--bot", "notes", "hello"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "on it");

    let killed = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(server.wait().unwrap().success());
    let names: Vec<_> = listed(&home).iter().map(|b| b["name"].clone()).collect();
    assert_eq!(names, [json!("assistant"), json!("notes")]);
}

#[test]
fn bots_edit_changes_a_bots_definition_and_refuses_what_it_cannot() {
    let home = TestHome::new();
    let made = troupe(
        &home,
        &["bots", "create", "scout", "--description", "Finds sources"],
    );
    assert!(made.status.success(), "{}", text(&made.stderr));
    let out = troupe(
        &home,
        &[
            "bots",
            "edit",
            "scout",
            "--description",
            "Finds and checks sources",
            "--model",
            "ollama:llama3",
            "--json",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let edited: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(edited["description"], "Finds and checks sources");
    assert_eq!(edited["model"], "ollama:llama3");
    let scout = listed(&home)
        .into_iter()
        .find(|b| b["name"] == "scout")
        .unwrap();
    assert_eq!(scout["description"], "Finds and checks sources");
    assert_eq!(scout["model"], "ollama:llama3");

    for (args, says) in [
        (&["bots", "edit", "scout"][..], "nothing to change"),
        (&["bots", "edit", "nobody", "--title", "X"], "nobody"),
        (
            &["bots", "edit", "scout", "--description", "two\nlines"],
            "one line",
        ),
    ] {
        let out = troupe(&home, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
