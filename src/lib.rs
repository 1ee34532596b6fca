//! troupe: an actor-model runtime for LLM agents that work together.
//!
//! This crate is the front: the Rust API ([`Runtime`], [`Bot`], [`Turn`]),
//! the `troupe` command's CLI, and re-exports of the crates underneath:
//! [`runtime`] (ids, protocol, store, models, tools, trust, config),
//! [`tools`] (one file per tool) and [`actors`] (node, conversations, turn
//! loop).

mod api;
pub mod bench;
pub mod cli;
pub mod demo;
pub mod gate;
pub mod server;

pub use api::{settings_from, Bot, Runtime, RuntimeBuilder, RuntimeError, Turn};
pub use async_trait::async_trait;
pub use troupe_actors as actors;
pub use troupe_actors::bot::BotSpec;
pub use troupe_actors::conversation::TurnReport;
pub use troupe_actors::environment::EnvironmentsRef;
pub use troupe_actors::house::{HouseRef, Rules as HouseRules, ThreadEvent, ThreadRef};
pub use troupe_actors::kinds::{
    ActorAddress, ActorError, Context, Kind, KindError, KindOptions, UserActor,
};
pub use troupe_runtime as runtime;
pub use troupe_runtime::protocol::{AgentEvent, TurnOutcome};
pub use troupe_runtime::tool::{FnTool, IntoToolResult, Json, Tool, ToolContext, ToolSpec};

/// Makes an async function a tool: `#[troupe::tool]` on
/// `async fn NAME(params: P, ctx: &ToolContext) -> R`, where `P` derives
/// `Deserialize` and `JsonSchema` and the doc comment is the description.
/// `NAME::tool()` returns the tool; the attribute's arguments are
/// [`FnTool`]'s builder methods (`read_only`, `failure_tolerant`,
/// `deferred`, `offered = …`). Built-in tools are written the same way.
/// The function must be at module level (not inside another function).
///
/// # Examples
///
/// ```
/// use std::sync::Arc;
///
/// use troupe::{Json, ToolContext};
///
/// /// Arguments of `word_count`.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Params {
///     /// The text to count the words of.
///     text: String,
/// }
///
/// /// Count the words of a text.
/// #[troupe::tool(read_only)]
/// async fn word_count(p: Params, _ctx: &ToolContext) -> anyhow::Result<Json<usize>> {
///     Ok(Json(p.text.split_whitespace().count()))
/// }
///
/// fn main() {
///     let tool = word_count::tool();
///     assert_eq!(tool.spec().description, "Count the words of a text.");
///     assert!(tool.spec().flags.read_only);
///     // Register it with `Runtime::builder().tool(Arc::new(tool))`.
///     let _: Arc<dyn troupe::Tool> = Arc::new(tool);
/// }
/// ```
pub use troupe_macros::tool;
pub use troupe_tools as tools;
