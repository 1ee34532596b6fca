//! A tool from a function: the one way to write a tool, built-in or yours.
//!
//! A tool is its logic plus a params struct. The params struct derives
//! `Deserialize` and `JsonSchema` (its doc comments become the schema's
//! descriptions); the logic is an async function of the params and the
//! call's [`ToolContext`]. [`FnTool`] wraps the two into a [`Tool`]: it
//! derives the schema with [`schema_for`](super::schema_for) (when first
//! read: [`Schema`]), parses each call's arguments with
//! [`parse_args`] (the dispatcher has already checked them against the
//! schema, so a bad argument gets the schema's error), runs the function and
//! turns what it returns into a [`ToolResult`] with [`IntoToolResult`].
//!
//! Two spellings build one:
//!
//! - `#[troupe::tool]` on an `async fn(params: P, ctx: &ToolContext)`: the
//!   function's name is the tool's, its doc comment the description, and
//!   the attribute's arguments are [`FnTool`]'s builder methods
//!   (`read_only`, `deferred`, `offered = in_house`, …). The function stays
//!   callable; `name::tool()` gives the tool. A third argument `state: &S`
//!   is the tool's configuration (a key, a client, settings):
//!   `name::tool(state)` takes it. Every built-in tool is written this way.
//! - [`FnTool::from_fn`] with a closure, for a tool made at run time.
//!
//! Two builder methods say what a plain function cannot: [`FnTool::offered_as`]
//! gives the spec a conversation is offered (a description that lists the
//! conversation's skills, another spec in a house), and [`FnTool::carrying`]
//! the state a tool holds through a compaction ([`Carry`]). The [`Tool`]
//! trait itself stays for tools whose schema is only known at run time (an
//! MCP server's tools).

use std::fmt;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

use serde::de::DeserializeOwned;

use super::scoped::Scoped;
use super::{parse_args, GateSubject, Schema, Tool, ToolContext, ToolSpec};
use crate::protocol::ToolResult;

/// The logic of a tool: a params type and what a call does with it.
///
/// `#[troupe::tool]` implements it for a function and [`FnTool::from_fn`]
/// for a closure; there is rarely a reason to implement it by hand.
pub trait Handler: Send + Sync + 'static {
    /// The call's arguments; the tool's JSON schema is derived from it.
    type Params: DeserializeOwned + schemars::JsonSchema + Send + 'static;

    /// Runs one call with its parsed arguments. (Not boxed: the tool's
    /// own call future holds it.)
    fn call<'a>(
        &'a self,
        params: Self::Params,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = ToolResult> + Send + 'a;
}

/// What a tool function may return: turned into the [`ToolResult`] the
/// model reads.
///
/// A `String` (or `&str`) is a successful result's text; [`Json`] a value
/// shown as JSON and kept as the result's data; a [`ToolResult`] is itself.
/// `Err` of a `Result` is an error result: its text is the error's
/// `Display` (say what was wrong and what to do), or the [`ToolResult`]
/// itself for `Result<_, ToolResult>`.
pub trait IntoToolResult {
    /// The result.
    fn into_tool_result(self) -> ToolResult;
}

impl IntoToolResult for ToolResult {
    fn into_tool_result(self) -> ToolResult {
        self
    }
}

impl IntoToolResult for String {
    fn into_tool_result(self) -> ToolResult {
        ToolResult::ok(self)
    }
}

impl IntoToolResult for &str {
    fn into_tool_result(self) -> ToolResult {
        ToolResult::ok(self)
    }
}

/// A value returned as JSON: the text is the value pretty-printed, the
/// result's data the value itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> IntoToolResult for Json<T> {
    fn into_tool_result(self) -> ToolResult {
        match serde_json::to_value(&self.0) {
            Ok(value) => {
                let text = serde_json::to_string_pretty(&value).unwrap_or_default();
                ToolResult::ok_with(text, value)
            }
            Err(e) => ToolResult::error(format!("the tool's result is not JSON: {e}")),
        }
    }
}

impl<T: IntoToolResult, E: fmt::Display> IntoToolResult for Result<T, E> {
    fn into_tool_result(self) -> ToolResult {
        match self {
            Ok(v) => v.into_tool_result(),
            Err(e) => ToolResult::error(e.to_string()),
        }
    }
}

impl<T: IntoToolResult> IntoToolResult for Result<T, ToolResult> {
    fn into_tool_result(self) -> ToolResult {
        self.map_or_else(|e| e, IntoToolResult::into_tool_result)
    }
}

/// Makes the spec a conversation is offered from the tool's own.
type OfferAs = dyn Fn(&ToolContext, &ToolSpec) -> Option<ToolSpec> + Send + Sync;

