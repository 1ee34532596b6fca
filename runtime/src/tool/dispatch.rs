//! The one place tool calls are run.
//!
//! Every call of every actor goes through [`Dispatcher::run_step`]: the tool
//! is looked up among those the conversation can see, its arguments are
//! checked against the depth limit ([`depth`]) and its schema, the gate admits or refuses it, and it runs in
//! its own task under a timeout, so a panicking tool becomes an error result
//! and the actor lives on. A step's calls run in the order the model made
//! them, so each sees what every call before it did; only adjacent
//! read-only calls run together.
//! Oversized results are spilled whole to a file and the model gets their
//! head, their size and the path.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::join_all;
use tracing::Instrument;

use super::registry::Registry;
use super::{spill, validate, Exposure, Tool, ToolContext, ToolSpec};
use crate::protocol::{depth, ToolCall, ToolResult};

/// Whether the gate lets a call run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// Run it.
    Allow,
    /// Do not run it; the text goes to the model as the call's error result.
    Deny(String),
}

/// The gate as the dispatcher sees it: one question per call. The trust
/// module implements it, asking the user through the conversation's channel
/// when its rules say so.
#[async_trait::async_trait]
pub trait CallGate: Send + Sync + 'static {
    /// Decides whether `call` may run.
    async fn admit(&self, spec: &ToolSpec, call: &ToolCall, ctx: &ToolContext) -> Admission;
}

/// A gate that lets everything through (tests of the loop itself).
#[derive(Debug, Clone, Copy, Default)]
pub struct OpenGate;

#[async_trait::async_trait]
impl CallGate for OpenGate {
    async fn admit(&self, _spec: &ToolSpec, _call: &ToolCall, _ctx: &ToolContext) -> Admission {
        Admission::Allow
    }
}

/// How the dispatcher runs calls.
#[derive(Debug, Clone)]
pub struct DispatchSettings {
    /// How long a call may run when its spec sets no timeout of its own.
    pub default_timeout: Duration,
    /// Results longer than this many characters are spilled to a file.
    pub spill_limit_chars: usize,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        Self {
            default_timeout: Duration::from_secs(120),
            spill_limit_chars: 30_000,
        }
    }
}

/// One call's end.
#[derive(Debug, Clone, PartialEq)]
pub struct CallOutcome {
    /// The call.
    pub call: ToolCall,
    /// Its result, as the model will read it.
    pub result: ToolResult,
    /// How long it took.
    pub elapsed: Duration,
}

/// Runs tool calls against a registry, through a gate.
#[derive(Clone)]
pub struct Dispatcher {
    registry: Arc<Registry>,
    gate: Arc<dyn CallGate>,
    settings: DispatchSettings,
}

impl std::fmt::Debug for Dispatcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dispatcher")
            .field("registry", &self.registry)
            .field("settings", &self.settings)
            .finish()
    }
}

impl Dispatcher {
    /// A dispatcher over `registry`, admitting calls through `gate`.
    pub fn new(
        registry: Arc<Registry>,
        gate: Arc<dyn CallGate>,
        settings: DispatchSettings,
    ) -> Self {
        Self {
            registry,
            gate,
            settings,
        }
    }

