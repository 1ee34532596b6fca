//! A scripted model for tests, demos and users' own bot tests.
//!
//! A script is a JSON file `{"turns": [...]}`, or, to script each bot of a
//! house on its own, `{"bots": {"alice": {"turns": [...]}, ...}}` (each
//! bot's conversations take that bot's turns in order); each model call is
//! answered by the next turn, as text, tool calls or both, streamed as the
//! same events a real provider yields. A turn may `expect` a substring in
//! the latest user or tool message, so a test fails loudly, naming the
//! turn, when the agent sent something else. A turn may instead be a
//! fault — `{"fail": "panic"}` makes the model call panic, `{"fail":
//! "error"}` makes it fail — so a user's own tests can check that their
//! bots survive a crash. The latest
//! [`KEPT_REQUESTS`] requests are kept for assertions, no more, so a long
//! scripted chat does not grow without bound (a script named in the model
//! settings keeps none). For
//! benchmarks, [`ScriptedProvider::from_fn`] answers from a function of the
//! request with no file and no latency.
//!
//! An outside executor (a coding harness such as `pi`) calls its model
//! through troupe's model relay, so to test one offline its calls must be
//! scripted too, apart from troupe's own: beside `turns` or `bots`, or
//! alone, a script may have `{"executors": {"pi": {"turns": [...]}}}`
//! ([`Provider::for_executor`]). Those turns have the same shape; their
//! tool calls use the harness's tool names (pi's `read`, `bash`, `edit`,
//! `write`), and each executor's turns are served in order across all its
//! calls in the process.

use std::collections::VecDeque;
use std::path::Path;

use parking_lot::Mutex;
use serde::Deserialize;

use super::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider};
use crate::protocol::{Message, StopReason, ToolCall, Usage};

/// One scripted answer.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    /// The text answered, if any.
    #[serde(default)]
    pub text: Option<String>,
    /// The tool calls made, if any.
    #[serde(default)]
    pub tool_calls: Vec<ScriptedCall>,
    /// A substring the latest user or tool message must contain.
    #[serde(default)]
    pub expect: Option<String>,
    /// The usage reported (missing fields are 0); none is reported if unset.
    #[serde(default, deserialize_with = "partial_usage")]
    pub usage: Option<Usage>,
    /// A fault in place of an answer.
    #[serde(default)]
    pub fail: Option<Fault>,
}

/// A fault a scripted turn injects instead of answering.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// The model call panics (the conversation's supervisor restarts it).
    Panic,
    /// The model call returns an error (the turn fails with it).
    Error,
}

impl Turn {
    /// A turn answering with text.
    pub fn text(text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..Self::default()
        }
    }

    /// A turn calling one tool.
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self {
            tool_calls: vec![ScriptedCall {
                name: name.into(),
                arguments,
                id: None,
            }],
            ..Self::default()
        }
    }

    /// This turn, requiring `substring` in the latest user or tool message.
    pub fn expecting(mut self, substring: impl Into<String>) -> Self {
        self.expect = Some(substring.into());
        self
    }

    /// A turn that injects `fault` instead of answering.
    pub fn fault(fault: Fault) -> Self {
        Self {
            fail: Some(fault),
            ..Self::default()
        }
    }

    /// This turn, reporting `usage`.
    pub fn with_usage(mut self, usage: Usage) -> Self {
        self.usage = Some(usage);
        self
    }
}

/// A scripted tool call.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedCall {
    /// The tool's name.
    pub name: String,
    /// Its arguments.
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
    /// The call id (default `call_<call>_<position>`).
    #[serde(default)]
    pub id: Option<String>,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

fn partial_usage<'de, D: serde::Deserializer<'de>>(de: D) -> Result<Option<Usage>, D::Error> {
    #[derive(Deserialize)]
    #[serde(deny_unknown_fields)]
    struct Partial {
        #[serde(default)]
        input_tokens: u64,
        #[serde(default)]
        output_tokens: u64,
        #[serde(default)]
        cache_read_tokens: u64,
        #[serde(default)]
        cache_write_tokens: u64,
    }
    Ok(Option::<Partial>::deserialize(de)?.map(|p| Usage {
        input_tokens: p.input_tokens,
        output_tokens: p.output_tokens,
        cache_read_tokens: p.cache_read_tokens,
        cache_write_tokens: p.cache_write_tokens,
    }))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptFile {
    #[serde(default)]
    turns: Option<Vec<Turn>>,
    #[serde(default)]
    bots: Option<std::collections::BTreeMap<String, OwnScript>>,
    #[serde(default)]
    executors: Option<std::collections::BTreeMap<String, OwnScript>>,
}

/// The turns of one bot or one executor.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnScript {
    turns: Vec<Turn>,
}

