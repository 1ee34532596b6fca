//! What a conversation commits, and how it reads its history back.
//!
//! Every write is one store job, so it lands in the writer's next group
//! commit and returns only once durable. A compaction is recorded as a
//! segment: the summary message, and how many messages before it stay
//! verbatim; loading a conversation reads its latest segment only.
//!
//! A journal may be *fenced* to one incarnation of its conversation's
//! actor. When the actor crashes and its supervisor starts the next one,
//! the new incarnation takes the fence: what the old one queued before
//! lands first, and every later write of the old one — a step task still
//! finishing a model call or a tool — is refused before it is queued. So a
//! conversation never gets two results for one call, or an answer after
//! its turn was resumed, and never loses what its last turn committed.

use troupe_runtime::id::{BotId, ConversationId, MsgId};
use troupe_runtime::protocol::{Envelope, Message, TurnOutcome, Usage};

use crate::node::{Closing, Committed};
use troupe_runtime::rusqlite::{params, OptionalExtension, Transaction};
use troupe_runtime::store::conversations::PreparedMessage;
use troupe_runtime::store::{self, conversations, mailbox, usage, Store, StoreError};

/// The conversation's link to the store; `None` when durability is off.
#[derive(Clone, Debug)]
pub struct Journal {
    store: Option<Store>,
    conversation: ConversationId,
    bot: BotId,
    fence: Option<Fence>,
    /// Its keys in `kv`, printed once (with a store) for all its writes.
    keys: Option<std::sync::Arc<TurnKeys>>,
}

/// Which incarnation of a conversation's actor may write: the one whose
/// number the shared gate holds.
///
/// A write is checked and *queued* under the gate's read lock; a takeover
/// bumps the number under its write lock and then waits for what is queued
/// ([`Journal::settle`]). So every write queued before the takeover — the
/// last turn's legitimate work, even if it lands late — is in the history
/// the new incarnation loads, and nothing queued after it gets in.
#[derive(Clone, Debug)]
pub struct Fence {
    gate: std::sync::Arc<tokio::sync::RwLock<u64>>,
    mine: u64,
}

impl Fence {
    /// Takes the fence: the incarnation this returns for is the only one
    /// allowed to write from now on.
    pub async fn take(gate: &std::sync::Arc<tokio::sync::RwLock<u64>>) -> Self {
        let mut current = gate.write().await;
        *current += 1;
        Self {
            gate: std::sync::Arc::clone(gate),
            mine: *current,
        }
    }
}

/// Refused: a newer incarnation of the conversation took over.
fn superseded() -> StoreError {
    StoreError::Aborted("this incarnation of the conversation was replaced after a crash".into())
}

type Result<T> = std::result::Result<T, StoreError>;

impl Journal {
    /// The journal of `conversation`.
    pub fn new(store: Option<Store>, conversation: ConversationId, bot: BotId) -> Self {
        let keys = store
            .is_some()
            .then(|| std::sync::Arc::new(TurnKeys::new(conversation)));
        Self {
            store,
            conversation,
            bot,
            fence: None,
            keys,
        }
    }

    /// Its keys in `kv`, for a write's job (made with a store).
    fn keys(&self) -> std::sync::Arc<TurnKeys> {
        match &self.keys {
            Some(keys) => std::sync::Arc::clone(keys),
            None => std::sync::Arc::new(TurnKeys::new(self.conversation)),
        }
    }

    /// This journal, writing only while `fence` is current.
    pub fn fenced(mut self, fence: Fence) -> Self {
        self.fence = Some(fence);
        self
    }

    /// Queues `job` if this journal's incarnation still holds the fence.
    async fn submit<T, F>(&self, store: &Store, job: F) -> Result<store::Pending<T>>
    where
        T: Send + 'static,
        F: Fn(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        match &self.fence {
            Some(fence) => {
                let current = fence.gate.read().await;
                if *current != fence.mine {
                    return Err(superseded());
                }
                store.submit(job).await
            }
            None => store.submit(job).await,
        }
    }

