//! `troupe executors list | install NAME | remove NAME | accounts | login
//! NAME@ACCOUNT`: the outside coding harnesses troupe hands coding work to,
//! installed into the home at the version troupe pins
//! ([`troupe_runtime::executors`]), and the accounts they run on
//! ([`troupe_runtime::executors::accounts`]).
//!
//! None takes the home's lock: `<home>/executors/` is written by these
//! commands only, and an install puts its folder in place in one rename.

use std::path::PathBuf;
use std::process::ExitCode;

use serde::Serialize;
use troupe_runtime::config::Config;
use troupe_runtime::executors::{self, accounts, login, Harness, Installed};
use troupe_runtime::home::Home;

/// What `troupe executors` does.
#[derive(Debug, clap::Subcommand)]
pub enum ExecutorsCommand {
    /// Every harness troupe knows: installed or not, its version, where.
    List {
        /// One JSON array, an object per harness.
        #[arg(long)]
        json: bool,
    },
    /// Installs a harness at its pinned version with npm (or links one already installed).
    Install {
        /// The harness: `troupe executors list` names them.
        name: String,
        /// Offline: a node_modules folder that already holds the package at the
        /// pinned version (e.g. made by `npm ci`); it is linked, not copied.
        #[arg(long, value_name = "NODE_MODULES_DIR")]
        from: Option<PathBuf>,
    },
    /// Removes an installed harness (a linked node_modules is unlinked, not deleted).
    Remove {
        /// The harness.
        name: String,
    },
    /// Each account of each harness: who it is logged in as, its usage per limit window,
    /// whether it is at its limit, the folders that start on it, its place in hand-over.
    Accounts {
        /// Only this executor's accounts (`claude-code`), or one (`claude-code@work`).
        executor: Option<String>,
        /// One JSON array, an object per account.
        #[arg(long)]
        json: bool,
    },
    /// Logs an account in with the harness's own login (its browser flow; the URL is shown),
    /// its credentials kept in that account's folder.
    Login {
        /// The account: `NAME@ACCOUNT` (`NAME` alone: its main account).
        target: String,
        /// The email you mean to log in as: refused at once if another account of the
        /// harness is logged in as it.
        #[arg(long)]
        email: Option<String>,
    },
}

/// One harness as `troupe executors list --json` reports it.
#[derive(Debug, Serialize)]
pub struct ExecutorReport {
    /// Its name.
    pub name: &'static str,
    /// Its npm package.
    pub package: &'static str,
    /// The version troupe pins.
    pub pinned: &'static str,
    /// Whether it is installed.
    pub installed: bool,
    /// The version installed.
    pub version: Option<String>,
    /// Its folder in the home (where it would be, if not installed).
    pub dir: PathBuf,
    /// The CLI troupe runs with `node`.
    pub entry: Option<PathBuf>,
    /// `npm`, or the folder it was linked from.
    pub from: Option<String>,
}

impl ExecutorReport {
    fn new(home: &Home, harness: &'static Harness, installed: Option<Installed>) -> Self {
        Self {
            name: harness.name,
            package: harness.package,
            pinned: harness.version,
            installed: installed.is_some(),
            version: installed.as_ref().map(|i| i.version.clone()),
            dir: harness.dir(home),
            entry: installed.as_ref().map(|i| i.entry.clone()),
            from: installed.map(|i| i.from),
        }
    }
}

