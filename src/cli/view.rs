//! The read-only view of a home that the listing commands read.
//!
//! Listing conversations must not start a node: starting one resumes every
//! turn the store shows as running, and those may be turns another live
//! process is running (a second terminal's `troupe conversations` took
//! over the first one's turn). So `bots`, `conversations`, `show`,
//! `search`, `usage`, `routines` and the `proposals` listing read the
//! home's configuration and open its store read-only
//! ([`Store::open_read_only`]), and nothing else: no lock, no node, no
//! model, no write. They run beside the home's owner and see what it
//! committed.

use std::path::PathBuf;

use troupe_actors::bot::BotRecord;
use troupe_actors::node::{bots, NodeError};
use troupe_runtime::config::Config;
use troupe_runtime::home::{traces_of_use, Home, MAIN_AGENT};
use troupe_runtime::id::BotId;
use troupe_runtime::rusqlite::Connection;
use troupe_runtime::store::{health, OpenOptions, Store, StoreError};

/// A home opened for reading.
pub struct View {
    /// The home's configuration (a bad one is refused here as everywhere).
    pub config: Config,
    /// Its store, or `None` before anything ran in the home.
    store: Option<Store>,
    /// The home.
    pub home: Home,
}

impl View {
    /// Reads `home`'s configuration (with `overrides`) and opens its store
    /// read-only; creates nothing.
    pub async fn open(
        home: Option<PathBuf>,
        overrides: &[(String, String)],
    ) -> anyhow::Result<View> {
        let home = home.map(Home::new).unwrap_or_else(Home::from_env);
        let env = |k: &str| std::env::var(k).ok();
        let config = Config::load(&home, &env, overrides)?;
        let opened = home.clone();
        let store = tokio::task::spawn_blocking(move || open_store(&opened)).await??;
        Ok(View {
            config,
            store,
            home,
        })
    }

    /// Runs `f` on a reader; `T::default()` (nothing) when the home has no
    /// database yet.
    pub async fn read<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Default + Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        match &self.store {
            Some(store) => store.read(f).await,
            None => Ok(T::default()),
        }
    }

    /// Every bot, the main agent first (as a node lists them).
    pub async fn bots(&self) -> Result<Vec<BotRecord>, StoreError> {
        let mut all = self.read(bots::list).await?;
        if !all.iter().any(|b| b.spec.name == MAIN_AGENT) {
            // A node creates it at its first start.
            all.push(BotRecord {
                id: BotId::new(),
                spec: Default::default(),
            });
        }
        all.sort_by_key(|b| (b.spec.name != MAIN_AGENT, b.spec.name.clone()));
        Ok(all)
    }

    /// The bot called `name`.
    pub async fn bot(&self, name: &str) -> anyhow::Result<BotRecord> {
        self.bots()
            .await?
            .into_iter()
            .find(|b| b.spec.name == name)
            .ok_or_else(|| NodeError::NoSuchBot(name.to_string()).into())
    }
}

/// The store read-only; `None` when there is no database yet. A database
/// missing from a home that had one is an error here too, not "nothing yet".
fn open_store(home: &Home) -> Result<Option<Store>, StoreError> {
    let path = home.database();
    health::refuse_missing(&path, &traces_of_use(home))?;
    let options = OpenOptions {
        readers: 1,
        ..OpenOptions::default()
    };
    match Store::open_read_only(&path, options) {
        Ok(store) => Ok(Some(store)),
        Err(StoreError::NoDatabase { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}
