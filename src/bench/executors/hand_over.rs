//! `troupe bench executors`' hand-over leg: how long a task waits when its
//! account reaches its plan's limit and the next account takes it.
//!
//! The bench's home has a second pi account (`spare`, first in the
//! hand-over order). Each task starts on `main`, where the stand-in prints
//! one event and then fails its model call at the usage limit, stamping
//! that line with the wall time it wrote it (`"t"` in the 429 body); troupe
//! marks `main` at its limit, copies the session into `spare`'s folder and
//! starts the next instance there, which prints its first event, stamped
//! too. The hand-over is the limit line written to that first event
//! written (both the stand-in's clock), and to it recorded (seen by a
//! watcher of the record, as the first leg's "recorded" is). The next
//! instance's node starts inside it, as in a real hand-over.

use std::path::Path;
use std::time::{Duration, Instant};

use troupe_actors::delegation::record;
use troupe_actors::node::Node;
use troupe_runtime::id::SubagentId;

use super::{start, wait_ended, wall_us};

/// `config.toml` of the bench's home: pi's second account, first to take
/// over.
pub(super) const CONFIG: &str = "[executors.pi.accounts.spare]\nhand_over = 1\n";

/// The task: one event, then the usage limit on `main` (whose folder is
/// `executors/pi/sessions`); one event on `spare`.
const TASK: &str = "limit-in sessions events 1";

/// One hand-over, timed from the stand-in's stamps.
pub(super) struct HandOver {
    /// The limit line written to the next instance's process started
    /// (troupe's part, and bubblewrap's).
    pub to_process: Duration,
    /// The limit line written to the next instance's first event written.
    pub written: Duration,
    /// The limit line written to that event recorded.
    pub recorded: Duration,
    /// The same without the stand-in's own start (its process's start to
    /// its first event written: node's, not troupe's), as the start leg's
    /// overhead is given without it.
    pub recorded_without_its_start: Duration,
}

/// Runs one task through a hand-over and times it.
pub(super) async fn once(node: &Node, folder: &Path) -> anyhow::Result<HandOver> {
    let subs = start(node, folder, &[TASK]).await?;
    let sub = subs[0];
    let ((next_started, next_written), seen, limit) = next_first_event(node, sub).await?;
    wait_ended(node, &subs).await?;
    let us = |d: i64| Duration::from_micros(u64::try_from(d).unwrap_or(0));
    Ok(HandOver {
        to_process: us(next_started - limit),
        written: us(next_written - limit),
        recorded: us(seen - limit),
        recorded_without_its_start: us((next_started - limit) + (seen - next_written)),
    })
}

/// Waits until `sub`'s record holds a tool event after its hand-over note:
/// that event's stamps (its process's start, its writing), the wall time
/// it was seen, and the limit line's stamp (from the record's "usage limit
/// reached" note).
async fn next_first_event(node: &Node, sub: SubagentId) -> anyhow::Result<((i64, i64), i64, i64)> {
    let delegations = node
        .delegations()
        .ok_or_else(|| anyhow::anyhow!("the node has no delegations"))?;
    // Subscribed before the first read: no commit falls between the two.
    let mut changes = delegations.record_changes();
    let deadline = Instant::now() + Duration::from_secs(60);
    let id = sub.to_string();
    loop {
        let id = id.clone();
        let (events, running, result) = node
            .store()
            .read(move |c| {
                // The row first: an end read here has its events in by
                // the time they are read (each read sees what committed
                // before it).
                let row = record::instance(c, &id)?;
                let events = record::events_of(c, sub, 0, usize::MAX)?;
                let running = row.as_ref().is_some_and(|r| r.status == "running");
                let result = row.map(|r| format!("{}: {}", r.status, r.result));
                Ok((events, running, result))
            })
            .await?;
        let seen = wall_us();
        let limit = events
            .iter()
            .filter(|e| e.1 == "note")
            .find_map(|e| stamp(e.2.strip_prefix("usage limit reached: ")?, "\"t\":"));
        let handed = events
            .iter()
            .position(|e| e.1 == "note" && e.2.starts_with("hand-over: "));
        let next = handed.and_then(|at| {
            events[at..]
                .iter()
                .filter(|e| e.1 == "tool")
                .find_map(|e| Some((stamp(&e.2, "o=")?, stamp(&e.2, "t=")?)))
        });
        if let (Some(limit), Some(next)) = (limit, next) {
            return Ok((next, seen, limit));
        }
        anyhow::ensure!(
            running,
            "{sub} ended without a hand-over to a first event ({}): {events:#?}",
            result.unwrap_or_default()
        );
        tokio::time::timeout_at(deadline.into(), changes.changed())
            .await
            .map_err(|_| anyhow::anyhow!("{sub} was not handed over within 60 s"))??;
    }
}

/// The number after `key` in `text`.
fn stamp(text: &str, key: &str) -> Option<i64> {
    let rest = &text[text.find(key)? + key.len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_are_read_from_the_limit_note_and_a_tool_event() {
        let note =
            r#"429 {"error":{"type":"usage_limit_reached","resets_at":17},"t":1796545982205166}"#;
        assert_eq!(stamp(note, "\"t\":"), Some(1796545982205166));
        assert_eq!(stamp("bash step 1 o=5 t=42", "t="), Some(42));
        assert_eq!(stamp("bash step 1", "t="), None);
    }
}
