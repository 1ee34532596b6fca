//! The Rust API of houses: [`Node::create_house`], [`Node::house`], then
//! a [`HouseRef`] for members and threads and a [`ThreadRef`] to post,
//! read and watch.
//!
//! Every call is scoped to its house: a [`HouseRef`] finds only its own
//! threads and members.

use std::time::Duration;

use tokio::sync::broadcast;
use troupe_runtime::house::check_name;
use troupe_runtime::id::{ConversationId, MsgId};
use troupe_runtime::protocol::house::{
    House, ListenMode, Member, MemberKind, Post, ThreadFilter, ThreadHit, ThreadInfo, ThreadMessage,
};
use troupe_runtime::protocol::{Address, Envelope, Payload};
use troupe_runtime::store::house as table;

use super::watch::{ThreadEvents, ThreadMessages};
use super::{Rules, ThreadEvent};
use crate::node::{Node, NodeError};

fn refused(text: impl Into<String>) -> NodeError {
    NodeError::Refused(text.into())
}

impl Node {
    /// Makes a house named `name`, with no members yet.
    pub async fn create_house(&self, name: &str) -> Result<HouseRef, NodeError> {
        check_name("house name", name).map_err(refused)?;
        let owned = name.to_string();
        let house = self
            .store()
            .write(move |tx| {
                if table::house_by_name(tx, &owned)?.is_some() {
                    return Ok(None);
                }
                table::create_house(tx, &owned).map(Some)
            })
            .await?
            .ok_or_else(|| NodeError::Conflict(format!("a house named `{name}` exists already")))?;
        Ok(HouseRef {
            node: self.clone(),
            house,
        })
    }

    /// Every house of this home, by name.
    pub async fn houses(&self) -> Result<Vec<House>, NodeError> {
        Ok(self.store().read(table::list_houses).await?)
    }

    /// The house named `name`.
    pub async fn house(&self, name: &str) -> Result<HouseRef, NodeError> {
        let owned = name.to_string();
        let house = self
            .store()
            .read(move |c| table::house_by_name(c, &owned))
            .await?
            .ok_or_else(|| {
                refused(format!(
                    "there is no house named `{name}`; `troupe house list` lists them, `troupe house create {name}` makes it"
                ))
            })?;
        Ok(HouseRef {
            node: self.clone(),
            house,
        })
    }

    /// Events of every thread of this node.
    pub fn thread_events(&self) -> broadcast::Receiver<ThreadEvent> {
        self.threads().subscribe()
    }
}

/// A house of a node.
#[derive(Debug, Clone)]
pub struct HouseRef {
    pub(super) node: Node,
    /// The house.
    pub house: House,
}

impl HouseRef {
    /// The node it lives on.
    pub(crate) fn node(&self) -> &Node {
        &self.node
    }

    /// Its members: people first, then bots.
    pub async fn members(&self) -> Result<Vec<Member>, NodeError> {
        let id = self.house.id;
        Ok(self
            .node
            .store()
            .read(move |c| table::members(c, id))
            .await?)
    }

    /// Adds a person (or renames one already in).
    pub async fn add_human(
        &self,
        handle: &str,
        display_name: Option<&str>,
    ) -> Result<Member, NodeError> {
        check_name("handle", handle).map_err(refused)?;
        if self.node.bot(handle).is_ok() {
            return Err(refused(format!(
                "`{handle}` is a bot's name; give the person another handle, or add the bot with --bot"
            )));
        }
        self.put(Member {
            handle: handle.to_string(),
            kind: MemberKind::Human,
            display_name: display_name.unwrap_or(handle).to_string(),
            listen: None,
            bot: None,
        })
        .await
    }

    /// Adds the bot `name` of this node (or changes its listen mode).
    pub async fn add_bot(&self, name: &str, listen: ListenMode) -> Result<Member, NodeError> {
        let bot = self.node.bot(name)?;
        self.put(Member {
            handle: bot.spec.name.clone(),
            kind: MemberKind::Bot,
            display_name: bot.spec.name.clone(),
            listen: Some(listen),
            bot: Some(bot.id),
        })
        .await
    }

