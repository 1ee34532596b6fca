//! Finding a Chrome, Edge or Chromium, and starting one.
//!
//! The browser is `[browser] chrome` when set, else the first of the usual
//! names found on `PATH`. It is started as the leader of its own process
//! group through [`troupe_runtime::tether`], so it dies with troupe however
//! troupe ends, and ending it ends its renderers too. It listens for the
//! DevTools protocol on a loopback port it picks itself
//! (`--remote-debugging-port=0`), which it prints on its standard error;
//! that line is awaited rather than a file polled.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use rustix::process::Signal;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::oneshot;

use crate::run_command::process::{signal_group, TERM_GRACE};

/// The names looked for on `PATH`, in order.
pub const CANDIDATES: &[&str] = &[
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "chrome",
    "microsoft-edge",
    "microsoft-edge-stable",
    "chromium-headless-shell",
    "headless_shell",
];

/// How long a browser may take to open its DevTools port.
pub const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The browser troupe drives, or why there is none.
pub fn find(configured: Option<&Path>) -> Result<PathBuf, String> {
    find_in(configured, std::env::var_os("PATH").as_deref())
}

/// [`find`] with `path` as `PATH`.
pub fn find_in(
    configured: Option<&Path>,
    path: Option<&std::ffi::OsStr>,
) -> Result<PathBuf, String> {
    if let Some(chrome) = configured {
        if chrome.as_os_str().is_empty() {
            return Err(
                "[browser] chrome is empty; name a browser program or remove the key".into(),
            );
        }
        let found = if chrome.components().count() > 1 {
            Some(chrome.to_path_buf()).filter(|p| is_program(p))
        } else {
            search(chrome.as_os_str(), path)
        };
        return found.ok_or_else(|| {
            format!(
                "[browser] chrome = {} is not an executable program; name an installed \
                 Chrome, Edge or Chromium (or remove the key to look for one on PATH)",
                chrome.display()
            )
        });
    }
    CANDIDATES
        .iter()
        .find_map(|name| search(name.as_ref(), path))
        .ok_or_else(|| {
            format!(
                "no Chrome, Edge or Chromium on PATH (looked for {}); install one \
                 (Debian: apt install chromium) or name it with [browser] chrome",
                CANDIDATES.join(", ")
            )
        })
}

fn search(name: &std::ffi::OsStr, path: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    std::env::split_paths(path?)
        .map(|dir| dir.join(name))
        .find(|p| is_program(p))
}

