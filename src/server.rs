//! `troupe serve`'s HTTP and WebSocket API, and the web page it serves.
//!
//! Everything under `/api/` is JSON and needs a member's token
//! (`Authorization: Bearer …`), except `GET /api/health`; `docs/api.md`
//! lists every route. The page at `/` is three static files compiled into
//! the binary ([`page`]); it talks to the same API.
//!
//! - [`auth`] — who a request speaks for ([`auth::Caller`]), which houses it
//!   may see, the per-token rate limit;
//! - [`feed`] — one task that turns the node's thread and conversation
//!   events into each thread's stream, serialized once for every watcher,
//!   and keeps the approvals and questions waiting for an answer;
//! - [`houses`], [`threads`], [`events`], [`files`], [`admin`],
//!   [`people`], [`requests`], [`metrics`] — the routes; [`history`] — a
//!   thread's messages with the tool calls of the turns that wrote them;
//!   [`markdown`] — a message's text as sanitised HTML (sent beside the
//!   text as `html`);
//! - [`error`] — one error type, one JSON shape, one status per kind;
//! - [`connections`] — the accept loop: connection caps and the header
//!   timeout; [`origin`] — the `Host` allow-list and the `Origin` check.
//!
//! A [`Server`] runs until [`Server::stop`]: it stops accepting, closes
//! every WebSocket with a close frame and waits for requests in flight.
//! Stopping the node (turns checkpointed, to resume at the next start) is
//! the caller's next step.

pub mod accounts;
pub mod admin;
pub mod auth;
pub mod cluster;
pub mod connections;
pub mod error;
pub mod events;
pub mod feed;
pub mod files;
pub mod history;
pub mod houses;
pub mod markdown;
pub mod metrics;
pub mod origin;
pub mod page;
pub mod people;
pub mod requests;
pub mod threads;
pub mod workbench;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{DefaultBodyLimit, Request, State};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, patch, post};
use axum::Router;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use troupe_actors::node::Node;

use self::auth::{AuthMode, RateLimit};

/// How the server listens and what it allows.
#[derive(Debug, Clone)]
pub struct ServerOptions {
    /// The address to listen on (`127.0.0.1:7878` by default).
    pub listen: SocketAddr,
    /// Whether requests need a token.
    pub auth: AuthMode,
    /// Requests per token (or per address, before authentication).
    pub rate: RateLimit,
    /// The largest request body, in bytes.
    pub body_limit: usize,
    /// How long one request may take (WebSockets excepted).
    pub request_timeout: Duration,
    /// How many connections at once, and how long a silent one may stay.
    pub connections: connections::ConnectionLimits,
    /// Host names requests may name besides the loopback names and the
    /// listen address (`[server] allowed_hosts`).
    pub allowed_hosts: Vec<String>,
    /// The owner's Unix socket (`<home>/serve.sock` under `troupe serve`):
    /// requests over it from troupe's own user act as the home's owner.
    pub owner_socket: Option<PathBuf>,
    /// The cluster this node is a node of: requests for a house another
    /// node hosts go there ([`cluster`]).
    pub cluster: Option<troupe_actors::cluster::Cluster>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        Self {
            listen: SocketAddr::from(([127, 0, 0, 1], 7878)),
            auth: AuthMode::Tokens,
            rate: RateLimit::default(),
            body_limit: 16 * 1024 * 1024,
            request_timeout: Duration::from_secs(60),
            connections: connections::ConnectionLimits::default(),
            allowed_hosts: Vec::new(),
            owner_socket: None,
            cluster: None,
        }
    }
}

/// What the routes share.
#[derive(Clone)]
pub struct AppState {
    inner: Arc<Inner>,
}

struct Inner {
    node: Node,
    options: ServerOptions,
    limiter: auth::Limiter,
    feed: feed::Feed,
    hosts: origin::AllowedHosts,
    stopping: CancellationToken,
    /// Which peer a token of another node belongs to, for a while.
    tokens: cluster::TokenNodes,
}

impl AppState {
    /// The node served.
    pub fn node(&self) -> &Node {
        &self.inner.node
    }

    pub(crate) fn feed(&self) -> &feed::Feed {
        &self.inner.feed
    }

    pub(crate) fn stopping(&self) -> &CancellationToken {
        &self.inner.stopping
    }
}

/// A running server.
pub struct Server {
    addr: SocketAddr,
    stopping: CancellationToken,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
    owner: Option<(PathBuf, tokio::task::JoinHandle<std::io::Result<()>>)>,
    feed: tokio::task::JoinHandle<()>,
}

