//! **A killed process leaves work behind.** `troupe run`, the real binary,
//! has started a background command, is waiting on a foreground command
//! that left a child of its own running, holds an MCP server that
//! started a helper of its own, and has its browser running (a
//! `browser_exec` call opened it, where a browser is installed). It is
//! killed with SIGKILL, so none of its clean-up code runs. Every one of
//! those processes is gone afterwards: nothing troupe started is orphaned. (The same for a command alone, at
//! the tool's level: `troupe-tools`' `a_command_and_its_children_die_when_troupe_is_sigkilled`
//! and its sandboxed twin; an executor's harness:
//! `executors::troupe_killed_mid_instance_reports_it_interrupted_once_and_never_runs_it_again`.)
//!
//! And `troupe serve`, the real binary, with a house thread's environment
//! running a bot's command, one of whose children left its session to
//! outlive it: killed with SIGKILL, the environment's sandbox and every
//! process in it are gone.

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::time::Instant;

use serde_json::json;

use crate::suite::cli::write_script;
use crate::suite::support::{TestHome, WAIT};

/// The processes whose command line holds `marker` as one argument.
fn processes_with(marker: &str) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let zombie = stat.rsplit(") ").next().unwrap_or("").starts_with('Z');
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            (!zombie && args.contains(&marker.as_bytes()))
                .then(|| (pid, String::from_utf8_lossy(&cmdline).replace('\0', " ")))
        })
        .collect()
}

#[test]
fn sigkill_of_troupe_leaves_no_command_or_mcp_server_running() {
    let home = TestHome::new();
    let work = tempfile::tempdir().unwrap();
    // Unique to this test run: durations nobody else sleeps for.
    let n = std::process::id() % 1000;
    let background = format!("971.{n}");
    let foreground = format!("972.{n}");
    let server_helper = format!("973.{n}");
    let server_mark = format!("scenario-mcp-{n}");
    let fixture = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/fixture.mjs");
    std::fs::write(
        home.path().join("mcp.json"),
        json!({"mcpServers": {"fx": {
            "command": "sh",
            "args": ["-c", format!(
                "sleep {server_helper} & exec node '{}' {server_mark}",
                fixture.display()
            )],
            "alwaysLoad": true
        }}})
        .to_string(),
    )
    .unwrap();
    let fifo = work.path().join("ready.fifo");
    let made = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    // The browser's processes all name its profile, in the home.
    let browser_mark = format!("{}/browser/", home.path().display());
    let with_browser = troupe::tools::browser::chrome::find(None).is_ok()
        || std::env::var_os("TROUPE_TEST_REQUIRE_BROWSER").is_some();
    let mut turns = vec![json!({"tool_calls": [{"name": "run_command", "arguments": {
        "command": format!("sleep {background}"), "background": true}}]})];
    if with_browser {
        turns.push(json!({"tool_calls": [{"name": "tool_search", "arguments": {
            "query": "browser_exec"}}]}));
        turns.push(
            json!({"tool_calls": [{"name": "browser_exec", "arguments": {
            "code": "# open the browser\nprint(page_info()['url'])", "mode": "headless"}}]}),
        );
    }
    turns.push(json!({"tool_calls": [{"name": "run_command", "arguments": {
        "command": format!("sleep {foreground} & echo go > ready.fifo; wait")}}]}));
    turns.push(json!({"text": "never reached"}));
    let model = write_script(&home, "turns.json", json!(turns));
    let mut troupe = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["run", "--auto", "--model", &model, "start the work"])
        .current_dir(work.path())
        .env_remove("TROUPE_HOME")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();

    // The foreground command says it runs (its child started first).
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = fifo.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        let read = std::fs::File::open(&reader).and_then(|mut f| f.read_to_string(&mut line));
        let _ = tx.send(read.map(|_| line));
    });
    let said = rx.recv_timeout(WAIT);
    if !matches!(said, Ok(Ok(ref line)) if line.trim() == "go") {
        let _ = troupe.kill();
        let out = troupe.wait_with_output().unwrap();
        panic!(
            "the command never said it runs ({said:?}): {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let markers = [
        background.as_str(),
        foreground.as_str(),
        server_helper.as_str(),
        server_mark.as_str(),
    ];
    let browser = || {
        if with_browser {
            processes_naming(&browser_mark)
        } else {
            Vec::new()
        }
    };
    // A child forked a moment ago may not have become `sleep` yet.
    let deadline = Instant::now() + WAIT;
    let missing = |markers: &[&str]| -> Vec<String> {
        markers
            .iter()
            .filter(|m| processes_with(m).is_empty())
            .map(|m| m.to_string())
            .collect()
    };
    while !missing(&markers).is_empty() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    assert_eq!(
        missing(&markers),
        Vec::<String>::new(),
        "not running before the kill"
    );
    assert!(
        !with_browser || !browser().is_empty(),
        "the browser is not running before the kill"
    );

    troupe.kill().unwrap();
    troupe.wait().unwrap();
    let deadline = Instant::now() + WAIT;
    let still = || -> Vec<(u32, String)> {
        let mut left: Vec<(u32, String)> = markers.iter().flat_map(|m| processes_with(m)).collect();
        left.extend(browser());
        left
    };
    let mut left = still();
    while !left.is_empty() && Instant::now() < deadline {
        std::thread::yield_now();
        left = still();
    }
    for (pid, _) in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert_eq!(left, vec![], "left running after troupe was killed");
}

