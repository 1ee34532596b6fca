//! Background commands: started, logged to a file, stopped by id.
//!
//! A background command writes its output straight to
//! `<home>/commands/<id>.log` (no memory is held for it) and, when it ends,
//! a last line saying how. The registry lives in the process-wide
//! [`Services`], so any later call can stop a command by its id; commands
//! live while the process runs ([`BackgroundCommands::stop_all`] ends them
//! at shutdown). Whoever asked with `notify_on_complete` is told through the
//! [`CommandNotifier`] the conversation actor provides.
//!
//! It runs in the same sandbox as a foreground command. troupe opens its log
//! file and hands the command the open file, so the log is written even
//! though `commands/` is read-only inside the sandbox.

use std::collections::HashMap;
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use troupe_runtime::id::ConversationId;
use troupe_runtime::sandbox::{Confinement, Sandbox};
use troupe_runtime::tool::Services;
use troupe_runtime::trust::seal::Seal;

use super::process::{end_tree, shell, Ending};
use super::tether::{self, Running};

/// How much of a log's end a notification carries.
const SUMMARY_TAIL_BYTES: u64 = 2000;

/// Told when a background command started with `notify_on_complete` ends.
#[async_trait::async_trait]
pub trait CommandNotifier: Send + Sync {
    /// Command `id` of `conversation` ended; `summary` says how, where its
    /// log is, and its last lines.
    async fn command_finished(&self, conversation: ConversationId, id: &str, summary: &str);
}

/// The notifier, as held in [`Services`].
#[derive(Clone)]
pub struct CommandNotifications(pub Arc<dyn CommandNotifier>);

/// One background command.
#[derive(Debug)]
struct Job {
    command: String,
    log: PathBuf,
    stop: CancellationToken,
    /// The ending line once it has ended.
    ended: watch::Receiver<Option<String>>,
}

/// What `start` answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Started {
    /// The id to stop it by.
    pub id: String,
    /// Where its output goes.
    pub log: PathBuf,
}

/// Every background command of the process, by id.
#[derive(Debug, Default)]
pub struct BackgroundCommands {
    jobs: Mutex<HashMap<String, Arc<Job>>>,
}

/// What starting a background command needs.
pub struct Launch<'a> {
    /// The shell command.
    pub command: &'a str,
    /// Where it runs.
    pub cwd: &'a Path,
    /// The `commands/` folder of the home.
    pub dir: &'a Path,
    /// Ends it after this long, if given.
    pub timeout: Option<Duration>,
    /// The sandbox it runs in and what it may touch there; `None` runs it
    /// on the machine itself.
    pub sandbox: Option<(&'a Sandbox, &'a Confinement)>,
    /// The addresses its network reaches through the proxy
    /// (`[sandbox] allow_addresses`).
    pub allow: &'a [std::net::IpAddr],
    /// Whom to tell when it ends, if anyone.
    pub notify: Option<(CommandNotifications, ConversationId)>,
    /// Unsandboxed: troupe's settings as they were, put back when it ends.
    pub seal: Option<Seal>,
}

impl BackgroundCommands {
    /// The registry held in `services`, made on first use.
    pub fn of(services: &Services) -> Arc<Self> {
        services.get_or_insert_with(Self::default)
    }

