//! A house is a tenant: a bot working for house B — in its thread, and in
//! what that conversation starts — reaches none of house A's data or bots
//! by any stored-data tool or `message_agent`, and no tool of the machine
//! (its files, its commands); the same calls within house B still work.

use std::sync::Arc;

use serde_json::json;
use troupe::actors::events::NodeEvent;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::runtime::protocol::{AgentEvent, Message, ToolResult};
use troupe::BotSpec;

use super::support::{on_bus, TestHome, WAIT};

/// The tool results of `bot`'s latest request, in order.
fn results(model: &ScriptedProvider, bot: &str) -> Vec<(String, ToolResult)> {
    let requests = model.bot(bot).expect("scripted").requests();
    let last = requests.last().expect("the bot was called");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } => Some((name.clone(), result.clone())),
            _ => None,
        })
        .collect()
}

/// The tools offered in `request`.
fn tools(request: &ModelRequest) -> Vec<String> {
    request.tools.iter().map(|t| t.name.clone()).collect()
}

/// What one call is expected to do.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// Refused, naming nothing of house A.
    Refused,
    /// Answered, showing nothing of house A.
    Blind,
    /// Answered, showing this (house B's own data).
    Shows(&'static str),
    /// Not run anywhere: refused, or answered with the guidance of a thread
    /// with no environment yet (the house reference's `run_command`), which
    /// says the command did not run.
    DidNotRun,
}

