//! Tools added to a running runtime — for every bot, or for one — besides
//! those given to the builder ([`RuntimeBuilder::tool`]). A conversation
//! offers the new list from its next model call; a tool removed is no
//! longer offered from then on (a call of it already running finishes).
//!
//! [`RuntimeBuilder::tool`]: crate::RuntimeBuilder::tool

use std::sync::Arc;

use troupe_actors::added_tools::AddToolError;
use troupe_runtime::tool::Tool;

use super::{Bot, Runtime, RuntimeError};

impl Runtime {
    /// Adds `tool` while the runtime runs: every bot's conversations offer
    /// it from their next model call. Refused when a tool of its name
    /// exists ([`RuntimeError::Tool`]).
    ///
    /// # Examples
    ///
    /// ```
    /// use std::sync::Arc;
    ///
    /// use troupe::runtime::model::{ScriptedProvider, Turn};
    /// use troupe::{BotSpec, FnTool, Runtime, ToolContext};
    ///
    /// /// Arguments of `shout`.
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Shout {
    ///     /// What to shout.
    ///     text: String,
    /// }
    ///
    /// #[tokio::main]
    /// async fn main() -> anyhow::Result<()> {
    ///     let home = tempfile::tempdir()?;
    ///     let model = Arc::new(ScriptedProvider::new(vec![
    ///         Turn::tool_call("shout", serde_json::json!({"text": "hi"})),
    ///         Turn::text("Shouted.").expecting("HI"),
    ///     ]));
    ///     let runtime = Runtime::builder().home(home.path()).provider(model).build().await?;
    ///     let scout = runtime.spawn_bot(BotSpec::new("scout", "Scout", "Shouts.")).await?;
    ///
    ///     // Only scout gets it; `runtime.add_tool` would give it to every bot.
    ///     let shout = FnTool::from_fn("shout", "Shout a text.", |p: Shout, _: ToolContext| async move {
    ///         p.text.to_uppercase()
    ///     });
    ///     scout.add_tool(Arc::new(shout))?;
    ///     assert_eq!(scout.send("Shout hi").await?.result().await?.text, "Shouted.");
    ///
    ///     runtime.shutdown().await;
    ///     Ok(())
    /// }
    /// ```
    pub fn add_tool(&self, tool: Arc<dyn Tool>) -> Result<(), RuntimeError> {
        Ok(self.added.add(tool, None)?)
    }

    /// Adds `tool` for the bot named `bot` only (its conversations and
    /// their subagents'), from their next model call.
    pub fn add_tool_for(&self, bot: &str, tool: Arc<dyn Tool>) -> Result<(), RuntimeError> {
        self.node.bot(bot)?;
        Ok(self.added.add(tool, Some(bot))?)
    }

    /// Removes the tool `name` added with [`Runtime::add_tool`] or
    /// [`Runtime::add_tool_for`]; `false` when none was added by that name
    /// (the builder's and the built-in tools stay).
    pub fn remove_tool(&self, name: &str) -> bool {
        self.added.remove(name)
    }
}

impl Bot {
    /// Adds `tool` for this bot only ([`Runtime::add_tool_for`]); see
    /// [`Runtime::add_tool`] for an example.
    pub fn add_tool(&self, tool: Arc<dyn Tool>) -> Result<(), RuntimeError> {
        Ok(self.added.add(tool, Some(&self.record.spec.name))?)
    }
}

impl From<AddToolError> for RuntimeError {
    fn from(e: AddToolError) -> Self {
        RuntimeError::Tool(e)
    }
}
