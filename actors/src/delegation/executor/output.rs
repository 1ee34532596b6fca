//! An instance's output, read to its end: spilled whole to a file, each
//! line parsed as one of the harness's records, recorded in order in the
//! delegation record (the workbench's watchers told as each commits),
//! progress posted to a house thread, and the state changes told to the
//! instance's actor.

use std::path::PathBuf;
use std::sync::Arc;

use ractor::ActorRef;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use troupe_runtime::id::{DelegationId, SubagentId};
use troupe_runtime::rusqlite::params;
use troupe_runtime::store::executor_usage;

use super::actor::ExecutorMsg;
use super::harness::{self, Event, Harness};
use crate::delegation::{record, Delegations};
use crate::node::Node;

/// Garbage lines recorded as notes before the rest are only counted.
const GARBAGE_NOTED: usize = 3;

/// Where a harness's output comes from.
pub(super) enum Output {
    /// A process's standard output.
    Pipe(tokio::process::ChildStdout),
    /// An environment job's output, as its sandbox reads it.
    Tap(tokio::sync::mpsc::UnboundedReceiver<bytes::Bytes>),
}

impl Output {
    /// The next piece of output into `buf` (0: the end).
    pub(super) async fn next(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Output::Pipe(pipe) => pipe.read(buf).await,
            Output::Tap(tap) => match tap.recv().await {
                None => Ok(0),
                Some(bytes) => {
                    // The tap's pieces are at most the sandbox's read size.
                    let n = bytes.len().min(buf.len());
                    buf[..n].copy_from_slice(&bytes[..n]);
                    Ok(n)
                }
            },
        }
    }
}

/// Reads the harness's output to its end: spilled whole, recorded in
/// order (watchers told as each commits), state changes told to the actor.
#[allow(clippy::too_many_arguments)]
pub(super) async fn read(
    harness: &'static dyn Harness,
    mut source: Output,
    output: PathBuf,
    node: Node,
    delegations: Arc<Delegations>,
    (delegation, sub): (DelegationId, SubagentId),
    posts: Option<(troupe_runtime::id::ThreadId, String)>,
    actor: ActorRef<ExecutorMsg>,
) {
    // Appended to: after a hand-over the next harness's output follows the
    // first's in the instance's file.
    let mut spill = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&output)
        .await
        .ok();
    let mut pending: Vec<u8> = Vec::new();
    let mut chunk = vec![0_u8; 64 * 1024];
    let mut garbage = 0_usize;
    // The harness's running total of cost so far (Claude Code's).
    let mut spent = 0.0_f64;
    let (committed, told) = tell_when_committed(delegations);
    let failure = loop {
        let n = match source.next(&mut chunk).await {
            Ok(0) => break None,
            Ok(n) => n,
            Err(e) => break Some(format!("its output could not be read: {e}")),
        };
        pending.extend_from_slice(&chunk[..n]);
        let mut start = 0;
        while let Some(at) = pending[start..].iter().position(|&b| b == b'\n') {
            let line = &pending[start..start + at];
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            start += at + 1;
            let text = String::from_utf8_lossy(line);
            if text.trim().is_empty() {
                continue;
            }
            for event in harness.parse(&text) {
                if let Some(write) = keep(
                    &node,
                    delegation,
                    sub,
                    &event,
                    &text,
                    (&mut garbage, &mut spent),
                )
                .await
                {
                    tracing::trace!(instance = %sub, "an event queued for the record");
                    let _ = committed.send(write);
                }
                if let Some((thread, bot)) = &posts {
                    super::house::progress(&node, *thread, bot, &event).await;
                }
                if matches!(
                    event,
                    Event::Assistant { .. } | Event::AgentEnd | Event::Refused { .. }
                ) {
                    let _ = actor.send_message(ExecutorMsg::Event(event));
                }
            }
        }
        // Spilled once its records are queued: the file is not on the
        // way from a line printed to its record committed.
        if let Some(file) = spill.as_mut() {
            if file.write_all(&chunk[..n]).await.is_err() {
                spill = None;
            }
        }
        pending.drain(..start);
        if pending.len() > super::MAX_LINE {
            break Some(format!(
                "it printed a line over {} MiB, which is not one of its records; its whole output \
                 is in {}",
                super::MAX_LINE / (1024 * 1024),
                output.display()
            ));
        }
    };
    if let Some(file) = spill.as_mut() {
        let _ = file.flush().await;
    }
    // Its end is told once everything it printed is in the record.
    drop(committed);
    let _ = told.await;
    let _ = actor.send_message(ExecutorMsg::OutputEnded(failure));
}

