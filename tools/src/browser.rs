//! troupe's own browser: a Chrome, Edge or Chromium driven over the
//! DevTools protocol, for `browser_exec`.
//!
//! One [`Browser`] per process owns at most one running browser per
//! [`Mode`], through the Browser actor ([`actor`]) under the node's
//! supervisor. A browser starts on first use, and the next call after it
//! died starts a new one (a call in flight when it died gets an error
//! result saying so); its tab and the workspace folder last across calls,
//! and it is stopped after `[browser] idle_s` seconds unused. The protocol
//! client is troupe's own ([`cdp`]): small, and tolerant of the events and
//! fields of browsers newer than itself. The helpers' work on a page is in
//! [`page`]; the Python module the agent's programs import, and the socket
//! it reaches troupe by, in [`control`].
//!
//! On disk, in the home's `browser/`: `profile/` (the `profile` mode's
//! persistent profile, where the user signs in once), `workspace/` (the
//! programs' `$BH_AGENT_WORKSPACE`), `<mode>.log` (the browser's own
//! messages), and `calls/` (each call's socket, gone when it ends).

pub mod actor;
pub mod cdp;
pub mod chrome;
pub mod control;
pub mod page;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::RwLock;
use ractor::{Actor, ActorCell, ActorRef};
use troupe_runtime::home::Home;
use troupe_runtime::supervise::ChildSpec;

use actor::{BrowserActor, BrowserMsg};
pub use page::Instance;

/// Which browser a call drives.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, Default, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// troupe's persistent profile in its home, where the user signs in
    /// once (a window where there is a display)
    #[default]
    Profile,
    /// a fresh profile, thrown away when the browser stops
    Clean,
    /// a fresh profile, without a window
    Headless,
}

impl Mode {
    /// Every mode.
    pub const ALL: [Mode; 3] = [Mode::Profile, Mode::Clean, Mode::Headless];

    /// Its name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Profile => "profile",
            Self::Clean => "clean",
            Self::Headless => "headless",
        }
    }
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Whether this session has a display a window can open on.
pub fn has_display() -> bool {
    ["DISPLAY", "WAYLAND_DISPLAY"]
        .iter()
        .any(|v| std::env::var_os(v).is_some_and(|s| !s.is_empty()))
}

/// What the browser is and where its files go.
#[derive(Debug, Clone)]
pub struct BrowserSettings {
    /// The program (found by [`chrome::find`]).
    pub program: PathBuf,
    /// The home's `browser/` folder.
    pub dir: PathBuf,
    /// A browser unused this long is stopped.
    pub idle: Duration,
    /// Whether windows may open (a display is there); without, every
    /// mode runs headless.
    pub display: bool,
    /// `[web]`'s outside-the-machine rules, which every request of the
    /// browser's pages follows (through its egress proxy).
    pub policy: crate::web::guard::Policy,
}

impl BrowserSettings {
    /// The browser `[browser]` names or the one found on `PATH`, with its
    /// files in `home`'s `browser/` and its pages under `[web]`'s rules;
    /// `Err` says why there is none.
    pub fn configured(
        config: &troupe_runtime::config::Config,
        home: &Home,
    ) -> Result<Self, String> {
        let program = chrome::find(config.browser.chrome.as_deref())?;
        Ok(Self {
            program,
            dir: home.root().join("browser"),
            idle: Duration::from_secs(config.browser.idle_s.max(1)),
            display: has_display(),
            policy: crate::web::guard::Policy::from_settings(&config.web),
        })
    }

    /// The programs' workspace folder (`$BH_AGENT_WORKSPACE`).
    pub fn workspace(&self) -> PathBuf {
        self.dir.join("workspace")
    }

    /// The folder of each call's control socket.
    pub fn calls(&self) -> PathBuf {
        self.dir.join("calls")
    }
}

/// A browser's state, as `troupe browser status` shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Running {
    /// Its mode.
    pub mode: Mode,
    /// Its process id.
    pub pid: Option<u32>,
    /// Its DevTools address.
    pub endpoint: String,
}

/// The handle on the process's browsers: the Browser actor's address.
pub struct Browser {
    settings: BrowserSettings,
    actor: RwLock<Option<ActorRef<BrowserMsg>>>,
    first: tokio::sync::Mutex<()>,
}

impl std::fmt::Debug for Browser {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Browser")
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl Browser {
    /// A handle on browsers started as `settings` says (none yet).
    pub fn new(settings: BrowserSettings) -> Arc<Self> {
        Arc::new(Self {
            settings,
            actor: RwLock::new(None),
            first: tokio::sync::Mutex::new(()),
        })
    }

    /// Its settings.
    pub fn settings(&self) -> &BrowserSettings {
        &self.settings
    }

    /// The Browser actor as a child named `browser` of a node's root: each
    /// incarnation becomes the one this handle talks to.
    pub fn child(self: &Arc<Self>) -> ChildSpec {
        let weak = Arc::downgrade(self);
        ChildSpec::new("browser", move |supervisor: ActorCell| {
            let weak = weak.clone();
            async move {
                let this = weak.upgrade().ok_or("the node is stopping")?;
                let (actor, _) =
                    Actor::spawn_linked(None, BrowserActor, this.settings.clone(), supervisor)
                        .await?;
                *this.actor.write() = Some(actor.clone());
                Ok(actor.get_cell())
            }
        })
    }

    /// The actor, started on first use when no node started it.
    async fn actor(&self) -> Result<ActorRef<BrowserMsg>, String> {
        if let Some(actor) = self.actor.read().clone() {
            return Ok(actor);
        }
        let _first = self.first.lock().await;
        if let Some(actor) = self.actor.read().clone() {
            return Ok(actor);
        }
        let (actor, _) = Actor::spawn(None, BrowserActor, self.settings.clone())
            .await
            .map_err(|e| format!("the browser's actor did not start: {e}"))?;
        *self.actor.write() = Some(actor.clone());
        Ok(actor)
    }

    /// The running browser of `mode`, started if there is none.
    pub async fn acquire(&self, mode: Mode) -> Result<Arc<Instance>, String> {
        let actor = self.actor().await?;
        ractor::call!(actor, |reply| BrowserMsg::Acquire { mode, reply })
            .map_err(|e| format!("the browser's actor did not answer: {e}"))?
    }

    /// Stops the browser of `mode` (every mode when `None`); the modes
    /// that were running.
    pub async fn stop(&self, mode: Option<Mode>) -> Result<Vec<Mode>, String> {
        let Some(actor) = self.actor.read().clone() else {
            return Ok(Vec::new());
        };
        ractor::call!(actor, |reply| BrowserMsg::Stop { mode, reply })
            .map_err(|e| format!("the browser's actor did not answer: {e}"))
    }

    /// The browsers running now.
    pub async fn status(&self) -> Result<Vec<Running>, String> {
        let Some(actor) = self.actor.read().clone() else {
            return Ok(Vec::new());
        };
        ractor::call!(actor, |reply| BrowserMsg::Status { reply })
            .map_err(|e| format!("the browser's actor did not answer: {e}"))
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Some(actor) = self.actor.get_mut().take() {
            actor.stop(Some("its handle was dropped".into()));
        }
    }
}
