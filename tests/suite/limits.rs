//! The size limit on a user message (`[limits] max_user_message_bytes`):
//! refused with its size, the limit and the setting, before anything is
//! stored, wherever user text enters.

use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::json;
use troupe::actors::node::NodeError;
use troupe::runtime::model::Turn;
use troupe::RuntimeError;

use super::cli::{text, troupe, write_script};
use super::support::{script, TestHome};

#[test]
fn a_run_over_the_size_limit_is_refused_and_stores_nothing() {
    let home = TestHome::new();
    let model = write_script(&home, "answer.json", json!([{ "text": "never" }]));
    let out = troupe(
        &home,
        &[
            "--set",
            "limits.max_user_message_bytes=16",
            "run",
            "--model",
            &model,
            "seventeen bytes!!",
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    assert!(
        err.contains(
            "the message is 17 bytes, over the limit of 16 bytes ([limits] max_user_message_bytes)"
        ),
        "{err}"
    );
    let listed = text(&troupe(&home, &["conversations"]).stdout);
    assert!(listed.starts_with("no conversations yet"), "{listed}");
}

#[test]
fn a_ten_megabyte_chat_message_is_refused_and_the_chat_goes_on() {
    let home = TestHome::new();
    let model = write_script(&home, "answer.json", json!([{ "text": "small is fine" }]));
    let mut chat = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["chat", "--model", &model])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut input = chat.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let big = "a".repeat(10 * 1024 * 1024);
        input.write_all(big.as_bytes()).unwrap();
        input.write_all(b"\nhello\n/quit\n").unwrap();
    });
    let out = chat.wait_with_output().unwrap();
    writer.join().unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let said = text(&out.stdout);
    assert!(
        said.contains("the message is 10485760 bytes, over the limit of 262144 bytes ([limits] max_user_message_bytes)"),
        "{}",
        &said[..said.len().min(2000)]
    );
    assert!(said.contains("small is fine"), "{said}");
    let listed = text(&troupe(&home, &["conversations"]).stdout);
    assert!(
        listed.contains("2 msgs"),
        "only `hello` and its answer: {listed}"
    );
}

#[tokio::test]
async fn the_rust_api_refuses_a_message_over_the_limit_before_storing_it() {
    let home = TestHome::new();
    let runtime = home
        .builder(script(vec![Turn::text("fine")]))
        .set("limits.max_user_message_bytes", "8")
        .build()
        .await
        .unwrap();
    let bot = runtime.bot("assistant").await.unwrap();
    let err = bot.send("nine bytes").await.unwrap_err();
    let RuntimeError::Node(NodeError::TooLarge(too_large)) = &err else {
        panic!("{err:?}");
    };
    assert_eq!((too_large.size, too_large.limit), (10, 8));
    assert!(matches!(
        bot.steer("nine bytes").await,
        Err(RuntimeError::Node(NodeError::TooLarge(_)))
    ));
    let conversation = bot.conversation();
    let stored = runtime
        .node()
        .store()
        .read(move |c| troupe::runtime::store::conversations::load_messages(c, conversation))
        .await
        .unwrap();
    assert!(stored.is_empty(), "{stored:?}");
    assert_eq!(super::support::ask(&bot, "short").await.text, "fine");
    runtime.shutdown().await;
}
