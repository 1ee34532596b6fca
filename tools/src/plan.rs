//! `plan`: the task list of multi-step work, per conversation.
//!
//! The list lives in the conversation's services, not on disk: it belongs to
//! one conversation and is rebuilt from the last `plan` result when the
//! conversation is resumed ([`Carry::restore`]). A compaction that would
//! summarize that result away appends a read of the plan after what it keeps
//! ([`Carry::carried_call`], [`HeldPlan`]), so the plan — open items and all — is in the
//! stored history and a new process still has it. One item
//! at a time is in progress, which keeps the model finishing before starting.

use parking_lot::Mutex;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::{Carry, ToolContext};

/// Where an item stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TodoStatus {
    /// Not started.
    Pending,
    /// Being worked on (one at a time).
    InProgress,
    /// Done and verified.
    Completed,
    /// Dropped.
    Cancelled,
}

impl TodoStatus {
    fn mark(self) -> &'static str {
        match self {
            Self::Pending => "[ ]",
            Self::InProgress => "[>]",
            Self::Completed => "[x]",
            Self::Cancelled => "[-]",
        }
    }

    fn is_open(self) -> bool {
        matches!(self, Self::Pending | Self::InProgress)
    }
}

/// One item of the plan.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// Its id, unique in the plan.
    pub id: String,
    /// What to do.
    pub content: String,
    /// Where it stands.
    pub status: TodoStatus,
    /// The id of the item it is a step of.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
}

/// An item as a call gives it; with `merge`, only `id` is needed to update.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TodoInput {
    /// Its id, unique in the plan.
    pub id: String,
    /// What to do (required for a new item).
    #[serde(default)]
    pub content: Option<String>,
    /// `pending` (default for a new item), `in_progress`, `completed` or `cancelled`.
    #[serde(default)]
    pub status: Option<TodoStatus>,
    /// The id of the item it is a step of.
    #[serde(default)]
    pub parent: Option<String>,
}

/// The arguments of `plan`; none reads the plan.
#[derive(Debug, Clone, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PlanParams {
    /// The items to write: the whole list, or with `merge` the ones to update or add.
    #[serde(default)]
    pub todos: Option<Vec<TodoInput>>,
    /// true: update items by id and add new ones; false (default): replace the list.
    #[serde(default)]
    pub merge: bool,
}

/// A conversation's plan (kept in its services).
#[derive(Debug, Default)]
pub struct Plan {
    todos: Mutex<Vec<Todo>>,
}

impl Plan {
    /// The items, in order.
    pub fn todos(&self) -> Vec<Todo> {
        self.todos.lock().clone()
    }

    /// Applies a write: checked as a whole, then stored, or refused unchanged.
    pub fn write(&self, inputs: Vec<TodoInput>, merge: bool) -> Result<Vec<Todo>, String> {
        let mut todos = self.todos.lock();
        let next = merged(if merge { &todos } else { &[] }, inputs)?;
        check(&next)?;
        *todos = next.clone();
        Ok(next)
    }

    fn set(&self, todos: Vec<Todo>) {
        *self.todos.lock() = todos;
    }
}

fn merged(base: &[Todo], inputs: Vec<TodoInput>) -> Result<Vec<Todo>, String> {
    let mut out = base.to_vec();
    let mut seen = std::collections::HashSet::new();
    for input in inputs {
        let id = input.id.trim().to_string();
        if id.is_empty() {
            return Err("every item needs a non-empty `id`".into());
        }
        if !seen.insert(id.clone()) {
            return Err(format!("id {id:?} appears twice in `todos`"));
        }
        match out.iter_mut().find(|t| t.id == id) {
            Some(todo) => {
                if let Some(content) = input.content {
                    todo.content = content;
                }
                if let Some(status) = input.status {
                    todo.status = status;
                }
                if input.parent.is_some() {
                    todo.parent = input.parent.filter(|p| !p.is_empty());
                }
            }
            None => {
                let content = input
                    .content
                    .filter(|c| !c.trim().is_empty())
                    .ok_or_else(|| format!("item {id:?} is new and needs `content`"))?;
                out.push(Todo {
                    id,
                    content,
                    status: input.status.unwrap_or(TodoStatus::Pending),
                    parent: input.parent.filter(|p| !p.is_empty()),
                });
            }
        }
    }
    Ok(out)
}