    /// Queues `job` (if the fence allows) and waits for its commit.
    async fn write<T, F>(&self, store: &Store, job: F) -> Result<T>
    where
        T: Send + 'static,
        F: Fn(&Transaction<'_>) -> Result<T> + Send + 'static,
    {
        self.submit(store, job).await?.wait().await
    }

    /// Waits until every write queued before this call is committed (or
    /// refused): a new incarnation calls it after taking the fence, so it
    /// loads a history no older write can still change.
    pub async fn settle(&self) -> Result<()> {
        match &self.store {
            Some(store) => store.write(|_| Ok(())).await,
            None => Ok(()),
        }
    }

    /// Creates the conversation's row if it has none.
    pub async fn ensure(
        &self,
        kind: &str,
        parent: Option<ConversationId>,
        title: &str,
    ) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let mut new = conversations::NewConversation::new(self.conversation, self.bot, kind);
        new.parent = parent;
        new.title = title.chars().take(80).collect();
        self.write(store, move |tx| {
            conversations::create_conversation_if_missing(tx, &new).map(drop)
        })
        .await
    }

    /// The model-visible history: the latest segment's summary, the messages
    /// it kept verbatim, and everything after it.
    pub async fn load(&self) -> Result<Vec<Message>> {
        let Some(store) = &self.store else {
            return Ok(Vec::new());
        };
        let conv = self.conversation.to_string();
        store
            .read(move |conn| {
                let segment: Option<(i64, i64)> = conn
                    .prepare_cached(
                        "SELECT summary_seq, tail_count FROM segments WHERE conversation_id = ?1
                         ORDER BY summary_seq DESC LIMIT 1",
                    )?
                    .query_row(params![conv], |r| Ok((r.get(0)?, r.get(1)?)))
                    .optional()?;
                let decode = |(body, text): (String, String)| conversations::decode_message(&body, text);
                let rows = |sql: &str, p: &[&dyn troupe_runtime::rusqlite::ToSql]| -> Result<Vec<(String, String)>> {
                    let mut stmt = conn.prepare_cached(sql)?;
                    let found = stmt
                        .query_map(p, |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                        .collect::<std::result::Result<Vec<_>, _>>()?;
                    Ok(found)
                };
                let mut history = Vec::new();
                match segment {
                    None => {
                        for row in rows("SELECT body, text FROM messages WHERE conversation_id = ?1 ORDER BY seq", &[&conv])? {
                            history.push(decode(row)?);
                        }
                    }
                    Some((summary_seq, tail_count)) => {
                        for row in rows("SELECT body, text FROM messages WHERE seq = ?1", &[&summary_seq])? {
                            history.push(decode(row)?);
                        }
                        let mut tail = rows(
                            "SELECT body, text FROM messages WHERE conversation_id = ?1 AND seq < ?2 ORDER BY seq DESC LIMIT ?3",
                            &[&conv, &summary_seq, &tail_count],
                        )?;
                        tail.reverse();
                        for row in tail {
                            history.push(decode(row)?);
                        }
                        for row in rows(
                            "SELECT body, text FROM messages WHERE conversation_id = ?1 AND seq > ?2 ORDER BY seq",
                            &[&conv, &summary_seq],
                        )? {
                            history.push(decode(row)?);
                        }
                    }
                }
                Ok(history)
            })
            .await
    }

    /// Appends messages in one transaction.
    pub async fn append(&self, messages: &[Message]) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let prepared = messages
            .iter()
            .map(|m| PreparedMessage::new(self.conversation, m))
            .collect::<Result<Vec<_>>>()?;
        self.write(store, move |tx| PreparedMessage::append_all(tx, &prepared))
            .await
    }

