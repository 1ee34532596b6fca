//! The Browser actor: owns the running browser of each mode.
//!
//! Its handlers stay short: starting a browser (about a second) runs in a
//! task whose outcome comes back as [`BrowserMsg::Started`], and callers
//! asking meanwhile wait in the slot's queue. A browser that exits — it
//! crashed, or someone killed it — is reported by its process watcher as
//! [`BrowserMsg::Exited`]; its slot empties and the next call starts a new
//! one. Each use arms an idle check `idle` later; a browser still unused
//! then (no call holds it) is stopped. The instances are dropped with the
//! actor's state however it ends, and dropping one ends its browser.

use std::collections::HashMap;
use std::sync::Arc;

use ractor::{Actor, ActorProcessingErr, ActorRef, RpcReplyPort};
use tokio_util::sync::CancellationToken;

use super::chrome::{self, Launch};
use super::page::Instance;
use super::{BrowserSettings, Mode, Running};
use crate::run_command::egress::Egress;
use crate::web::guard::Policy;

type Reply = RpcReplyPort<Result<Arc<Instance>, String>>;

/// What the Browser actor is asked and told.
pub enum BrowserMsg {
    /// The running browser of `mode`, started if need be.
    Acquire {
        /// The mode.
        mode: Mode,
        /// Where the browser goes.
        reply: Reply,
    },
    /// A start finished.
    Started {
        /// The mode.
        mode: Mode,
        /// The browser, or why it did not start.
        outcome: Result<Arc<Instance>, String>,
    },
    /// The browser of `mode` started as `generation` exited.
    Exited {
        /// The mode.
        mode: Mode,
        /// Which start it was.
        generation: u64,
    },
    /// The idle check armed by use `stamp` of `generation`.
    Idle {
        /// The mode.
        mode: Mode,
        /// Which start it was.
        generation: u64,
        /// Which use armed it.
        stamp: u64,
    },
    /// Stops the browser of a mode, or every one.
    Stop {
        /// The mode, or every one when `None`.
        mode: Option<Mode>,
        /// The modes that were running.
        reply: RpcReplyPort<Vec<Mode>>,
    },
    /// The browsers running.
    Status {
        /// Where the list goes.
        reply: RpcReplyPort<Vec<Running>>,
    },
}

// Never crosses a node: ractor's `cluster` feature asks each message type.
impl ractor::Message for BrowserMsg {}

/// One mode's browser.
enum Slot {
    Starting(Vec<Reply>),
    Up {
        instance: Arc<Instance>,
        generation: u64,
        stamp: u64,
    },
}

/// The actor's state.
pub struct BrowserState {
    settings: BrowserSettings,
    slots: HashMap<Mode, Slot>,
    generation: u64,
}

/// The Browser actor (its state is built in `pre_start`).
pub struct BrowserActor;

impl Actor for BrowserActor {
    type Msg = BrowserMsg;
    type State = BrowserState;
    type Arguments = BrowserSettings;

    async fn pre_start(
        &self,
        _myself: ActorRef<Self::Msg>,
        settings: Self::Arguments,
    ) -> Result<Self::State, ActorProcessingErr> {
        let swept = sweep_scratch_profiles(&settings.dir);
        if swept > 0 {
            tracing::info!(
                swept,
                "removed the throwaway browser profiles of ended processes"
            );
        }
        Ok(BrowserState {
            settings,
            slots: HashMap::new(),
            generation: 0,
        })
    }