impl Server {
    /// Binds `options.listen` (and `options.owner_socket`) and serves
    /// `node` until [`Server::stop`].
    pub async fn start(node: Node, options: ServerOptions) -> anyhow::Result<Server> {
        if options.auth == AuthMode::Open && !options.listen.ip().is_loopback() {
            anyhow::bail!(
                "refusing to serve {} without tokens: only a loopback address may run with `server.auth = \"open\"`",
                options.listen
            );
        }
        let listener = TcpListener::bind(options.listen).await.map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {}: {e}; another process may hold the port (choose another with --listen)",
                options.listen
            )
        })?;
        let addr = listener.local_addr()?;
        let owner_listener = match &options.owner_socket {
            Some(path) => Some((path.clone(), bind_owner_socket(path)?)),
            None => None,
        };
        let hosts =
            origin::AllowedHosts::new(addr, &options.allowed_hosts).map_err(anyhow::Error::msg)?;
        let limits = options.connections;
        let stopping = CancellationToken::new();
        let (feed, feed_task) = feed::Feed::start(&node, stopping.clone());
        let state = AppState {
            inner: Arc::new(Inner {
                node,
                limiter: auth::Limiter::new(options.rate),
                options,
                feed,
                hosts,
                stopping: stopping.clone(),
                tokens: cluster::TokenNodes::default(),
            }),
        };
        let cluster = state.inner.options.cluster.clone();
        let app = app(state);
        if let Some(cluster) = cluster {
            cluster.serve_http(
                Arc::new(cluster::Answer { app: app.clone() }),
                format!("http://{addr}"),
            );
            cluster.serve_streams(Arc::new(cluster::Accept {
                app: app.clone(),
                stopping: stopping.clone(),
            }));
        }
        let owner = owner_listener.map(|(path, (listener, me))| {
            let task = tokio::spawn(connections::serve_owner(
                listener,
                me,
                app.clone(),
                limits,
                stopping.clone(),
            ));
            (path, task)
        });
        let task = tokio::spawn(connections::serve(listener, app, limits, stopping.clone()));
        Ok(Server {
            addr,
            stopping,
            task,
            owner,
            feed: feed_task,
        })
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting, closes the WebSockets, waits for requests in flight.
    pub async fn stop(self) {
        self.stopping.cancel();
        if let Ok(Err(e)) = self.task.await {
            tracing::warn!(error = %e, "the server stopped with an error");
        }
        if let Some((path, task)) = self.owner {
            let _ = task.await;
            let _ = std::fs::remove_file(path);
        }
        let _ = self.feed.await;
    }
}

/// Binds the owner's socket at `path`, readable and writable by troupe's
/// user only. A socket left there by a server that died is replaced; a
/// live server's is not (its home lock keeps a second one out first).
/// With it, troupe's own user: the socket's owner, who made it.
fn bind_owner_socket(path: &Path) -> anyhow::Result<(tokio::net::UnixListener, u32)> {
    use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_socket()) {
        std::fs::remove_file(path)?;
    }
    let listener = tokio::net::UnixListener::bind(path).map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on the owner's socket {}: {e}{}",
            path.display(),
            if path.as_os_str().len() > 100 {
                "; the home's path is too long for a Unix socket (about 100 bytes at most): choose a shorter --home"
            } else {
                ""
            }
        )
    })?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok((listener, std::fs::metadata(path)?.uid()))
}

/// The whole application: the API under `/api/`, the page at `/`.
pub fn app(state: AppState) -> Router {
    let api = Router::new()
        .route("/me", get(houses::me))
        .route("/houses", get(houses::list).post(people::create_house))
        .route("/people", get(people::list))
        .route("/houses/{house}", get(houses::show))
        .route(
            "/houses/{house}/members",
            get(houses::members).post(people::add_member),
        )
        .route(
            "/houses/{house}/members/{handle}",
            delete(people::remove_member),
        )
        .route(
            "/houses/{house}/rules",
            get(houses::rules).put(houses::set_rules),
        )
        .route("/houses/{house}/tokens", post(people::issue_token))
        .route("/houses/{house}/move", post(houses::move_house))
        .route("/tokens/{id}", delete(people::revoke_token))
        .route(
            "/houses/{house}/threads",
            get(threads::list).post(threads::create),
        )
        .route("/houses/{house}/search", get(threads::search))
        .route("/houses/{house}/threads/{thread}", get(threads::show))
        .route(
            "/houses/{house}/threads/{thread}/archive",
            post(threads::archive),
        )
        .route("/houses/{house}/threads/{thread}/pin", post(threads::pin))
        .route(
            "/houses/{house}/threads/{thread}/messages",
            get(threads::messages).post(threads::post),
        )
        .route(
            "/houses/{house}/threads/{thread}/events",
            get(events::thread),
        )
        .route("/houses/{house}/files", get(files::list))
        .route("/houses/{house}/versions", get(files::versions))
        .route("/houses/{house}/search/files", get(files::search))
        .route(
            "/houses/{house}/files/{*path}",
            get(files::get).put(files::put).delete(files::delete),
        )
        .route("/requests", get(requests::list))
        .route("/requests/{id}", post(requests::answer))
        .route("/bots", get(admin::bots).post(admin::create_bot))
        .route(
            "/bots/{bot}",
            patch(admin::edit_bot).delete(admin::remove_bot),
        )
        .route("/bots/{bot}/turns", post(admin::turn))
        .route("/conversations/{id}/events", get(events::conversation))
        .route("/routines", get(admin::routines))
        .route("/routines/{id}/{action}", post(admin::routine_action))
        .route("/usage", get(admin::usage))
        .route("/tree", get(admin::tree))
        .route("/metrics", get(metrics::scrape))
        .route("/executors/accounts", get(accounts::list))
        .route("/workbench", get(workbench::list).post(workbench::start))
        .route("/workbench/{id}", get(workbench::show))
        .route("/workbench/{id}/events", get(workbench::events))
        .route("/workbench/{id}/steer", post(workbench::steer))
        .route("/workbench/{id}/stop", post(workbench::stop))
        .layer(middleware::from_fn_with_state(state.clone(), auth::require))
        .route("/health", get(health));
    Router::new()
        .nest("/api", api)
        .merge(page::routes())
        .fallback(not_found)
        .layer(middleware::from_fn_with_state(
            state.clone(),
            cluster::forward,
        ))
        .layer(middleware::from_fn_with_state(state.clone(), guard))
        .layer(middleware::from_fn_with_state(state.clone(), origin::guard))
        .layer(DefaultBodyLimit::max(state.inner.options.body_limit))
        .with_state(state)
}