    /// Appends an assistant message and the usage of the call that made
    /// it; with `close`, closes the turn in the same commit (see
    /// [`Journal::close_turn`]).
    pub async fn append_assistant(
        &self,
        message: &Message,
        model: &str,
        usage: Usage,
        cost_usd: f64,
        close: Option<Close>,
    ) -> Result<Vec<Committed>> {
        let Some(store) = &self.store else {
            return match close {
                Some(close) => close.alone().await,
                None => Ok(Vec::new()),
            };
        };
        let (conv, bot) = (self.conversation, self.bot);
        let prepared = PreparedMessage::new(conv, message)?;
        let usage =
            usage::PreparedUsage::new(conv, bot, model, &usage, cost_usd, chrono::Utc::now());
        let keys = self.keys();
        self.write(store, move |tx| {
            // The turn's opening was queued without waiting: if it did
            // not land, neither does what follows it.
            if !turn_is_open(tx, &keys)? {
                return Err(StoreError::Aborted(
                    "the turn's first message was not saved".into(),
                ));
            }
            prepared.append(tx)?;
            usage.add(tx)?;
            match &close {
                Some(close) => close.write(tx, &keys),
                None => Ok(Vec::new()),
            }
        })
        .await
    }

    /// Applies a delivered message: consumes it and appends it in one
    /// transaction. `false` when it was applied before (a redelivery).
    pub async fn apply_delivery(&self, envelope: Envelope, message: Message) -> Result<bool> {
        let conv = self.conversation;
        let Some(store) = &self.store else {
            return Ok(true);
        };
        let prepared = PreparedMessage::with_id(envelope.id, conv, &message)?;
        let keys = self.keys();
        let mark = open_mark(Some(&envelope))?;
        self.write(store, move |tx| {
            if !mailbox::consume(tx, envelope.id)? {
                return Ok(false);
            }
            prepared.append(tx)?;
            // The open turn records what it answers: a turn resumed
            // after a crash still replies.
            mark_turn(tx, &keys, Some(&mark))?;
            Ok(true)
        })
        .await
    }

    /// Queues the start of a turn — its first message, and the mark that
    /// the conversation is mid-turn — without waiting for it: the model
    /// call needs nothing from it, and the answer's commit (which checks
    /// the mark) follows it in the same group commit. `None` when nothing
    /// is kept.
    pub async fn open_turn(&self, first: Message) -> Result<Option<store::Pending<()>>> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let conv = self.conversation;
        let first = PreparedMessage::new(conv, &first)?;
        let keys = self.keys();
        let mark = open_mark(None)?;
        let pending = self
            .submit(store, move |tx| {
                first.append(tx)?;
                mark_turn(tx, &keys, Some(&mark))
            })
            .await?;
        Ok(Some(pending))
    }

    /// Closes the turn: clears its mark and the requests it waited on,
    /// enqueues the reply to what it answered, and writes what the node's
    /// turn hooks commit with a close (a subagent's end and its
    /// delegation's report) — one commit, so each happens exactly once.
    pub async fn close_turn(&self, close: Close) -> Result<Vec<Committed>> {
        let Some(store) = &self.store else {
            return close.alone().await;
        };
        let keys = self.keys();
        self.write(store, move |tx| close.write(tx, &keys)).await
    }

    /// Marks the conversation as mid-turn (or not), so a restart resumes it.
    pub async fn set_turn_open(&self, open: bool, first: Option<Message>) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let conv = self.conversation;
        let first = first.map(|m| PreparedMessage::new(conv, &m)).transpose()?;
        let keys = self.keys();
        let mark = open.then(|| open_mark(None)).transpose()?;
        self.write(store, move |tx| {
            if let Some(m) = &first {
                m.append(tx)?;
            }
            mark_turn(tx, &keys, mark.as_deref())
        })
        .await
    }

    /// Records a compaction: the summary message, how many messages before
    /// it stay verbatim, and the carried tools' re-reads, in one commit.
    pub async fn record_compaction(
        &self,
        summary: Message,
        tail_count: usize,
        carried: Vec<Message>,
    ) -> Result<()> {
        let Some(store) = &self.store else {
            return Ok(());
        };
        let conv = self.conversation;
        let carried = carried
            .iter()
            .map(|m| PreparedMessage::new(conv, m))
            .collect::<Result<Vec<_>>>()?;
        self.write(store, move |tx| {
                let seq = conversations::append_message_with_id(tx, MsgId::new(), conv, &summary)?;
                tx.prepare_cached(
                    "INSERT INTO segments (conversation_id, summary_seq, tail_count, created_at) VALUES (?1, ?2, ?3, ?4)",
                )?
                .execute(params![conv.to_string(), seq, tail_count as i64, store::now()])?;
                // After the summary: a reload puts them after the kept tail,
                // where the compacted history in memory has them too.
                PreparedMessage::append_all(tx, &carried)?;
                Ok(())
            })
            .await
    }

    /// The turn the store marks open, if any (never, when nothing is kept).
    pub async fn open_turn_state(&self) -> Result<Option<OpenTurn>> {
        let Some(store) = &self.store else {
            return Ok(None);
        };
        let conv = self.conversation;
        store
            .read(move |conn| {
                let value: Option<String> = conn
                    .prepare_cached("SELECT value FROM kv WHERE key = ?1")?
                    .query_row([format!("open_turn:{conv}")], |r| r.get(0))
                    .optional()?;
                // Marks written before turns recorded what they answer
                // hold a timestamp: they answer nothing.
                Ok(value.map(|v| serde_json::from_str(&v).unwrap_or_default()))
            })
            .await
    }
}

