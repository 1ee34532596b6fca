//! `troupe serve`: hosts the home's bots, fires its routines, and answers
//! over HTTP and WebSocket (`src/server.rs`, `docs/api.md`) until SIGINT or
//! SIGTERM; then it stops accepting, closes the sockets, and stops the node
//! (turns in flight stay open, to resume at the next start).
//!
//! While it runs, `<home>/serve.json` (readable by the home's owner only)
//! says where it listens and holds a secret for the home's own CLI, which
//! talks to the running server instead of opening the database beside it.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};
use troupe_runtime::store::tokens;

use super::Builder;
use crate::server::auth::AuthMode;
use crate::server::{Server, ServerOptions};

/// What `serve.json` records.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Running {
    /// The server's process.
    pub pid: u32,
    /// Its base URL (`http://127.0.0.1:7878`).
    pub url: String,
    /// The secret the home's CLI presents.
    pub token: String,
}

impl Running {
    /// The record in `home`, if a server wrote one.
    pub fn read(home: &Path) -> Option<Running> {
        let text = std::fs::read_to_string(file(home)).ok()?;
        serde_json::from_str(&text).ok()
    }
}

fn file(home: &Path) -> PathBuf {
    home.join("serve.json")
}

fn write(home: &Path, running: &Running) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let path = file(home);
    let tmp = path.with_extension("json.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(serde_json::to_string_pretty(running)?.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(tmp, path)
}

/// Runs `troupe serve`.
pub async fn serve(builder: Builder, listen: Option<String>) -> anyhow::Result<ExitCode> {
    let runtime = builder.build().await?;
    // Every bot's model, at start: a bot that could not answer is said now.
    if let Err(e) = super::preflight::every_bot(runtime.node()) {
        runtime.shutdown().await;
        return Err(e);
    }
    let started = async {
        let options = ServerOptions::from_config(&runtime.config().server, listen.as_deref())?;
        let local = tokens::mint();
        let server =
            Server::start(runtime.node().clone(), options.clone(), Some(local.hash)).await?;
        anyhow::Ok((server, options, local.secret))
    }
    .await;
    let (server, options, secret) = match started {
        Ok(s) => s,
        Err(e) => {
            runtime.shutdown().await;
            return Err(e);
        }
    };
    let home = runtime.node().home().root().to_path_buf();
    let url = format!("http://{}", server.addr());
    let running = Running {
        pid: std::process::id(),
        url: url.clone(),
        token: secret,
    };
    if let Err(e) = write(&home, &running) {
        eprintln!(
            "troupe: warning: cannot write {}: {e}; the CLI will not find this server",
            file(&home).display()
        );
    }
    eprintln!(
        "troupe serving {} bot(s) from {} at {url} (the API under /api/, the web page at /); Ctrl-C or SIGTERM stops it",
        runtime.node().bots().len(),
        home.display()
    );
    if options.auth == AuthMode::Open {
        eprintln!(
            "troupe: server.auth = \"open\": no token is asked; anyone who can reach {} acts as the home's owner",
            server.addr()
        );
    }
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    eprintln!("troupe: stopping");
    server.stop().await;
    let _ = std::fs::remove_file(file(&home));
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