/// The processes, zombies aside, whose command line holds `text`
/// anywhere.
fn processes_naming(text: &str) -> Vec<(u32, String)> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            let zombie = stat.rsplit(") ").next().unwrap_or("").starts_with('Z');
            let line = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            (!zombie && line.contains(text)).then_some((pid, line))
        })
        .collect()
}

#[test]
fn sigkill_of_troupe_serve_leaves_no_environment_running() {
    if troupe::runtime::sandbox::Sandbox::detect_or_skip(
        "sigkill_of_troupe_serve_leaves_no_environment_running",
    )
    .is_none()
    {
        return;
    }
    let home = TestHome::new();
    let n = std::process::id() % 1000;
    let escaped = format!("974.{n}");
    let waited = format!("975.{n}");
    let script = home.path().join("bots.json");
    let turns = json!({"bots": {"assistant": {"turns": [
        {"tool_calls": [{"name": "run_command", "arguments": {
            "cmd": format!("setsid sleep {escaped} >/dev/null 2>&1 < /dev/null & sleep {waited}")}}]},
        {"text": "never reached"}
    ]}}});
    std::fs::write(&script, turns.to_string()).unwrap();
    let model = format!("script:{}", script.display());
    let troupe = |args: &[&str]| {
        let out = Command::new(env!("CARGO_BIN_EXE_troupe"))
            .arg("--home")
            .arg(home.path())
            .args(args)
            .env_remove("TROUPE_HOME")
            .env("TROUPE_MODEL", &model)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    troupe(&["house", "create", "acme"]);
    troupe(&["house", "add", "acme", "--human", "ada"]);
    troupe(&[
        "house",
        "add",
        "acme",
        "--bot",
        "assistant",
        "--listen",
        "all",
    ]);
    troupe(&["thread", "create", "acme", "lab"]);
    troupe(&["env", "create", "acme", "--thread", "lab"]);

    let mut serve = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .env_remove("TROUPE_HOME")
        .env("TROUPE_MODEL", &model)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(serve.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("serve says where it listens").unwrap();
        if line.contains(" at ") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    troupe(&[
        "thread",
        "post",
        "acme",
        "lab",
        "@assistant go",
        "--as",
        "ada",
        "--no-wait",
    ]);

    // The command and its escaped child run, in the environment's sandbox.
    let root = home.path().display().to_string();
    let deadline = Instant::now() + WAIT;
    let running = || {
        !processes_with(&escaped).is_empty()
            && !processes_with(&waited).is_empty()
            && processes_naming(&root)
                .iter()
                .any(|(_, l)| l.contains("bwrap"))
    };
    while !running() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    if !running() {
        let _ = serve.kill();
        panic!(
            "the bot's command never ran in its environment: {} {} {:?}",
            processes_with(&escaped).len(),
            processes_with(&waited).len(),
            processes_naming(&root)
        );
    }

    serve.kill().unwrap();
    serve.wait().unwrap();
    let left = || {
        let mut left = processes_with(&escaped);
        left.extend(processes_with(&waited));
        left.extend(processes_naming(&root));
        left
    };
    let deadline = Instant::now() + WAIT;
    while !left().is_empty() && Instant::now() < deadline {
        std::thread::yield_now();
    }
    let left = left();
    for (pid, _) in &left {
        let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
    }
    assert_eq!(left, vec![], "left running after troupe serve was killed");
}