    /// Starts a command in the background.
    pub fn start(self: &Arc<Self>, launch: Launch<'_>) -> std::io::Result<Started> {
        std::fs::create_dir_all(launch.dir)?;
        let suffix = uuid::Uuid::now_v7().simple().to_string();
        let id = format!("cmd_{}", &suffix[suffix.len() - 12..]);
        let log = launch.dir.join(format!("{id}.log"));
        let file = std::fs::File::create(&log)?;
        let mut cmd = shell(launch.command, launch.cwd, launch.sandbox, launch.allow);
        cmd.stdout(Stdio::from(file.try_clone()?))
            .stderr(Stdio::from(file));
        let Running {
            mut child,
            pgid,
            watchdog,
        } = tether::start(cmd)?;
        let stop = CancellationToken::new();
        let (ended_tx, ended) = watch::channel(None);
        let job = Arc::new(Job {
            command: launch.command.to_string(),
            log: log.clone(),
            stop: stop.clone(),
            ended,
        });
        self.jobs.lock().insert(id.clone(), Arc::clone(&job));
        let timeout = launch.timeout;
        let notify = launch.notify;
        let seal = launch.seal;
        let task_id = id.clone();
        tokio::spawn(async move {
            let sleep = async {
                match timeout {
                    Some(after) => tokio::time::sleep(after).await,
                    None => std::future::pending().await,
                }
            };
            let ending = tokio::select! {
                status = child.wait() => match status {
                    Ok(status) => Ending::of(status),
                    Err(_) => Ending::Exit(-1),
                },
                () = stop.cancelled() => {
                    end_tree(&mut child, pgid).await;
                    Ending::Stopped
                }
                () = sleep => {
                    end_tree(&mut child, pgid).await;
                    Ending::Timeout(timeout.unwrap_or_default())
                }
            };
            // The shell has ended: what it left running keeps running.
            drop(watchdog);
            let mut line = ending.to_string();
            if let Some(report) = seal.and_then(|seal| seal.restore().report()) {
                tracing::warn!(command = %job.command, "{report}");
                line = format!("{line}. {report}");
            }
            let log = job.log.clone();
            let summary = tokio::task::spawn_blocking(move || {
                if let Err(e) = append_ending(&log, &line) {
                    tracing::warn!(log = %log.display(), error = %e, "could not end a command's log");
                }
                (line, log_tail(&log))
            })
            .await;
            let (line, tail) = summary.unwrap_or_else(|_| (ending.to_string(), String::new()));
            let _ = ended_tx.send(Some(line.clone()));
            if let Some((notifier, conversation)) = notify {
                let summary = format!(
                    "Background command {task_id} (`{}`) ended: {line}. Its output is in {}; it ends with:\n{tail}",
                    job.command,
                    job.log.display()
                );
                notifier
                    .0
                    .command_finished(conversation, &task_id, &summary)
                    .await;
            }
        });
        Ok(Started { id, log })
    }

    /// Stops command `id` and waits (up to a while) for it to end; `Ok`
    /// with its ending line, or `Err` with what was wrong.
    pub async fn stop(&self, id: &str) -> Result<String, String> {
        let Some(job) = self.jobs.lock().get(id).cloned() else {
            return Err(format!(
                "there is no background command `{id}`; use the id that starting it returned (cmd_…)"
            ));
        };
        if let Some(line) = job.ended.borrow().clone() {
            return Ok(format!(
                "`{id}` had already ended: {line}. Its output is in {}.",
                job.log.display()
            ));
        }
        job.stop.cancel();
        let mut ended = job.ended.clone();
        let waited = tokio::time::timeout(
            super::process::TERM_GRACE * 5,
            ended.wait_for(Option::is_some),
        )
        .await;
        match waited {
            Ok(Ok(line)) => Ok(format!(
                "Stopped `{id}`: {}. Its output is in {}.",
                line.clone().unwrap_or_default(),
                job.log.display()
            )),
            _ => Err(format!(
                "`{id}` was told to stop but has not ended yet; check {}",
                job.log.display()
            )),
        }
    }

    /// Stops every command still running (at shutdown).
    pub fn stop_all(&self) {
        for job in self.jobs.lock().values() {
            job.stop.cancel();
        }
    }
}

/// Appends the ending line, on a line of its own.
fn append_ending(log: &Path, line: &str) -> std::io::Result<()> {
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .append(true)
        .open(log)?;
    let len = file.metadata()?.len();
    let mut text = String::new();
    if len > 0 {
        let mut last = [0_u8; 1];
        file.seek(SeekFrom::Start(len - 1))?;
        file.read_exact(&mut last)?;
        if last[0] != b'\n' {
            text.push('\n');
        }
    }
    text.push_str(line);
    text.push('\n');
    file.write_all(text.as_bytes())
}

/// The last bytes of a log, as text.
fn log_tail(log: &Path) -> String {
    let read = || -> std::io::Result<String> {
        let mut file = std::fs::File::open(log)?;
        let len = file.metadata()?.len();
        file.seek(SeekFrom::Start(len.saturating_sub(SUMMARY_TAIL_BYTES)))?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    read().unwrap_or_default()
}