/// `GET /api/health`: alive, and which troupe.
async fn health(State(state): State<AppState>) -> impl IntoResponse {
    axum::Json(serde_json::json!({
        "status": if state.stopping().is_cancelled() { "stopping" } else { "ok" },
        "version": env!("CARGO_PKG_VERSION"),
    }))
}

async fn not_found() -> error::ApiError {
    error::ApiError::NotFound("no such route; docs/api.md lists them".into())
}

/// Every request: a timeout (WebSocket upgrades excepted) and one access
/// log line through tracing.
async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let started = std::time::Instant::now();
    let (method, path) = (request.method().clone(), request.uri().path().to_string());
    let upgrade = request.headers().contains_key(axum::http::header::UPGRADE);
    let response = if upgrade {
        next.run(request).await
    } else {
        match tokio::time::timeout(state.inner.options.request_timeout, next.run(request)).await {
            Ok(response) => response,
            Err(_) => error::ApiError::Timeout.into_response(),
        }
    };
    tracing::info!(
        target: "troupe::access",
        %method,
        path,
        status = response.status().as_u16(),
        micros = started.elapsed().as_micros() as u64,
    );
    response
}

impl ServerOptions {
    /// The options `[server]` of `config.toml` sets, with `--listen` over it.
    pub fn from_config(
        config: &troupe_runtime::config::Server,
        listen: Option<&str>,
    ) -> anyhow::Result<ServerOptions> {
        let text = listen.unwrap_or(&config.listen);
        let listen: SocketAddr = text.parse().map_err(|e| {
            anyhow::anyhow!("`{text}` is not an address to listen on ({e}); give an IP and a port, e.g. 127.0.0.1:7878")
        })?;
        let auth = match config.auth.as_str() {
            "tokens" => AuthMode::Tokens,
            "open" => AuthMode::Open,
            other => anyhow::bail!(
                "server.auth is `{other}`; it must be `tokens` (every request presents a member's token) or `open` (loopback only)"
            ),
        };
        if config.header_timeout_secs == 0 {
            anyhow::bail!("server.header_timeout_secs is 0; give the seconds a connection may take to send a request's head (10 by default)");
        }
        if config.max_connections == 0 || config.max_connections_per_address == 0 {
            anyhow::bail!("server.max_connections and server.max_connections_per_address must be above 0 (1024 and 128 by default)");
        }
        if config.max_connections_per_address > config.max_connections {
            anyhow::bail!(
                "server.max_connections_per_address ({}) is above server.max_connections ({}); one address cannot hold more than all",
                config.max_connections_per_address,
                config.max_connections
            );
        }
        origin::AllowedHosts::new(listen, &config.allowed_hosts).map_err(anyhow::Error::msg)?;
        if config.requests_per_second.is_nan()
            || config.requests_per_second <= 0.0
            || config.burst == 0
        {
            anyhow::bail!("server.requests_per_second and server.burst must be above 0");
        }
        Ok(ServerOptions {
            listen,
            auth,
            rate: RateLimit {
                per_second: config.requests_per_second,
                burst: f64::from(config.burst),
            },
            body_limit: usize::try_from(config.max_body_bytes).unwrap_or(usize::MAX),
            request_timeout: Duration::from_secs(config.request_timeout_secs.max(1)),
            connections: connections::ConnectionLimits {
                header_timeout: Duration::from_secs(config.header_timeout_secs),
                total: config.max_connections as usize,
                per_address: config.max_connections_per_address as usize,
            },
            allowed_hosts: config.allowed_hosts.clone(),
            owner_socket: None,
            cluster: None,
        })
    }
}
