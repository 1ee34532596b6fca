//! `troupe serve`'s API over real HTTP and WebSockets on loopback: every
//! route's happy path and refusals, tokens (missing, wrong, revoked),
//! house isolation on every route, the event stream's resume, 200
//! watchers of one thread, a bot's reply and its approval through the API,
//! rate and size limits, and the graceful stop.

use std::sync::Arc;

use futures::{SinkExt, StreamExt};
use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::Message as Ws;
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::server::auth::RateLimit;
use troupe::server::{Server, ServerOptions};
use troupe::{BotSpec, Runtime};

use super::support::{TestHome, WAIT};

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// Stands for the owner in [`Served`]'s calls: the request goes over the
/// owner's Unix socket, with no token.
pub(super) const OWNER: &str = "<over the owner's socket>";

/// A served runtime: house `acme` (person `ada`, bot `alice` listening to
/// all, thread `general`) and house `beta` (person `bob`, thread `plans`).
pub(super) struct Served {
    pub(super) runtime: Runtime,
    server: Option<Server>,
    pub(super) base: String,
    pub(super) ada: String,
    pub(super) bob: String,
    /// [`OWNER`]: requests go over the owner's socket.
    pub(super) owner: String,
    /// How the server was started, to start it again ([`Served::restart`]).
    started: ServerOptions,
    http: reqwest::Client,
    owner_http: reqwest::Client,
    /// The owner's socket.
    pub(super) socket: std::path::PathBuf,
    /// The bots' working folder (commands run there).
    pub(super) work: tempfile::TempDir,
    _home: TestHome,
}

impl Served {
    pub(super) async fn start(alice: Vec<Turn>) -> Served {
        Self::start_with(alice, |_| {}).await
    }

    pub(super) async fn start_with(
        alice: Vec<Turn>,
        options: impl FnOnce(&mut ServerOptions),
    ) -> Served {
        Self::start_configured(alice, |b| b, options).await
    }

