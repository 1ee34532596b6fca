//! Restart: how long a conversation takes to come back from a crash.
//!
//! Each of `n` conversations runs one turn whose first model call panics.
//! Its supervisor (the conversation router) restarts it; the new
//! incarnation takes over, reloads the history from the store and resumes
//! the turn, whose next model call answers. Measured: from the panic to the
//! resumed turn's model call (the restart itself), and from the panic to
//! the turn's end (what its caller waits for).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use std::sync::Mutex;
use troupe_actors::toolset::Narrowing;
use troupe_runtime::model::{Fault, ScriptedProvider, Turn};
use troupe_runtime::protocol::TurnOutcome;

use super::percentiles;
use crate::Runtime;

/// Runs the workload over `n` conversations, one after another.
pub async fn restart(n: usize, durable: bool) -> anyhow::Result<serde_json::Value> {
    let home = tempfile::tempdir()?;
    let armed = Arc::new(AtomicBool::new(false));
    let panicked_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let resumed_at: Arc<Mutex<Option<Instant>>> = Arc::new(Mutex::new(None));
    let (arm, at_panic, at_resume) = (
        Arc::clone(&armed),
        Arc::clone(&panicked_at),
        Arc::clone(&resumed_at),
    );
    let model = ScriptedProvider::from_fn(move |_| {
        if arm.swap(false, Ordering::SeqCst) {
            if let Ok(mut at) = at_panic.lock() {
                *at = Some(Instant::now());
            }
            return Turn::fault(Fault::Panic);
        }
        if let Ok(mut at) = at_resume.lock() {
            *at = Some(Instant::now());
        }
        Turn::text("back")
    })
    .recording(false);
    let runtime = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(model))
        .durable(durable)
        .set("review.enabled", "false")
        .build()
        .await?;
    let node = runtime.node().clone();
    let (mut restart, mut to_end) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for _ in 0..n {
        let conversation = node
            .new_conversation("assistant", Narrowing::default())
            .await?;
        armed.store(true, Ordering::SeqCst);
        let (_events, done) = node.send(conversation, "hello").await?;
        let report = done.await?;
        let ended = Instant::now();
        anyhow::ensure!(
            report.outcome == TurnOutcome::Finished,
            "the resumed turn ended with {:?}",
            report.outcome
        );
        let (Some(panic), Some(resumed)) = (
            panicked_at.lock().map_or(None, |mut m| m.take()),
            resumed_at.lock().map_or(None, |mut m| m.take()),
        ) else {
            anyhow::bail!("the model was not called as expected");
        };
        restart.push(resumed.duration_since(panic));
        to_end.push(ended.duration_since(panic));
    }
    runtime.shutdown().await;
    Ok(json!({
        "workload": "restart", "durable": durable, "restarts": n,
        "panic_to_resumed_call": percentiles(restart),
        "panic_to_turn_end": percentiles(to_end),
    }))
}
