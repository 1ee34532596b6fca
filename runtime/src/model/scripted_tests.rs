use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;
use crate::model::testkit::collect;
use crate::protocol::ToolResult;

fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        model: "script".into(),
        system: "".into(),
        messages: messages.into(),
        tools: Vec::new().into(),
        max_tokens: None,
        temperature: None,
    }
}

fn write_script(dir: &tempfile::TempDir, text: &str) -> std::path::PathBuf {
    let path = dir.path().join("script.json");
    std::fs::write(&path, text).unwrap();
    path
}

#[tokio::test]
async fn a_script_file_serves_turns_in_order_and_records_requests() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(
        &dir,
        r#"{"turns": [
            {"text": "Looking.", "tool_calls": [{"name": "lookup_weather", "arguments": {"city": "Paris"}}], "expect": "weather", "usage": {"input_tokens": 10, "output_tokens": 3}},
            {"text": "It is sunny.", "expect": "sunny"}
        ]}"#,
    );
    let script = ScriptedProvider::load(&path).unwrap();
    let first = request(vec![Message::user("What's the weather?")]);
    let (events, error) = collect(script.stream(first.clone()).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta {
                text: "Looking.".into()
            },
            ModelEvent::ToolCallStarted {
                index: 0,
                id: "call_1_0".into(),
                name: "lookup_weather".into()
            },
            ModelEvent::ToolCallDelta {
                index: 0,
                fragment: r#"{"city":"Paris"}"#.into()
            },
            ModelEvent::ToolCallCompleted {
                index: 0,
                call: ToolCall {
                    id: "call_1_0".into(),
                    name: "lookup_weather".into(),
                    arguments: json!({"city": "Paris"})
                }
            },
            ModelEvent::Usage {
                usage: Usage {
                    input_tokens: 10,
                    output_tokens: 3,
                    ..Usage::default()
                }
            },
            ModelEvent::Stop {
                reason: StopReason::ToolUse
            },
        ]
    );
    let mut second_messages = first.messages.to_vec();
    second_messages.push(Message::Tool {
        call_id: "call_1_0".into(),
        name: "lookup_weather".into(),
        result: ToolResult::ok("sunny, 21 C"),
    });
    let second = request(second_messages);
    let (events, _) = collect(script.stream(second.clone()).await.unwrap()).await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta {
                text: "It is sunny.".into()
            },
            ModelEvent::Stop {
                reason: StopReason::EndTurn
            },
        ]
    );
    assert_eq!(script.requests(), vec![first, second]);

    let error = script
        .stream(request(vec![Message::user("more?")]))
        .await
        .err();
    assert_eq!(
        error,
        Some(ModelError::Script(format!(
            "script {} has 2 turns; call 3 has none",
            path.display()
        )))
    );
}

#[tokio::test]
async fn an_expectation_that_fails_names_the_turn_and_what_came() {
    let script = ScriptedProvider::new(vec![
        Turn::text("ok"),
        Turn::text("never").expecting("approved"),
    ]);
    let _first = script
        .stream(request(vec![Message::user("hi")]))
        .await
        .unwrap();
    let error = script
        .stream(request(vec![
            Message::user("hi"),
            Message::assistant("ok"),
            Message::user("denied"),
        ]))
        .await
        .err();
    assert_eq!(
        error,
        Some(ModelError::Script(
            "script <inline> turn 2 expected the latest user or tool message to contain \"approved\", got \"denied\"".into()
        ))
    );
}

#[test]
fn a_bad_script_file_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(&dir, r#"{"turns": [{"txt": "typo"}]}"#);
    let error = ScriptedProvider::load(&path).unwrap_err().to_string();
    assert!(
        error.contains("script.json") && error.contains("txt"),
        "{error}"
    );
}