/// Which conversations are offered the tool, and as what.
#[derive(Clone)]
enum Offer {
    /// The tool's own spec, to the conversations this accepts: offered
    /// borrowed, never copied.
    When(Arc<dyn Fn(&ToolContext) -> bool + Send + Sync>),
    /// The spec this makes from the tool's own (or nothing).
    As(Arc<OfferAs>),
}

/// What a carried tool holds through a compaction: the plan's open items,
/// the skills in use. Given to [`FnTool::carrying`], which also marks the
/// spec carried; each method is the [`Tool`] method of the same name.
pub trait Carry: Send + Sync + 'static {
    /// The text that comes back after a compaction; `None` when nothing is
    /// held ([`Tool::carried`]).
    fn carried(&self, ctx: &ToolContext) -> Option<String>;

    /// The arguments and result of a call that re-reads what is held, for
    /// state that must outlive a compaction exactly ([`Tool::carried_call`]).
    fn carried_call(&self, _ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        None
    }

    /// Rebuilds the held state from this tool's latest call when a
    /// conversation is resumed from the store ([`Tool::restore`]).
    fn restore(&self, _ctx: &ToolContext, _args: &serde_json::Value, _result: &ToolResult) {}
}

/// A tool made of a spec and a [`Handler`]: what `#[troupe::tool]` and
/// [`FnTool::from_fn`] build.
///
/// The builder methods set the spec's flags; each is also an argument of
/// `#[troupe::tool]` (`#[tool(read_only, offered = in_house)]`).
///
/// # Examples
///
/// ```
/// use troupe_runtime::tool::func::FnTool;
/// use troupe_runtime::tool::{Tool, ToolContext};
///
/// /// Arguments of `shout`.
/// #[derive(serde::Deserialize, schemars::JsonSchema)]
/// struct Params {
///     /// What to shout.
///     text: String,
/// }
///
/// let tool = FnTool::from_fn(
///     "shout",
///     "Repeat a text in capitals.",
///     |p: Params, _ctx: ToolContext| async move { p.text.to_uppercase() },
/// )
/// .read_only();
/// assert_eq!(tool.spec().name, "shout");
/// assert!(tool.spec().flags.read_only);
/// assert_eq!(tool.spec().parameters["required"][0], "text");
/// ```
pub struct FnTool<H> {
    spec: ToolSpec,
    handler: H,
    offer: Option<Offer>,
    carry: Option<Box<dyn Carry>>,
}

impl<H> fmt::Debug for FnTool<H> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnTool")
            .field("name", &self.spec.name)
            .field("offered_conditionally", &self.offer.is_some())
            .field("carried", &self.carry.is_some())
            .finish_non_exhaustive()
    }
}

impl<H: Handler> FnTool<H> {
    /// A built-in, always-on tool named `name` that runs `handler`, with
    /// the JSON schema of its params type.
    pub fn with_handler(
        name: impl Into<String>,
        description: impl Into<String>,
        handler: H,
    ) -> Self {
        Self {
            spec: ToolSpec::new(name, description, Schema::of::<H::Params>()),
            handler,
            offer: None,
            carry: None,
        }
    }

    /// Marks it read-only: it runs alongside the step's other read-only
    /// calls, and again after a crash.
    pub fn read_only(mut self) -> Self {
        self.spec = self.spec.read_only();
        self
    }

    /// Marks it failure-tolerant: repeated failures warn, never halt.
    pub fn failure_tolerant(mut self) -> Self {
        self.spec = self.spec.failure_tolerant();
        self
    }

    /// Marks it as paging its own output: never spilled to a file.
    pub fn pages_own_output(mut self) -> Self {
        self.spec = self.spec.pages_own_output();
        self
    }

    /// Makes it deferred: listed by name, loaded by `tool_search`.
    pub fn deferred(mut self) -> Self {
        self.spec = self.spec.deferred();
        self
    }

