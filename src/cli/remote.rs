//! The CLI beside a running `troupe serve`: over its API, not the database.
//!
//! `troupe serve` records in `<home>/serve.json` where it listens, and
//! serves the home's own CLI on the owner's socket `<home>/serve.sock`
//! (troupe's user only; see `src/cli/serve.rs`). When the home is locked by that very
//! process, the commands that would write the home (`thread post`, `ps`)
//! ask the server instead; without a server, they open the home as before,
//! and a home held by any other writer is refused with its name.

use std::path::Path;
use std::time::Duration;

use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message;
use troupe_runtime::home::{Home, HomeLock};
use troupe_runtime::protocol::house::ThreadMessage;

use super::serve::Running;

/// What the server answered to a request it refused: its status and the
/// message of its `{"error": …}` body (what the CLI prints).
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Refused {
    /// The HTTP status (404, 503, …).
    pub status: u16,
    /// What was wrong, as the server said it.
    pub message: String,
}

/// A running server of this home.
pub struct Remote {
    running: Running,
    /// The owner's socket, where every request goes.
    socket: std::path::PathBuf,
    http: reqwest::Client,
}

impl Remote {
    /// The server holding `home`, if one does: its record names the
    /// process that holds the home's lock, and that process is alive.
    pub fn find(home: Option<&Path>) -> Option<Remote> {
        let home = home.map(Home::new).unwrap_or_else(Home::from_env);
        let running = Running::read(home.root())?;
        let owner = HomeLock::recorded_owner(&home)?;
        if owner.pid != running.pid || owner.ended.is_some() || !alive(running.pid) {
            return None;
        }
        let socket = running.socket.clone()?;
        troupe_runtime::net::install_crypto_provider();
        let http = reqwest::Client::builder()
            .unix_socket(socket.clone())
            .timeout(Duration::from_secs(120))
            .build()
            .ok()?;
        Some(Remote {
            running,
            socket,
            http,
        })
    }

    /// Where it listens.
    pub fn url(&self) -> &str {
        &self.running.url
    }

    /// `/api{path}` on the owner's socket (the host is only a name: the
    /// connection goes to the socket).
    fn api(path: &str) -> String {
        format!("http://localhost/api{path}")
    }

    async fn answer(response: reqwest::Response) -> anyhow::Result<Value> {
        let status = response.status();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        if status.is_success() {
            return Ok(body);
        }
        Err(Self::refused(status, &body))
    }

    /// A refusal as the CLI says it: the message of the `{"error": …}`
    /// body, else the status.
    fn refused(status: reqwest::StatusCode, body: &Value) -> anyhow::Error {
        let message = body["error"]["message"]
            .as_str()
            .map_or_else(|| status.to_string(), str::to_string);
        Refused {
            status: status.as_u16(),
            message,
        }
        .into()
    }

