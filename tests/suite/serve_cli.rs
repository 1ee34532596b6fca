//! `troupe serve` as a process, and the CLI beside it: `thread post`,
//! `ps`, `run` and `chat` go through its API (the other writing commands:
//! `serve_writes.rs`); a command with no route, that would write the home
//! itself, is refused with the server named; SIGTERM stops it cleanly.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

use serde_json::json;

use super::cli::{text, troupe};
use super::support::TestHome;

/// `troupe serve` on a free loopback port; its base URL.
fn serve(home: &TestHome, model: &str) -> (Child, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env("TROUPE_MODEL", model)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = BufReader::new(stderr).lines();
    let url = loop {
        let line = lines.next().expect("serve says where it listens").unwrap();
        if let Some(at) = line.split(" at ").nth(1) {
            break at.split_whitespace().next().unwrap().to_string();
        }
    };
    // Keep reading its stderr so it never blocks on a full pipe.
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

#[test]
fn the_cli_goes_through_a_running_server_and_sigterm_stops_it() {
    let home = TestHome::new();
    let script = home.path().join("bots.json");
    std::fs::write(
        &script,
        json!({"bots": {
            "assistant": {"turns": [
                {"text": "the launch is on Friday"},
                {"text": "hello from the server"},
                {"text": "chatting through the server"}
            ]}
        }})
        .to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    for args in [
        &["house", "create", "acme"][..],
        &["house", "add", "acme", "--human", "ada"],
    ] {
        let out = troupe(&home, args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let made = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args([
            "house",
            "add",
            "acme",
            "--bot",
            "assistant",
            "--listen",
            "all",
        ])
        .env_remove("TROUPE_HOME")
        .env("TROUPE_MODEL", &model)
        .output()
        .unwrap();
    assert!(made.status.success(), "{}", text(&made.stderr));
    let out = troupe(
        &home,
        &["thread", "create", "acme", "general", "--with", "assistant"],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));

    let (mut server, url) = serve(&home, &model);
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    // Its record says where it is and holds no credential: the CLI talks
    // over the owner's socket, troupe's user only.
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(home.path().join("serve.json")).unwrap())
            .unwrap();
    let mut keys: Vec<_> = record.as_object().unwrap().keys().cloned().collect();
    keys.sort();
    assert_eq!(keys, ["pid", "socket", "url"], "{record}");
    let socket = home.path().join("serve.sock");
    assert_eq!(record["socket"], socket.display().to_string());
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);

    // A post through the server, the bot's answer printed from its stream.
    let out = troupe(
        &home,
        &[
            "thread",
            "post",
            "acme",
            "general",
            "when is the launch?",
            "--as",
            "ada",
        ],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("through the server"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("[assistant] the launch is on Friday"),
        "{}",
        text(&out.stdout)
    );

    // The live tree of the server.
    let out = troupe(&home, &["ps"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(text(&out.stdout).contains(&url), "{}", text(&out.stdout));
    assert!(
        text(&out.stdout).contains("threads"),
        "{}",
        text(&out.stdout)
    );

    // A turn, run by the server's node.
    let out = troupe(&home, &["run", "hello again"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("runs there"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout).trim(), "hello from the server");
    // A chat: each line a turn on the server, in one conversation.
    let mut chat = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .arg("chat")
        .env_remove("TROUPE_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write as _;
        let mut stdin = chat.stdin.take().unwrap();
        writeln!(stdin, "how are you?").unwrap();
    }
    let out = chat.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("chatting through the server"),
        "{}",
        text(&out.stdout)
    );
    let out = troupe(&home, &["run", "--model", &model, "hello"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--model"),
        "{}",
        text(&out.stderr)
    );

    // The house's rules, read and changed through the server.
    let out = troupe(&home, &["house", "rules", "acme", "--max-turns", "5"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        "max_turns_per_round = 5\nmax_chain = 3\ncontext_messages = 30\n"
    );
    let out = troupe(&home, &["house", "rules", "acme", "--context", "0"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--context must be at least 1"),
        "{}",
        text(&out.stderr)
    );

    // A command with no route in the API, which would write the home
    // itself, is refused, naming the server.
    let out = troupe(&home, &["proposals", "reject", "1"]);
    assert!(!out.status.success());
    assert!(text(&out.stderr).contains("serve"), "{}", text(&out.stderr));

    // SIGTERM: a clean stop, and the record of the server is gone.
    let killed = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = server.wait().unwrap();
    assert!(status.success(), "{status:?}");
    assert!(!home.path().join("serve.json").exists());
    assert!(!home.path().join("serve.sock").exists());
    // And the CLI works on the home directly again.
    let out = troupe(&home, &["house", "create", "beta"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
}