    /// [`Served::start_with`], the runtime's builder set up by `configure`.
    pub(super) async fn start_configured(
        alice: Vec<Turn>,
        configure: impl FnOnce(troupe::RuntimeBuilder) -> troupe::RuntimeBuilder,
        options: impl FnOnce(&mut ServerOptions),
    ) -> Served {
        troupe::runtime::net::install_crypto_provider();
        let home = TestHome::new();
        let model = Arc::new(ScriptedProvider::per_bot(
            "test".into(),
            [("alice".to_string(), alice)].into_iter().collect(),
        ));
        let work = tempfile::tempdir().unwrap();
        let builder = home
            .builder(model)
            .cwd(work.path())
            .set("environments.helper", env!("CARGO_BIN_EXE_troupe"));
        let runtime = configure(builder).build().await.unwrap();
        runtime
            .spawn_bot(BotSpec::new("alice", "Alice", "A member of the house."))
            .await
            .unwrap();
        let acme = runtime.create_house("acme").await.unwrap();
        acme.add_human("ada", Some("Ada")).await.unwrap();
        acme.add_bot("alice", ListenMode::All).await.unwrap();
        acme.create_thread(Some("general"), &[], "ada", &["ada".into(), "alice".into()])
            .await
            .unwrap();
        let beta = runtime.create_house("beta").await.unwrap();
        beta.add_human("bob", None).await.unwrap();
        beta.create_thread(Some("plans"), &[], "bob", &["bob".into()])
            .await
            .unwrap();
        let ada = acme.issue_token("ada").await.unwrap().secret;
        let bob = beta.issue_token("bob").await.unwrap().secret;
        let socket = work.path().join("serve.sock");
        let mut opts = ServerOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            owner_socket: Some(socket.clone()),
            ..ServerOptions::default()
        };
        options(&mut opts);
        let server = Server::start(runtime.node().clone(), opts.clone())
            .await
            .unwrap();
        let base = format!("http://{}", server.addr());
        opts.listen = server.addr();
        Served {
            runtime,
            server: Some(server),
            base,
            ada,
            bob,
            owner: OWNER.into(),
            started: opts,
            http: troupe::runtime::net::client_builder().build().unwrap(),
            owner_http: reqwest::Client::builder()
                .unix_socket(socket.clone())
                .build()
                .unwrap(),
            socket,
            work,
            _home: home,
        }
    }

    pub(super) async fn call(
        &self,
        method: Method,
        path: &str,
        token: Option<&str>,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let mut request = if token == Some(OWNER) {
            self.owner_http
                .request(method, format!("http://localhost/api{path}"))
        } else {
            self.http
                .request(method, format!("{}/api{path}", self.base))
        };
        if let Some(t) = token.filter(|t| *t != OWNER) {
            request = request.bearer_auth(t);
        }
        if let Some(b) = body {
            request = request.json(&b);
        }
        let response = request.send().await.unwrap();
        let status = response.status();
        let text = response.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// `GET /api{path}` with no `Authorization` header.
    pub(super) async fn anonymous_get(&self, path: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, None, None).await
    }

    pub(super) async fn get(&self, path: &str, token: &str) -> (StatusCode, Value) {
        self.call(Method::GET, path, Some(token), None).await
    }

    pub(super) async fn post(&self, path: &str, token: &str, body: Value) -> (StatusCode, Value) {
        self.call(Method::POST, path, Some(token), Some(body)).await
    }

    pub(super) async fn watch(&self, path: &str, token: &str) -> Socket {
        let url = format!("{}/api{path}", self.base.replacen("http", "ws", 1));
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("authorization", format!("Bearer {token}").parse().unwrap());
        tokio_tungstenite::connect_async(request).await.unwrap().0
    }

    /// A WebSocket to `/api{path}` over the owner's socket.
    pub(super) async fn watch_owner(
        &self,
        path: &str,
    ) -> tokio_tungstenite::WebSocketStream<tokio::net::UnixStream> {
        let request = format!("ws://localhost/api{path}")
            .into_client_request()
            .unwrap();
        let stream = tokio::net::UnixStream::connect(&self.socket).await.unwrap();
        tokio_tungstenite::client_async(request, stream)
            .await
            .unwrap()
            .0
    }

    /// Gives the thread `general` an environment, where the bots' commands run.
    pub(super) async fn environment(&self) {
        let acme = self.runtime.house("acme").await.unwrap();
        let general = acme.thread("general").await.unwrap();
        acme.environments()
            .create(Some(general.info.id))
            .await
            .unwrap();
    }

    /// Stops the server alone; the node keeps running.
    pub(super) async fn stop_server(&mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await;
        }
    }

    /// Starts the server again on the same address.
    pub(super) async fn restart(&mut self) {
        let opts = self.started.clone();
        let server = Server::start(self.runtime.node().clone(), opts)
            .await
            .unwrap();
        self.server = Some(server);
    }

    /// Stops the server and the runtime as `troupe serve` stops, then
    /// starts both again on the same home, `alice` answering from a new
    /// script (a process restart, in this test's process).
    pub(super) async fn restart_process(&mut self, alice: Vec<Turn>) {
        self.stop_server().await;
        self.runtime.shutdown().await;
        let model = Arc::new(ScriptedProvider::per_bot(
            "test".into(),
            [("alice".to_string(), alice)].into_iter().collect(),
        ));
        self.runtime = self
            ._home
            .builder(model)
            .cwd(self.work.path())
            .set("environments.helper", env!("CARGO_BIN_EXE_troupe"))
            .build()
            .await
            .unwrap();
        let mut opts = self.started.clone();
        opts.listen = "127.0.0.1:0".parse().unwrap();
        let server = Server::start(self.runtime.node().clone(), opts.clone())
            .await
            .unwrap();
        self.base = format!("http://{}", server.addr());
        opts.listen = server.addr();
        self.started = opts;
        self.server = Some(server);
    }

    pub(super) async fn stop(mut self) {
        if let Some(s) = self.server.take() {
            s.stop().await;
        }
        self.runtime.shutdown().await;
    }
}

/// The next frame of `socket` (its JSON), within [`WAIT`].
pub(super) async fn frame<S>(socket: &mut tokio_tungstenite::WebSocketStream<S>) -> Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let next = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a frame in time")
            .expect("the stream is open")
            .unwrap();
        if let Ws::Text(text) = next {
            return serde_json::from_str(&text).unwrap();
        }
    }
}

