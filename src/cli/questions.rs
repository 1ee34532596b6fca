//! Questions put to the user at the terminal: the gate's approval requests
//! and `ask_user`'s questions, shared by `troupe chat` and `troupe run`.
//!
//! The prompts are written over any line reader and writer, so the answer
//! logic is tested on memory rather than a real terminal. Where nobody can
//! answer (`troupe run` with stdin not a terminal), [`unanswerable`] says
//! what was asked and how to let it through next time, instead of the turn
//! waiting out the gate's timeout in silence.
//!
//! An answer is read through [`Input`]: plain lines (a pipe, or `troupe
//! run`), or `troupe chat`'s line editor, which draws the prompt itself.

use std::io::Write;

use tokio::io::{AsyncBufRead, Lines};

/// Where the answers are read from.
#[allow(async_fn_in_trait)]
pub trait Input {
    /// Shows `prompt` and reads one line; `None` when input ends (or the
    /// user cancels the question with Ctrl-C at the line editor).
    async fn line(&mut self, prompt: &str, out: &mut impl Write)
        -> std::io::Result<Option<String>>;
}

impl<R: AsyncBufRead + Unpin> Input for Lines<R> {
    async fn line(
        &mut self,
        prompt: &str,
        out: &mut impl Write,
    ) -> std::io::Result<Option<String>> {
        write!(out, "{prompt}")?;
        out.flush()?;
        self.next_line().await
    }
}
use troupe_runtime::protocol::{AgentEvent, ToolCall};

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
pub async fn approval(
    lines: &mut impl Input,
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
        let Some(line) = lines
            .line(&format!("{indent}{APPROVAL_CHOICES}? "), out)
            .await?
        else {
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
pub async fn questions(
    lines: &mut impl Input,
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
        let Some(line) = lines.line(&format!("{indent}answer: "), out).await? else {
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

/// For a question nobody can answer (stdin is not a terminal): what was
/// asked, and how to let it through next time. `None` for other events.
pub fn unanswerable(event: &AgentEvent) -> Option<String> {
    match event {
        AgentEvent::ApprovalRequested { call, reason, .. } => Some(approval_text(call, reason)),
        AgentEvent::QuestionAsked { questions, .. } => Some(questions_text(questions)),
        _ => None,
    }
}

fn approval_text(call: &ToolCall, reason: &str) -> String {
    let mut text = format!(
        "this turn needs your approval, and nobody can give it: stdin is not a terminal. \
         The call did not run, and the turn was stopped.\n  call: {} {}\n  why: {reason}\n  \
         choices: once, session, always, deny\nTo let it run:\n  - run the same command in \
         a terminal and answer the question (`always` remembers the approval in this home).",
        call.name, call.arguments
    );
    if reason.contains("without a sandbox") {
        // The `unsandboxed-home` rule: neither `--auto` nor an allow
        // pattern lifts it; a sandbox does.
        text.push_str(&format!(
            "\n  - or let commands run in the sandbox, where troupe's home is read-only and \
             this is not asked: {}.",
            troupe_runtime::sandbox::INSTALL_HINT
        ));
        return text;
    }
    if let Some(command) = call.arguments.get("command").and_then(|c| c.as_str()) {
        let quoted = serde_json::to_string(command).unwrap_or_default();
        text.push_str(&format!(
            "\n  - or pass `--auto`: risky commands run without asking (commands that act \
             outside the machine or cannot be analysed are still asked).\n  - or allow such \
             commands in config.toml, a glob over the command (`re:` for a regex):\n      \
             [trust]\n      allow = [{quoted}]"
        ));
    }
    text
}

fn questions_text(questions: &serde_json::Value) -> String {
    let mut text = String::from(
        "the model asked you questions (`ask_user`), and nobody can answer them: stdin is not \
         a terminal. The turn was stopped.",
    );
    for q in questions.as_array().into_iter().flatten() {
        text.push_str(&format!(
            "\n  ? {}",
            q["question"].as_str().unwrap_or_default()
        ));
        for (i, choice) in choices(q).iter().enumerate() {
            text.push_str(&format!("\n    {}. {choice}", i + 1));
        }
    }
    text.push_str(
        "\nRun the same command in a terminal to answer them, or give what they ask in the \
         prompt (or leave the tool out with `--tools`).",
    );
    text
}

#[cfg(test)]
#[path = "questions_tests.rs"]
mod tests;