type Responder = dyn Fn(&ModelRequest) -> Turn + Send + Sync;

enum Source {
    Turns {
        label: String,
        turns: Vec<Turn>,
    },
    Function(Box<Responder>),
    /// Per-bot scripts: each bot's calls go to its own provider.
    Bots {
        label: String,
        bots: std::collections::BTreeMap<String, std::sync::Arc<ScriptedProvider>>,
    },
}

/// How many of the latest requests a recording provider keeps.
pub const KEPT_REQUESTS: usize = 100;

struct State {
    calls: usize,
    requests: VecDeque<ModelRequest>,
}

/// How far each bot of a per-bot script got, kept in a file so the next
/// process goes on where this one stopped.
struct Progress {
    path: std::path::PathBuf,
    calls: Mutex<std::collections::BTreeMap<String, usize>>,
}

impl Progress {
    fn record(&self, bot: &str, calls: usize) {
        let mut all = self.calls.lock();
        all.insert(bot.to_string(), calls);
        let text = serde_json::to_string(&*all).unwrap_or_default();
        let tmp = self.path.with_extension("tmp");
        let written = self
            .path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| std::fs::write(&tmp, text))
            .and_then(|()| std::fs::rename(&tmp, &self.path));
        if let Err(e) = written {
            tracing::warn!(path = %self.path.display(), error = %e, "the script's progress could not be kept");
        }
    }
}

/// A provider answering from a script or a function.
pub struct ScriptedProvider {
    source: Source,
    record: bool,
    state: Mutex<State>,
    /// For one bot of a per-bot script whose progress is kept: its name and where.
    progress: Option<(String, std::sync::Arc<Progress>)>,
    /// The providers answering outside harnesses' calls, by executor name.
    executors: std::collections::BTreeMap<String, std::sync::Arc<ScriptedProvider>>,
}

