//! `ask_user`: asks the user 1 to 5 questions and waits for the answer.
//!
//! Each question has up to 4 choices, the recommended one first; the screen
//! adds "Other". The result says how the wait ended: submitted, cancelled,
//! timed out or undelivered. It is not how dangerous actions are approved:
//! that is the gate's job.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use troupe_macros::tool;
use troupe_runtime::agents::Agents;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

/// One question.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Question {
    /// The question.
    pub question: String,
    /// Up to 4 choices, the recommended one first ("Other" is added).
    #[serde(default)]
    pub choices: Vec<String>,
    /// Whether several choices may be picked.
    #[serde(default)]
    pub multi_select: bool,
}

/// Arguments of `ask_user`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Params {
    /// 1 to 5 questions.
    pub questions: Vec<Question>,
}

/// Checks the questions; returns them with "Other" added to choice lists.
pub fn check(mut params: Params) -> Result<Vec<Question>, ToolResult> {
    let n = params.questions.len();
    if !(1..=5).contains(&n) {
        return Err(ToolResult::error(format!("ask 1 to 5 questions, not {n}.")));
    }
    for (i, q) in params.questions.iter_mut().enumerate() {
        if q.question.trim().is_empty() {
            return Err(ToolResult::error(format!("question {} is empty.", i + 1)));
        }
        if q.choices.len() > 4 {
            return Err(ToolResult::error(format!(
                "question {} has {} choices; give at most 4 (\"Other\" is added).",
                i + 1,
                q.choices.len()
            )));
        }
        if !q.choices.is_empty() && !q.choices.iter().any(|c| c.eq_ignore_ascii_case("other")) {
            q.choices.push("Other".into());
        }
    }
    Ok(params.questions)
}

/// Ask the user 1 to 5 questions and wait for the answers. Each question may offer up to 4
/// choices, the recommended one first ("Other" is added). The result says whether the user
/// answered, cancelled, did not answer in time, or could not be reached. Not for approving
/// dangerous actions: the gate asks for those itself.
#[tool]
pub async fn ask_user(p: Params, ctx: &ToolContext) -> Result<ToolResult, ToolResult> {
    let questions = serde_json::to_value(check(p)?).unwrap_or_default();
    Ok(Agents::of(ctx)?.ask_user(ctx, questions).await)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn run(v: serde_json::Value) -> Result<Vec<Question>, ToolResult> {
        check(serde_json::from_value(v).unwrap())
    }

    #[test]
    fn questions_are_counted_and_other_is_added() {
        assert_eq!(
            run(json!({"questions": []})).unwrap_err().text,
            "ask 1 to 5 questions, not 0."
        );
        let six: Vec<_> = (0..6).map(|_| json!({"question": "q"})).collect();
        assert_eq!(
            run(json!({"questions": six})).unwrap_err().text,
            "ask 1 to 5 questions, not 6."
        );
        let five =
            run(json!({"questions": [{"question": "q", "choices": ["a", "b", "c", "d", "e"]}]}));
        assert!(five.unwrap_err().text.contains("give at most 4"));
        let ok =
            run(json!({"questions": [{"question": "Which?", "choices": ["a", "b"]}]})).unwrap();
        assert_eq!(ok[0].choices, vec!["a", "b", "Other"]);
    }
}