    /// Lets one call run for `timeout` instead of the dispatcher's default.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.spec = self.spec.timeout(timeout);
        self
    }

    /// Names what the trust gate judges in a call.
    pub fn gated_by(mut self, subject: GateSubject) -> Self {
        self.spec = self.spec.gated_by(subject);
        self
    }

    /// Accepts `alias` for the top-level argument `argument`.
    pub fn alias(mut self, alias: impl Into<String>, argument: impl Into<String>) -> Self {
        self.spec = self.spec.alias(alias, argument);
        self
    }

    /// Offers it only to the conversations `when` accepts (by default,
    /// every conversation the tool table gives it to).
    pub fn offered(mut self, when: impl Fn(&ToolContext) -> bool + Send + Sync + 'static) -> Self {
        self.offer = Some(Offer::When(Arc::new(when)));
        self
    }

    /// Offers the conversation of a context the spec `offer` makes from
    /// the tool's own, or nothing when it returns `None`: a description
    /// that lists what this conversation may use, another spec where the
    /// call means something else (a house's `read_file`).
    pub fn offered_as(
        mut self,
        offer: impl Fn(&ToolContext, &ToolSpec) -> Option<ToolSpec> + Send + Sync + 'static,
    ) -> Self {
        self.offer = Some(Offer::As(Arc::new(offer)));
        self
    }

    /// Makes it carried: what `carry` holds comes back after a compaction.
    pub fn carrying(mut self, carry: impl Carry) -> Self {
        self.spec = self.spec.carried();
        self.carry = Some(Box::new(carry));
        self
    }

    /// This tool, except in the conversations `scope` accepts, where the
    /// name means `other` (a tool of its own, with its own schema): a
    /// house's `read_file` reads the house's files.
    pub fn instead_where<T: Tool>(self, scope: super::scoped::Scope, other: T) -> Scoped<Self, T> {
        Scoped::new(self, scope, other)
    }

    /// Its spec.
    pub fn spec(&self) -> &ToolSpec {
        &self.spec
    }
}

/// A closure as a [`Handler`]: see [`FnTool::from_fn`].
pub struct FromFn<P, F> {
    f: F,
    params: PhantomData<fn(P)>,
}

impl<P, F, Fut, R> Handler for FromFn<P, F>
where
    P: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    F: Fn(P, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult,
{
    type Params = P;

    fn call<'a>(
        &'a self,
        params: P,
        ctx: &'a ToolContext,
    ) -> impl Future<Output = ToolResult> + Send + 'a {
        let running = (self.f)(params, ctx.clone());
        async move { running.await.into_tool_result() }
    }
}

impl<P, F, Fut, R> FnTool<FromFn<P, F>>
where
    P: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    F: Fn(P, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = R> + Send + 'static,
    R: IntoToolResult,
{
    /// A tool named `name` whose calls run `f` with the parsed params and
    /// (a clone of) the call's context. Its schema is `P`'s.
    ///
    /// # Examples
    ///
    /// ```
    /// use troupe_runtime::home::Home;
    /// use troupe_runtime::tool::func::FnTool;
    /// use troupe_runtime::tool::{Tool, ToolContext};
    ///
    /// #[derive(serde::Deserialize, schemars::JsonSchema)]
    /// struct Params {
    ///     a: i64,
    ///     b: i64,
    /// }
    ///
    /// let add = FnTool::from_fn("add", "Add two numbers.", |p: Params, _ctx: ToolContext| async move {
    ///     (p.a + p.b).to_string()
    /// });
    /// let home = tempfile::tempdir()?;
    /// let ctx = ToolContext::standalone(Home::new(home.path()), home.path().into());
    /// let result = tokio::runtime::Runtime::new()?
    ///     .block_on(add.call(serde_json::json!({"a": 2, "b": 3}), &ctx));
    /// assert_eq!(result.text, "5");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_fn(name: impl Into<String>, description: impl Into<String>, f: F) -> Self {
        Self::with_handler(
            name,
            description,
            FromFn {
                f,
                params: PhantomData,
            },
        )
    }
}

#[async_trait::async_trait]
impl<H: Handler> Tool for FnTool<H> {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    fn available(&self, ctx: &ToolContext) -> Option<ToolSpec> {
        self.offered(ctx).map(std::borrow::Cow::into_owned)
    }

    fn offer_varies(&self) -> bool {
        self.offer.is_some()
    }

    fn offered(&self, ctx: &ToolContext) -> Option<std::borrow::Cow<'_, ToolSpec>> {
        use std::borrow::Cow;
        match &self.offer {
            None => Some(Cow::Borrowed(&self.spec)),
            Some(Offer::When(when)) => when(ctx).then_some(Cow::Borrowed(&self.spec)),
            Some(Offer::As(offer)) => offer(ctx, &self.spec).map(Cow::Owned),
        }
    }

    fn carried(&self, ctx: &ToolContext) -> Option<String> {
        self.carry.as_ref()?.carried(ctx)
    }

    fn carried_call(&self, ctx: &ToolContext) -> Option<(serde_json::Value, ToolResult)> {
        self.carry.as_ref()?.carried_call(ctx)
    }

    fn restore(&self, ctx: &ToolContext, args: &serde_json::Value, result: &ToolResult) {
        if let Some(carry) = &self.carry {
            carry.restore(ctx, args, result);
        }
    }

    async fn call(&self, args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        match parse_args::<H::Params>(&self.spec.name, args) {
            Ok(params) => self.handler.call(params, ctx).await,
            Err(refusal) => refusal,
        }
    }
}

#[cfg(test)]
#[path = "func_tests.rs"]
mod tests;
