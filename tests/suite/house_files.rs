//! House files as users reach them: a bot's tools in a thread round, the
//! Rust API and `troupe files`, with two houses that see nothing of each
//! other's files.

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::runtime::store::house_files::NewFile;
use troupe::BotSpec;

use super::cli::{text, troupe};
use super::support::{TestHome, WAIT};

#[tokio::test]
async fn a_bots_write_is_one_version_and_another_house_sees_none_of_it() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        [(
            "scribe".to_string(),
            vec![
                Turn::tool_call(
                    "write_file",
                    json!({"files": [{"path": "plans/a.md", "content": "alpha"}, {"path": "plans/b.md", "content": "beta"}], "message": "two plans"}),
                ),
                Turn::text("wrote them"),
            ],
        )]
        .into_iter()
        .collect(),
    ));
    let runtime = home.builder(model).build().await.unwrap();
    runtime
        .spawn_bot(BotSpec::new("scribe", "scribe", "Keeps the files."))
        .await
        .unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    let beta = runtime.create_house("beta").await.unwrap();
    acme.add_human("ada", None).await.unwrap();
    acme.add_bot("scribe", ListenMode::All).await.unwrap();
    let general = acme
        .create_thread(
            Some("general"),
            &[],
            "ada",
            &["ada".into(), "scribe".into()],
        )
        .await
        .unwrap();
    let answers = general
        .post_and_wait("ada", "write the plans", WAIT)
        .await
        .unwrap();
    assert_eq!(answers.last().unwrap().text, "wrote them");
    let log = acme.file_log(None, 10).await.unwrap();
    assert_eq!(log.len(), 1, "{log:?}");
    assert_eq!(
        (
            log[0].author.as_str(),
            log[0].message.as_str(),
            log[0].changes.len()
        ),
        ("scribe", "two plans", 2)
    );
    assert_eq!(
        acme.read_file("plans/b.md", None)
            .await
            .unwrap()
            .text
            .as_deref(),
        Some("beta")
    );
    // Beta sees nothing of it through the API.
    assert!(beta.files(None).await.unwrap().is_empty());
    assert!(beta.read_file("plans/a.md", None).await.is_err());
    assert!(beta.search_files("alpha", 5).await.unwrap().is_empty());
    assert!(beta
        .delete_files("ada", "", vec![("plans/a.md".into(), 1)])
        .await
        .is_err());
    // A stale delete through the API is refused whole.
    acme.write_files("ada", "", vec![NewFile::text("plans/a.md", "alpha 2")])
        .await
        .unwrap();
    let err = acme
        .delete_files(
            "ada",
            "",
            vec![("plans/a.md".into(), 1), ("plans/b.md".into(), 1)],
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("nothing was deleted"), "{err}");
    assert_eq!(acme.files(None).await.unwrap().len(), 2);
    runtime.shutdown().await;
}

#[test]
fn files_are_put_listed_got_logged_and_removed_from_the_command_line() {
    let home = TestHome::new();
    let run = |args: &[&str]| {
        let out = troupe(&home, args);
        (out.status.success(), text(&out.stdout), text(&out.stderr))
    };
    let ok = |args: &[&str]| {
        let (success, stdout, stderr) = run(args);
        assert!(success, "troupe {args:?} failed: {stderr}");
        stdout
    };
    ok(&["house", "create", "acme"]);
    ok(&["house", "create", "beta"]);
    let local = home.path().join("brief.md");
    std::fs::write(&local, "The code word is PERIWINKLE.\n").unwrap();
    let local = local.to_str().unwrap();
    let put = ok(&[
        "files",
        "put",
        "acme",
        "brief.md",
        local,
        "notes/copy.md",
        local,
        "-m",
        "first",
    ]);
    assert!(put.contains("brief.md → version 1"), "{put}");
    let ls = ok(&["files", "ls", "acme"]);
    assert!(
        ls.contains("brief.md") && ls.contains("notes/copy.md") && ls.contains("indexed"),
        "{ls}"
    );
    assert_eq!(
        ok(&["files", "get", "acme", "brief.md"]),
        "The code word is PERIWINKLE.\n"
    );
    assert!(ok(&["files", "search", "acme", "periwinkle"]).contains("[1] "));
    assert!(ok(&["files", "log", "acme"]).contains("first"));
    // Beta sees none of it.
    assert_eq!(ok(&["files", "ls", "beta"]), "");
    let (success, _, stderr) = run(&["files", "get", "beta", "brief.md"]);
    assert!(
        !success && stderr.contains("no file `brief.md`"),
        "{stderr}"
    );
    assert_eq!(ok(&["files", "search", "beta", "periwinkle"]), "");
    // A bad path is refused and nothing is written.
    let (success, _, stderr) = run(&["files", "put", "acme", "../escape.md", local]);
    assert!(
        !success && stderr.contains("not a valid file path"),
        "{stderr}"
    );
    // rm with a stale version is refused; with the seen one it removes.
    let (success, _, stderr) = run(&["files", "rm", "acme", "brief.md", "--version", "7"]);
    assert!(
        !success && stderr.contains("changed since version 7"),
        "{stderr}"
    );
    ok(&["files", "rm", "acme", "brief.md", "--version", "1"]);
    let ls = ok(&["files", "ls", "acme"]);
    assert!(
        !ls.contains("brief.md") && ls.contains("notes/copy.md"),
        "{ls}"
    );
    // Without --version: a file of one version goes; one of several asks
    // for the version (no terminal here to say yes on).
    ok(&["files", "put", "acme", "one.md", local]);
    ok(&["files", "rm", "acme", "one.md"]);
    ok(&[
        "files",
        "put",
        "acme",
        "notes/copy.md",
        local,
        "-m",
        "again",
    ]);
    let (success, _, stderr) = run(&["files", "rm", "acme", "notes/copy.md"]);
    assert!(
        !success && stderr.contains("give the one you saw with --version (the newest is"),
        "{stderr}"
    );
    let ls = ok(&["files", "ls", "acme"]);
    assert!(
        !ls.contains("one.md") && ls.contains("notes/copy.md"),
        "{ls}"
    );
}