    async fn put(&self, member: Member) -> Result<Member, NodeError> {
        let id = self.house.id;
        let m = member.clone();
        let clash = self
            .node
            .store()
            .write(move |tx| {
                if let Some(existing) = table::member(tx, id, &m.handle)? {
                    if existing.kind != m.kind {
                        return Ok(Some(existing.kind));
                    }
                }
                table::put_member(tx, id, &m)?;
                Ok(None)
            })
            .await?;
        if let Some(kind) = clash {
            return Err(NodeError::Conflict(format!(
                "`{}` is already a {} member of `{}`",
                member.handle,
                kind.as_str(),
                self.house.name
            )));
        }
        Ok(member)
    }

    /// Takes `handle` out of the house and its threads; whether it was in.
    pub async fn remove_member(&self, handle: &str) -> Result<bool, NodeError> {
        let (id, handle) = (self.house.id, handle.to_string());
        Ok(self
            .node
            .store()
            .write(move |tx| table::remove_member(tx, id, &handle))
            .await?)
    }

    /// Opens a thread named `name` (`None`: unnamed), with `participants`.
    pub async fn create_thread(
        &self,
        name: Option<&str>,
        tags: &[String],
        created_by: &str,
        participants: &[String],
    ) -> Result<ThreadRef, NodeError> {
        if let Some(name) = name {
            check_name("thread name", name).map_err(refused)?;
        }
        for tag in tags {
            check_name("tag", tag).map_err(refused)?;
        }
        let (id, owned, tags, by, people) = (
            self.house.id,
            name.map(str::to_string),
            tags.to_vec(),
            created_by.to_string(),
            participants.to_vec(),
        );
        let info = self
            .node
            .store()
            .write(move |tx| {
                if let Some(name) = &owned {
                    if table::resolve_thread(tx, id, name)?.is_some() {
                        return Ok(None);
                    }
                }
                for handle in &people {
                    if table::member(tx, id, handle)?.is_none() {
                        return Ok(None);
                    }
                }
                table::create_thread(tx, id, owned.as_deref(), &tags, &by, &people).map(Some)
            })
            .await?;
        let Some(info) = info else {
            return Err(match name {
                Some(name) if self.thread(name).await.is_ok() => NodeError::Conflict(format!(
                    "`{}` has a thread named `{name}` already; pick another name or post there",
                    self.house.name
                )),
                _ => refused(format!(
                    "every participant must be a member of `{}`; `troupe house members {}` lists them",
                    self.house.name, self.house.name
                )),
            });
        };
        Ok(ThreadRef {
            node: self.node.clone(),
            house: self.house.clone(),
            info,
        })
    }

    /// Its threads that `filter` keeps (most recently active first).
    pub async fn threads(&self, filter: ThreadFilter) -> Result<Vec<ThreadInfo>, NodeError> {
        let id = self.house.id;
        Ok(self
            .node
            .store()
            .read(move |c| table::list_threads(c, id, &filter))
            .await?)
    }

    /// The thread `reference` names (an id, a link or a name) in this house.
    pub async fn thread(&self, reference: &str) -> Result<ThreadRef, NodeError> {
        let (id, owned) = (self.house.id, reference.to_string());
        let info = self
            .node
            .store()
            .read(move |c| table::resolve_thread(c, id, &owned))
            .await?
            .ok_or_else(|| {
                refused(format!(
                    "`{}` has no thread `{reference}`; `troupe thread list {}` lists them",
                    self.house.name, self.house.name
                ))
            })?;
        Ok(ThreadRef {
            node: self.node.clone(),
            house: self.house.clone(),
            info,
        })
    }

    /// Keyword search over its threads' messages, best first.
    pub async fn search(&self, query: &str, limit: usize) -> Result<Vec<ThreadHit>, NodeError> {
        let (id, q) = (self.house.id, query.to_string());
        Ok(self
            .node
            .store()
            .read(move |c| table::search(c, id, &q, limit))
            .await?)
    }