    async fn handle(
        &self,
        myself: ActorRef<Self::Msg>,
        message: Self::Msg,
        state: &mut Self::State,
    ) -> Result<(), ActorProcessingErr> {
        match message {
            BrowserMsg::Acquire { mode, reply } => state.acquire(&myself, mode, reply),
            BrowserMsg::Started { mode, outcome } => state.started(&myself, mode, outcome),
            BrowserMsg::Exited { mode, generation } => {
                if matches!(state.slots.get(&mode), Some(Slot::Up { generation: g, .. }) if *g == generation)
                {
                    tracing::warn!(%mode, "the browser exited; the next call starts it again");
                    state.slots.remove(&mode);
                }
            }
            BrowserMsg::Idle {
                mode,
                generation,
                stamp,
            } => state.idle(&myself, mode, generation, stamp),
            BrowserMsg::Stop { mode, reply } => {
                let modes: Vec<Mode> = match mode {
                    Some(mode) => vec![mode],
                    None => Mode::ALL.to_vec(),
                };
                let mut stopped = Vec::new();
                for mode in modes {
                    if let Some(Slot::Up { .. }) = state.slots.get(&mode) {
                        state.slots.remove(&mode);
                        stopped.push(mode);
                    }
                }
                let _ = reply.send(stopped);
            }
            BrowserMsg::Status { reply } => {
                let running = Mode::ALL
                    .iter()
                    .filter_map(|mode| match state.slots.get(mode) {
                        Some(Slot::Up { instance, .. }) => {
                            let process = instance.process.lock();
                            Some(Running {
                                mode: *mode,
                                pid: process.pid,
                                endpoint: process.endpoint.clone(),
                            })
                        }
                        _ => None,
                    })
                    .collect();
                let _ = reply.send(running);
            }
        }
        Ok(())
    }
}

impl BrowserState {
    fn acquire(&mut self, myself: &ActorRef<BrowserMsg>, mode: Mode, reply: Reply) {
        match self.slots.get_mut(&mode) {
            Some(Slot::Up {
                instance,
                generation,
                stamp,
            }) if instance.alive() => {
                *stamp += 1;
                arm_idle(myself, &self.settings, mode, *generation, *stamp);
                let _ = reply.send(Ok(Arc::clone(instance)));
            }
            Some(Slot::Starting(waiting)) => waiting.push(reply),
            _ => {
                self.slots.insert(mode, Slot::Starting(vec![reply]));
                let launch = launch(&self.settings, mode);
                let myself = myself.clone();
                let policy = self.settings.policy.clone();
                tokio::spawn(async move {
                    let outcome = start(launch, policy).await;
                    let _ = myself.send_message(BrowserMsg::Started { mode, outcome });
                });
            }
        }
    }

    fn started(
        &mut self,
        myself: &ActorRef<BrowserMsg>,
        mode: Mode,
        outcome: Result<Arc<Instance>, String>,
    ) {
        let waiting = match self.slots.remove(&mode) {
            Some(Slot::Starting(waiting)) => waiting,
            other => {
                // Stopped while starting: the new browser is dropped (ended).
                if let Some(slot) = other {
                    self.slots.insert(mode, slot);
                }
                Vec::new()
            }
        };
        if let Ok(instance) = &outcome {
            if !waiting.is_empty() {
                self.generation += 1;
                let generation = self.generation;
                self.slots.insert(
                    mode,
                    Slot::Up {
                        instance: Arc::clone(instance),
                        generation,
                        stamp: 0,
                    },
                );
                watch_exit(myself, instance, mode, generation);
                arm_idle(myself, &self.settings, mode, generation, 0);
            }
        }
        for reply in waiting {
            let _ = reply.send(outcome.clone());
        }
    }

    fn idle(&mut self, myself: &ActorRef<BrowserMsg>, mode: Mode, generation: u64, stamp: u64) {
        let Some(Slot::Up {
            instance,
            generation: g,
            stamp: s,
        }) = self.slots.get(&mode)
        else {
            return;
        };
        if *g != generation || *s != stamp {
            return;
        }
        // A call still holds it: look again later.
        if Arc::strong_count(instance) > 1 {
            arm_idle(myself, &self.settings, mode, generation, stamp);
            return;
        }
        tracing::info!(%mode, "stopping the browser: idle");
        self.slots.remove(&mode);
    }
}

fn launch(settings: &BrowserSettings, mode: Mode) -> Launch {
    let scratch = mode != Mode::Profile;
    let profile = if scratch {
        let id = uuid::Uuid::now_v7().simple().to_string();
        settings.dir.join(format!(
            "{mode}-{}-{}",
            std::process::id(),
            &id[id.len() - 12..]
        ))
    } else {
        settings.dir.join("profile")
    };
    Launch {
        program: settings.program.clone(),
        profile,
        headless: mode == Mode::Headless || !settings.display,
        log: settings.dir.join(format!("{mode}.log")),
        scratch,
        proxy: None,
    }
}