/// A task that tells the record's watchers when the writes it is handed
/// commit: it waits for the newest one handed so far (the writer commits
/// in order, so the earlier ones are in too), then says so once. It ends
/// when its sender is dropped and the last write is in.
fn tell_when_committed(
    delegations: Arc<Delegations>,
) -> (
    tokio::sync::mpsc::UnboundedSender<troupe_runtime::store::Pending<()>>,
    tokio::task::JoinHandle<()>,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<troupe_runtime::store::Pending<()>>();
    let task = tokio::spawn(async move {
        while let Some(mut newest) = rx.recv().await {
            while let Ok(later) = rx.try_recv() {
                newest = later;
            }
            let _ = newest.wait().await;
            tracing::trace!("events committed");
            delegations.record_grew();
        }
    });
    (tx, task)
}

/// Queues what the record keeps of `event` for the writer (in order).
async fn keep(
    node: &Node,
    delegation: DelegationId,
    sub: SubagentId,
    event: &Event,
    line: &str,
    (garbage, spent): (&mut usize, &mut f64),
) -> Option<troupe_runtime::store::Pending<()>> {
    let now = chrono::Utc::now();
    let limit = match event {
        Event::Assistant {
            error: Some(error), ..
        } => super::limit::usage_limit(error, now),
        Event::RateLimit(state) if state.rejected() => Some(super::limit::UsageLimit {
            why: state.describe(),
            resets_at: state.resets_at,
        }),
        _ => None,
    };
    let cost = match *event {
        Event::Cost { usd, running: true } => {
            // A running total: what it added since the last one.
            let added = (usd - *spent).max(0.0);
            *spent = spent.max(usd);
            added
        }
        Event::Cost {
            usd,
            running: false,
        } => usd.max(0.0),
        _ => 0.0,
    };
    let (kind, text, tokens, session): (&str, String, u64, Option<String>) = match event {
        Event::Record { kind, text } => (kind, text.clone(), 0, None),
        Event::ToolStarted(text) | Event::ToolEnded(text) => ("tool", text.clone(), 0, None),
        Event::Assistant { text, tokens, .. } => match &limit {
            Some(limit) => (
                "note",
                format!("usage limit reached: {}", limit.why),
                *tokens,
                None,
            ),
            None => ("message", text.clone(), *tokens, None),
        },
        Event::Session(file) => ("note", String::new(), 0, Some(file.clone())),
        Event::RateLimit(state) if state.rejected() || state.status == "allowed_warning" => {
            ("note", state.describe(), 0, None)
        }
        Event::RateLimit(_) | Event::Cost { .. } => ("note", String::new(), 0, None),
        Event::Refused { command, error } => {
            ("note", format!("`{command}` refused: {error}"), 0, None)
        }
        Event::Garbage => {
            *garbage += 1;
            if *garbage > GARBAGE_NOTED {
                return None;
            }
            (
                "note",
                harness::bounded(&format!("not a record: {line}")),
                0,
                None,
            )
        }
        Event::AgentEnd | Event::Ignored => return None,
    };
    if text.trim().is_empty() && tokens == 0 && session.is_none() && cost <= 0.0 {
        return None;
    }
    let kind = kind.to_string();
    node.store()
        .submit(move |tx| {
            if !text.trim().is_empty() {
                record::event(tx, delegation, Some(sub), &kind, &text)?;
            }
            if tokens > 0 || session.is_some() {
                tx.prepare_cached(
                    "UPDATE subagents SET tokens = tokens + ?2, session = COALESCE(?3, session) WHERE id = ?1",
                )?
                .execute(params![sub.to_string(), tokens as i64, session])?;
            }
            let id = sub.to_string();
            if tokens > 0 || cost > 0.0 {
                executor_usage::add_by_instance(tx, &id, now.timestamp(), tokens, cost)?;
            }
            if let Some(limit) = &limit {
                if let Some((executor, account)) = executor_usage::account_of(tx, &id)? {
                    let limit = executor_usage::Limit {
                        reached_at: now.timestamp(),
                        resets_at: limit.resets_at,
                        why: limit.why.clone(),
                    };
                    executor_usage::reach(tx, (&executor, &account), &limit, Some(&id))?;
                }
            }
            Ok(())
        })
        .await
        .ok()
}