fn is_program(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// How a browser is started.
#[derive(Debug, Clone)]
pub struct Launch {
    /// The program.
    pub program: PathBuf,
    /// Its profile folder (`--user-data-dir`).
    pub profile: PathBuf,
    /// Without a window.
    pub headless: bool,
    /// Where its own messages go.
    pub log: PathBuf,
    /// The profile is thrown away when the browser ends (`clean`, `headless`).
    pub scratch: bool,
    /// The egress proxy every request of its pages goes through
    /// ([`crate::run_command::egress::Egress::for_browser`]); `None` for the
    /// user's own session (`troupe browser start`).
    pub proxy: Option<std::net::SocketAddr>,
}

/// A started browser: its DevTools address, its process group, and the
/// means to end it.
pub struct Process {
    /// `ws://127.0.0.1:PORT/devtools/browser/ID`.
    pub endpoint: String,
    /// Its process id (the group's).
    pub pid: Option<u32>,
    /// Fires when the browser has exited, for whatever reason.
    pub exited: tokio::sync::watch::Receiver<bool>,
    kill: Option<oneshot::Sender<()>>,
}

impl Process {
    /// Ends the browser and its whole group (also done when dropped).
    pub fn stop(&mut self) {
        if let Some(kill) = self.kill.take() {
            let _ = kill.send(());
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The command-line flags of a browser troupe drives.
pub fn arguments(launch: &Launch) -> Vec<String> {
    let mut args = vec![
        "--remote-debugging-port=0".to_owned(),
        "--remote-debugging-address=127.0.0.1".to_owned(),
        format!("--user-data-dir={}", launch.profile.display()),
        "--no-first-run".to_owned(),
        "--no-default-browser-check".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--password-store=basic".to_owned(),
        "--use-mock-keychain".to_owned(),
        "--window-size=1280,900".to_owned(),
    ];
    if let Some(proxy) = launch.proxy {
        args.push(format!("--proxy-server=http://{proxy}"));
        // Loopback too: Chromium sends it around a proxy unless told not to.
        args.push("--proxy-bypass-list=<-loopback>".to_owned());
    }
    if launch.headless {
        args.push("--headless=new".to_owned());
        args.push("--hide-scrollbars".to_owned());
    }
    // Chromium refuses to run as root with its own sandbox on.
    if rustix::process::geteuid().is_root() {
        args.push("--no-sandbox".to_owned());
    }
    args.push("about:blank".to_owned());
    args
}

/// Starts the browser `launch` describes and waits for its DevTools port.
pub async fn start(launch: &Launch) -> Result<Process, String> {
    std::fs::create_dir_all(&launch.profile).map_err(|e| {
        format!(
            "cannot make the profile folder {}: {e}",
            launch.profile.display()
        )
    })?;
    let mut log = tokio::fs::File::create(&launch.log)
        .await
        .map_err(|e| format!("cannot write {}: {e}", launch.log.display()))?;
    let mut cmd = tokio::process::Command::new(&launch.program);
    cmd.args(arguments(launch))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .process_group(0);
    let running = troupe_runtime::tether::start(cmd)
        .map_err(|e| format!("cannot start {}: {e}", launch.program.display()))?;
    let troupe_runtime::tether::Running {
        mut child,
        pgid,
        watchdog,
    } = running;
    let Some(stderr) = child.stderr.take() else {
        return Err("the browser's error output could not be read".into());
    };
    let mut lines = BufReader::new(stderr).lines();
    let waiting = async {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = log.write_all(format!("{line}\n").as_bytes()).await;
            if let Some(at) = line.find("ws://") {
                return Some(line[at..].trim().to_owned());
            }
        }
        None
    };
    let endpoint = match tokio::time::timeout(START_TIMEOUT, waiting).await {
        Ok(Some(endpoint)) => endpoint,
        outcome => {
            if let Some(pgid) = pgid {
                signal_group(pgid, Signal::KILL);
            }
            let _ = child.kill().await;
            return Err(format!(
                "{} did not open its DevTools port{}; its messages are in {}",
                launch.program.display(),
                if outcome.is_err() {
                    format!(" within {} s", START_TIMEOUT.as_secs())
                } else {
                    " (it exited)".to_owned()
                },
                launch.log.display()
            ));
        }
    };
    // Its later messages go on to the log, so its pipe never fills.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            let _ = log.write_all(format!("{line}\n").as_bytes()).await;
        }
    });
    let (kill, killed) = oneshot::channel::<()>();
    let (exited_tx, exited) = tokio::sync::watch::channel(false);
    let pid = child.id();
    let scratch = launch.scratch.then(|| launch.profile.clone());
    tokio::spawn(async move {
        // The watchdog lives as long as the browser: it ends the group if
        // troupe dies.
        let _watchdog = watchdog;
        tokio::select! {
            _ = child.wait() => {}
            _ = killed => {
                if let Some(pgid) = pgid {
                    signal_group(pgid, Signal::TERM);
                }
                let _ = tokio::time::timeout(TERM_GRACE, child.wait()).await;
                if let Some(pgid) = pgid {
                    signal_group(pgid, Signal::KILL);
                }
                let _ = child.wait().await;
            }
        }
        // Its renderers and helpers are in its group: none outlives it.
        if let Some(pgid) = pgid {
            signal_group(pgid, Signal::KILL);
        }
        if let Some(dir) = scratch {
            let _ = tokio::fs::remove_dir_all(dir).await;
        }
        let _ = exited_tx.send(true);
    });
    Ok(Process {
        endpoint,
        pid,
        exited,
        kill: Some(kill),
    })
}

/// Asks the browser whose process (and group) is `pid` to end.
pub fn terminate(pid: u32) {
    signal_group(pid, Signal::TERM);
}

/// The browser's version line (`Chromium 156.0…`), when it tells.
pub async fn version(program: &Path) -> Option<String> {
    let out = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::process::Command::new(program)
            .arg("--version")
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output(),
    )
    .await
    .ok()?
    .ok()?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!text.is_empty()).then_some(text)
}