/// Frames until one of `kind` that `pick` accepts; that one.
pub(super) async fn until<S>(
    socket: &mut tokio_tungstenite::WebSocketStream<S>,
    kind: &str,
    pick: impl Fn(&Value) -> bool,
) -> Value
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    loop {
        let f = frame(socket).await;
        if f["type"] == kind && pick(&f) {
            return f;
        }
    }
}

/// The texts of the next `n` message frames.
/// A scripted call the gate asks about: alice cleaning `./build`.
pub(super) fn clean_the_build() -> Turn {
    Turn::tool_call(
        "run_command",
        json!({"command": "rm -rf ./build && echo removed"}),
    )
}

/// Ada asks, in `general`, for the build to be cleaned: a socket watching
/// the thread (its `ready` read) and the round's id.
pub(super) async fn ask_to_clean(s: &Served) -> (Socket, Value) {
    s.environment().await;
    let mut socket = s.watch(&format!("{GENERAL}/events"), &s.ada).await;
    assert_eq!(frame(&mut socket).await["type"], "ready");
    let (status, posted) = s
        .post(
            &format!("{GENERAL}/messages"),
            &s.ada,
            json!({"text": "please clean the build"}),
        )
        .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    (socket, posted["id"].clone())
}

async fn messages(socket: &mut Socket, n: usize) -> Vec<String> {
    let mut out = Vec::new();
    while out.len() < n {
        let f = frame(socket).await;
        if f["type"] == "message" {
            out.push(f["message"]["text"].as_str().unwrap().to_string());
        }
    }
    out
}

pub(super) const GENERAL: &str = "/houses/acme/threads/general";

#[tokio::test]
async fn health_needs_no_token_and_every_other_route_a_live_one() {
    let s = Served::start(vec![]).await;
    let (status, body) = s.call(Method::GET, "/health", None, None).await;
    assert_eq!(
        (status, body["status"].as_str()),
        (StatusCode::OK, Some("ok"))
    );
    let (status, body) = s.call(Method::GET, "/houses", None, None).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    assert!(body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("Bearer"));
    let (status, _) = s.get("/houses", "troupe_not-a-token").await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let (status, body) = s.get("/houses", &s.ada).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["houses"].as_array().unwrap().len(), 1);
    assert_eq!(body["houses"][0]["name"], "acme");
    // Revoked: locked out at once.
    let acme = s.runtime.house("acme").await.unwrap();
    assert_eq!(acme.revoke_tokens("ada").await.unwrap(), 1);
    let (status, body) = s.get("/houses", &s.ada).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{body}");
    // A person taken out of the house is locked out too.
    let beta = s.runtime.house("beta").await.unwrap();
    assert_eq!(s.get("/me", &s.bob).await.0, StatusCode::OK);
    beta.remove_member("bob").await.unwrap();
    assert_eq!(s.get("/me", &s.bob).await.0, StatusCode::UNAUTHORIZED);
    s.stop().await;
}