    /// `GET /api{path}`.
    pub async fn get(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::GET, path, None).await
    }

    /// `METHOD /api{path}`, with a JSON body if given; its JSON answer.
    async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
    ) -> anyhow::Result<Value> {
        let mut request = self.http.request(method, Self::api(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().await.map_err(|e| self.unreachable(e))?;
        Self::answer(response).await
    }

    /// `GET /api{path}` of a body that is bytes, not JSON (a file).
    pub async fn get_bytes(&self, path: &str) -> anyhow::Result<Vec<u8>> {
        let response = self
            .http
            .get(Self::api(path))
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        let status = response.status();
        if !status.is_success() {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            return Err(Self::refused(status, &body));
        }
        Ok(response
            .bytes()
            .await
            .map_err(|e| self.unreachable(e))?
            .to_vec())
    }

    /// `POST /api{path}` with a JSON body.
    pub async fn post(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::POST, path, Some(body)).await
    }

    /// `PATCH /api{path}` with a JSON body.
    pub async fn patch(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::PATCH, path, Some(body)).await
    }

    /// `DELETE /api{path}`.
    pub async fn delete(&self, path: &str) -> anyhow::Result<Value> {
        self.call(reqwest::Method::DELETE, path, None).await
    }

    /// `PUT /api{path}` with a JSON body.
    pub async fn put(&self, path: &str, body: &Value) -> anyhow::Result<Value> {
        self.call(reqwest::Method::PUT, path, Some(body)).await
    }

    /// `PUT /api{path}` with raw bytes.
    pub async fn put_bytes(&self, path: &str, bytes: Vec<u8>) -> anyhow::Result<Value> {
        let response = self
            .http
            .put(Self::api(path))
            .body(bytes)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        Self::answer(response).await
    }

    fn unreachable(&self, e: reqwest::Error) -> anyhow::Error {
        anyhow::anyhow!(
            "the home is served by pid {} at {}, which did not answer: {e}",
            self.running.pid,
            self.running.url
        )
    }

    /// A WebSocket to `/api{path}`.
    pub async fn events(
        &self,
        path: &str,
    ) -> anyhow::Result<tokio_tungstenite::WebSocketStream<tokio::net::UnixStream>> {
        let request = format!("ws://localhost/api{path}").into_client_request()?;
        let socket = &self.socket;
        let stream = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
            anyhow::anyhow!(
                "the home's server at {} did not answer: {e}",
                socket.display()
            )
        })?;
        let (socket, _) = tokio_tungstenite::client_async(request, stream).await?;
        Ok(socket)
    }

    /// Posts in a thread and, unless `no_wait`, prints the bots' answers
    /// of the round as they land, until it settles or `timeout`, and why a
    /// bot's turn failed. The exit status: 1 when a bot's turn failed.
    #[allow(clippy::too_many_arguments)]
    pub async fn post_in_thread(
        &self,
        house: &str,
        thread: &str,
        text: &str,
        author: Option<&str>,
        no_wait: bool,
        timeout: Duration,
        json_out: bool,
    ) -> anyhow::Result<u8> {
        let base = format!("/houses/{}/threads/{}", encode(house), encode(thread));
        let mut socket = if no_wait {
            None
        } else {
            Some(self.events(&format!("{base}/events")).await?)
        };
        let mut body = json!({ "text": text });
        if let Some(a) = author {
            body["as"] = a.into();
        }
        let posted = self.post(&format!("{base}/messages"), &body).await?;
        let round = posted["id"].as_str().unwrap_or_default().to_string();
        eprintln!("posted {round} through the server at {}", self.url());
        let Some(socket) = socket.as_mut() else {
            println!("posted ({round})");
            return Ok(super::exit::FINISHED);
        };
        let mut failed = false;
        let wait = async {
            while let Some(frame) = socket.next().await {
                let Message::Text(text) = frame? else {
                    continue;
                };
                let event: Value = serde_json::from_str(&text)?;
                match event["type"].as_str() {
                    // What lands in the thread until the round settles (the
                    // round's answers, a GIF a bot posts meanwhile), printed
                    // as the command prints it without a server.
                    Some("message") if event["message"]["id"] != round.as_str() => {
                        let m: ThreadMessage = serde_json::from_value(event["message"].clone())?;
                        super::thread::print_message(&m, json_out)?;
                    }
                    Some("turn_failed") if event["round"] == round.as_str() => {
                        failed = true;
                        super::thread::print_failure(
                            event["bot"].as_str().unwrap_or("?"),
                            event["reason"].as_str().unwrap_or_default(),
                            json_out,
                        );
                    }
                    Some("held") if event["round"] == round.as_str() => super::thread::print_held(
                        event["bot"].as_str().unwrap_or("?"),
                        event["reason"].as_str().unwrap_or_default(),
                        json_out,
                    ),
                    Some("settled") if event["round"] == round.as_str() => return anyhow::Ok(()),
                    _ => {}
                }
            }
            anyhow::bail!("the server closed the stream before the round settled")
        };
        let result = tokio::time::timeout(timeout, wait).await;
        let _ = socket.close(None).await;
        match result {
            Ok(r) => r.map(|()| {
                if failed {
                    super::exit::FAILED
                } else {
                    super::exit::FINISHED
                }
            }),
            Err(_) => anyhow::bail!(
                "the round did not settle within {} s; the answers will still land in the thread",
                timeout.as_secs()
            ),
        }
    }
}

