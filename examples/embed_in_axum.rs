//! troupe inside your own axum app: one tokio runtime, one process, your
//! routes calling a troupe `Runtime` — a bot answering `POST /ask`, an
//! actor of your own kind counting visits (`POST /visits/{page}`), the
//! runtime's events streamed to the app's log, and the tree of actors at
//! `GET /tree`.
//!
//! The process is set up much as the `troupe` binary sets itself up:
//! mimalloc as the global allocator, and each worker thread of the tokio
//! runtime collecting its heap when it runs out of work (`on_thread_park`)
//! — so that what a burst of agents allocated goes back to the system when
//! the app is idle. That is why `main` builds the tokio runtime itself
//! instead of using `#[tokio::main]`. This example gives freed memory back
//! at once (a purge delay of 0), the simplest form; the binary keeps it
//! through a burst and gives it back once its workers have been idle for
//! 10 ms (`src/idle_heap.rs`), which spares a burst of a thousand agents
//! the page faults of taking it back.
//!
//! The model is scripted (it echoes), so this runs offline. The example
//! serves on a free loopback port, calls its own routes once as a client
//! would, prints what came back and exits; with `-- --serve` it keeps
//! serving until Ctrl-C (try `curl -X POST localhost:PORT/ask -d hello`).
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example embed_in_axum
//! ```

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::routing::{get, post};
use axum::{Json, Router};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::Message;
use troupe::{ActorError, AgentEvent, Bot, Context, EventSource, Kind, Runtime, UserActor};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// `mi_option_purge_delay` in `mimalloc.h`: 0 gives freed pages back at
/// once instead of after a delay.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[allow(unsafe_code)]
fn tune_allocator() {
    // SAFETY: `mi_option_set` stores a value in mimalloc's option table,
    // which any thread may do at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, 0) };
}

/// Run by each worker thread when it runs out of work: gives back the
/// pages its heap has free (microseconds).
#[allow(unsafe_code)]
fn collect_when_idle() {
    // SAFETY: `mi_collect` only reorganises the calling thread's heap and
    // the process's arenas; any thread may call it at any time.
    unsafe { libmimalloc_sys::mi_collect(false) };
}

/// Counts a page's visits; troupe keeps the count across restarts.
struct Visits;

#[troupe::async_trait]
impl UserActor for Visits {
    type Msg = ();
    type Reply = u64;
    type State = u64;

    async fn handle(&self, cx: &mut Context<'_, Self>, (): ()) -> Result<u64, ActorError> {
        *cx.state_mut() += 1;
        cx.save();
        Ok(*cx.state())
    }
}

/// What the app's handlers share.
#[derive(Clone)]
struct App {
    troupe: Runtime,
    bot: Bot,
    visits: Kind<Visits>,
}

/// An error answered as 500 with its text.
struct Failed(String);

impl<E: std::fmt::Display> From<E> for Failed {
    fn from(e: E) -> Self {
        Failed(e.to_string())
    }
}

impl axum::response::IntoResponse for Failed {
    fn into_response(self) -> axum::response::Response {
        (axum::http::StatusCode::INTERNAL_SERVER_ERROR, self.0).into_response()
    }
}

async fn ask(State(app): State<App>, question: String) -> Result<String, Failed> {
    let report = app.bot.send(question).await?.result().await?;
    Ok(report.text)
}

async fn visit(State(app): State<App>, Path(page): Path<String>) -> Result<String, Failed> {
    let count = app.troupe.call(&app.visits.address(page), ()).await?;
    Ok(count.to_string())
}

async fn tree(State(app): State<App>) -> Json<Vec<String>> {
    let tree = app.troupe.tree().await;
    Json(
        tree.into_iter()
            .map(|a| format!("{} ({})", a.id, a.kind))
            .collect(),
    )
}

/// The model: echoes the last thing it was told.
fn echo() -> ScriptedProvider {
    ScriptedProvider::from_fn(|request| {
        let said = request.messages.iter().rev().find_map(|m| match m {
            Message::User { content } => Some(content.clone()),
            Message::Assistant { .. } | Message::Tool { .. } => None,
        });
        Turn::text(format!("You said: {}", said.unwrap_or_default()))
    })
}

async fn run(serve: bool) -> anyhow::Result<()> {
    let home = tempfile::tempdir()?;
    let troupe = Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .provider(Arc::new(echo()))
        .build()
        .await?;
    // The app's log of what happens inside troupe, from a stream.
    let mut events = troupe.events();
    let log = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            match (event.source(), &event.event) {
                (EventSource::Actor(actor), AgentEvent::ActorStarted { .. }) => {
                    println!("[troupe] actor {actor} started");
                }
                (EventSource::Conversation(id), AgentEvent::TurnFinished { .. }) => {
                    println!("[troupe] a turn of conversation {id} finished");
                }
                _ => {}
            }
        }
    });
    let visits = troupe.register("visits", |_page: &str| Visits).await?;
    let bot = troupe.bot("assistant").await?;
    let app = App {
        troupe: troupe.clone(),
        bot,
        visits,
    };
    let routes = Router::new()
        .route("/ask", post(ask))
        .route("/visits/{page}", post(visit))
        .route("/tree", get(tree))
        .with_state(app);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let address = listener.local_addr()?;
    println!("serving on http://{address}");
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let server = tokio::spawn(async move {
        axum::serve(listener, routes)
            .with_graceful_shutdown(async {
                let _ = stopped.await;
            })
            .await
    });

    if serve {
        tokio::signal::ctrl_c().await?;
    } else {
        // The app's own routes, called as a client would.
        let answer = request(address, "POST", "/ask", "hello troupe").await?;
        println!("POST /ask -> {answer}");
        anyhow::ensure!(answer == "You said: hello troupe", "unexpected answer");
        request(address, "POST", "/visits/home", "").await?;
        let count = request(address, "POST", "/visits/home", "").await?;
        println!("POST /visits/home (twice) -> {count}");
        anyhow::ensure!(count == "2", "unexpected count");
        let tree = request(address, "GET", "/tree", "").await?;
        println!("GET /tree -> {tree}");
        anyhow::ensure!(tree.contains("visits/home"), "the actor is not in the tree");
    }

    let _ = stop.send(());
    server.await??;
    troupe.shutdown().await;
    log.abort();
    Ok(())
}

/// One HTTP/1.1 request to `address` (no client library needed); the
/// response's body, or an error naming its status.
async fn request(
    address: std::net::SocketAddr,
    method: &str,
    path: &str,
    body: &str,
) -> anyhow::Result<String> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    let head = format!(
        "{method} {path} HTTP/1.1\r\nHost: {address}\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| anyhow::anyhow!("a malformed response: {response}"))?;
    anyhow::ensure!(
        head.starts_with("HTTP/1.1 200"),
        "{method} {path}: {head}\n{body}"
    );
    Ok(body.to_string())
}

fn main() -> anyhow::Result<()> {
    tune_allocator();
    let serve = std::env::args().any(|a| a == "--serve");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .on_thread_park(collect_when_idle)
        .build()?;
    runtime.block_on(run(serve))
}