fn check(todos: &[Todo]) -> Result<(), String> {
    let busy: Vec<&str> = todos
        .iter()
        .filter(|t| t.status == TodoStatus::InProgress)
        .map(|t| t.id.as_str())
        .collect();
    if busy.len() > 1 {
        return Err(format!(
            "only one item may be in_progress, but {} are: {}; set the others to pending or completed",
            busy.len(),
            busy.join(", ")
        ));
    }
    for todo in todos {
        let mut at = todo;
        let mut steps = 0;
        while let Some(parent) = &at.parent {
            at = todos.iter().find(|t| &t.id == parent).ok_or_else(|| {
                format!(
                    "item {:?} names parent {parent:?}, which is not in the plan",
                    at.id
                )
            })?;
            steps += 1;
            if steps > todos.len() {
                return Err(format!(
                    "item {:?} is its own ancestor; fix its parent",
                    todo.id
                ));
            }
        }
    }
    Ok(())
}

/// The plan as text: each item under its parent, indented.
pub fn render(todos: &[Todo], only_open: bool) -> String {
    fn walk(
        todos: &[Todo],
        parent: Option<&str>,
        depth: usize,
        only_open: bool,
        out: &mut Vec<String>,
    ) {
        for todo in todos.iter().filter(|t| t.parent.as_deref() == parent) {
            if !only_open || todo.status.is_open() {
                out.push(format!(
                    "{}{} {}: {}",
                    "  ".repeat(depth),
                    todo.status.mark(),
                    todo.id,
                    todo.content
                ));
            }
            walk(todos, Some(&todo.id), depth + 1, only_open, out);
        }
    }
    let mut out = Vec::new();
    walk(todos, None, 0, only_open, &mut out);
    out.join("\n")
}

fn summary(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "The plan is empty.".into();
    }
    let count = |s: TodoStatus| todos.iter().filter(|t| t.status == s).count();
    format!(
        "Plan: {} completed, {} in progress, {} pending, {} cancelled.\n{}",
        count(TodoStatus::Completed),
        count(TodoStatus::InProgress),
        count(TodoStatus::Pending),
        count(TodoStatus::Cancelled),
        render(todos, false)
    )
}

fn result(todos: &[Todo]) -> ToolResult {
    ToolResult::ok_with(summary(todos), serde_json::json!({ "todos": todos }))
}

/// The task list of multi-step work. With no arguments it reads the list. `todos` (items of
/// `id`, `content`, `status`: pending|in_progress|completed|cancelled, optional `parent` id)
/// writes the whole list, or with `merge: true` updates items by id and adds new ones. One item
/// in progress at a time; mark an item completed only once verified.
#[tool(deferred, carrying = HeldPlan)]
pub async fn plan(params: PlanParams, ctx: &ToolContext) -> ToolResult {
    let plan = ctx.services.get_or_insert_with(Plan::default);
    match params.todos {
        None => result(&plan.todos()),
        Some(inputs) => match plan.write(inputs, params.merge) {
            Ok(todos) => result(&todos),
            Err(e) => ToolResult::error(format!("{e}. The plan was not changed.")),
        },
    }
}

/// What `plan` carries through a compaction: the open items of the
/// conversation's plan.
#[derive(Debug, Clone, Copy)]
pub struct HeldPlan;

impl Carry for HeldPlan {
    fn carried(&self, ctx: &ToolContext) -> Option<String> {
        let todos = ctx.services.get::<Plan>()?.todos();
        if !todos.iter().any(|t| t.status.is_open()) {
            return None;
        }
        Some(format!("Plan, open items:\n{}", render(&todos, true)))
    }

    fn carried_call(&self, ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        let todos = ctx.services.get::<Plan>()?.todos();
        if !todos.iter().any(|t| t.status.is_open()) {
            return None;
        }
        Some((serde_json::json!({}), result(&todos)))
    }

    fn restore(&self, ctx: &ToolContext, args: &serde_json::Value, result: &ToolResult) {
        if result.is_error() {
            return;
        }
        let plan = ctx.services.get_or_insert_with(Plan::default);
        if let Ok(todos) = serde_json::from_value::<Vec<Todo>>(result.data["todos"].clone()) {
            plan.set(todos);
            return;
        }
        let Ok(params) = serde_json::from_value::<PlanParams>(args.clone()) else {
            return;
        };
        if let Some(inputs) = params.todos {
            if let Err(e) = plan.write(inputs, params.merge) {
                tracing::debug!(error = %e, "plan not restored from arguments");
            }
        }
    }
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
