//! The private socket a `browser_exec` program reaches the browser by.
//!
//! The program runs sandboxed, without troupe's home and without the
//! browser's DevTools port: what it may do to the browser is only what the
//! helpers ask, one JSON line per request, on a Unix socket made for this
//! call alone in a folder of its own (bound into the sandbox, removed when
//! the call ends). That keeps the navigation rules in troupe, where the
//! program cannot skip them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixListener;
use tokio_util::sync::CancellationToken;

use super::page::Instance;
use crate::web::guard::Policy;

/// The helpers' Python module.
pub const HELPERS: &str = include_str!("troupe_browser.py");
/// Its module name.
pub const MODULE: &str = "troupe_browser";

/// One call's socket, its folder and the task answering it; the folder
/// goes when this is dropped.
pub struct Control {
    /// The call's folder (the socket, the helpers' module, the program).
    pub dir: PathBuf,
    /// The socket's path.
    pub socket: PathBuf,
    stop: CancellationToken,
}

impl Drop for Control {
    fn drop(&mut self) {
        self.stop.cancel();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Control {
    /// Makes the call's folder under `calls` with the helpers' module and a
    /// socket answered by `instance` until dropped.
    pub fn open(
        calls: &Path,
        instance: Arc<Instance>,
        policy: Policy,
        workspace: PathBuf,
    ) -> std::io::Result<Self> {
        let id = uuid::Uuid::now_v7().simple().to_string();
        let dir = calls.join(&id[id.len() - 12..]);
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{MODULE}.py")), HELPERS)?;
        let socket = dir.join("s");
        let listener = UnixListener::bind(&socket)?;
        let stop = CancellationToken::new();
        let stopped = stop.clone();
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    accepted = listener.accept() => accepted,
                    () = stopped.cancelled() => break,
                };
                let Ok((stream, _)) = accepted else { break };
                let instance = Arc::clone(&instance);
                let policy = policy.clone();
                let workspace = workspace.clone();
                let stopped = stopped.clone();
                tokio::spawn(async move {
                    let (read, mut write) = stream.into_split();
                    let mut lines = BufReader::new(read).lines();
                    loop {
                        let line = tokio::select! {
                            line = lines.next_line() => line,
                            () = stopped.cancelled() => break,
                        };
                        let Ok(Some(line)) = line else { break };
                        let answer = answer(&instance, &line, &policy, &workspace).await;
                        let mut out = answer.to_string();
                        out.push('\n');
                        if write.write_all(out.as_bytes()).await.is_err() {
                            break;
                        }
                    }
                });
            }
        });
        Ok(Self { dir, socket, stop })
    }
}

async fn answer(instance: &Instance, line: &str, policy: &Policy, workspace: &Path) -> Value {
    let request: Value = match serde_json::from_str(line) {
        Ok(request) => request,
        Err(e) => return json!({"error": format!("not a helper request: {e}")}),
    };
    let helper = request["helper"].as_str().unwrap_or_default();
    let args = request.get("args").cloned().unwrap_or_else(|| json!({}));
    match instance.helper(helper, &args, policy, workspace).await {
        Ok(value) => json!({"ok": value}),
        Err(error) => json!({"error": error}),
    }
}