impl std::fmt::Debug for ScriptedProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let source = match &self.source {
            Source::Turns { label, turns } => format!("{label} ({} turns)", turns.len()),
            Source::Function(_) => "function".to_string(),
            Source::Bots { label, bots } => format!("{label} ({} bots)", bots.len()),
        };
        f.debug_struct("ScriptedProvider")
            .field("source", &source)
            .field("calls", &self.state.lock().calls)
            .field("executors", &self.executors.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl ScriptedProvider {
    /// A provider serving `turns` in order.
    pub fn new(turns: Vec<Turn>) -> Self {
        Self::with_source(Source::Turns {
            label: "<inline>".to_string(),
            turns,
        })
    }

    /// A provider serving the script at `path` (`{"turns": [...]}`).
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|err| {
            ModelError::Config(format!("cannot read script {}: {err}", path.display()))
        })?;
        Self::parse(&text, &path.display().to_string())
    }

    /// A provider serving the script `text` (`{"turns": [...]}` or
    /// `{"bots": {...}}`, with or without `{"executors": {...}}`, or that
    /// section alone); `label` names it in errors, as the file's path does
    /// for [`ScriptedProvider::load`].
    pub fn parse(text: &str, label: &str) -> Result<Self, ModelError> {
        let shape = |detail: String| {
            ModelError::Config(format!(
                "script {label} is not {{\"turns\": [...]}} or {{\"bots\": {{\"NAME\": {{\"turns\": [...]}}}}}} \
                 (either may have an \"executors\": {{\"NAME\": {{\"turns\": [...]}}}} section beside it, \
                 or that section may stand alone) with turns of text, tool_calls, expect, usage, fail: {detail}"
            ))
        };
        let file: ScriptFile = serde_json::from_str(text).map_err(|err| shape(err.to_string()))?;
        let label = label.to_string();
        let executors = file.executors.map(|executors| {
            executors
                .into_iter()
                .map(|(name, s)| (name, s.turns))
                .collect::<Vec<_>>()
        });
        let provider = match (file.turns, file.bots, &executors) {
            (Some(turns), None, _) => Self::with_source(Source::Turns {
                label: label.clone(),
                turns,
            }),
            (None, Some(bots), _) => Self::per_bot(
                label.clone(),
                bots.into_iter().map(|(name, s)| (name, s.turns)).collect(),
            ),
            (None, None, Some(_)) => Self::with_source(Source::Turns {
                label: label.clone(),
                turns: Vec::new(),
            }),
            (Some(_), Some(_), _) => {
                return Err(shape("it has both `turns` and `bots`; keep one".into()))
            }
            (None, None, None) => {
                return Err(shape(
                    "it has none of `turns`, `bots` and `executors`".into(),
                ))
            }
        };
        Ok(provider.with_executors(&label, executors.unwrap_or_default()))
    }

    /// This provider, answering the model calls of each outside harness
    /// named in `executors` from its own turns, in order (`label` names the
    /// script in errors).
    pub fn with_executors(mut self, label: &str, executors: Vec<(String, Vec<Turn>)>) -> Self {
        for (name, turns) in executors {
            let mut provider = Self::with_source(Source::Turns {
                label: format!("{label} (executor `{name}`)"),
                turns,
            });
            provider.record = self.record;
            self.executors.insert(name, std::sync::Arc::new(provider));
        }
        self
    }

    /// The provider scripted for outside harness `name`, if the script's
    /// `executors` section names it.
    pub fn executor(&self, name: &str) -> Option<std::sync::Arc<ScriptedProvider>> {
        self.executors.get(name).cloned()
    }

    /// A provider answering each bot from its own turns (`label` names the
    /// script in errors).
    pub fn per_bot(label: String, bots: Vec<(String, Vec<Turn>)>) -> Self {
        let bots = bots
            .into_iter()
            .map(|(name, turns)| {
                let provider = Self::with_source(Source::Turns {
                    label: format!("{label} (bot `{name}`)"),
                    turns,
                });
                (name, std::sync::Arc::new(provider))
            })
            .collect();
        Self::with_source(Source::Bots { label, bots })
    }

    /// The provider scripted for bot `name`, if the script names it.
    pub fn bot(&self, name: &str) -> Option<std::sync::Arc<ScriptedProvider>> {
        match &self.source {
            Source::Bots { bots, .. } => bots.get(name).cloned(),
            _ => None,
        }
    }

    /// A provider answering every call with `respond(request)`.
    pub fn from_fn(respond: impl Fn(&ModelRequest) -> Turn + Send + Sync + 'static) -> Self {
        Self::with_source(Source::Function(Box::new(respond)))
    }

    /// The benchmark's weather agent: unless the last message is a tool
    /// result it calls `lookup_weather {"city": "Paris"}`, then it answers
    /// with text.
    pub fn weather() -> Self {
        Self::from_fn(|request| match request.messages.last() {
            Some(Message::Tool { result, .. }) => {
                Turn::text(format!("The weather in Paris: {}", result.text))
            }
            _ => Turn::tool_call("lookup_weather", serde_json::json!({"city": "Paris"})),
        })
        .recording(false)
    }

    /// Whether to keep the latest [`KEPT_REQUESTS`] requests (on by default;
    /// off for benchmarks and wherever nobody reads them).
    pub fn recording(mut self, record: bool) -> Self {
        self.record = record;
        for executor in self.executors.values_mut() {
            if let Some(executor) = std::sync::Arc::get_mut(executor) {
                executor.record = record;
            }
        }
        self
    }

    /// Keeps how far each bot of a per-bot script got in a file under
    /// `dir` (named after the script's path and content: an edited script
    /// starts over), and goes on from what is kept there.
    pub fn keeping_progress(self, dir: &Path, script: &Path) -> Self {
        let Source::Bots { label, bots } = self.source else {
            return self;
        };
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        script.hash(&mut h);
        std::fs::read(script).unwrap_or_default().hash(&mut h);
        let path = dir.join(format!("{:016x}.json", h.finish()));
        let kept: std::collections::BTreeMap<String, usize> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or_default();
        let progress = std::sync::Arc::new(Progress {
            path,
            calls: Mutex::new(kept.clone()),
        });
        let bots = bots
            .into_iter()
            .map(|(name, provider)| {
                let mut provider = std::sync::Arc::try_unwrap(provider).unwrap_or_else(|shared| {
                    let Source::Turns { label, turns } = &shared.source else {
                        unreachable!("a bot's own script is a list of turns")
                    };
                    Self::with_source(Source::Turns {
                        label: label.clone(),
                        turns: turns.clone(),
                    })
                });
                provider.state.get_mut().calls = kept.get(&name).copied().unwrap_or(0);
                provider.record = self.record;
                provider.progress = Some((name.clone(), std::sync::Arc::clone(&progress)));
                (name, std::sync::Arc::new(provider))
            })
            .collect();
        Self {
            source: Source::Bots { label, bots },
            ..self
        }
    }

    fn with_source(source: Source) -> Self {
        Self {
            progress: None,
            executors: std::collections::BTreeMap::new(),
            source,
            record: true,
            state: Mutex::new(State {
                calls: 0,
                requests: VecDeque::new(),
            }),
        }
    }

    /// The requests received, in order: the latest [`KEPT_REQUESTS`].
    pub fn requests(&self) -> Vec<ModelRequest> {
        self.state.lock().requests.iter().cloned().collect()
    }

    /// How many calls were made.
    pub fn calls(&self) -> usize {
        self.state.lock().calls
    }

    /// The turn answering call `number` (from 1) with `request`.
    fn turn(&self, number: usize, request: &ModelRequest) -> Result<Turn, ModelError> {
        let (label, turn) = match &self.source {
            Source::Function(respond) => return Ok(respond(request)),
            Source::Bots { label, bots } => {
                return Err(ModelError::Script(format!(
                    "script {label} scripts only the bots {}; this call came from another agent. \
                     Add its turns under `bots`.",
                    bots.keys()
                        .map(|b| format!("`{b}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
            Source::Turns { label, turns } if turns.is_empty() && !self.executors.is_empty() => {
                return Err(ModelError::Script(format!(
                    "script {label} scripts only the executors {}; this call came from \
                         troupe's own agent. Add `turns` or `bots`.",
                    self.executors
                        .keys()
                        .map(|e| format!("`{e}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                )))
            }
            Source::Turns { label, turns } => match turns.get(number - 1) {
                Some(turn) => (label, turn.clone()),
                None => {
                    return Err(ModelError::Script(format!(
                        "script {label} has {} turns; call {number} has none",
                        turns.len()
                    )))
                }
            },
        };
        if let Some(expected) = &turn.expect {
            let latest = request
                .messages
                .iter()
                .rev()
                .find(|m| matches!(m, Message::User { .. } | Message::Tool { .. }));
            let got = latest
                .map(Message::text)
                .unwrap_or("(no user or tool message)");
            if !got.contains(expected.as_str()) {
                return Err(ModelError::Script(format!(
                    "script {label} turn {number} expected the latest user or tool message to contain {expected:?}, got {got:?}"
                )));
            }
        }
        Ok(turn)
    }
}

/// The events a turn streams as, call ids made from the call's number.
fn events(turn: Turn, number: usize) -> Vec<Result<ModelEvent, ModelError>> {
    let mut out = Vec::new();
    if let Some(text) = turn.text.filter(|t| !t.is_empty()) {
        out.push(ModelEvent::TextDelta { text });
    }
    let calls = !turn.tool_calls.is_empty();
    for (index, call) in turn.tool_calls.into_iter().enumerate() {
        let id = call.id.unwrap_or_else(|| format!("call_{number}_{index}"));
        out.push(ModelEvent::ToolCallStarted {
            index,
            id: id.clone(),
            name: call.name.clone(),
        });
        out.push(ModelEvent::ToolCallDelta {
            index,
            fragment: call.arguments.to_string(),
        });
        out.push(ModelEvent::ToolCallCompleted {
            index,
            call: ToolCall {
                id,
                name: call.name,
                arguments: call.arguments,
            },
        });
    }
    if let Some(usage) = turn.usage {
        out.push(ModelEvent::Usage { usage });
    }
    out.push(ModelEvent::Stop {
        reason: if calls {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        },
    });
    out.into_iter().map(Ok).collect()
}

#[async_trait::async_trait]
impl Provider for ScriptedProvider {
    fn name(&self) -> &str {
        "script"
    }

    fn for_agent(&self, agent: &str) -> Option<std::sync::Arc<dyn Provider>> {
        self.bot(agent).map(|p| p as std::sync::Arc<dyn Provider>)
    }

    fn for_executor(&self, executor: &str) -> Option<std::sync::Arc<dyn Provider>> {
        self.executor(executor)
            .map(|p| p as std::sync::Arc<dyn Provider>)
    }

    async fn stream(&self, request: ModelRequest) -> Result<ModelStream, ModelError> {
        let number = {
            let mut state = self.state.lock();
            state.calls += 1;
            if self.record {
                if state.requests.len() == KEPT_REQUESTS {
                    state.requests.pop_front();
                }
                state.requests.push_back(request.clone());
            }
            if let Some((bot, progress)) = &self.progress {
                progress.record(bot, state.calls);
            }
            state.calls
        };
        let turn = self.turn(number, &request)?;
        match turn.fail {
            None => {}
            Some(Fault::Error) => {
                return Err(ModelError::Script(format!(
                    "scripted fault: call {number} fails as its script says"
                )))
            }
            Some(Fault::Panic) => {
                // A deliberate fault, for users' crash tests.
                #[allow(clippy::panic)]
                {
                    panic!("scripted fault: call {number} panics as its script says")
                }
            }
        }
        Ok(Box::pin(futures::stream::iter(events(turn, number))))
    }
}

#[cfg(test)]
#[path = "scripted_tests.rs"]
mod tests;