/// A path segment, percent-encoded.
pub(super) fn encode(segment: &str) -> String {
    segment
        .bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
                char::from(b).to_string()
            } else {
                format!("%{b:02X}")
            }
        })
        .collect()
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

impl Remote {
    /// One turn of `bot` through the server (`POST /api/bots/{bot}/turns`),
    /// printed as `troupe run` prints one: progress on stderr (or every
    /// event as JSON with `json_out`), the answer on stdout. Its exit status.
    /// Without `conversation`, `new` starts one, else the bot's latest goes
    /// on. The exit status and the conversation the turn ran in.
    pub async fn run_turn(
        &self,
        bot: &str,
        conversation: Option<&str>,
        new: bool,
        text: &str,
        json_out: bool,
    ) -> anyhow::Result<(u8, String)> {
        use troupe_runtime::protocol::{AgentEvent, TurnOutcome};

        let mut body = json!({ "text": text, "new_conversation": new && conversation.is_none() });
        if let Some(c) = conversation {
            body["conversation"] = c.into();
        }
        let response = self
            .http
            .post(Self::api(&format!("/bots/{}/turns", encode(bot))))
            .timeout(Duration::from_secs(24 * 3600))
            .json(&body)
            .send()
            .await
            .map_err(|e| self.unreachable(e))?;
        if !response.status().is_success() {
            let body: Value = response.json().await.unwrap_or(Value::Null);
            let message = body["error"]["message"]
                .as_str()
                .unwrap_or("the server refused the turn")
                .to_string();
            if body["error"]["code"] == "model_unavailable" {
                return Err(super::exit::Misconfigured(message).into());
            }
            anyhow::bail!("{message}");
        }
        eprintln!(
            "troupe: the home is served at {}; this turn runs there",
            self.url()
        );
        let mut stream = response.bytes_stream();
        let mut pending = Vec::new();
        while let Some(chunk) = stream.next().await {
            pending.extend_from_slice(&chunk?);
            while let Some(end) = pending.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = pending.drain(..=end).collect();
                let value: Value = serde_json::from_slice(&line)?;
                if let Some(report) = value.get("report") {
                    let outcome: TurnOutcome = serde_json::from_value(report["outcome"].clone())?;
                    let answer = report["text"].as_str().unwrap_or_default();
                    if json_out {
                        println!("{value}");
                    } else if !answer.is_empty() {
                        println!("{answer}");
                    }
                    if let Some(why) = super::run::outcome_text(&outcome) {
                        eprintln!("troupe: {why}");
                    }
                    let id = report["conversation"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string();
                    return Ok((super::run::exit_code(&outcome), id));
                }
                if let Some(error) = value.get("error").and_then(Value::as_str) {
                    anyhow::bail!("{error}");
                }
                let event: AgentEvent = serde_json::from_value(value.clone())?;
                if json_out {
                    println!("{value}");
                    continue;
                }
                match &event {
                    AgentEvent::ApprovalRequested { request_id, call, reason } => eprintln!(
                        "troupe: `{}` waits for approval ({reason}): answer it in the web page, or POST /api/requests/{request_id}",
                        call.name
                    ),
                    AgentEvent::QuestionAsked { request_id, .. } => eprintln!(
                        "troupe: a question waits for an answer: in the web page, or POST /api/requests/{request_id}"
                    ),
                    other => {
                        if let Some(line) = super::run::progress_line(other) {
                            eprintln!("{line}");
                        }
                    }
                }
            }
        }
        anyhow::bail!("the server closed the turn's stream before it ended")
    }
}