/// What a turn's close commits with it.
#[derive(Debug, Clone)]
pub struct Close {
    /// How the turn ended.
    pub outcome: TurnOutcome,
    /// Its last answer.
    pub text: String,
    /// The answer to the message it answered, if that expects one.
    pub reply: Option<Envelope>,
    /// What the node's hooks write with it.
    pub hooks: Option<Closing>,
}

impl Close {
    fn write(&self, tx: &Transaction<'_>, keys: &TurnKeys) -> Result<Vec<Committed>> {
        mark_turn(tx, keys, None)?;
        crate::channel::stored::remove_range(tx, &keys.requests)?;
        if let Some(reply) = &self.reply {
            mailbox::enqueue(tx, reply)?;
        }
        match &self.hooks {
            Some(hooks) => hooks.write(tx, &self.outcome, &self.text),
            None => Ok(Vec::new()),
        }
    }

    /// Nothing of the conversation is kept: the hooks' writes commit alone.
    async fn alone(self) -> Result<Vec<Committed>> {
        match self.hooks {
            Some(hooks) => hooks.commit_alone(self.outcome, self.text).await,
            None => Ok(Vec::new()),
        }
    }
}

/// A conversation's keys in `kv` that its turns write, printed before the
/// job reaches the store's one writer thread.
#[derive(Debug, Clone)]
struct TurnKeys {
    /// Its mark of a turn open, `open_turn:<conversation>`.
    open_turn: String,
    /// The range of its kept requests (see [`crate::channel::stored`]).
    requests: (String, String),
}

impl TurnKeys {
    fn new(conv: ConversationId) -> Self {
        Self {
            open_turn: format!("open_turn:{conv}"),
            requests: crate::channel::stored::range(conv),
        }
    }
}

/// Whether the conversation is marked mid-turn.
fn turn_is_open(tx: &Transaction<'_>, keys: &TurnKeys) -> Result<bool> {
    Ok(tx
        .prepare_cached("SELECT 1 FROM kv WHERE key = ?1")?
        .query_row([&keys.open_turn], |_| Ok(()))
        .optional()?
        .is_some())
}

/// A turn the store marks open.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct OpenTurn {
    /// When it opened.
    #[serde(default)]
    pub at: String,
    /// The delivered message it answers, if it expects a reply.
    #[serde(default)]
    pub answers: Option<Envelope>,
}

/// The mark of a turn open now, answering `answers`, as stored.
fn open_mark(answers: Option<&Envelope>) -> Result<String> {
    serde_json::to_string(&OpenTurn {
        at: store::now(),
        answers: answers.cloned(),
    })
    .map_err(|e| StoreError::Codec {
        what: "open turn",
        detail: e.to_string(),
    })
}