    /// Its turn-taking rules.
    pub async fn rules(&self) -> Result<Rules, NodeError> {
        let id = self.house.id;
        Ok(self
            .node
            .store()
            .read(move |c| super::rules_of(c, id))
            .await?)
    }

    /// Sets its turn-taking rules (from the next message posted).
    pub async fn set_rules(&self, rules: Rules) -> Result<(), NodeError> {
        let id = self.house.id.to_string();
        let json = serde_json::to_string(&rules).map_err(|e| refused(e.to_string()))?;
        self.node
            .store()
            .write(move |tx| {
                tx.execute(
                    "UPDATE houses SET settings = json_set(settings, '$.rules', json(?2)) WHERE id = ?1",
                    troupe_runtime::rusqlite::params![id, json],
                )?;
                Ok(())
            })
            .await?;
        Ok(())
    }
}

/// A thread of a house.
#[derive(Debug, Clone)]
pub struct ThreadRef {
    node: Node,
    /// Its house.
    pub house: House,
    /// The thread as it was when this handle was made.
    pub info: ThreadInfo,
}

impl ThreadRef {
    /// Posts `text` as the person `author` (a human member of the house):
    /// committed before this returns the post's id, then handed to the
    /// thread's director.
    pub async fn post(&self, author: &str, text: &str) -> Result<MsgId, NodeError> {
        if text.trim().is_empty() {
            return Err(refused("the message is empty"));
        }
        self.node.settings().check_user_message(text)?;
        let (house, handle) = (self.house.id, author.to_string());
        let member = self
            .node
            .store()
            .read(move |c| table::member(c, house, &handle))
            .await?;
        match member {
            Some(m) if m.kind == MemberKind::Human => {}
            Some(_) => {
                return Err(refused(format!(
                    "`{author}` is a bot; bots speak in threads through their turns"
                )))
            }
            None => {
                return Err(refused(format!(
                    "`{author}` is not a member of `{}`; add them with `troupe house add {} --human {author}`",
                    self.house.name, self.house.name
                )))
            }
        }
        if self.info.archived {
            return Err(refused(format!(
                "thread `{}` is archived; unarchive it first (`troupe thread unarchive {} {}`)",
                self.info.label(),
                self.house.name,
                self.info.label()
            )));
        }
        let envelope = Envelope {
            id: MsgId::new(),
            from: Address::Service(format!("human:{author}")),
            to: Address::Thread(self.info.id),
            body: Payload::Post(Post {
                author: author.to_string(),
                author_kind: MemberKind::Human,
                text: text.to_string(),
                round: None,
                depth: 0,
                via: None,
                answers_offer: false,
                failed: None,
                attachments: Vec::new(),
            }),
            sent_at: chrono::Utc::now(),
        };
        self.node.post_to_thread(envelope).await
    }

