//! `troupe browser status|start|stop`: troupe's own browser, the one
//! `browser_exec` drives.
//!
//! `status` says which browser was found (or why none was, so
//! `browser_exec` is not offered) and whether one runs on troupe's
//! profile. `start` opens that profile — in a window where there is a
//! display — so the user signs in to the sites an agent will visit, once;
//! it runs until the window is closed or Ctrl-C. `stop` ends the browser
//! running on the profile, whichever troupe started it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use troupe_runtime::config::Config;
use troupe_runtime::home::Home;
use troupe_tools::browser::chrome::{self, Launch};
use troupe_tools::browser::{has_display, BrowserSettings};

/// `troupe browser …`.
#[derive(Debug, clap::Subcommand)]
pub enum BrowserCommand {
    /// Which browser browser_exec drives (or why there is none), and whether it runs.
    Status,
    /// Open troupe's browser profile to sign in to sites, until the window closes or Ctrl-C.
    Start,
    /// Stop the browser running on troupe's profile.
    Stop,
}

/// Runs `troupe browser …`.
pub async fn browser(home: Option<PathBuf>, command: BrowserCommand) -> anyhow::Result<ExitCode> {
    let home = home.map(Home::new).unwrap_or_else(Home::from_env);
    let config = Config::load(&home, &|k| std::env::var(k).ok(), &[])?;
    match command {
        BrowserCommand::Status => status(&home, &config).await,
        BrowserCommand::Start => start(&home, &config).await,
        BrowserCommand::Stop => stop(&home),
    }
}

/// `troupe doctor`'s line: the browser found, or why `browser_exec` is
/// not offered.
pub async fn finding(home: &Home, config: &Config) -> (bool, String) {
    match BrowserSettings::configured(config, home) {
        Ok(settings) => {
            let version = chrome::version(&settings.program).await;
            (
                true,
                format!(
                    "{}{} (browser_exec is offered)",
                    settings.program.display(),
                    version.map(|v| format!(", {v}")).unwrap_or_default()
                ),
            )
        }
        Err(why) => (false, format!("{why}; browser_exec is not offered")),
    }
}

async fn status(home: &Home, config: &Config) -> anyhow::Result<ExitCode> {
    let (found, line) = finding(home, config).await;
    println!("browser: {line}");
    let profile = profile(home);
    println!("profile: {}", profile.display());
    println!(
        "windows: {}",
        if has_display() {
            "a display is there: `profile` and `clean` open a window"
        } else {
            "no display: every mode runs headless (sign in from a machine with a display, \
             or copy a signed-in profile to the folder above)"
        }
    );
    match running_on(&profile) {
        Some(pid) => println!("running: yes, process {pid}"),
        None => println!("running: no (it starts with the first browser_exec call)"),
    }
    Ok(if found {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

async fn start(home: &Home, config: &Config) -> anyhow::Result<ExitCode> {
    let settings =
        BrowserSettings::configured(config, home).map_err(|why| anyhow::anyhow!("{why}"))?;
    let profile = profile(home);
    if let Some(pid) = running_on(&profile) {
        anyhow::bail!(
            "a browser already runs on troupe's profile (process {pid}); use its window, or \
             `troupe browser stop` first"
        );
    }
    let launch = Launch {
        program: settings.program.clone(),
        profile: profile.clone(),
        headless: !settings.display,
        log: settings.dir.join("profile.log"),
        scratch: false,
        proxy: None,
    };
    let mut process = chrome::start(&launch)
        .await
        .map_err(|why| anyhow::anyhow!("{why}"))?;
    if settings.display {
        println!(
            "troupe's browser is open on its profile ({}). Sign in to the sites your agents \
             will use, then close the window (or press Ctrl-C).",
            profile.display()
        );
    } else {
        println!(
            "troupe's browser runs headless on its profile ({}): this session has no display, \
             so there is no window to sign in with. DevTools at {}. Press Ctrl-C to stop it.",
            profile.display(),
            process.endpoint
        );
    }
    let mut exited = process.exited.clone();
    let closed = tokio::select! {
        gone = exited.wait_for(|gone| *gone) => gone.is_ok(),
        _ = tokio::signal::ctrl_c() => false,
    };
    if closed {
        println!("the browser was closed");
    } else {
        process.stop();
        let mut exited = process.exited.clone();
        let _ = exited.wait_for(|gone| *gone).await;
        println!("the browser is stopped");
    }
    Ok(ExitCode::SUCCESS)
}

fn stop(home: &Home) -> anyhow::Result<ExitCode> {
    let profile = profile(home);
    let Some(pid) = running_on(&profile) else {
        println!(
            "no browser runs on troupe's profile ({})",
            profile.display()
        );
        return Ok(ExitCode::SUCCESS);
    };
    chrome::terminate(pid);
    println!("stopped the browser on troupe's profile (process {pid})");
    Ok(ExitCode::SUCCESS)
}

fn profile(home: &Home) -> PathBuf {
    home.root().join("browser").join("profile")
}

/// The process of the browser running on `profile`: Chromium's lock
/// there names it (`host-pid`), when it is alive.
fn running_on(profile: &Path) -> Option<u32> {
    let target = std::fs::read_link(profile.join("SingletonLock")).ok()?;
    let pid: u32 = target.to_str()?.rsplit('-').next()?.parse().ok()?;
    Path::new(&format!("/proc/{pid}")).exists().then_some(pid)
}
