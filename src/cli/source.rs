//! Where `troupe house …`, `troupe thread …` and `troupe files …` read a
//! house from.
//!
//! One rule for every such command: when a `troupe serve` holds the home,
//! the command asks it (over the owner's socket, [`Remote`]); else it
//! reads the home's store read-only. The server knows what the store
//! cannot: in a cluster, a house of another node is answered by that node
//! through this one (docs/cluster.md), and a house on a node that is down
//! gets the server's 503 naming the node. Either way the command gets the
//! same typed values, so it prints the same lines.

use serde::de::DeserializeOwned;
use troupe_actors::house::Rules;
use troupe_runtime::protocol::house::{Member, ThreadFilter, ThreadHit, ThreadInfo, ThreadMessage};
use troupe_runtime::store::house as table;

use super::house::{find_house, no_house};
use super::remote::{encode, Refused, Remote};
use super::view::View;

mod files;

/// The most messages one request to the server returns (its page).
const PAGE: usize = 500;

/// A house's data as the CLI reads it.
pub enum Source {
    /// The server holding the home.
    Server(Remote),
    /// The home's store, read-only (no server runs).
    Store(Box<View>),
}

impl Source {
    /// The server holding the home at `home`, else the store `read_only`
    /// opens.
    pub async fn open<F>(
        home: Option<&std::path::Path>,
        read_only: impl FnOnce() -> F,
    ) -> anyhow::Result<Source>
    where
        F: std::future::Future<Output = anyhow::Result<View>>,
    {
        match Remote::find(home) {
            Some(remote) => Ok(Source::Server(remote)),
            None => Ok(Source::Store(Box::new(read_only().await?))),
        }
    }

    /// `GET /api/houses/{house}{rest}`, its field `field`; a house the
    /// server does not know gets the same error as the store's.
    async fn get<T: DeserializeOwned>(
        remote: &Remote,
        house: &str,
        rest: &str,
        field: &str,
    ) -> anyhow::Result<T> {
        let path = format!("/houses/{}{rest}", encode(house));
        let mut answer = remote.get(&path).await.map_err(|e| unknown(e, house))?;
        Ok(serde_json::from_value(answer[field].take())?)
    }

    /// A house's members: people, then bots.
    pub async fn members(&self, house: &str) -> anyhow::Result<Vec<Member>> {
        match self {
            Source::Server(remote) => Self::get(remote, house, "/members", "members").await,
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                Ok(view.read(move |c| table::members(c, h.id)).await?)
            }
        }
    }

    /// A house's threads, most recently active first.
    pub async fn threads(
        &self,
        house: &str,
        archived: bool,
        limit: usize,
    ) -> anyhow::Result<Vec<ThreadInfo>> {
        match self {
            Source::Server(remote) => {
                let query = format!("/threads?archived={archived}&limit={limit}");
                Self::get(remote, house, &query, "threads").await
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let filter = ThreadFilter {
                    include_archived: archived,
                    limit,
                    ..ThreadFilter::default()
                };
                Ok(view
                    .read(move |c| table::list_threads(c, h.id, &filter))
                    .await?)
            }
        }
    }

    /// A thread's messages, oldest first: `limit` before the newest
    /// `offset`.
    pub async fn messages(
        &self,
        house: &str,
        thread: &str,
        offset: usize,
        limit: usize,
    ) -> anyhow::Result<Vec<ThreadMessage>> {
        match self {
            Source::Server(remote) => {
                // The server answers a page at a time: newest pages first,
                // each put before the ones read already.
                let mut messages: Vec<ThreadMessage> = Vec::new();
                let (mut skipped, mut left) = (offset, limit);
                while left > 0 {
                    let n = left.min(PAGE);
                    let rest = format!(
                        "/threads/{}/messages?offset={skipped}&limit={n}",
                        encode(thread)
                    );
                    let page: Vec<ThreadMessage> =
                        Self::get(remote, house, &rest, "messages").await?;
                    let short = page.len() < n;
                    messages.splice(0..0, page);
                    if short {
                        break;
                    }
                    skipped += n;
                    left -= n;
                }
                Ok(messages)
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let owned = thread.to_string();
                let t = view
                    .read(move |c| table::resolve_thread(c, h.id, &owned))
                    .await?
                    .ok_or_else(|| {
                        anyhow::anyhow!(
                            "`{house}` has no thread `{thread}`; `troupe thread list {house}` lists them"
                        )
                    })?;
                Ok(view
                    .read(move |c| table::read_messages(c, t.id, offset, limit))
                    .await?)
            }
        }
    }

    /// Hits for `query` among a house's thread messages, best first.
    pub async fn search(
        &self,
        house: &str,
        query: &str,
        limit: usize,
    ) -> anyhow::Result<Vec<ThreadHit>> {
        match self {
            Source::Server(remote) => {
                let rest = format!("/search?q={}&limit={limit}", encode(query));
                Self::get(remote, house, &rest, "hits").await
            }
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                let q = query.to_string();
                Ok(view
                    .read(move |c| table::search(c, h.id, &q, limit))
                    .await?)
            }
        }
    }

    /// A house's turn-taking rules.
    pub async fn rules(&self, house: &str) -> anyhow::Result<Rules> {
        match self {
            Source::Server(remote) => Self::get(remote, house, "/rules", "rules").await,
            Source::Store(view) => {
                let h = find_house(view, house).await?;
                Ok(view
                    .read(move |c| troupe_actors::house::rules_of(c, h.id))
                    .await?)
            }
        }
    }
}

/// `PUT /api/houses/{house}/rules` through the server: the rules it keeps.
pub async fn set_rules(remote: &Remote, house: &str, rules: &Rules) -> anyhow::Result<Rules> {
    let path = format!("/houses/{}/rules", encode(house));
    let mut answer = remote
        .put(&path, &serde_json::to_value(rules)?)
        .await
        .map_err(|e| unknown(e, house))?;
    Ok(serde_json::from_value(answer["rules"].take())?)
}

/// The server's 404 for a house it knows on no node, said as the store
/// says it; any other error as it is.
fn unknown(e: anyhow::Error, house: &str) -> anyhow::Error {
    match e.downcast_ref::<Refused>() {
        Some(r) if r.status == 404 && r.message == format!("no house `{house}`") => {
            anyhow::anyhow!("{}", no_house(house))
        }
        _ => e,
    }
}
