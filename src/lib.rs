//! troupe: an actor-model runtime for LLM agents that work together.
//!
//! Every agent, subagent, routine, house thread and sandbox is an actor
//! under a supervisor, with a durable mailbox in an embedded SQLite store.
//! This crate is the Rust API — a [`Runtime`] built with
//! [`Runtime::builder`], its [`Bot`]s, their [`Turn`]s and your own
//! [`Tool`]s — with the crates underneath re-exported: [`runtime`] (ids,
//! protocol, store, models, tools, trust, config), [`tools`] (one file per
//! tool) and [`actors`] (node, conversations, turn loop).
//!
//! # Quickstart
//!
//! A runtime on a throwaway home, with a scripted model (no network, no
//! key; a real one is `.model("openai:gpt-4o-mini")` or
//! `.model("anthropic:claude-sonnet-4-5")`), one bot, one turn:
//!
//! ```
//! use std::sync::Arc;
//!
//! use troupe::runtime::model::{ScriptedProvider, Turn};
//! use troupe::{AgentEvent, BotSpec, Runtime};
//!
//! #[tokio::main]
//! async fn main() -> anyhow::Result<()> {
//!     let home = tempfile::tempdir()?;
//!     let model = Arc::new(ScriptedProvider::new(vec![Turn::text("Found it: README.md.")]));
//!     let runtime = Runtime::builder()
//!         .home(home.path())
//!         .cwd(home.path())
//!         .provider(model)
//!         .build()
//!         .await?;
//!
//!     let scout = runtime
//!         .spawn_bot(BotSpec::new("scout", "Scout", "Finds files."))
//!         .await?;
//!     let mut turn = scout.send("Where is the README?").await?;
//!     // Events stream while the turn runs; the last is `turn_finished`.
//!     while let Some(event) = turn.next_event().await {
//!         if let AgentEvent::TextDelta { text, .. } = &event {
//!             print!("{text}");
//!         }
//!     }
//!     let report = turn.result().await?;
//!     assert_eq!(report.text, "Found it: README.md.");
//!
//!     runtime.shutdown().await;
//!     Ok(())
//! }
//! ```
//!
//! More in `examples/` (each runs offline: `cargo run --example hello_bot`)
//! and in the docs (`docs/` of the repository).
//!
//! # Features
//!
//! The library needs none: an embedder writes
//! `troupe = { version = "0.1", default-features = false }` and compiles
//! no CLI or HTTP stack (clap, axum, hyper, tower). The `troupe` command
//! turns them on, and they are on by default so that `cargo install
//! troupe` and `cargo run` build it:
//!
//! - `server`: the HTTP/WebSocket server (the `server` module).
//! - `cli` (default; includes `server`): the `troupe` command's CLI, its
//!   benchmarks and its demo (the `cli`, `bench` and `demo` modules).

#![warn(missing_docs)]

mod api;
#[cfg(feature = "cli")]
pub mod bench;
#[cfg(feature = "cli")]
pub mod cli;
#[cfg(feature = "cli")]
pub mod demo;
pub mod gate;
#[cfg(feature = "cli")]
pub(crate) mod progress;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod telemetry;

pub use api::{settings_from, Bot, Runtime, RuntimeBuilder, RuntimeError, RuntimeEvents, Turn};
pub use async_trait::async_trait;
pub use troupe_actors as actors;
pub use troupe_actors::bot::BotSpec;
pub use troupe_actors::conversation::TurnReport;
pub use troupe_actors::environment::EnvironmentsRef;
pub use troupe_actors::events::{ActorName, NodeEvent, Source as EventSource};
pub use troupe_actors::house::{
    HouseRef, Rules as HouseRules, ThreadEvent, ThreadEvents, ThreadMessages, ThreadRef,
};
pub use troupe_actors::kinds::{
    ActorAddress, ActorError, Context, HouseKeys, Kind, KindError, KindOptions, UserActor,
};
pub use troupe_runtime as runtime;
pub use troupe_runtime::protocol::{AgentEvent, TurnOutcome};
pub use troupe_runtime::tool::{FnTool, IntoToolResult, Json, Tool, ToolContext, ToolSpec};

/// Makes an async function a tool: `#[troupe::tool]` on
/// `async fn NAME(params: P, ctx: &ToolContext) -> R`, where `P` derives
/// `Deserialize` and `JsonSchema` and the doc comment is the description.
/// `NAME::tool()` returns the tool; the attribute's arguments are
/// [`FnTool`]'s builder methods (`read_only`, `failure_tolerant`,
/// `deferred`, `offered = …`, `offered_as = …`, `carrying = …`). A third
/// argument `state: &S` is the tool's configuration, given once to
/// `NAME::tool(state)`. Built-in tools are written the same way.
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
