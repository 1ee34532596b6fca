//! The guardian: a second opinion on risky commands.
//!
//! A command that matches a dangerous pattern is neither blocked nor waved
//! through: the [`Guardian`] reads it, with the rules it tripped, and
//! approves, denies or asks the user. [`ModelGuardian`] asks a model with a
//! short prompt and reads a one-word or JSON answer. The gate, not the
//! guardian, makes this fail closed: an error, a timeout or an answer that is
//! neither of the three becomes a question for the user (a refusal when
//! nobody is there), and a guardian that keeps refusing stops being asked.

use std::path::PathBuf;
use std::sync::Arc;

use futures::StreamExt;
use serde::{Deserialize, Serialize};

use crate::model::{ModelEvent, ModelRequest, Provider};
use crate::protocol::Message;

/// A rule a command tripped, as the guardian sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Flag {
    /// The rule's id.
    pub rule: String,
    /// Why the rule exists.
    pub reason: String,
    /// The part of the command it caught.
    pub snippet: String,
}

/// What the guardian is asked to judge.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct GuardianRequest {
    /// The tool called.
    pub tool: String,
    /// The whole command.
    pub command: String,
    /// Where it runs.
    pub cwd: PathBuf,
    /// The dangerous rules it tripped.
    pub flagged: Vec<Flag>,
    /// Whether nobody is there to answer a question.
    pub unattended: bool,
}

/// The guardian's judgement.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum GuardianAnswer {
    /// Safe enough to run.
    Approve,
    /// Should not run.
    Deny {
        /// Why.
        reason: String,
    },
    /// The user should decide.
    Ask {
        /// Why.
        reason: String,
    },
}

/// Judges risky commands.
#[async_trait::async_trait]
pub trait Guardian: Send + Sync {
    /// Judges one request; an `Err` (any failure) counts as "cannot tell".
    async fn judge(&self, request: &GuardianRequest) -> Result<GuardianAnswer, String>;
}

impl std::fmt::Debug for dyn Guardian {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Guardian")
    }
}

/// A guardian that asks a model.
pub struct ModelGuardian {
    provider: Arc<dyn Provider>,
    model: String,
}

impl std::fmt::Debug for ModelGuardian {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelGuardian")
            .field("provider", &self.provider.name())
            .field("model", &self.model)
            .finish()
    }
}

const SYSTEM: &str = "You review shell commands an AI agent wants to run on a user's machine. \
Each was flagged by a safety rule. Decide: approve (clearly part of normal work and its effects are \
limited and intended), deny (destructive, exfiltrating, or out of proportion), or ask (the user \
should decide). Answer with JSON only: {\"decision\":\"approve|deny|ask\",\"reason\":\"one short sentence\"}.";

/// The most answer text read before it is called malformed.
const MAX_ANSWER: usize = 4_000;

impl ModelGuardian {
    /// A guardian asking `model` through `provider`.
    pub fn new(provider: Arc<dyn Provider>, model: impl Into<String>) -> Self {
        Self {
            provider,
            model: model.into(),
        }
    }

    /// The request sent to the model.
    pub fn prompt(&self, request: &GuardianRequest) -> ModelRequest {
        let mut text = format!(
            "Tool: {}\nWorking folder: {}\nCommand:\n{}\n\nFlagged:\n",
            request.tool,
            request.cwd.display(),
            request.command
        );
        for flag in &request.flagged {
            text.push_str(&format!(
                "- {} (`{}`): it {}\n",
                flag.rule, flag.snippet, flag.reason
            ));
        }
        ModelRequest {
            model: self.model.clone(),
            system: SYSTEM.into(),
            messages: vec![Message::user(text)].into(),
            tools: Vec::new().into(),
            max_tokens: Some(200),
            temperature: Some(0.0),
        }
    }
}

/// Reads a guardian's answer: JSON (`{"decision": "deny", "reason": "…"}`,
/// fences allowed) or a line starting with `approve`, `deny` or `ask`.
pub fn parse_answer(text: &str) -> Result<GuardianAnswer, String> {
    let text = text.trim();
    let unfenced = text
        .strip_prefix("```json")
        .or_else(|| text.strip_prefix("```"))
        .and_then(|t| t.strip_suffix("```"))
        .map_or(text, str::trim);
    let (decision, reason) = if unfenced.starts_with('{') {
        #[derive(Deserialize)]
        struct Json {
            decision: String,
            #[serde(default)]
            reason: String,
        }
        let json: Json = serde_json::from_str(unfenced)
            .map_err(|e| format!("its answer is not the JSON asked for ({e})"))?;
        (json.decision.to_ascii_lowercase(), json.reason)
    } else {
        let mut parts = unfenced.splitn(2, |c: char| c.is_whitespace() || c == ':' || c == '.');
        let word = parts.next().unwrap_or_default().to_ascii_lowercase();
        let rest = parts.next().unwrap_or_default().trim().to_string();
        (word, rest)
    };
    let reason = if reason.is_empty() {
        "no reason given".to_string()
    } else {
        reason
    };
    match decision.trim_matches(|c: char| !c.is_ascii_alphabetic()) {
        "approve" | "allow" => Ok(GuardianAnswer::Approve),
        "deny" | "block" => Ok(GuardianAnswer::Deny { reason }),
        "ask" => Ok(GuardianAnswer::Ask { reason }),
        _ => Err(format!(
            "its answer `{}` is none of approve, deny or ask",
            super::rules::shorten(unfenced, 80)
        )),
    }
}

#[async_trait::async_trait]
impl Guardian for ModelGuardian {
    async fn judge(&self, request: &GuardianRequest) -> Result<GuardianAnswer, String> {
        let mut stream = self
            .provider
            .stream(self.prompt(request))
            .await
            .map_err(|e| e.to_string())?;
        let mut text = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(|e| e.to_string())? {
                ModelEvent::TextDelta { text: t } => {
                    text.push_str(&t);
                    if text.len() > MAX_ANSWER {
                        return Err("its answer is far longer than one decision".into());
                    }
                }
                ModelEvent::ToolCallStarted { .. }
                | ModelEvent::ToolCallDelta { .. }
                | ModelEvent::ToolCallCompleted { .. } => {
                    return Err("it called a tool instead of answering".into())
                }
                ModelEvent::Usage { .. } => {}
                ModelEvent::Stop { .. } => break,
            }
        }
        parse_answer(&text)
    }
}