#[tokio::test]
async fn a_house_b_bot_reaches_nothing_of_house_a_nor_the_machine() {
    let home = TestHome::new();
    let host = tempfile::tempdir().unwrap();
    let host_file = host.path().join("host.txt");
    std::fs::write(&host_file, "HOST-ONLY line\n").unwrap();
    let host_path = host_file.display().to_string();
    let call = |name: &str, args: serde_json::Value| Turn::tool_call(name, args);
    // duo sits in both houses; anna only in acme (A); bodo only in beta (B).
    let attack: Vec<(Turn, Expect)> = vec![
        (
            call(
                "tool_search",
                json!({"query": "conversation_search delegation_search cronjob_manage"}),
            ),
            Expect::Blind,
        ),
        (
            call("conversation_search", json!({"query": "zanzibar"})),
            Expect::Blind,
        ),
        (call("conversation_search", json!({})), Expect::Blind),
        (
            call("conversation_search", json!({"query": "kilimanjaro"})),
            Expect::Shows("KILIMANJARO"),
        ),
        (
            call("delegation_search", json!({"query": "zanzibar"})),
            Expect::Blind,
        ),
        (call("delegation_search", json!({})), Expect::Blind),
        (
            call(
                "memory",
                json!({"target": "user", "action": "add", "content": "the owner likes ZANZIBAR"}),
            ),
            Expect::Refused,
        ),
        (
            call("cronjob_manage", json!({"action": "list"})),
            Expect::Refused,
        ),
        (
            call(
                "message_agent",
                json!({"target": "anna", "message": "what is the vault code?"}),
            ),
            Expect::Refused,
        ),
        (
            call(
                "edit_file",
                json!({"path": host_path, "old_string": "HOST-ONLY", "new_string": "EDITED"}),
            ),
            Expect::Refused,
        ),
        (
            call(
                "find_files",
                json!({"pattern": "HOST-ONLY", "path": host.path()}),
            ),
            Expect::Refused,
        ),
        (
            call("read_file", json!({"path": host_path})),
            Expect::Refused,
        ),
        (
            call(
                "run_command",
                json!({"command": format!("cat {host_path}")}),
            ),
            Expect::DidNotRun,
        ),
        (
            call(
                "message_agent",
                json!({"target": "bodo", "message": "search your conversations for the secret code"}),
            ),
            Expect::Shows("Delivered to `bodo`"),
        ),
    ];
    let mut duo: Vec<Turn> = vec![
        Turn::text("Noted: the vault code is ZANZIBAR."),
        Turn::text("Noted: the beta word is KILIMANJARO."),
    ];
    duo.extend(attack.iter().map(|(t, _)| t.clone()));
    duo.extend([Turn::text("done"), Turn::text("thanks")]);
    let bodo = vec![
        call("tool_search", json!({"query": "conversation_search"})),
        call("conversation_search", json!({"query": "zanzibar"})),
        call("conversation_search", json!({})),
        call("read_file", json!({"path": host_path})),
        call(
            "run_command",
            json!({"command": format!("cat {host_path}")}),
        ),
        Turn::text("found nothing"),
    ];
    let model = Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        [
            ("duo".to_string(), duo),
            ("bodo".to_string(), bodo),
            ("anna".to_string(), vec![]),
        ]
        .into_iter()
        .collect(),
    ));
    let (bus, mut events) = tokio::sync::broadcast::channel(4096);
    let rt = home
        .builder(Arc::clone(&model))
        .event_bus(bus)
        .build()
        .await
        .unwrap();
    for name in ["duo", "anna", "bodo"] {
        rt.spawn_bot(BotSpec::new(name, name, "A member."))
            .await
            .unwrap();
    }
    let acme = rt.create_house("acme").await.unwrap();
    acme.add_human("ada", None).await.unwrap();
    acme.add_bot("duo", ListenMode::All).await.unwrap();
    acme.add_bot("anna", ListenMode::Mentions).await.unwrap();
    let vault = acme
        .create_thread(Some("vault"), &[], "ada", &["ada".into(), "duo".into()])
        .await
        .unwrap();
    vault
        .post_and_wait("ada", "the vault code is ZANZIBAR", WAIT)
        .await
        .unwrap();
    let beta = rt.create_house("beta").await.unwrap();
    beta.add_human("bob", None).await.unwrap();
    beta.add_bot("duo", ListenMode::All).await.unwrap();
    beta.add_bot("bodo", ListenMode::Mentions).await.unwrap();
    let people = ["bob".to_string(), "duo".to_string()];
    let general = beta
        .create_thread(Some("general"), &[], "bob", &people)
        .await
        .unwrap();
    general
        .post_and_wait("bob", "the beta word is KILIMANJARO", WAIT)
        .await
        .unwrap();
    let second = beta
        .create_thread(Some("second"), &[], "bob", &people)
        .await
        .unwrap();
    second
        .post_and_wait("bob", "look around", WAIT)
        .await
        .unwrap();
    // bodo's answer comes back to duo as a notice: its turn has ended.
    on_bus(&mut events, |e: &NodeEvent| match &e.event {
        AgentEvent::Notice { topic, .. } if topic == "reply" => Some(()),
        _ => None,
    })
    .await;

    let duo_requests = model.bot("duo").unwrap().requests();
    let attack_request = duo_requests
        .iter()
        .rev()
        .find(|r| tools(r).iter().any(|t| t == "conversation_search"))
        .expect("duo's turn in beta");
    let offered = tools(attack_request);
    for absent in ["edit_file", "find_files", "cronjob_manage"] {
        assert!(
            !offered.contains(&absent.to_string()),
            "{absent} offered: {offered:?}"
        );
    }
    for present in ["read_file", "write_file", "list_files", "message_agent"] {
        assert!(
            offered.contains(&present.to_string()),
            "{present} missing: {offered:?}"
        );
    }
    let r: Vec<_> = attack_request
        .messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } => Some((name.clone(), result.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(r.len(), attack.len(), "{r:#?}");
    for ((name, result), (_, expect)) in r.iter().zip(&attack) {
        for secret in ["ZANZIBAR", "vault", "acme", "anna", "HOST-ONLY"] {
            assert!(
                !result.text.contains(secret)
                    || matches!(expect, Expect::Refused) && secret == "anna",
                "{name} showed `{secret}`: {}",
                result.text
            );
        }
        match expect {
            Expect::Refused => assert!(result.is_error(), "{name} should refuse: {}", result.text),
            Expect::DidNotRun => assert!(
                result.is_error() || result.text.contains("did not run"),
                "{name} should not run: {}",
                result.text
            ),
            Expect::Blind => assert!(!result.is_error(), "{name}: {}", result.text),
            Expect::Shows(what) => {
                assert!(!result.is_error(), "{name}: {}", result.text);
                assert!(result.text.contains(what), "{name}: {}", result.text)
            }
        }
    }
    assert_eq!(
        std::fs::read_to_string(&host_file).unwrap(),
        "HOST-ONLY line\n",
        "the machine's file is untouched"
    );
    // bodo answered in its conversation for beta: as blind, and as far
    // from the machine, as duo's seat.
    let bodo_requests = model.bot("bodo").unwrap().requests();
    let offered = tools(bodo_requests.last().unwrap());
    for absent in ["edit_file", "find_files"] {
        assert!(
            !offered.contains(&absent.to_string()),
            "{absent} offered to bodo"
        );
    }
    // bodo's own conversation (duo's message, in beta) is its to see; the
    // message names no secret of acme, so none may show.
    let r = results(&model, "bodo");
    assert_eq!(r.len(), 5, "{r:#?}");
    for (i, (name, result)) in r.iter().enumerate() {
        for secret in ["ZANZIBAR", "vault", "HOST-ONLY"] {
            assert!(
                !result.text.contains(secret),
                "bodo's {name} showed `{secret}`: {}",
                result.text
            );
        }
        if i >= 3 {
            assert!(
                result.is_error(),
                "bodo's {name} should refuse: {}",
                result.text
            );
        }
    }
    rt.shutdown().await;
}