#[tokio::test]
async fn a_member_of_one_house_gets_404_for_everything_of_another() {
    let s = Served::start(vec![]).await;
    let gets = [
        "/houses/beta",
        "/houses/beta/members",
        "/houses/beta/threads",
        "/houses/beta/threads/plans",
        "/houses/beta/threads/plans/messages",
        "/houses/beta/files",
        "/houses/beta/files/notes.md",
        "/houses/beta/versions",
        "/houses/beta/search/files?q=plan",
        "/houses/nowhere/threads",
    ];
    for path in gets {
        let (status, body) = s.get(path, &s.ada).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "GET {path}: {body}");
    }
    let writes = [
        (Method::POST, "/houses/beta/threads", json!({"name": "x"})),
        (
            Method::POST,
            "/houses/beta/threads/plans/messages",
            json!({"text": "hi"}),
        ),
        (
            Method::POST,
            "/houses/beta/threads/plans/archive",
            json!({"archived": true}),
        ),
        (Method::PUT, "/houses/beta/files/a.txt", json!("x")),
        (
            Method::DELETE,
            "/houses/beta/files/a.txt?version=1",
            json!(null),
        ),
    ];
    for (method, path, body) in writes {
        let (status, answer) = s.call(method.clone(), path, Some(&s.ada), Some(body)).await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}");
    }
    // The event stream refuses before upgrading.
    let url = format!(
        "{}/api/houses/beta/threads/plans/events",
        s.base.replacen("http", "ws", 1)
    );
    let mut request = url.into_client_request().unwrap();
    request.headers_mut().insert(
        "authorization",
        format!("Bearer {}", s.ada).parse().unwrap(),
    );
    let refused = tokio_tungstenite::connect_async(request).await.unwrap_err();
    assert!(refused.to_string().contains("404"), "{refused}");
    // Nothing of beta changed.
    let beta = s.runtime.house("beta").await.unwrap();
    assert_eq!(
        beta.thread("plans")
            .await
            .unwrap()
            .read(0, 10)
            .await
            .unwrap()
            .len(),
        0
    );
    // The node's own routes are for the people of the house `home`.
    for path in ["/bots", "/routines", "/usage", "/tree"] {
        assert_eq!(s.get(path, &s.ada).await.0, StatusCode::FORBIDDEN, "{path}");
    }
    s.stop().await;
}

