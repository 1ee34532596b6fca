//! The CLI's conventions through the real binary: `config show` naming
//! where each value came from, `doctor` checking the models (a loopback
//! endpoint that refuses the key) and the programs, `proposals --json`,
//! and an `Examples:` section in the help of the main commands.

use std::io::{Read as _, Write as _};
use std::process::Output;

use super::cli::{command, text, troupe, without_model};
use super::support::TestHome;

fn troupe_with(home: &TestHome, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = command(home, args);
    without_model(&mut command).env("NO_COLOR", "1");
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the troupe binary runs")
}

#[test]
fn config_show_gives_each_value_and_the_layer_it_came_from() {
    let home = TestHome::new();
    std::fs::write(
        home.path().join("config.toml"),
        "[agent]\nmax_steps_per_turn = 30\n[log]\njson = false\n",
    )
    .unwrap();
    let out = troupe_with(
        &home,
        &["--set", "agent.max_steps_per_turn=7", "config", "show"],
        &[("TROUPE_MODEL", "script:turns.json")],
    );
    assert!(out.status.success(), "{}", text(&out.stderr));
    let shown = text(&out.stdout);
    for line in [
        "[agent]",
        "model = \"script:turns.json\"",
        "# env TROUPE_MODEL",
        "# --set",
        "json = false",
        "# config.toml",
        "# default",
    ] {
        assert!(shown.contains(line), "`{line}` missing:\n{shown}");
    }
    let out = troupe_with(&home, &["config", "show", "--json"], &[]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json["agent.max_steps_per_turn"],
        serde_json::json!({"value": 30, "source": "config.toml"})
    );
    assert_eq!(json["agent.model"]["source"], "default");
}

#[test]
fn doctor_checks_each_model_and_says_when_its_endpoint_refuses_the_key() {
    let home = TestHome::new();
    // An endpoint on loopback that answers every request with 401.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { break };
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(
                b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
            );
        }
    });
    std::fs::write(
        home.path().join("models.toml"),
        format!(
            "[models.local]\napi = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\nkey_env = \"DOCTOR_TEST_KEY\"\nmodel = \"m\"\n"
        ),
    )
    .unwrap();
    let out = troupe_with(&home, &["doctor"], &[("DOCTOR_TEST_KEY", "wrong")]);
    let shown = text(&out.stdout);
    // The database decides the status: there is none yet, which is whole.
    assert!(out.status.success(), "{shown}\n{}", text(&out.stderr));
    assert!(shown.contains("model openai:gpt-4o-mini"), "{shown}");
    assert!(shown.contains("OPENAI_API_KEY"), "{shown}");
    assert!(shown.contains("model local"), "{shown}");
    assert!(
        shown.contains("key from DOCTOR_TEST_KEY") && shown.contains("refuses the key (HTTP 401)"),
        "{shown}"
    );
    assert!(shown.contains("node:") && shown.contains("npm:"), "{shown}");

    let out = troupe_with(
        &home,
        &["doctor", "--offline"],
        &[("DOCTOR_TEST_KEY", "wrong")],
    );
    let shown = text(&out.stdout);
    assert!(shown.contains("not probed (--offline)"), "{shown}");
    assert!(!shown.contains("refuses the key"), "{shown}");
}

#[test]
fn proposals_list_as_json_and_refuse_json_with_a_decision() {
    let home = TestHome::new();
    let out = troupe(&home, &["proposals", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    let out = troupe(&home, &["proposals", "--json", "approve", "1"]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("--json lists the proposals"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn the_main_commands_show_examples_in_their_help() {
    let home = TestHome::new();
    for command in [
        "init",
        "demo",
        "run",
        "chat",
        "bots",
        "conversations",
        "show",
        "search",
        "usage",
        "routines",
        "proposals",
        "tools",
        "serve",
        "ps",
        "doctor",
        "house",
        "thread",
        "files",
        "token",
        "env",
        "completions",
    ] {
        let out = troupe(&home, &[command, "--help"]);
        assert!(out.status.success(), "{command}: {}", text(&out.stderr));
        assert!(
            text(&out.stdout).contains("Examples:\n  troupe "),
            "`troupe {command} --help` has no examples:\n{}",
            text(&out.stdout)
        );
    }
}