/// Starts a browser whose pages go out only through an egress proxy of its
/// own under `policy`; the proxy ends with the instance.
async fn start(mut launch: Launch, policy: Policy) -> Result<Arc<Instance>, String> {
    if let Some(parent) = launch.log.parent() {
        std::fs::create_dir_all(parent)
            .map_err(|e| format!("cannot make {}: {e}", parent.display()))?;
    }
    let egress = CancellationToken::new();
    let guard = egress.clone().drop_guard();
    let proxy = Arc::new(Egress::for_browser(policy))
        .listen(egress)
        .await
        .map_err(|e| format!("its egress proxy could not listen on the loopback: {e}"))?;
    launch.proxy = Some(proxy);
    let process = chrome::start(&launch).await?;
    Ok(Arc::new(Instance::connect(process, guard).await?))
}

/// Removes the throwaway profiles (`clean-…`, `headless-…`) of troupe
/// processes that are gone: a browser's own watcher removes its profile
/// when the browser ends, but not when troupe was killed first. A folder
/// names the process that made it, so another troupe on the same home keeps
/// its own.
pub(super) fn sweep_scratch_profiles(dir: &std::path::Path) -> usize {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    let mut removed = 0;
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let Some(rest) = [Mode::Clean, Mode::Headless]
            .iter()
            .find_map(|m| name.strip_prefix(m.name())?.strip_prefix('-'))
        else {
            continue;
        };
        // `<mode>-<pid>-<id>`; a folder without a live owner's pid (one made
        // before folders named their process, too) is gone.
        let gone = rest
            .split('-')
            .next()
            .and_then(|pid| pid.parse::<i32>().ok())
            .and_then(rustix::process::Pid::from_raw)
            .is_none_or(|pid| {
                rustix::process::test_kill_process(pid).is_err_and(|e| e == rustix::io::Errno::SRCH)
            });
        if gone
            && entry.file_type().is_ok_and(|t| t.is_dir())
            && std::fs::remove_dir_all(entry.path()).is_ok()
        {
            removed += 1;
        }
    }
    removed
}

fn watch_exit(
    myself: &ActorRef<BrowserMsg>,
    instance: &Arc<Instance>,
    mode: Mode,
    generation: u64,
) {
    let mut exited = instance.process.lock().exited.clone();
    let myself = myself.clone();
    tokio::spawn(async move {
        let _ = exited.wait_for(|gone| *gone).await;
        let _ = myself.send_message(BrowserMsg::Exited { mode, generation });
    });
}

fn arm_idle(
    myself: &ActorRef<BrowserMsg>,
    settings: &BrowserSettings,
    mode: Mode,
    generation: u64,
    stamp: u64,
) {
    myself.send_after(settings.idle, move || BrowserMsg::Idle {
        mode,
        generation,
        stamp,
    });
}

#[cfg(test)]
mod tests {
    use super::sweep_scratch_profiles;

    #[test]
    fn the_throwaway_profiles_of_ended_processes_are_swept_and_the_rest_kept() {
        let dir = tempfile::tempdir().unwrap();
        let me = std::process::id();
        let gone = [
            "clean-2147483000-0123456789ab".to_owned(),
            "headless-2147483001-0123456789ab".to_owned(),
            // Made before a folder named its process.
            "clean-0123456789ab".to_owned(),
        ];
        let kept = [
            format!("headless-{me}-0123456789ab"),
            "profile".to_owned(),
            "workspace".to_owned(),
            "calls".to_owned(),
        ];
        for name in gone.iter().chain(&kept) {
            std::fs::create_dir_all(dir.path().join(name).join("Default")).unwrap();
        }
        std::fs::write(dir.path().join("clean.log"), "").unwrap();
        assert_eq!(sweep_scratch_profiles(dir.path()), gone.len());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        let mut expected: Vec<String> = kept.to_vec();
        expected.push("clean.log".into());
        expected.sort();
        assert_eq!(left, expected);
    }
}