#[tokio::test]
async fn the_weather_function_calls_the_tool_then_answers() {
    let weather = ScriptedProvider::weather();
    let (events, _) = collect(
        weather
            .stream(request(vec![Message::user("weather?")]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Stop {
            reason: StopReason::ToolUse
        })
    );
    let (events, _) = collect(
        weather
            .stream(request(vec![
                Message::user("weather?"),
                Message::Tool {
                    call_id: "call_1_0".into(),
                    name: "lookup_weather".into(),
                    result: ToolResult::ok("sunny"),
                },
            ]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        events,
        vec![
            ModelEvent::TextDelta {
                text: "The weather in Paris: sunny".into()
            },
            ModelEvent::Stop {
                reason: StopReason::EndTurn
            }
        ]
    );
    assert_eq!(weather.calls(), 2);
    assert_eq!(
        weather.requests(),
        vec![],
        "the benchmark provider keeps nothing"
    );
}

#[tokio::test]
async fn a_long_scripted_chat_keeps_only_the_latest_requests_not_every_one() {
    // 5,000 turns once kept every request: 2.75 GB. Now the record is bounded.
    let script = ScriptedProvider::from_fn(|_| Turn::text("ok"));
    let calls = KEPT_REQUESTS * 3;
    for n in 0..calls {
        let sent = request(vec![Message::user(format!("message {n}"))]);
        let (_, error) = collect(script.stream(sent).await.unwrap()).await;
        assert_eq!(error, None);
    }
    let kept = script.requests();
    assert_eq!(script.calls(), calls);
    assert_eq!(kept.len(), KEPT_REQUESTS);
    assert_eq!(
        kept.first().map(|r| r.messages[0].text().to_string()),
        Some(format!("message {}", calls - KEPT_REQUESTS))
    );
    assert_eq!(
        kept.last().map(|r| r.messages[0].text().to_string()),
        Some(format!("message {}", calls - 1))
    );
}

#[tokio::test]
async fn a_provider_not_recording_keeps_no_request() {
    let script = ScriptedProvider::from_fn(|_| Turn::text("ok")).recording(false);
    let (_, error) = collect(
        script
            .stream(request(vec![Message::user("hi")]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(error, None);
    assert_eq!(script.requests(), Vec::new());
}

#[tokio::test]
async fn an_executors_section_answers_each_harness_from_its_own_turns_in_order() {
    let script = ScriptedProvider::parse(
        r#"{"turns": [{"text": "troupe's own"}],
            "executors": {"pi": {"turns": [
                {"tool_calls": [{"name": "write", "arguments": {"path": "hello.txt", "content": "hi"}, "id": "c1"}]},
                {"text": "Wrote it.", "expect": "Successfully wrote"}
            ]}}}"#,
        "s.json",
    )
    .unwrap();
    let pi = script.for_executor("pi").unwrap();
    assert!(script.for_executor("codex").is_none());
    let (events, error) = collect(
        pi.stream(request(vec![Message::user("write hello")]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(error, None);
    assert_eq!(
        events.last(),
        Some(&ModelEvent::Stop {
            reason: StopReason::ToolUse
        })
    );
    assert!(events.contains(&ModelEvent::ToolCallStarted {
        index: 0,
        id: "c1".into(),
        name: "write".into()
    }));

    // Troupe's own calls do not take the executor's turns, nor it theirs.
    let (events, _) = collect(
        script
            .stream(request(vec![Message::user("hi")]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(
        events[0],
        ModelEvent::TextDelta {
            text: "troupe's own".into()
        }
    );

    // The same executor reached again (another call of the process) goes on.
    let again = script.for_executor("pi").unwrap();
    let (events, error) = collect(
        again
            .stream(request(vec![
                Message::user("write hello"),
                Message::Tool {
                    call_id: "c1".into(),
                    name: "write".into(),
                    result: ToolResult::ok("Successfully wrote 2 bytes to hello.txt"),
                },
            ]))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(error, None);
    assert_eq!(
        events[0],
        ModelEvent::TextDelta {
            text: "Wrote it.".into()
        }
    );
    assert_eq!(script.executor("pi").unwrap().calls(), 2);
    let error = again
        .stream(request(vec![Message::user("more")]))
        .await
        .err();
    assert_eq!(
        error,
        Some(ModelError::Script(
            "script s.json (executor `pi`) has 2 turns; call 3 has none".into()
        ))
    );
}

#[tokio::test]
async fn a_script_of_executors_only_refuses_troupes_own_calls_by_name() {
    let script = ScriptedProvider::parse(
        r#"{"executors": {"pi": {"turns": [{"text": "done"}]}}}"#,
        "s.json",
    )
    .unwrap();
    let error = script
        .stream(request(vec![Message::user("hi")]))
        .await
        .err();
    assert_eq!(
        error,
        Some(ModelError::Script(
            "script s.json scripts only the executors `pi`; this call came from troupe's own \
             agent. Add `turns` or `bots`."
                .into()
        ))
    );
    let pi = script.for_executor("pi").unwrap();
    let (events, error) =
        collect(pi.stream(request(vec![Message::user("go")])).await.unwrap()).await;
    assert_eq!(error, None);
    assert_eq!(
        events[0],
        ModelEvent::TextDelta {
            text: "done".into()
        }
    );
}

#[test]
fn a_per_bot_script_keeps_its_executors_when_its_progress_is_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(
        &dir,
        r#"{"bots": {"alice": {"turns": [{"text": "hi"}]}},
            "executors": {"pi": {"turns": [{"text": "done"}]}}}"#,
    );
    let script = ScriptedProvider::load(&path)
        .unwrap()
        .recording(false)
        .keeping_progress(&dir.path().join("progress"), &path);
    assert!(script.for_agent("alice").is_some());
    assert!(script.for_executor("pi").is_some());
    assert!(script.for_executor("alice").is_none());
    assert!(script.for_agent("pi").is_none());
}

#[test]
fn a_script_without_any_section_names_all_three() {
    let error = ScriptedProvider::parse("{}", "s.json")
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("\"executors\"")
            && error.contains("none of `turns`, `bots` and `executors`"),
        "{error}"
    );
    let error = ScriptedProvider::parse(r#"{"executors": {"pi": {"turn": []}}}"#, "s.json")
        .unwrap_err()
        .to_string();
    assert!(error.contains("turn"), "{error}");
}