    /// Posts like [`ThreadRef::post`] and waits until the round it starts
    /// settles (every offered bot answered), at most `timeout`; returns
    /// the answers — the round's messages after the post — in the order
    /// they landed.
    pub async fn post_and_wait(
        &self,
        author: &str,
        text: &str,
        timeout: Duration,
    ) -> Result<Vec<ThreadMessage>, NodeError> {
        let mut events = self.node.thread_events();
        let round = self.post(author, text).await?;
        let mut landed = Vec::new();
        let wait = async {
            loop {
                match events.recv().await {
                    Ok(ThreadEvent::Posted(p)) if p.round == round && p.message.id != round => {
                        landed.push(p.message)
                    }
                    Ok(ThreadEvent::RoundSettled { round: r, .. }) if r == round => return Ok(()),
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => {}
                    Err(broadcast::error::RecvError::Closed) => {
                        return Err(refused("the node stopped before the round settled"))
                    }
                }
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(r) => r.map(|()| landed),
            Err(_) => Err(refused(format!(
                "the round did not settle within {} s; the bots' answers will still land in the thread",
                timeout.as_secs()
            ))),
        }
    }

    /// A page of its messages, oldest first: `limit` before the newest `offset`.
    pub async fn read(&self, offset: usize, limit: usize) -> Result<Vec<ThreadMessage>, NodeError> {
        let id = self.info.id;
        Ok(self
            .node
            .store()
            .read(move |c| table::read_messages(c, id, offset, limit))
            .await?)
    }

    /// Its messages after `seq`, oldest first, at most `limit`: how a
    /// watcher that reconnects catches up.
    pub async fn read_after(
        &self,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<ThreadMessage>, NodeError> {
        let id = self.info.id;
        Ok(self
            .node
            .store()
            .read(move |c| table::messages_from(c, id, seq, limit))
            .await?)
    }

    /// Its messages before `seq` (the newest `limit` of them), oldest
    /// first: paging back.
    pub async fn read_before(
        &self,
        seq: i64,
        limit: usize,
    ) -> Result<Vec<ThreadMessage>, NodeError> {
        let id = self.info.id;
        Ok(self
            .node
            .store()
            .read(move |c| table::messages_before(c, id, seq, limit))
            .await?)
    }

    /// Archives or unarchives it; whether that changed anything.
    ///
    /// Archiving ends the thread's round: the turns running in it are
    /// stopped, and an answer still on its way stays in its bot's
    /// conversation instead of landing in the thread.
    pub async fn set_archived(&self, archived: bool) -> Result<bool, NodeError> {
        self.set_archived_by(archived, None).await
    }

    /// [`Self::set_archived`] asked by the turn of `caller` (`archive_thread`),
    /// which is left to finish: its answer stays in its conversation.
    pub async fn set_archived_by(
        &self,
        archived: bool,
        caller: Option<ConversationId>,
    ) -> Result<bool, NodeError> {
        let id = self.info.id;
        let (changed, seats) = self
            .node
            .store()
            .write(move |tx| {
                let changed = table::set_archived(tx, id, archived)?;
                let seats = if changed && archived {
                    table::seats_of(tx, id)?
                } else {
                    Vec::new()
                };
                Ok((changed, seats))
            })
            .await?;
        for conversation in seats.into_iter().filter(|c| Some(*c) != caller) {
            self.node.stop(conversation).await?;
        }
        Ok(changed)
    }

    /// Pins it to the top of the house's lists, or unpins it; whether that
    /// changed anything.
    pub async fn set_pinned(&self, pinned: bool) -> Result<bool, NodeError> {
        let id = self.info.id;
        Ok(self
            .node
            .store()
            .write(move |tx| table::set_pinned(tx, id, pinned))
            .await?)
    }

    /// Adds a member of the house; whether it was not in yet.
    pub async fn add_participant(&self, handle: &str) -> Result<bool, NodeError> {
        let (house, id, h) = (self.house.id, self.info.id, handle.to_string());
        self.node
            .store()
            .write(move |tx| {
                if table::member(tx, house, &h)?.is_none() {
                    return Ok(None);
                }
                table::add_participant(tx, id, &h).map(Some)
            })
            .await?
            .ok_or_else(|| {
                refused(format!(
                    "`{handle}` is not a member of `{}`",
                    self.house.name
                ))
            })
    }

    /// Takes someone out; whether they were in.
    pub async fn remove_participant(&self, handle: &str) -> Result<bool, NodeError> {
        let (id, h) = (self.info.id, handle.to_string());
        Ok(self
            .node
            .store()
            .write(move |tx| table::remove_participant(tx, id, &h))
            .await?)
    }

    /// The thread as it is now.
    pub async fn refresh(&self) -> Result<ThreadInfo, NodeError> {
        let id = self.info.id;
        self.node
            .store()
            .read(move |c| table::thread(c, id))
            .await?
            .ok_or_else(|| refused("the thread is gone"))
    }

    /// Its events from now on, as a stream ([`ThreadEvents`]).
    pub fn events(&self) -> ThreadEvents {
        ThreadEvents::new(self.info.id, self.node.thread_events(), self.node.stopped())
    }

    /// The messages posted to it from now on, as a stream
    /// ([`ThreadMessages`]).
    pub fn messages(&self) -> ThreadMessages {
        ThreadMessages::new(self.events())
    }
}
