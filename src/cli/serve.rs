//! `troupe serve`: hosts the home's bots, fires its routines, and answers
//! over HTTP and WebSocket (`src/server.rs`, `docs/api.md`) until SIGINT or
//! SIGTERM; then it stops accepting, closes the sockets, and stops the node
//! (turns in flight stay open, to resume at the next start).
//!
//! While it runs, `<home>/serve.json` says where it listens, and the
//! owner's socket `<home>/serve.sock` (mode 0600, troupe's own user only,
//! checked by the kernel's peer credentials) is where the home's own CLI
//! talks to it instead of opening the database beside it. No secret is
//! written: a command that could read the home would find none.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use serde::{Deserialize, Serialize};

pub use super::serve_cluster::ClusterArgs;
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
    /// The owner's socket, where the home's CLI talks to it.
    #[serde(default)]
    pub socket: Option<PathBuf>,
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

/// The owner's socket of `home`.
pub fn socket(home: &Path) -> PathBuf {
    home.join("serve.sock")
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
pub async fn serve(
    builder: Builder,
    listen: Option<String>,
    cluster: ClusterArgs,
) -> anyhow::Result<ExitCode> {
    let runtime = builder.build().await?;
    let cluster = match super::serve_cluster::options(
        &cluster,
        &runtime.config().cluster,
        std::env::var(super::serve_cluster::COOKIE_VAR).ok(),
    ) {
        Ok(None) => None,
        Ok(Some(options)) => {
            match troupe_actors::cluster::Cluster::start(runtime.node(), options).await {
                Ok(c) => Some(c),
                Err(e) => {
                    runtime.shutdown().await;
                    return Err(e.into());
                }
            }
        }
        Err(e) => {
            runtime.shutdown().await;
            return Err(e);
        }
    };
    if let Some(c) = &cluster {
        eprintln!(
            "troupe: node `{}` of the cluster listens at {}",
            c.node_name(),
            c.listen()
        );
    }
    // Every bot's model, at start: a bot that could not answer is said now,
    // in one line. The server still starts: people use a house without
    // bots, and a bot's turn then fails at once, with this same reason.
    if let Err(e) = super::preflight::every_bot(runtime.node()) {
        eprintln!("troupe: warning: {e}; their turns fail until that is fixed");
    }
    let started = async {
        let mut options = ServerOptions::from_config(&runtime.config().server, listen.as_deref())?;
        options.owner_socket = Some(socket(runtime.node().home().root()));
        options.cluster = cluster.clone();
        let server = Server::start(runtime.node().clone(), options.clone()).await?;
        anyhow::Ok((server, options))
    }
    .await;
    let (server, options) = match started {
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
        socket: options.owner_socket.clone(),
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
    if let Some(c) = &cluster {
        c.stop();
    }
    server.stop().await;
    let _ = std::fs::remove_file(file(&home));
    runtime.shutdown().await;
    Ok(ExitCode::SUCCESS)
}
