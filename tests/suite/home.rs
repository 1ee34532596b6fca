//! A home's ownership and integrity: one writing process at a time, listing
//! beside it, a crash that frees the home, a damaged or missing database
//! refused, a home cut short completed.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::json;
use troupe::runtime::model::Turn;
use troupe::runtime::protocol::Message;
use troupe::runtime::store::conversations;

use super::cli::{text, troupe, write_script};
use super::support::{script, Gate, TestHome, WAIT};

/// `troupe ARGS` on the home at `home` (from a thread that does not own
/// the `TestHome`).
fn troupe_in(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home)
        .args(args)
        .current_dir(home)
        .env_remove("TROUPE_HOME")
        .output()
        .unwrap()
}

/// `troupe run` with a one-answer script.
fn run_once(home: &TestHome, answer: &str) -> Output {
    let model = write_script(home, "answer.json", json!([{ "text": answer }]));
    troupe(home, &["run", "--model", &model, "hi"])
}

#[test]
fn a_second_writer_is_refused_naming_the_owner_until_a_sigkill_frees_the_home() {
    let home = TestHome::new();
    // `serve` checks every bot's model as it starts: a script needs no key.
    let model = write_script(&home, "idle.json", json!([]));
    let mut serve = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env("TROUPE_MODEL", model)
        .env("TROUPE_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) for the line `serve` prints once it owns the home.
    let stderr = serve.stderr.take().unwrap();
    let (ready_tx, ready) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("troupe serving") {
                let _ = ready_tx.send(());
            }
        }
    });
    ready.recv_timeout(WAIT).expect("`troupe serve` started");

    // (`run`, `chat`, `thread post` and `ps` would go through the server's
    // API: tests/suite/serve_cli.rs.)
    // (The `house`, `thread`, `files`, `token` and `bots` changes go through
    // it too: tests/suite/serve_writes.rs; `proposals approve|reject` has
    // no route.)
    let refused = troupe(&home, &["proposals", "reject", "1"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = text(&refused.stderr);
    let owner = format!("is in use by pid {} (`troupe --home", serve.id());
    assert!(err.contains(&owner), "{err}");
    assert!(
        err.contains(" serve --listen 127.0.0.1:0`) since "),
        "{err}"
    );
    assert!(err.contains("stop it, or use --home DIR"), "{err}");
    // Listing runs beside the owner.
    let listed = troupe(&home, &["conversations"]);
    assert!(listed.status.success(), "{}", text(&listed.stderr));

    // SIGKILL: no clean end is recorded, and the kernel frees the lock.
    serve.kill().unwrap();
    serve.wait().unwrap();
    let model = write_script(&home, "after.json", json!([{ "text": "mine now" }]));
    let after = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["run", "--model", &model, "hi"])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env("TROUPE_LOG", "troupe_runtime::home=info")
        .output()
        .unwrap();
    assert!(after.status.success(), "{}", text(&after.stderr));
    assert_eq!(text(&after.stdout), "mine now\n");
    assert!(
        text(&after.stderr).contains("checking the database after an unclean end"),
        "{}",
        text(&after.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listing_commands_never_take_over_the_turn_another_process_is_running() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let model = script(vec![
        Turn::tool_call("hold", json!({})),
        Turn::text("finished by its owner"),
    ]);
    let runtime = home
        .builder(Arc::clone(&model))
        .tool(hold.clone())
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let turn = bot.send("hold on").await.unwrap();
    tokio::time::timeout(WAIT, hold.entered.notified())
        .await
        .unwrap();
    // Mid-turn, with the turn open in the store, every listing command runs
    // from another process, and a writing one is refused.
    let id = bot.conversation().to_string();
    let path = home.path().to_path_buf();
    let outputs = tokio::task::spawn_blocking(move || {
        let listings: Vec<Vec<&str>> = vec![
            vec!["conversations"],
            vec!["show", &id],
            vec!["search", "hold"],
            vec!["bots"],
            vec!["usage"],
            vec!["routines"],
            vec!["proposals"],
        ];
        let listed: Vec<_> = listings
            .iter()
            .map(|args| (args.join(" "), troupe_in(&path, args)))
            .collect();
        let run = troupe_in(&path, &["run", "hi"]);
        (listed, run)
    })
    .await
    .unwrap();
    for (command, out) in &outputs.0 {
        assert!(out.status.success(), "{command}: {}", text(&out.stderr));
    }
    assert!(text(&outputs.0[0].1.stdout).contains(&bot.conversation().to_string()));
    assert!(text(&outputs.0[1].1.stdout).contains("hold on"));
    let refused = text(&outputs.1.stderr);
    assert!(
        refused.contains(&format!("is in use by pid {}", std::process::id())),
        "{refused}"
    );
    // The turn is still this process's: the call gets one result, the answer
    // is the owner's, and nothing called the model from outside.
    assert_eq!(*hold.calls.lock(), 1);
    hold.release.notify_one();
    let report = tokio::time::timeout(WAIT, turn.result())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(report.text, "finished by its owner");
    assert_eq!(model.calls(), 2);
    let conversation = bot.conversation();
    let history = runtime
        .node()
        .store()
        .read(move |c| conversations::load_messages(c, conversation))
        .await
        .unwrap();
    let results = history
        .iter()
        .filter(|m| matches!(m.message, Message::Tool { .. }))
        .count();
    assert_eq!(results, 1);
    runtime.shutdown().await;
    // Released at shutdown: another writer may own the home now.
    assert!(run_once(&home, "after").status.success());
}

#[test]
fn random_bytes_written_into_the_database_are_refused_at_the_next_start() {
    let home = TestHome::new();
    assert!(run_once(&home, "first").status.success());
    let db = home.path().join("troupe.db");
    // Every page in the file itself, none shadowed by the log (the writer
    // checkpoints so in the background).
    troupe::runtime::rusqlite::Connection::open(&db)
        .unwrap()
        .execute_batch("PRAGMA wal_checkpoint(TRUNCATE)")
        .unwrap();
    let mut bytes = std::fs::read(&db).unwrap();
    let middle = bytes.len() / 2;
    let mut x: u32 = 0x9e37_79b9;
    for b in &mut bytes[middle - 8 * 1024..middle + 8 * 1024] {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        *b = x.to_le_bytes()[0];
    }
    std::fs::write(&db, &bytes).unwrap();

    // (`run`, `chat`, `thread post` and `ps` would go through the server's
    // API: tests/suite/serve_cli.rs.)
    let refused = troupe(&home, &["house", "create", "never"]);
    assert_eq!(refused.status.code(), Some(1));
    let err = text(&refused.stderr);
    assert!(err.contains("is damaged (PRAGMA quick_check: "), "{err}");
    assert!(err.contains("Run `troupe doctor`"), "{err}");
    assert_eq!(std::fs::read(&db).unwrap(), bytes, "nothing was written");

    let doctor = troupe(&home, &["doctor"]);
    assert_eq!(doctor.status.code(), Some(1));
    let report = text(&doctor.stdout);
    assert!(report.contains("problem(s)"), "{report}");
    assert!(
        report.contains(".recover | sqlite3 recovered.db"),
        "{report}"
    );
    // Still refused: the doctor looked, it did not vouch for the file.
    assert_eq!(run_once(&home, "never").status.code(), Some(1));
}

#[test]
fn doctor_finds_a_whole_database_whole_and_copies_it() {
    let home = TestHome::new();
    assert!(run_once(&home, "first").status.success());
    let copy = home.path().join("copy.db");
    let doctor = troupe(&home, &["doctor", "--recover", copy.to_str().unwrap()]);
    let report = text(&doctor.stdout);
    assert!(doctor.status.success(), "{report}{}", text(&doctor.stderr));
    assert!(report.contains("integrity:     ok"), "{report}");
    assert!(report.contains("full text messages_fts: ok"), "{report}");
    assert!(report.contains("the database is whole"), "{report}");
    assert!(copy.is_file());
}

#[test]
fn an_empty_database_beside_its_wal_is_refused_instead_of_started_afresh() {
    let home = TestHome::new();
    assert!(run_once(&home, "first").status.success());
    let db = home.path().join("troupe.db");
    let wal = home.path().join("troupe.db-wal");
    std::fs::write(&wal, std::fs::read(&db).unwrap()).unwrap();
    std::fs::write(&db, b"").unwrap();
    for args in [&["run", "hi"][..], &["conversations"][..]] {
        let out = troupe(&home, args);
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = text(&out.stderr);
        assert!(
            err.contains("is missing or empty, but this home had a database"),
            "{err}"
        );
        assert!(err.contains("troupe.db-wal"), "{err}");
    }
    assert_eq!(std::fs::metadata(&db).unwrap().len(), 0, "not replaced");
}

#[test]
fn a_home_cut_short_while_being_created_is_completed_at_the_next_start() {
    let home = TestHome::new();
    let config = "[agent]\nmax_steps_per_turn = 7\n";
    std::fs::write(home.path().join("config.toml"), config).unwrap();
    assert!(run_once(&home, "done").status.success());
    assert_eq!(
        std::fs::read_to_string(home.path().join("config.toml")).unwrap(),
        config
    );
    assert_eq!(
        std::fs::read_to_string(home.path().join("models.toml")).unwrap(),
        troupe::runtime::config::MODELS_EXAMPLE
    );
    assert!(home.path().join("memory").is_dir());
}
