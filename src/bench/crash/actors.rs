//! The crash harness's own actor kind: durable sends to a program's actor
//! (`Runtime::send_durable`) among the kill points.
//!
//! `tally` keeps the tokens it was sent, in order, as its state; a token
//! is a durable message applied in the transaction that consumes it and
//! saves the state. A worker notes each send in `sent` before it makes it
//! and in `acks` with its delivery id once it returned (committed). After
//! the last worker settled, every acknowledged token must be in its
//! actor's stored state once (`actor_sends_lost`), and no token sent —
//! acknowledged or not — twice (`actor_sends_duplicated`).

use std::collections::HashMap;

use serde_json::json;
use troupe_actors::kinds::{ActorError, Context, Kind, KindOptions, UserActor};
use troupe_runtime::rusqlite::Connection;

use super::records::append_synced;
use super::{Files, Rng};
use crate::Runtime;

/// The kind's name.
pub const KIND: &str = "tally";

/// Its keys: two actors, so sends interleave between them.
const KEYS: [&str; 2] = ["a", "b"];

/// Keeps the tokens it was sent.
pub struct Tally;

#[async_trait::async_trait]
impl UserActor for Tally {
    type Msg = String;
    type Reply = usize;
    type State = Vec<String>;

    async fn handle(&self, cx: &mut Context<'_, Self>, token: String) -> Result<usize, ActorError> {
        cx.state_mut().push(token);
        cx.save();
        Ok(cx.state().len())
    }
}

/// Registers the kind; durable messages a killed worker left are handed
/// over now. Kept live: a passivation is not what is tested here.
pub async fn register(runtime: &Runtime) -> anyhow::Result<Kind<Tally>> {
    Ok(runtime
        .register_with(KIND, KindOptions::default().idle_after(None), |_: &str| {
            Tally
        })
        .await?)
}

/// One durable send of `token` to one of the kind's actors: noted before,
/// acknowledged with its delivery id after.
pub async fn send(
    runtime: &Runtime,
    tally: &Kind<Tally>,
    files: &Files,
    token: &str,
    rng: &mut Rng,
) -> anyhow::Result<()> {
    let key = KEYS[rng.below(KEYS.len() as u64) as usize];
    append_synced(&files.sent, &format!("actor\t{key}\t{token}\n"))?;
    let id = runtime
        .send_durable(&tally.address(key), token.to_string())
        .await?;
    append_synced(&files.acks, &format!("actor\t{key}\t{token}\t{id}\n"))?;
    Ok(())
}

/// Every acknowledged send applied once; none sent applied twice.
pub fn check(
    db: &Connection,
    files: &Files,
    out: &mut serde_json::Map<String, serde_json::Value>,
) -> anyhow::Result<()> {
    let mut applied: HashMap<(String, String), usize> = HashMap::new();
    for key in KEYS {
        let stored: Option<String> = db
            .query_row(
                "SELECT value FROM kv WHERE key = ?1",
                [format!("actor:{KIND}/{key}")],
                |r| r.get(0),
            )
            .ok();
        let tokens: Vec<String> = match stored {
            Some(json) => serde_json::from_str(&json)?,
            None => Vec::new(),
        };
        for token in tokens {
            *applied.entry((key.to_string(), token)).or_default() += 1;
        }
    }
    let count = |key: &str, token: &str| {
        applied
            .get(&(key.to_string(), token.to_string()))
            .copied()
            .unwrap_or(0)
    };
    let read = |path: &std::path::Path| -> Vec<Vec<String>> {
        super::records::read(path)
            .into_iter()
            .filter(|l| l.first().is_some_and(|k| k == "actor"))
            .collect()
    };
    let (sent, acks) = (read(&files.sent), read(&files.acks));
    let lost = acks
        .iter()
        .filter(|a| matches!(a.as_slice(), [_, key, token, _] if count(key, token) == 0))
        .count();
    let duplicated = sent
        .iter()
        .filter(|s| matches!(s.as_slice(), [_, key, token] if count(key, token) > 1))
        .count();
    out.insert("actor_sends".into(), json!(sent.len()));
    out.insert("actor_sends_acknowledged".into(), json!(acks.len()));
    out.insert(
        "actor_sends_applied".into(),
        json!(applied.values().sum::<usize>()),
    );
    out.insert("actor_sends_lost".into(), json!(lost));
    out.insert("actor_sends_duplicated".into(), json!(duplicated));
    Ok(())
}