/// Marks the conversation as mid-turn (`Some`, with its [`open_mark`]), or not.
fn mark_turn(tx: &Transaction<'_>, keys: &TurnKeys, open: Option<&str>) -> Result<()> {
    match open {
        Some(mark) => {
            tx.prepare_cached("INSERT OR REPLACE INTO kv (key, value) VALUES (?1, ?2)")?
                .execute(params![keys.open_turn, mark])?;
        }
        None => {
            tx.prepare_cached("DELETE FROM kv WHERE key = ?1")?
                .execute(params![keys.open_turn])?;
        }
    }
    Ok(())
}

/// The conversations a crash left mid-turn.
pub async fn open_turns(store: &Store) -> Result<Vec<ConversationId>> {
    store
        .read(|conn| {
            let mut stmt = conn
                .prepare_cached("SELECT key FROM kv WHERE key LIKE 'open_turn:%' ORDER BY key")?;
            let keys = stmt
                .query_map([], |r| r.get::<_, String>(0))?
                .collect::<std::result::Result<Vec<_>, _>>()?;
            Ok(keys
                .iter()
                .filter_map(|k| k.strip_prefix("open_turn:")?.parse().ok())
                .collect())
        })
        .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_answer_lands_only_after_its_turn_opened() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let journal = Journal::new(Some(store), ConversationId::new(), BotId::new());
        journal.ensure("conversation", None, "t").await.unwrap();
        let journal = &journal;
        let answer = |text: &str| {
            let text = text.to_string();
            async move {
                journal
                    .append_assistant(
                        &Message::assistant(text.clone()),
                        "m",
                        Usage::default(),
                        0.0,
                        Some(Close {
                            outcome: TurnOutcome::Finished,
                            text,
                            reply: None,
                            hooks: None,
                        }),
                    )
                    .await
            }
        };
        // No opening (as when it failed): the answer is refused, not orphaned.
        let orphan = answer("lost").await.unwrap_err();
        assert!(
            orphan.to_string().contains("first message was not saved"),
            "{orphan}"
        );
        assert!(journal.load().await.unwrap().is_empty());

        // Queued, not waited for: the answer queued after it lands with it.
        let opening = journal
            .open_turn(Message::user("hi"))
            .await
            .unwrap()
            .unwrap();
        answer("hello").await.unwrap();
        opening.wait().await.unwrap();
        assert_eq!(
            journal.load().await.unwrap(),
            vec![Message::user("hi"), Message::assistant("hello")]
        );
        assert!(open_turns(journal.store.as_ref().unwrap())
            .await
            .unwrap()
            .is_empty());
    }

    #[tokio::test]
    async fn writes_queued_before_a_takeover_land_and_later_ones_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(&dir.path().join("t.db")).unwrap();
        let (conv, bot) = (ConversationId::new(), BotId::new());
        let gate = std::sync::Arc::new(tokio::sync::RwLock::new(0));
        let old = Journal::new(Some(store.clone()), conv, bot).fenced(Fence::take(&gate).await);
        old.ensure("conversation", None, "t").await.unwrap();
        // The old incarnation queues its turn's opening and dies before it lands.
        let queued = old.open_turn(Message::user("hi")).await.unwrap().unwrap();
        let new = Journal::new(Some(store.clone()), conv, bot).fenced(Fence::take(&gate).await);
        new.settle().await.unwrap();
        queued.wait().await.unwrap();
        assert_eq!(new.load().await.unwrap(), vec![Message::user("hi")]);
        assert!(new.open_turn_state().await.unwrap().is_some());
        // What the old one's step tasks try after the takeover is refused.
        let late = old.append(&[Message::assistant("late")]).await.unwrap_err();
        assert!(
            late.to_string().contains("replaced after a crash"),
            "{late}"
        );
        new.append(&[Message::assistant("hello")]).await.unwrap();
        assert_eq!(
            new.load().await.unwrap(),
            vec![Message::user("hi"), Message::assistant("hello")]
        );
    }
}