    /// The registry.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.registry
    }

    /// Whether `name` is a read-only tool (run again after a crash).
    pub fn is_read_only(&self, name: &str) -> bool {
        self.registry
            .get(name)
            .is_some_and(|t| t.spec().flags.read_only)
    }

    /// Runs one model step's calls. `visible` names the tools the model was
    /// offered (always-on plus loaded deferred ones); `on_start` and
    /// `on_finish` see each call begin and end. The calls run in the order
    /// given, so a call's result reflects every call placed before it; a
    /// run of adjacent read-only calls runs at once, never before an
    /// earlier writing call. Results come back in the calls' order, each
    /// outcome holding its call.
    pub async fn run_step(
        &self,
        calls: Vec<ToolCall>,
        visible: &HashSet<String>,
        ctx: &ToolContext,
        on_start: &(dyn Fn(&ToolCall) + Send + Sync),
        on_finish: &(dyn Fn(&CallOutcome) + Send + Sync),
    ) -> Vec<CallOutcome> {
        let reads = |call: &ToolCall| self.is_read_only(&call.name) && visible.contains(&call.name);
        let mut outcomes = Vec::with_capacity(calls.len());
        let mut rest = calls.into_iter().peekable();
        while let Some(first) = rest.next() {
            let mut together = Vec::new();
            if reads(&first) {
                while let Some(next) = rest.next_if(|c| reads(c)) {
                    together.push(next);
                }
            }
            if together.is_empty() {
                outcomes.push(
                    self.run_reported(first, visible, ctx, on_start, on_finish)
                        .await,
                );
            } else {
                together.insert(0, first);
                outcomes.extend(
                    join_all(
                        together
                            .into_iter()
                            .map(|c| self.run_reported(c, visible, ctx, on_start, on_finish)),
                    )
                    .await,
                );
            }
        }
        outcomes
    }

    async fn run_reported(
        &self,
        call: ToolCall,
        visible: &HashSet<String>,
        ctx: &ToolContext,
        on_start: &(dyn Fn(&ToolCall) + Send + Sync),
        on_finish: &(dyn Fn(&CallOutcome) + Send + Sync),
    ) -> CallOutcome {
        on_start(&call);
        let started = Instant::now();
        let span = crate::telemetry::gen_ai::tool_span(&call.name, &call.id);
        let result = self
            .run_one(&call, visible, ctx)
            .instrument(span.clone())
            .await;
        crate::telemetry::gen_ai::tool_finished(&span, &result);
        let outcome = CallOutcome {
            call,
            result,
            elapsed: started.elapsed(),
        };
        on_finish(&outcome);
        outcome
    }

    /// Runs one call: lookup, argument check, gate, timeout, panic isolation
    /// and spill. Never fails: every problem is an error result.
    pub async fn run_one(
        &self,
        call: &ToolCall,
        visible: &HashSet<String>,
        ctx: &ToolContext,
    ) -> ToolResult {
        let Some(tool) = self
            .registry
            .get(&call.name)
            .filter(|_| visible.contains(&call.name))
        else {
            return self.unknown_tool(call, visible);
        };
        // The spec this conversation was offered: a tool may take other
        // arguments in some conversations (`read_file` in a house turn).
        let spec = tool
            .offered(ctx)
            .unwrap_or(std::borrow::Cow::Borrowed(tool.spec()));
        let spec = &*spec;
        if let Some(refusal) = depth::refusal(call) {
            return ToolResult::error(refusal);
        }
        let args = match &call.arguments {
            serde_json::Value::Null => serde_json::json!({}),
            other => other.clone(),
        };
        let args = match validate::resolve_aliases(&spec.aliases, args) {
            Ok(args) => args,
            Err(problem) => {
                return ToolResult::error(format!(
                    "invalid arguments for `{}`: {problem}.",
                    spec.name
                ))
            }
        };
        if let Err(problems) = validate::check(&spec.parameters, &args) {
            return ToolResult::error(format!(
                "invalid arguments for `{}`: {}. Call it again with arguments that match its schema.",
                spec.name,
                problems.join("; ")
            ));
        }
        let mut call_ctx = ctx.clone();
        call_ctx.call_id = call.id.clone();
        // The gate judges what the tool will get: an argument given by its
        // alias (`command` for a house's `cmd`) is judged under its name.
        let resolved = ToolCall {
            arguments: args.clone(),
            ..call.clone()
        };
        if let Admission::Deny(reason) = self.gate.admit(spec, &resolved, &call_ctx).await {
            return ToolResult::error(reason);
        }
        let timeout = spec
            .timeout_secs
            .map(Duration::from_secs)
            .unwrap_or(self.settings.default_timeout);
        let result = run_isolated(Arc::clone(&tool), args, call_ctx, timeout).await;
        if spec.flags.pages_own_output
            || result.text.chars().count() <= self.settings.spill_limit_chars
        {
            return result;
        }
        spill::spill(
            &ctx.home,
            &ctx.conversation.to_string(),
            &call.id,
            result,
            self.settings.spill_limit_chars,
        )
    }

    fn unknown_tool(&self, call: &ToolCall, visible: &HashSet<String>) -> ToolResult {
        if let Some(tool) = self.registry.get(&call.name) {
            if tool.spec().exposure == Exposure::Deferred {
                return ToolResult::error(format!(
                    "`{}` is a deferred tool that is not loaded yet: call `tool_search` with its name first, then call it.",
                    call.name
                ));
            }
            return ToolResult::error(format!(
                "the tool `{}` is not available to this agent.",
                call.name
            ));
        }
        let mut names: Vec<String> = self
            .registry
            .iter()
            .map(|t| t.spec().name.clone())
            .filter(|n| visible.contains(n))
            .collect();
        names.sort_unstable();
        ToolResult::error(format!(
            "unknown tool `{}`. The tools you can call are: {}.",
            call.name,
            names.join(", ")
        ))
    }
}

/// Runs a tool so that a panic or a hang stays in its call: a panic is
/// caught where the call is polled, and a hang ends at the timeout or when
/// the turn is stopped, either of which drops the call.
///
/// The call runs in the caller's task, not a task of its own: a task per
/// call was two hand-offs between tasks, and the async runtime moves a
/// chain of hand-offs to its other worker every fourth one, waking it
/// (see docs/benchmarks.md).
async fn run_isolated(
    tool: Arc<dyn Tool>,
    args: serde_json::Value,
    ctx: ToolContext,
    timeout: Duration,
) -> ToolResult {
    use futures::FutureExt;
    let name = tool.spec().name.clone();
    let cancel = ctx.cancel.clone();
    let call = std::panic::AssertUnwindSafe(async move { tool.call(args, &ctx).await });
    tokio::select! {
        joined = tokio::time::timeout(timeout, call.catch_unwind()) => match joined {
            Ok(Ok(result)) => result,
            Ok(Err(panic)) => {
                let message = panic
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| panic.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "no message".into());
                tracing::error!(tool = %name, %message, "tool panicked");
                ToolResult::error(format!("the tool `{name}` crashed ({message}); nothing else was affected. Try other arguments or another way."))
            }
            Err(_) => ToolResult::error(format!(
                "the tool `{name}` did not finish within {} s and was stopped.",
                timeout.as_secs_f64()
            )),
        },
        // The tool sees the same token and may clean up (kill its
        // processes) as it is dropped.
        () = cancel.cancelled() => {
            ToolResult::error(format!("the call to `{name}` was stopped because the turn was stopped."))
        }
    }
}

#[cfg(test)]
#[path = "dispatch_tests.rs"]
mod tests;
