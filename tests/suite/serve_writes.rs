//! Every writing command of the CLI beside a running `troupe serve`, with
//! the real binary: `house create|add|remove`, `token issue|revoke`,
//! `thread create|pin|archive`, `files put|rm`, `bots create|edit|remove`
//! go through its API over the owner's socket — none is refused — and the
//! server's node sees each change at once (a token it issued signs in, a
//! revoked one no longer does). Then the home, read after the server
//! stopped, holds what they did.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Output};

use serde_json::{json, Value};

use super::cli::{command, text, write_script};
use super::support::TestHome;

fn troupe(home: &TestHome, args: &[&str]) -> Output {
    let out = command(home, args).env("NO_COLOR", "1").output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    out
}

/// `GET path` over HTTP/1.1 with `token`: the status code.
fn status_with(url: &str, path: &str, token: &str) -> u16 {
    let host = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    answer.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// The last line of `out`'s stdout: a token's secret.
fn secret(out: &Output) -> String {
    text(&out.stdout).lines().last().unwrap().trim().to_owned()
}

fn lines(out: &Output) -> Vec<Value> {
    text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[test]
fn every_writing_command_goes_through_a_running_server() {
    let home = TestHome::new();
    let model = write_script(&home, "turns.json", json!([]));
    let (mut server, url) = super::telemetry::serve(&home, &model);

    let out = troupe(&home, &["house", "create", "acme"]);
    assert!(
        text(&out.stdout).starts_with("made house `acme` ("),
        "{}",
        text(&out.stdout)
    );
    let out = troupe(
        &home,
        &["house", "add", "acme", "--human", "ada", "--name", "Ada L."],
    );
    assert!(
        text(&out.stdout).contains("`ada` is a person of `acme`"),
        "{}",
        text(&out.stdout)
    );
    let first = secret(&out);
    assert_eq!(
        status_with(&url, "/api/me", &first),
        200,
        "the new token signs in"
    );
    let out = troupe(&home, &["house", "add", "acme", "--human", "ada"]);
    assert!(
        text(&out.stdout).contains("(already;"),
        "{}",
        text(&out.stdout)
    );
    let out = troupe(&home, &["house", "add", "acme", "--human", "bob"]);
    let bob = secret(&out);

    let out = troupe(
        &home,
        &["bots", "create", "scout", "--description", "Finds sources"],
    );
    assert!(
        text(&out.stderr).contains("through the server"),
        "{}",
        text(&out.stderr)
    );
    troupe(
        &home,
        &["bots", "edit", "scout", "--title", "Scout the first"],
    );
    let out = troupe(
        &home,
        &["house", "add", "acme", "--bot", "scout", "--listen", "all"],
    );
    assert_eq!(
        text(&out.stdout).trim(),
        "`scout` is a bot of `acme`, listening to all"
    );

    let out = troupe(&home, &["token", "issue", "acme", "ada"]);
    let second = secret(&out);
    assert_eq!(status_with(&url, "/api/me", &second), 200);
    let out = troupe(&home, &["token", "revoke", "--house", "acme", "ada"]);
    assert_eq!(text(&out.stdout).trim(), "revoked 2 token(s)");
    for token in [&first, &second] {
        assert_eq!(status_with(&url, "/api/me", token), 401, "revoked at once");
    }

    let out = troupe(
        &home,
        &[
            "thread", "create", "acme", "plans", "--with", "ada", "--with", "scout",
        ],
    );
    assert!(
        text(&out.stdout).contains("opened thread `plans` in `acme`"),
        "{}",
        text(&out.stdout)
    );
    troupe(&home, &["thread", "pin", "acme", "plans"]);
    let again = command(&home, &["thread", "pin", "acme", "plans"])
        .output()
        .unwrap();
    assert_eq!(again.status.code(), Some(1));
    assert!(
        text(&again.stderr).contains("pinned already"),
        "{}",
        text(&again.stderr)
    );

    std::fs::write(home.path().join("plan.md"), "# Plan\n\nShip it.\n").unwrap();
    std::fs::write(home.path().join("b.bin"), [0u8, 159, 146, 150]).unwrap();
    let out = troupe(
        &home,
        &[
            "files",
            "put",
            "acme",
            "docs/plan v1.md",
            "plan.md",
            "-m",
            "first & draft",
            "--as",
            "ada",
        ],
    );
    assert!(
        text(&out.stdout).starts_with("docs/plan v1.md → version 1 (17 B, "),
        "{}",
        text(&out.stdout)
    );
    troupe(&home, &["files", "put", "acme", "b.bin", "b.bin"]);
    let out = troupe(&home, &["files", "rm", "acme", "b.bin"]);
    assert!(
        text(&out.stdout).contains("removed `b.bin`"),
        "{}",
        text(&out.stdout)
    );

    let out = troupe(&home, &["house", "remove", "acme", "bob"]);
    assert_eq!(text(&out.stdout).trim(), "`bob` left `acme`");
    assert_eq!(status_with(&url, "/api/me", &bob), 401);
    let out = troupe(&home, &["bots", "remove", "scout", "--json"]);
    let removed: Value = serde_json::from_str(text(&out.stdout).trim()).unwrap();
    assert_eq!(
        removed,
        json!({"name": "scout", "houses": 2, "routines": 0})
    );
    troupe(&home, &["thread", "archive", "acme", "plans"]);

    let killed = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(server.wait().unwrap().success());

    // The home itself holds what the commands did through the server.
    let members: Vec<_> = lines(&troupe(&home, &["house", "members", "acme", "--json"]))
        .iter()
        .map(|m| m["handle"].clone())
        .collect();
    assert_eq!(members, [json!("ada")]);
    let threads = lines(&troupe(
        &home,
        &["thread", "list", "acme", "--all", "--json"],
    ));
    assert_eq!(threads.len(), 1);
    assert_eq!(
        (threads[0]["pinned"].clone(), threads[0]["archived"].clone()),
        (json!(true), json!(true))
    );
    assert_eq!(
        threads[0]["participants"],
        json!(["ada"]),
        "the bot left its threads"
    );
    let log = lines(&troupe(&home, &["files", "log", "acme", "--json"]));
    let authors: Vec<_> = log
        .iter()
        .map(|v| (v["author"].clone(), v["message"].clone()))
        .collect();
    assert_eq!(
        authors,
        [
            (json!("owner"), json!("")),
            (json!("owner"), json!("")),
            (json!("ada"), json!("first & draft"))
        ]
    );
    let bots: Vec<_> = lines(&troupe(&home, &["bots", "--json"]))
        .iter()
        .map(|b| b["name"].clone())
        .collect();
    assert_eq!(bots, [json!("assistant")]);
}
