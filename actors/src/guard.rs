//! Loop guards: what stops a turn that is going nowhere.
//!
//! A turn may make at most `max_steps` model calls. The same call (same tool,
//! same arguments) failing `repeat_limit` times in a row halts the turn,
//! unless the tool is failure-tolerant, for which repeated failure is
//! diagnosis and only draws a warning. A tool failing again and again with
//! other arguments also only warns. The guard lives in the conversation
//! actor, not in the history, so a compaction does not reset it.

use std::collections::HashMap;

use troupe_runtime::protocol::{ToolCall, ToolResult};

/// What the guard says after a call's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Go on.
    Continue,
    /// Go on, and tell the model this (appended to the result).
    Warn(String),
    /// End the turn with this reason.
    Halt(String),
}

/// The guard of one conversation.
#[derive(Debug, Clone)]
pub struct Guard {
    max_steps: u32,
    repeat_limit: u32,
    steps: u32,
    same_call_failures: HashMap<String, u32>,
    tool_failures: HashMap<String, u32>,
}

impl Guard {
    /// A guard allowing `max_steps` model calls per turn and halting on the
    /// `repeat_limit`-th identical failure.
    pub fn new(max_steps: u32, repeat_limit: u32) -> Self {
        Self {
            max_steps: max_steps.max(1),
            repeat_limit: repeat_limit.max(1),
            steps: 0,
            same_call_failures: HashMap::new(),
            tool_failures: HashMap::new(),
        }
    }

    /// A new turn begins: the step count starts again. Failure counts carry
    /// over, so a model cannot dodge the guard by ending its turn.
    pub fn start_turn(&mut self) {
        self.steps = 0;
    }

    /// Model calls made in this turn.
    pub fn steps(&self) -> u32 {
        self.steps
    }

    /// Called before each model call; `Halt` when the cap is reached.
    pub fn before_model_call(&mut self) -> Verdict {
        if self.steps >= self.max_steps {
            return Verdict::Halt(format!(
                "the turn reached its cap of {} model calls; send another message to let it go on",
                self.max_steps
            ));
        }
        self.steps += 1;
        Verdict::Continue
    }

    /// Called with each call's result.
    pub fn after_call(
        &mut self,
        call: &ToolCall,
        result: &ToolResult,
        failure_tolerant: bool,
    ) -> Verdict {
        // The call's key prints its arguments: made only when a failure
        // is counted or may be held.
        let key = || format!("{}\u{0}{}", call.name, call.arguments);
        if !result.is_error() {
            if !self.same_call_failures.is_empty() {
                self.same_call_failures.remove(&key());
            }
            if !self.tool_failures.is_empty() {
                self.tool_failures.remove(&call.name);
            }
            return Verdict::Continue;
        }
        let same = {
            let n = self.same_call_failures.entry(key()).or_default();
            *n += 1;
            *n
        };
        let any = {
            let n = self.tool_failures.entry(call.name.clone()).or_default();
            *n += 1;
            *n
        };
        if same >= self.repeat_limit {
            let message = format!(
                "the same call to `{}` failed {same} times in a row with the same arguments",
                call.name
            );
            if failure_tolerant {
                return Verdict::Warn(format!("{message}; try something different."));
            }
            return Verdict::Halt(message);
        }
        if any >= self.repeat_limit {
            return Verdict::Warn(format!(
                "`{}` has failed {any} times in a row; read the errors and change approach.",
                call.name
            ));
        }
        Verdict::Continue
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(args: serde_json::Value) -> ToolCall {
        ToolCall {
            id: "c".into(),
            name: "run_command".into(),
            arguments: args,
        }
    }

    #[test]
    fn the_step_cap_halts() {
        let mut guard = Guard::new(2, 3);
        assert_eq!(guard.before_model_call(), Verdict::Continue);
        assert_eq!(guard.before_model_call(), Verdict::Continue);
        assert!(
            matches!(guard.before_model_call(), Verdict::Halt(r) if r.contains("cap of 2 model calls"))
        );
        guard.start_turn();
        assert_eq!(guard.before_model_call(), Verdict::Continue);
    }

    #[test]
    fn the_same_failing_call_halts_unless_failure_tolerant() {
        let err = ToolResult::error("no");
        let mut guard = Guard::new(50, 3);
        let c = call(json!({"command": "false"}));
        assert_eq!(guard.after_call(&c, &err, false), Verdict::Continue);
        assert_eq!(guard.after_call(&c, &err, false), Verdict::Continue);
        assert_eq!(
            guard.after_call(&c, &err, false),
            Verdict::Halt(
                "the same call to `run_command` failed 3 times in a row with the same arguments"
                    .into()
            )
        );
        let mut tolerant = Guard::new(50, 2);
        tolerant.after_call(&c, &err, true);
        assert!(matches!(
            tolerant.after_call(&c, &err, true),
            Verdict::Warn(_)
        ));
    }

    #[test]
    fn failures_with_other_arguments_only_warn_and_a_success_resets() {
        let err = ToolResult::error("no");
        let mut guard = Guard::new(50, 2);
        assert_eq!(
            guard.after_call(&call(json!({"a": 1})), &err, false),
            Verdict::Continue
        );
        assert!(matches!(
            guard.after_call(&call(json!({"a": 2})), &err, false),
            Verdict::Warn(_)
        ));
        guard.after_call(&call(json!({"a": 1})), &ToolResult::ok("fine"), false);
        assert_eq!(
            guard.after_call(&call(json!({"a": 1})), &err, false),
            Verdict::Continue
        );
    }
}
