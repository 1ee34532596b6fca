//! The terminal prompts on memory: what the user reads, what each typed
//! answer becomes, and the text shown when nobody can answer.

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use troupe_actors::gate::parse_approval;
use troupe_runtime::protocol::{AgentEvent, ToolCall};
use troupe_runtime::trust::ApprovalAnswer;

use super::*;

fn rm_build() -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: "run_command".into(),
        arguments: json!({"command": "rm -rf ./build"}),
    }
}

/// Runs the approval prompt on `typed`; returns the answer and the screen.
async fn approve(typed: &str) -> (serde_json::Value, String) {
    let mut lines = BufReader::new(typed.as_bytes()).lines();
    let mut screen = Vec::new();
    let answer = approval(&mut lines, &mut screen, "", &rm_build(), "it deletes")
        .await
        .unwrap();
    (answer, String::from_utf8(screen).unwrap())
}

#[tokio::test]
async fn every_choice_the_prompt_offers_is_an_answer_the_gate_reads() {
    let cases = [
        ("o\n", ApprovalAnswer::Once),
        ("once\n", ApprovalAnswer::Once),
        ("S\n", ApprovalAnswer::Session),
        ("a\n", ApprovalAnswer::Always),
        ("d\n", ApprovalAnswer::Deny),
        ("\n", ApprovalAnswer::Deny),
        // The end of input denies rather than waiting.
        ("", ApprovalAnswer::Deny),
    ];
    for (typed, expected) in cases {
        let (answer, _) = approve(typed).await;
        assert_eq!(parse_approval(&answer), Some(expected), "typed {typed:?}");
    }
}

#[tokio::test]
async fn the_approval_prompt_shows_the_call_and_why_and_asks_again_after_a_non_answer() {
    let (answer, screen) = approve("maybe\no\n").await;
    assert_eq!(answer, json!("once"));
    assert_eq!(
        screen,
        "approval needed: run_command {\"command\":\"rm -rf ./build\"}\n\
         why: it deletes\n\
         [o]nce, [s]ession, [a]lways, [d]eny? \
         `maybe` is not an answer: type o, s, a or d (an empty line denies).\n\
         [o]nce, [s]ession, [a]lways, [d]eny? "
    );
}

#[tokio::test]
async fn ask_user_questions_take_a_choice_number_or_free_text() {
    let asked = json!([
        {"question": "Which city?", "choices": ["Paris", "Oslo", "Other"]},
        {"question": "Why?"}
    ]);
    let mut lines = BufReader::new(&b"2\nbecause\n"[..]).lines();
    let mut screen = Vec::new();
    let answers = questions(&mut lines, &mut screen, "  ", &asked)
        .await
        .unwrap();
    assert_eq!(
        answers,
        Some(json!({"answers": [
            {"question": "Which city?", "answer": "Oslo"},
            {"question": "Why?", "answer": "because"}
        ]}))
    );
    assert_eq!(
        String::from_utf8(screen).unwrap(),
        "  ? Which city?\n    1. Paris\n    2. Oslo\n    3. Other\n  answer:   ? Why?\n  answer: "
    );
}

#[tokio::test]
async fn questions_are_cancelled_when_input_ends() {
    let mut lines = BufReader::new(&b""[..]).lines();
    let answers = questions(
        &mut lines,
        &mut Vec::new(),
        "",
        &json!([{"question": "Sure?"}]),
    )
    .await
    .unwrap();
    assert_eq!(answers, None);
}

#[test]
fn an_unanswerable_approval_says_what_was_asked_and_every_way_to_allow_it() {
    let text = unanswerable(&AgentEvent::ApprovalRequested {
        request_id: "ask_1".into(),
        call: rm_build(),
        reason: "it deletes".into(),
    })
    .unwrap();
    for part in [
        "stdin is not a terminal",
        "call: run_command {\"command\":\"rm -rf ./build\"}",
        "why: it deletes",
        "choices: once, session, always, deny",
        "in a terminal",
        "--auto",
        "[trust]\n      allow = [\"rm -rf ./build\"]",
    ] {
        assert!(text.contains(part), "`{part}` missing from:\n{text}");
    }
}

#[test]
fn unanswerable_questions_are_listed_with_their_choices() {
    let text = unanswerable(&AgentEvent::QuestionAsked {
        request_id: "ask_2".into(),
        questions: json!([{"question": "Which city?", "choices": ["Paris", "Other"]}]),
    })
    .unwrap();
    assert!(
        text.contains("? Which city?\n    1. Paris\n    2. Other"),
        "{text}"
    );
    assert!(text.contains("in a terminal"), "{text}");
    assert_eq!(unanswerable(&AgentEvent::Passivated), None);
}