/// Runs `troupe executors …`.
pub async fn executors(
    home: Option<PathBuf>,
    command: ExecutorsCommand,
) -> anyhow::Result<ExitCode> {
    let home = home.map(Home::new).unwrap_or_else(Home::from_env);
    match command {
        ExecutorsCommand::List { json } => {
            let reports: Vec<ExecutorReport> = executors::list(&home)
                .into_iter()
                .map(|(h, i)| ExecutorReport::new(&home, h, i))
                .collect();
            if json {
                println!("{}", serde_json::to_string(&reports)?);
            } else {
                for r in &reports {
                    println!("{}", line(r));
                }
            }
        }
        ExecutorsCommand::Install { name, from } => {
            let done = match from {
                Some(from) => executors::install_from(&home, &name, &from)?,
                None => {
                    let what = executors::harness(&name).map_or_else(
                        || format!("installing {name}"),
                        |h| {
                            format!(
                                "installing {} ({}@{}) with npm",
                                h.name, h.package, h.version
                            )
                        },
                    );
                    let on = crate::progress::wanted(false);
                    if !on {
                        eprintln!("{what}…");
                    }
                    let home = home.clone();
                    let install =
                        tokio::task::spawn_blocking(move || executors::install(&home, &name));
                    crate::progress::during(on, &what, install).await??
                }
            };
            println!(
                "{}  {}  installed  {}",
                done.harness.name,
                done.version,
                done.dir.display()
            );
        }
        ExecutorsCommand::Accounts { executor, json } => {
            let view = super::view::View::open(Some(home.root().to_path_buf()), &[]).await?;
            let (config_home, executors) = (view.home.clone(), view.config.executors.clone());
            let only = executor.clone();
            let mut found = view
                .read(move |conn| {
                    accounts::view(
                        &config_home,
                        &executors,
                        Some(conn),
                        chrono::Utc::now(),
                        only.as_deref(),
                    )
                    .map(Some)
                })
                .await?;
            if found.is_none() {
                // No database yet: nothing used.
                found = Some(accounts::view(
                    &view.home,
                    &view.config.executors,
                    None,
                    chrono::Utc::now(),
                    executor.as_deref(),
                )?);
            }
            let found = found.unwrap_or_default();
            if json {
                println!("{}", serde_json::to_string(&found)?);
            } else {
                print!("{}", accounts::render(&found));
            }
        }
        ExecutorsCommand::Login { target, email } => {
            return login(&home, &target, email.as_deref()).await;
        }
        ExecutorsCommand::Remove { name } => {
            let dir = executors::harness(&name).map(|h| h.dir(&home));
            if executors::remove(&home, &name)? {
                let dir = dir.unwrap_or_default();
                println!("removed {name} ({})", dir.display());
            } else {
                println!("{name} was not installed");
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `pi  0.73.1  installed  /…/executors/pi`, or what to do.
fn line(r: &ExecutorReport) -> String {
    match &r.version {
        Some(v) if v == r.pinned => {
            format!("{}  {v}  installed  {}", r.name, r.dir.display())
        }
        Some(v) => format!(
            "{}  {v}  installed, troupe pins {}  {}  (troupe executors install {})",
            r.name,
            r.pinned,
            r.dir.display(),
            r.name
        ),
        None => format!(
            "{}  -  not installed  (troupe executors install {})",
            r.name, r.name
        ),
    }
}

/// `troupe executors login NAME@ACCOUNT`: the harness's own login, run
/// in the account's folder, in this terminal (it shows its URL). An email
/// another account of the harness is logged in as is refused, naming it:
/// before the login when `--email` says it, after it otherwise (the new
/// credentials are then removed).
async fn login(home: &Home, target: &str, email: Option<&str>) -> anyhow::Result<ExitCode> {
    let config = Config::load(home, &|k: &str| std::env::var(k).ok(), &[])?;
    let mut prepared =
        login::prepare(home, &config.executors, target, email).map_err(anyhow::Error::msg)?;
    let target = prepared.target();
    eprintln!(
        "{target}: {}'s own login, its credentials kept in {}",
        prepared.executor,
        prepared.dir.display()
    );
    let mut command = std::mem::replace(&mut prepared.command, std::process::Command::new("true"));
    let status = tokio::task::spawn_blocking(move || command.status()).await??;
    if !status.success() {
        anyhow::bail!(
            "{}'s login ended without logging in ({status}); run it again",
            prepared.executor
        );
    }
    match login::finish(home, &config.executors, &prepared).map_err(anyhow::Error::msg)? {
        Some(now) => println!("{target} logged in as {now}"),
        None => println!("{target} logged in"),
    }
    Ok(ExitCode::SUCCESS)
}