#[tokio::test]
async fn threads_messages_and_files_over_http() {
    let s = Served::start(vec![]).await;
    let (status, me) = s.get("/me", &s.ada).await;
    assert_eq!(
        (status, me["handle"].as_str()),
        (StatusCode::OK, Some("ada"))
    );
    let (status, members) = s.get("/houses/acme/members", &s.ada).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(members["members"].as_array().unwrap().len(), 2);

    // Threads: open (the caller takes part), a taken name, list, archive.
    let (status, t) = s
        .post(
            "/houses/acme/threads",
            &s.ada,
            json!({"name": "ops", "tags": ["infra"]}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{t}");
    assert_eq!(t["thread"]["participants"], json!(["ada"]));
    let (status, _) = s
        .post("/houses/acme/threads", &s.ada, json!({"name": "ops"}))
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, body) = s
        .post("/houses/acme/threads", &s.ada, json!({"nom": "x"}))
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert!(
        body["error"]["message"].as_str().unwrap().contains("nom"),
        "{body}"
    );
    let (_, list) = s.get("/houses/acme/threads", &s.ada).await;
    assert_eq!(list["threads"].as_array().unwrap().len(), 2);
    let (status, a) = s
        .post(
            "/houses/acme/threads/ops/archive",
            &s.ada,
            json!({"archived": true}),
        )
        .await;
    assert_eq!((status, &a["changed"]), (StatusCode::OK, &json!(true)));
    let (_, list) = s.get("/houses/acme/threads", &s.ada).await;
    assert_eq!(list["threads"].as_array().unwrap().len(), 1);
    let (_, list) = s.get("/houses/acme/threads?archived=true", &s.ada).await;
    assert_eq!(list["threads"].as_array().unwrap().len(), 2);
    let (status, body) = s
        .post(
            "/houses/acme/threads/ops/messages",
            &s.ada,
            json!({"text": "hi"}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::BAD_REQUEST,
        "an archived thread takes no posts: {body}"
    );

    // Messages: post (committed: 202 with its id), read, page back and forth.
    let mut socket = s.watch(&format!("{GENERAL}/events"), &s.ada).await;
    assert_eq!(frame(&mut socket).await["type"], "ready");
    s.runtime
        .house("acme")
        .await
        .unwrap()
        .add_bot("alice", ListenMode::Off)
        .await
        .unwrap();
    for i in 0..5 {
        let (status, posted) = s
            .post(
                &format!("{GENERAL}/messages"),
                &s.ada,
                json!({"text": format!("m{i}")}),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED, "{posted}");
        assert!(posted["id"].as_str().unwrap().starts_with("msg_"));
    }
    assert_eq!(
        messages(&mut socket, 5).await,
        ["m0", "m1", "m2", "m3", "m4"]
    );
    let (_, page) = s.get(&format!("{GENERAL}/messages?limit=2"), &s.ada).await;
    let texts = |v: &Value| -> Vec<String> {
        v["messages"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["text"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(texts(&page), ["m3", "m4"]);
    let oldest = page["messages"][0]["seq"].as_i64().unwrap();
    let (_, back) = s
        .get(
            &format!("{GENERAL}/messages?limit=2&before={oldest}"),
            &s.ada,
        )
        .await;
    assert_eq!(texts(&back), ["m1", "m2"]);
    let first = back["messages"][0]["seq"].as_i64().unwrap();
    let (_, forth) = s
        .get(
            &format!("{GENERAL}/messages?after={first}&limit=10"),
            &s.ada,
        )
        .await;
    assert_eq!(texts(&forth), ["m2", "m3", "m4"]);
    let (status, _) = s
        .get(&format!("{GENERAL}/messages?after=1&before=2"), &s.ada)
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = s
        .post(
            &format!("{GENERAL}/messages"),
            &s.ada,
            json!({"text": "  "}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = s
        .post(
            &format!("{GENERAL}/messages"),
            &s.ada,
            json!({"text": "x", "as": "bob"}),
        )
        .await;
    assert_eq!(
        status,
        StatusCode::FORBIDDEN,
        "a member posts as themselves"
    );

    // Files: put, get, versions, search, a stale delete refused, then deleted.
    let put = |path: &str, body: &'static str| {
        s.http
            .put(format!(
                "{}/api/houses/acme/files/{path}?message=first",
                s.base
            ))
            .bearer_auth(&s.ada)
            .body(body)
            .send()
    };
    let response = put("docs/notes.md", "hello house").await.unwrap();
    assert_eq!(response.status(), StatusCode::CREATED);
    let written: Value = response.json().await.unwrap();
    let v1 = written["version"].as_i64().unwrap();
    let response = put("docs/notes.md", "hello again").await.unwrap();
    let v2: i64 = response.json::<Value>().await.unwrap()["version"]
        .as_i64()
        .unwrap();
    let got = s
        .http
        .get(format!(
            "{}/api/houses/acme/files/docs/notes.md?version={v1}",
            s.base
        ))
        .bearer_auth(&s.ada)
        .send()
        .await
        .unwrap();
    assert_eq!(got.headers()["x-troupe-version"], v1.to_string().as_str());
    assert_eq!(got.text().await.unwrap(), "hello house");
    let (_, files) = s.get("/houses/acme/files?folder=docs", &s.ada).await;
    assert_eq!(files["files"][0]["path"], "docs/notes.md");
    let (_, log) = s
        .get("/houses/acme/versions?path=docs/notes.md", &s.ada)
        .await;
    assert_eq!(log["versions"].as_array().unwrap().len(), 2, "{log}");
    let (_, found) = s.get("/houses/acme/search/files?q=again", &s.ada).await;
    assert_eq!(found["hits"][0]["path"], "docs/notes.md", "{found}");
    assert_eq!(found["hits"][0]["version"], v2, "{found}");
    let (status, body) = s
        .call(
            Method::DELETE,
            &format!("/houses/acme/files/docs/notes.md?version={v1}"),
            Some(&s.ada),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT, "{body}");
    let (status, _) = s.get("/houses/acme/files/docs/notes.md", &s.ada).await;
    assert_eq!(status, StatusCode::OK, "a refused delete deletes nothing");
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("/houses/acme/files/docs/notes.md?version={v2}"),
            Some(&s.ada),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = s.get("/houses/acme/files/docs/notes.md", &s.ada).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = s.get("/houses/acme/nothing-here", &s.ada).await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.stop().await;
}

#[tokio::test]
async fn the_event_stream_resumes_after_a_dropped_connection_without_gap_or_duplicate() {
    let served = Served::start(vec![]).await;
    let s = &served;
    s.runtime
        .house("acme")
        .await
        .unwrap()
        .add_bot("alice", ListenMode::Off)
        .await
        .unwrap();
    let post = |text: String| async move {
        let (status, _) = s
            .post(
                &format!("{GENERAL}/messages"),
                &s.ada,
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    };
    let mut socket = s.watch(&format!("{GENERAL}/events"), &s.ada).await;
    assert_eq!(frame(&mut socket).await["after"], 0);
    for i in 0..3 {
        post(format!("before {i}")).await;
    }
    let mut last = 0;
    for _ in 0..3 {
        last = until(&mut socket, "message", |_| true).await["id"]
            .as_i64()
            .unwrap();
    }
    drop(socket);
    for i in 0..4 {
        post(format!("while away {i}")).await;
    }
    let mut socket = s
        .watch(&format!("{GENERAL}/events?after={last}"), &s.ada)
        .await;
    assert_eq!(
        messages(&mut socket, 4).await,
        [
            "while away 0",
            "while away 1",
            "while away 2",
            "while away 3"
        ]
    );
    assert_eq!(frame(&mut socket).await["type"], "ready");
    post("live".into()).await;
    assert_eq!(messages(&mut socket, 1).await, ["live"]);
    // The browser's way to present a token to a WebSocket.
    let url = format!(
        "{}/api{GENERAL}/events?after={last}&access_token={}",
        s.base.replacen("http", "ws", 1),
        s.ada
    );
    let (mut browser, _) = tokio_tungstenite::connect_async(url).await.unwrap();
    assert_eq!(messages(&mut browser, 5).await.last().unwrap(), "live");
    served.stop().await;
}

#[tokio::test]
async fn two_hundred_watchers_of_one_thread_all_see_every_message_in_order() {
    let s = Served::start_with(vec![], |o| o.rate.burst = 1000.0).await;
    s.runtime
        .house("acme")
        .await
        .unwrap()
        .add_bot("alice", ListenMode::Off)
        .await
        .unwrap();
    let mut watchers = Vec::new();
    for _ in 0..200 {
        let mut socket = s.watch(&format!("{GENERAL}/events"), &s.ada).await;
        assert_eq!(frame(&mut socket).await["type"], "ready");
        watchers.push(socket);
    }
    let sent: Vec<String> = (0..20).map(|i| format!("message {i}")).collect();
    for text in &sent {
        let (status, _) = s
            .post(
                &format!("{GENERAL}/messages"),
                &s.ada,
                json!({ "text": text }),
            )
            .await;
        assert_eq!(status, StatusCode::ACCEPTED);
    }
    let seen =
        futures::future::join_all(watchers.iter_mut().map(|w| messages(w, sent.len()))).await;
    for got in seen {
        assert_eq!(got, sent);
    }
    s.stop().await;
}

#[tokio::test]
async fn a_bots_turn_streams_in_and_its_approval_is_answered_over_the_api() {
    let s = Served::start(vec![
        clean_the_build(),
        Turn::text("cleaned up").expecting("removed"),
    ])
    .await;
    let (mut socket, round) = ask_to_clean(&s).await;
    let call = until(&mut socket, "tool_call", |f| f["bot"] == "alice").await;
    assert_eq!(call["call"]["name"], "run_command");
    let asked = until(&mut socket, "request", |_| true).await;
    assert_eq!(asked["kind"], "approval");
    // bob, of another house, sees nothing waiting and cannot answer.
    let (_, theirs) = s.get("/requests", &s.bob).await;
    assert_eq!(theirs["requests"], json!([]));
    let id = asked["request_id"].as_str().unwrap();
    let (status, _) = s
        .post(
            &format!("/requests/{id}"),
            &s.bob,
            json!({"answer": "once"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (_, mine) = s.get("/requests", &s.ada).await;
    assert_eq!(mine["requests"][0]["id"], id, "{mine}");
    assert_eq!(mine["requests"][0]["bot"], "alice");
    let (status, _) = s
        .post(
            &format!("/requests/{id}"),
            &s.ada,
            json!({"answer": "maybe"}),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = s
        .post(
            &format!("/requests/{id}"),
            &s.ada,
            json!({"answer": "once"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    let result = until(&mut socket, "tool_result", |_| true).await;
    assert_eq!(result["status"], "ok", "{result}");
    assert!(
        result["text"].as_str().unwrap().contains("removed"),
        "{result}"
    );
    let reply = until(&mut socket, "message", |f| {
        f["message"]["author"] == "alice"
    })
    .await;
    assert_eq!(reply["message"]["text"], "cleaned up");
    assert_eq!(reply["round"], round);
    until(&mut socket, "settled", |f| f["round"] == round).await;
    let (_, after) = s.get("/requests", &s.ada).await;
    assert_eq!(after["requests"], json!([]));
    s.stop().await;
}

#[tokio::test]
async fn the_homes_owner_manages_bots_routines_usage_and_the_tree() {
    let s = Served::start(vec![Turn::text("hello from alice")]).await;
    let (status, bots) = s.get("/bots", &s.owner).await;
    assert_eq!(status, StatusCode::OK);
    assert!(bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["spec"]["name"] == "alice"));
    let (status, made) = s
        .post(
            "/bots",
            &s.owner,
            json!({"name": "scribe", "title": "Scribe", "mission": "Takes notes."}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{made}");
    let (status, _) = s
        .post(
            "/bots",
            &s.owner,
            json!({"name": "scribe", "title": "Scribe", "mission": "x"}),
        )
        .await;
    assert_eq!(status, StatusCode::CONFLICT);
    let (status, routines) = s.get("/routines", &s.owner).await;
    assert_eq!(status, StatusCode::OK, "{routines}");
    let (status, _) = s.post("/routines/nope/pause", &s.owner, json!(null)).await;
    assert!(status.is_client_error());
    let (status, _) = s
        .post("/routines/nope/explode", &s.owner, json!(null))
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    // The owner sees every house.
    let (_, houses) = s.get("/houses", &s.owner).await;
    assert!(houses["houses"].as_array().unwrap().len() >= 3, "{houses}");
    // A turn, streamed as NDJSON: events, then the report.
    let response = s
        .owner_http
        .post("http://localhost/api/bots/alice/turns")
        .json(&json!({"text": "hi", "new_conversation": true}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let lines: Vec<Value> = response
        .text()
        .await
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.first().unwrap()["event"], "turn_started");
    assert_eq!(lines.last().unwrap()["report"]["text"], "hello from alice");
    let (_, usage) = s.get("/usage", &s.owner).await;
    assert!(usage["usage"].is_array());
    let (_, tree) = s.get("/tree", &s.owner).await;
    let kinds: Vec<&str> = tree["actors"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["kind"].as_str().unwrap())
        .collect();
    assert!(
        kinds.contains(&"conversations") && kinds.contains(&"threads"),
        "{kinds:?}"
    );
    s.stop().await;
}

#[tokio::test]
async fn limits_refuse_a_flood_and_an_oversized_body_and_stop_closes_the_sockets() {
    let s = Served::start_with(vec![], |o| {
        o.rate = RateLimit {
            per_second: 0.5,
            burst: 3.0,
        };
        o.body_limit = 1024;
    })
    .await;
    for _ in 0..3 {
        assert_eq!(s.get("/me", &s.ada).await.0, StatusCode::OK);
    }
    let response = s
        .http
        .get(format!("{}/api/me", s.base))
        .bearer_auth(&s.ada)
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::TOO_MANY_REQUESTS);
    assert!(response.headers().contains_key("retry-after"));
    // Another token has its own bucket.
    let big = "x".repeat(4096);
    let (status, _) = s
        .post(
            &format!("{GENERAL}/messages"),
            &s.owner,
            json!({ "text": big }),
        )
        .await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
    // Ada's bucket is empty: a second token of hers has its own.
    let again = s
        .runtime
        .house("acme")
        .await
        .unwrap()
        .issue_token("ada")
        .await
        .unwrap()
        .secret;
    let mut socket = s.watch(&format!("{GENERAL}/events"), &again).await;
    assert_eq!(frame(&mut socket).await["type"], "ready");
    let Served {
        server, runtime, ..
    } = s;
    server.unwrap().stop().await;
    let closed = tokio::time::timeout(WAIT, socket.next()).await.unwrap();
    assert!(matches!(closed, Some(Ok(Ws::Close(Some(_))))), "{closed:?}");
    let _ = socket.send(Ws::Close(None)).await;
    runtime.shutdown().await;
}
