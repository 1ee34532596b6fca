//! Questions put to the user at the terminal: the gate's approval requests
//! and `ask_user`'s questions, shared by `troupe chat` and `troupe run`.
//!
//! The prompts are written over any line reader and writer, so the answer
//! logic is tested on memory rather than a real terminal.

use std::io::Write;

use tokio::io::{AsyncBufRead, Lines};
use troupe_runtime::protocol::ToolCall;

/// The choices of an approval prompt.
const APPROVAL_CHOICES: &str = "[o]nce, [s]ession, [a]lways, [d]eny";

/// The answer word the gate reads (`troupe_actors::gate::parse_approval`)
/// for what the user typed: a word or its first letter. An empty line
/// denies; anything else is not an answer (the prompt asks again).
pub fn approval_word(typed: &str) -> Option<&'static str> {
    match typed.trim().to_ascii_lowercase().as_str() {
        "o" | "once" | "y" | "yes" => Some("once"),
        "s" | "session" => Some("session"),
        "a" | "always" => Some("always"),
        "" | "d" | "deny" | "n" | "no" => Some("deny"),
        _ => None,
    }
}

/// Asks the user to approve `call`, on `out`, reading the answer from
/// `lines`; returns the answer to give `Node::answer`. The end of input
/// denies.
pub async fn approval<R: AsyncBufRead + Unpin>(
    lines: &mut Lines<R>,
    out: &mut impl Write,
    indent: &str,
    call: &ToolCall,
    reason: &str,
) -> std::io::Result<serde_json::Value> {
    writeln!(
        out,
        "{indent}approval needed: {} {}\n{indent}why: {reason}",
        call.name, call.arguments
    )?;
    loop {
        write!(out, "{indent}{APPROVAL_CHOICES}? ")?;
        out.flush()?;
        let Some(line) = lines.next_line().await? else {
            writeln!(out)?;
            return Ok(serde_json::json!("deny"));
        };
        match approval_word(&line) {
            Some(word) => return Ok(serde_json::json!(word)),
            None => writeln!(
                out,
                "{indent}`{}` is not an answer: type o, s, a or d (an empty line denies).",
                line.trim()
            )?,
        }
    }
}

/// Asks `ask_user`'s questions one by one; a number picks a choice,
/// anything else is the answer itself. `None` when input ends (a cancel).
pub async fn questions<R: AsyncBufRead + Unpin>(
    lines: &mut Lines<R>,
    out: &mut impl Write,
    indent: &str,
    questions: &serde_json::Value,
) -> std::io::Result<Option<serde_json::Value>> {
    let mut answers = Vec::new();
    for q in questions.as_array().into_iter().flatten() {
        writeln!(
            out,
            "{indent}? {}",
            q["question"].as_str().unwrap_or_default()
        )?;
        let choices = choices(q);
        for (i, choice) in choices.iter().enumerate() {
            writeln!(out, "{indent}  {}. {choice}", i + 1)?;
        }
        write!(out, "{indent}answer: ")?;
        out.flush()?;
        let Some(line) = lines.next_line().await? else {
            writeln!(out)?;
            return Ok(None);
        };
        let line = line.trim().to_string();
        let picked = line
            .parse::<usize>()
            .ok()
            .and_then(|n| choices.get(n.wrapping_sub(1)))
            .map(|c| c.to_string())
            .unwrap_or(line);
        answers.push(serde_json::json!({"question": q["question"], "answer": picked}));
    }
    Ok(Some(serde_json::json!({ "answers": answers })))
}

fn choices(question: &serde_json::Value) -> Vec<&str> {
    question["choices"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c.as_str())
        .collect()
}

#[cfg(test)]
#[path = "questions_tests.rs"]
mod tests;
