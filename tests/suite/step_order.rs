//! A step's calls run in the order the model made them: a read-only call
//! placed after a writing call sees what it wrote (issue: a `list_files`
//! after a `delete_file` listed the deleted file).

use std::sync::Arc;

use serde_json::json;
use troupe::runtime::model::{ScriptedCall, ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::runtime::protocol::Message;
use troupe::runtime::store::house_files::NewFile;
use troupe::BotSpec;

use super::support::{ask, TestHome, WAIT};

/// One step calling each of `calls` in order.
fn step(calls: &[(&str, serde_json::Value)]) -> Turn {
    Turn {
        tool_calls: calls
            .iter()
            .map(|(name, arguments)| ScriptedCall {
                name: (*name).into(),
                arguments: arguments.clone(),
                id: None,
            })
            .collect(),
        ..Turn::default()
    }
}

/// The tool results the model was given, by tool name, in order.
fn results(model: &ScriptedProvider, tool: &str) -> Vec<String> {
    model
        .requests()
        .last()
        .unwrap()
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } if name == tool => Some(result.text.clone()),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn in_a_house_a_listing_after_a_delete_in_one_step_does_not_list_the_deleted_file() {
    let home = TestHome::new();
    let model = Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        vec![(
            "scribe".to_string(),
            vec![
                step(&[
                    ("list_files", json!({})),
                    (
                        "delete_file",
                        json!({"files": [{"path": "old.md", "version": 1}], "message": "stale"}),
                    ),
                    ("list_files", json!({})),
                ]),
                Turn::text("tidied"),
            ],
        )],
    ));
    let runtime = home.builder(model.clone()).build().await.unwrap();
    runtime
        .spawn_bot(BotSpec::new("scribe", "scribe", "Keeps the files."))
        .await
        .unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    acme.add_human("ada", None).await.unwrap();
    acme.add_bot("scribe", ListenMode::All).await.unwrap();
    acme.write_files(
        "ada",
        "two notes",
        vec![
            NewFile::text("old.md", "stale"),
            NewFile::text("keep.md", "fresh"),
        ],
    )
    .await
    .unwrap();
    let general = acme
        .create_thread(
            Some("general"),
            &[],
            "ada",
            &["ada".into(), "scribe".into()],
        )
        .await
        .unwrap();
    let answers = general.post_and_wait("ada", "tidy up", WAIT).await.unwrap();
    assert_eq!(answers.last().unwrap().text, "tidied");
    let scribe = model.bot("scribe").unwrap();
    let listings = results(&scribe, "list_files");
    assert_eq!(listings.len(), 2, "{listings:?}");
    assert!(listings[0].contains("old.md"), "before: {}", listings[0]);
    assert!(!listings[1].contains("old.md"), "after: {}", listings[1]);
    assert!(listings[1].contains("keep.md"), "after: {}", listings[1]);
    runtime.shutdown().await;
}

#[tokio::test]
async fn locally_a_read_after_a_write_in_one_step_reads_what_was_written() {
    let home = TestHome::new();
    let work = tempfile::tempdir().unwrap();
    let model = Arc::new(ScriptedProvider::new(vec![
        step(&[
            (
                "write_file",
                json!({"path": "plan.md", "content": "ship on Friday"}),
            ),
            ("read_file", json!({"path": "plan.md"})),
        ]),
        Turn::text("done"),
    ]));
    let runtime = home
        .builder(model.clone())
        .cwd(work.path())
        .set("trust.mode", "auto")
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let report = ask(&bot, "write the plan and check it").await;
    assert_eq!(report.text, "done");
    let read = results(&model, "read_file");
    assert_eq!(read.len(), 1);
    assert!(read[0].contains("ship on Friday"), "{}", read[0]);
    runtime.shutdown().await;
}
