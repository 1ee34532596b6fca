//! What the integration tests share: a temp home, a scripted model, test
//! tools, and waiting on events with a timeout instead of sleeping.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use serde_json::json;
use tokio::sync::Notify;
use troupe::runtime::model::{ModelRequest, ScriptedProvider, Turn};
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::runtime::tool::{Tool, ToolContext, ToolSpec};
use troupe::{AgentEvent, Runtime, RuntimeBuilder};

/// How long a test waits for something before failing.
pub const WAIT: Duration = Duration::from_secs(20);

/// A temp home that lives as long as the test.
pub struct TestHome {
    pub dir: tempfile::TempDir,
}

impl TestHome {
    pub fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn path(&self) -> &std::path::Path {
        self.dir.path()
    }

    /// A builder on this home, working in it, with the given model.
    pub fn builder(&self, model: Arc<ScriptedProvider>) -> RuntimeBuilder {
        Runtime::builder()
            .home(self.path())
            .cwd(self.path())
            .provider(model)
            // Sandboxed commands' network and the environments are held by
            // troupe's helper: this build's binary, not the test's.
            .set("environments.helper", env!("CARGO_BIN_EXE_troupe"))
    }
}

/// A scripted model serving `turns` in order.
pub fn script(turns: Vec<Turn>) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::new(turns))
}

/// The benchmarks' `lookup_weather(city)`, answering "sunny, 21C".
pub use troupe::bench::Weather;

/// A tool that waits until released (or the turn is stopped), recording its calls.
pub struct Gate {
    spec: ToolSpec,
    pub entered: Arc<Notify>,
    pub release: Arc<Notify>,
    pub calls: Arc<Mutex<u32>>,
}

impl Gate {
    pub fn new(name: &str) -> Arc<Self> {
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {}});
        Arc::new(Self {
            spec: ToolSpec::new(name, "Waits until released.", schema)
                .timeout(Duration::from_secs(60)),
            entered: Arc::new(Notify::new()),
            release: Arc::new(Notify::new()),
            calls: Arc::new(Mutex::new(0)),
        })
    }
}

#[async_trait::async_trait]
impl Tool for Gate {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _args: serde_json::Value, ctx: &ToolContext) -> ToolResult {
        *self.calls.lock() += 1;
        self.entered.notify_one();
        tokio::select! {
            () = self.release.notified() => ToolResult::ok("released"),
            () = ctx.cancel.cancelled() => ToolResult::error("stopped"),
        }
    }
}

/// A tool that panics.
pub struct Panics {
    spec: ToolSpec,
}

impl Panics {
    pub fn new() -> Arc<Self> {
        let schema = json!({"type": "object", "additionalProperties": false, "properties": {}});
        Arc::new(Self {
            spec: ToolSpec::new("explode", "Panics.", schema),
        })
    }
}

#[async_trait::async_trait]
impl Tool for Panics {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn call(&self, _args: serde_json::Value, _ctx: &ToolContext) -> ToolResult {
        panic!("the tool blew up")
    }
}

/// Waits for the first event on the node's bus that `pick` accepts.
pub async fn on_bus<T>(
    bus: &mut tokio::sync::broadcast::Receiver<troupe::actors::events::NodeEvent>,
    mut pick: impl FnMut(&troupe::actors::events::NodeEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(WAIT, async {
        loop {
            let event = bus.recv().await.expect("the bus is open");
            if let Some(t) = pick(&event) {
                return t;
            }
        }
    })
    .await
    .expect("timed out waiting for an event on the bus")
}

/// Sends `text` to `bot` and waits for the turn's report.
pub async fn ask(bot: &troupe::Bot, text: impl Into<String>) -> troupe::TurnReport {
    bot.send(text)
        .await
        .expect("the turn starts")
        .result()
        .await
        .expect("the turn reports")
}

/// Waits for the first event of `turn` that `pick` accepts.
pub async fn wait_for<T>(
    turn: &mut troupe::Turn,
    mut pick: impl FnMut(&AgentEvent) -> Option<T>,
) -> T {
    tokio::time::timeout(WAIT, async {
        loop {
            let event = turn
                .next_event()
                .await
                .expect("the event stream ended first");
            if let Some(t) = pick(&event) {
                return t;
            }
        }
    })
    .await
    .expect("timed out waiting for an event")
}

/// Checks what every request must satisfy: each tool result answers a call
/// made before it and not answered yet, and the tool list never reorders.
pub fn check_invariants(requests: &[ModelRequest]) {
    let mut order: Vec<String> = Vec::new();
    for (n, request) in requests.iter().enumerate() {
        let mut open: Vec<String> = Vec::new();
        for message in request.messages.iter() {
            match message {
                Message::Assistant { tool_calls, .. } => {
                    assert!(
                        open.is_empty(),
                        "request {n}: calls {open:?} unanswered before the next assistant message"
                    );
                    open = tool_calls.iter().map(|c| c.id.clone()).collect();
                }
                Message::Tool { call_id, .. } => {
                    let at = open.iter().position(|id| id == call_id);
                    assert!(
                        at.is_some(),
                        "request {n}: result {call_id} answers no open call"
                    );
                    open.remove(at.unwrap());
                }
                Message::User { .. } => {
                    assert!(
                        open.is_empty(),
                        "request {n}: calls {open:?} unanswered before a user message"
                    )
                }
            }
        }
        // Tools keep their relative order from one request to the next.
        let names: Vec<String> = request.tools.iter().map(|t| t.name.clone()).collect();
        let common: Vec<&String> = names.iter().filter(|n| order.contains(n)).collect();
        let before: Vec<&String> = order.iter().filter(|n| names.contains(n)).collect();
        assert_eq!(common, before, "request {n}: the tool order changed");
        order = names;
    }
}
