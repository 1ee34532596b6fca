//! The log as the Rust ecosystem expects it, through the real binary:
//! `RUST_LOG` over `TROUPE_LOG` over `[log]` (file, `--set`, variables),
//! no colours in a pipe, JSON lines with ids as fields, and `[log] file`.

use std::process::{Output, Stdio};

use serde_json::json;

use super::cli::{command, house_with_assistant, text, write_script};
use super::support::TestHome;

fn troupe(home: &TestHome, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = command(home, args);
    command
        .env_remove("RUST_LOG")
        .env_remove("TROUPE_LOG")
        .env_remove("NO_COLOR")
        .stdin(Stdio::null());
    for (k, v) in env {
        command.env(k, v);
    }
    command.output().expect("the troupe binary runs")
}

#[test]
fn rust_log_and_the_log_section_each_change_what_is_logged() {
    let home = TestHome::new();
    // No background review: whether one is still running when the process
    // ends (and says so) is a race, not what is tested here.
    std::fs::write(
        home.path().join("config.toml"),
        "[review]\nenabled = false\n",
    )
    .unwrap();
    let model = write_script(&home, "hi.json", json!([{"text": "hello"}]));
    let run = ["run", "--model", model.as_str(), "hi"];
    let debug_lines = |out: &Output| {
        assert!(out.status.success(), "{}", text(&out.stderr));
        assert_eq!(text(&out.stdout), "hello\n");
        // A pipe gets no colours, whatever the level.
        assert!(!text(&out.stderr).contains('\x1b'), "{}", text(&out.stderr));
        text(&out.stderr)
            .lines()
            .filter(|l| l.contains(" DEBUG "))
            .count()
    };
    // The default (`warn`, as documented) says nothing on a good run.
    let quiet = troupe(&home, &run, &[]);
    assert_eq!(text(&quiet.stderr), "", "the default logs nothing here");
    assert!(debug_lines(&troupe(&home, &run, &[("RUST_LOG", "debug")])) > 0);
    let mut with_set = vec!["--set", "log.filter=debug"];
    with_set.extend(run);
    assert!(debug_lines(&troupe(&home, &with_set, &[])) > 0);
    assert!(debug_lines(&troupe(&home, &run, &[("TROUPE_LOG", "debug")])) > 0);
    std::fs::write(
        home.path().join("config.toml"),
        "[review]\nenabled = false\n[log]\nfilter = \"debug\"\n",
    )
    .unwrap();
    assert!(debug_lines(&troupe(&home, &run, &[])) > 0);
    // RUST_LOG wins over TROUPE_LOG and [log].
    let out = troupe(
        &home,
        &run,
        &[("RUST_LOG", "error"), ("TROUPE_LOG", "debug")],
    );
    assert_eq!(debug_lines(&out), 0, "{}", text(&out.stderr));
    // A bad RUST_LOG is said in one line, status 2.
    let out = troupe(&home, &run, &[("RUST_LOG", "troupe=loud")]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out.stderr).starts_with("error: RUST_LOG: log filter `troupe=loud`"));
}

#[test]
fn json_logs_go_to_the_log_file_with_ids_as_fields() {
    let home = TestHome::new();
    house_with_assistant(&home);
    std::fs::write(
        home.path().join("config.toml"),
        "[log]\nfilter = \"info\"\njson = true\nfile = \"troupe.log\"\n",
    )
    .unwrap();
    // The bot's script has no turns: its turn fails, which is logged.
    let model = write_script(&home, "none.json", json!([]));
    let out = troupe(
        &home,
        &[
            "thread",
            "post",
            "acme",
            "general",
            "hi @assistant",
            "--as",
            "ada",
        ],
        &[("TROUPE_MODEL", &model)],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    // stderr has the one line for the person; the log went to the file.
    assert_eq!(
        text(&out.stderr).lines().count(),
        1,
        "{}",
        text(&out.stderr)
    );
    let log = std::fs::read_to_string(home.path().join("troupe.log")).unwrap();
    let failed = log
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("each line is JSON"))
        .find(|v| v["message"] == "a bot's turn in a thread did not finish")
        .unwrap_or_else(|| panic!("the failed turn is logged:\n{log}"));
    assert_eq!(failed["level"], "INFO");
    assert_eq!(failed["bot"], "assistant");
    assert!(
        failed["thread"]
            .as_str()
            .unwrap_or_default()
            .starts_with("thr"),
        "{failed}"
    );
    assert!(!log.contains('\x1b'));
}
