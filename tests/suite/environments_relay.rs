//! An environment's model relay: a command in the sandbox calls one of
//! troupe's models at `$OPENAI_BASE_URL` with a placeholder key; the
//! relay forwards it to the provider troupe's `models.toml` names, with
//! the real key added outside, and streams the answer back as it comes.
//! An unknown model and an unknown path are refused with messages that
//! say what to use; the provider cannot be reached but through the relay;
//! a client that goes away mid-stream closes the provider's connection.
//! Loopback only: the "provider" is a fake OpenAI-compatible server of
//! the test on 127.0.0.1.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use axum::Router;
use parking_lot::Mutex;
use serde_json::{json, Value};
use tokio::sync::Notify;
use troupe::runtime::environment::CommandOutcome;
use troupe::runtime::id::EnvironmentId;
use troupe::runtime::sandbox::Sandbox;
use troupe::{EnvironmentsRef, Runtime};

use super::environments::settings;
use super::support::{script, TestHome, WAIT};

/// The key troupe has for the fake provider; nothing in a sandbox may see it.
const REAL_KEY: &str = "sk-real-key-kept-outside-0123456789";

/// What the fake provider saw of one request.
#[derive(Debug, Clone)]
struct Seen {
    path: String,
    authorization: Option<String>,
    x_api_key: Option<String>,
    body: Value,
}

/// A fake OpenAI-compatible provider on 127.0.0.1.
///
/// `POST /v1/chat/completions` answers "fake says hi" as a whole JSON
/// completion; a request whose last message is "release" lets a waiting
/// stream go on; a `"stream": true` request sends its first event, waits
/// for that release (at most [`WAIT`]), then sends the rest. Every request
/// is recorded; a dropped stream is told on `stream_dropped`.
#[derive(Clone, Default)]
struct Fake {
    seen: Arc<Mutex<Vec<Seen>>>,
    release: Arc<Notify>,
    stream_dropped: Arc<Notify>,
}

impl Fake {
    /// Starts it; its port.
    async fn start(&self) -> u16 {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let app = Router::new().fallback(any(answer)).with_state(self.clone());
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        port
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().clone()
    }
}

/// Tells the fake when its stream is dropped before it ended.
struct DropSignal(Arc<Notify>, bool);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if !self.1 {
            self.0.notify_one();
        }
    }
}

async fn answer(State(fake): State<Fake>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let header = |name: &str| {
        headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_string())
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    fake.seen.lock().push(Seen {
        path: uri.path().to_string(),
        authorization: header("authorization"),
        x_api_key: header("x-api-key"),
        body: body.clone(),
    });
    if uri.path() != "/v1/chat/completions" {
        return (
            StatusCode::IM_A_TEAPOT,
            "the fake serves chat completions only",
        )
            .into_response();
    }
    let last = body["messages"]
        .as_array()
        .and_then(|m| m.last())
        .map(|m| m["content"].as_str().unwrap_or_default().to_string())
        .unwrap_or_default();
    let text = if last == "release" {
        fake.release.notify_one();
        "released"
    } else {
        "fake says hi"
    };
    if body["stream"] != json!(true) {
        let completion = json!({
            "id": "c1", "object": "chat.completion", "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": text}}],
            "usage": {"prompt_tokens": 12, "completion_tokens": 3},
        });
        return (
            [("content-type", "application/json")],
            completion.to_string(),
        )
            .into_response();
    }
    let first = Ok::<_, std::io::Error>(Bytes::from(format!("{}\n\n", STREAM[0]())));
    let release = Arc::clone(&fake.release);
    let signal = DropSignal(Arc::clone(&fake.stream_dropped), false);
    let rest = futures::stream::once(async move {
        let mut signal = signal;
        let released = tokio::time::timeout(WAIT, release.notified()).await.is_ok();
        signal.1 = true;
        let more = if released {
            STREAM[1..]
                .iter()
                .map(|line| format!("{}\n\n", line()))
                .collect()
        } else {
            "data: {\"error\": \"never released\"}\n\n".to_string()
        };
        Ok::<_, std::io::Error>(Bytes::from(more))
    });
    let stream = futures::StreamExt::chain(futures::stream::once(async move { first }), rest);
    (
        [("content-type", "text/event-stream")],
        Body::from_stream(stream),
    )
        .into_response()
}

/// The lines of the fake's stream: the first event, sent at once, and
/// the rest, sent when released.
const STREAM: [fn() -> String; 4] = [
    || {
        format!(
            "data: {}",
            json!({"choices": [{"index": 0, "delta": {"content": "Hel"}}]})
        )
    },
    || {
        format!(
            "data: {}",
            json!({"choices": [{"index": 0, "delta": {"content": "lo"}}]})
        )
    },
    || {
        let usage = json!({"prompt_tokens": 12, "completion_tokens": 2});
        format!("data: {}", json!({"choices": [], "usage": usage}))
    },
    || "data: [DONE]".to_string(),
];

/// A runtime whose `models.toml` names the fake as model `fake` (its key
/// in `FAKE_PROVIDER_KEY`, given by the runtime's own lookup), a house
/// and one environment of it.
async fn environment_with_fake(
    home: &TestHome,
    fake_port: u16,
    extra: &[(&str, &str)],
) -> (Runtime, EnvironmentsRef, EnvironmentId) {
    std::fs::write(
        home.path().join("models.toml"),
        format!(
            "[models.fake]\napi = \"openai\"\nbase_url = \"http://127.0.0.1:{fake_port}/v1\"\n\
             key_env = \"FAKE_PROVIDER_KEY\"\nmodel = \"fake-model-1\"\n\
             prices = {{ input = 1, output = 2 }}\n"
        ),
    )
    .unwrap();
    let mut builder = home
        .builder(script(vec![]))
        .env(|name| (name == "FAKE_PROVIDER_KEY").then(|| REAL_KEY.to_string()));
    for (k, v) in settings() {
        builder = builder.set(k, v);
    }
    for (k, v) in extra {
        builder = builder.set(*k, *v);
    }
    let runtime = builder.build().await.unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    let envs = acme.environments();
    let id = envs.create(None).await.unwrap().info.id;
    (runtime, envs, id)
}

/// Runs `command` in the environment; whatever it printed never holds the
/// real key.
async fn run(envs: &EnvironmentsRef, id: EnvironmentId, command: &str) -> CommandOutcome {
    let out = envs
        .exec(id, command, Some(Duration::from_secs(30)))
        .await
        .unwrap();
    assert!(out.sandboxed, "{out:?}");
    assert!(
        !out.output.contains(REAL_KEY),
        "the real key reached the sandbox: {out:?}"
    );
    out
}

/// A `curl` POST of `body` to the relay's `path`, printing the answer and
/// then its status on a line of its own.
fn post(path: &str, body: &Value) -> String {
    format!(
        "curl -sS --max-time 20 -w '\\n%{{http_code}}' -H \"Authorization: Bearer $OPENAI_API_KEY\" \
         -H 'content-type: application/json' -d '{body}' \"$TROUPE_MODEL_RELAY{path}\""
    )
}

/// The JSON answer and status `post` printed.
fn answer_of(out: &CommandOutcome) -> (Value, u16) {
    let (body, status) = out
        .output
        .trim_end()
        .rsplit_once('\n')
        .unwrap_or_else(|| panic!("no status line: {out:?}"));
    (
        serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {out:?}")),
        status.parse().unwrap_or_else(|e| panic!("{e}: {out:?}")),
    )
}

fn chat(model: &str, content: &str) -> Value {
    json!({"model": model, "messages": [{"role": "user", "content": content}]})
}

#[tokio::test]
async fn a_sandboxed_command_reaches_troupes_model_only_through_the_relay_which_adds_the_key() {
    if Sandbox::detect_or_skip("environments_relay").is_none() {
        return;
    }
    let fake = Fake::default();
    let fake_port = fake.start().await;
    let home = TestHome::new();
    let (_rt, envs, id) = environment_with_fake(&home, fake_port, &[]).await;

    // Commands are pointed at the relay, with a placeholder key only.
    let out = run(&envs, id, "env | sort").await;
    for line in [
        "OPENAI_BASE_URL=http://127.0.0.1:3129/v1",
        "OPENAI_API_KEY=troupe-model-relay-adds-the-real-key",
        "ANTHROPIC_BASE_URL=http://127.0.0.1:3129",
        "ANTHROPIC_API_KEY=troupe-model-relay-adds-the-real-key",
        "TROUPE_MODEL_RELAY=http://127.0.0.1:3129",
    ] {
        assert!(out.output.lines().any(|l| l == line), "{line}: {out:?}");
    }

    // A chat completion, as an OpenAI client sends it.
    let out = run(
        &envs,
        id,
        &format!(
            "curl -sS --max-time 20 -H \"Authorization: Bearer $OPENAI_API_KEY\" \
             -H 'content-type: application/json' -d '{}' \"$OPENAI_BASE_URL/chat/completions\"",
            chat("fake", "hi")
        ),
    )
    .await;
    let answer: Value =
        serde_json::from_str(&out.output).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    assert_eq!(
        answer["choices"][0]["message"]["content"], "fake says hi",
        "{out:?}"
    );
    let seen = fake.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        (
            seen[0].path.as_str(),
            seen[0].authorization.as_deref(),
            seen[0].x_api_key.as_deref(),
            &seen[0].body["model"],
        ),
        (
            "/v1/chat/completions",
            Some(format!("Bearer {REAL_KEY}").as_str()),
            None,
            &json!("fake-model-1"),
        ),
        "the provider gets the real key and its own model id"
    );

    // The list of models comes from troupe's configuration.
    let out = run(
        &envs,
        id,
        "curl -sS --max-time 20 \"$OPENAI_BASE_URL/models\"",
    )
    .await;
    let list: Value = serde_json::from_str(&out.output).unwrap_or_else(|e| panic!("{e}: {out:?}"));
    let ids: Vec<&Value> = list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| &m["id"])
        .collect();
    assert_eq!(ids, vec![&json!("fake")], "{out:?}");

    // An unknown model, a path that is not the model API, a body too large.
    let out = run(
        &envs,
        id,
        &post("/v1/chat/completions", &chat("gpt-nope", "hi")),
    )
    .await;
    let (body, status) = answer_of(&out);
    assert_eq!(
        (
            status,
            body["error"]["message"].as_str().unwrap_or_default()
        ),
        (
            404,
            "troupe model relay: model \"gpt-nope\" is not one of troupe's models; use one of: \
             fake (openai)"
        ),
        "{out:?}"
    );
    let out = run(
        &envs,
        id,
        &post("/v1/embeddings", &json!({"model": "fake"})),
    )
    .await;
    let (body, status) = answer_of(&out);
    assert_eq!(status, 404, "{out:?}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains(
                "nothing at POST /v1/embeddings: the relay forwards only POST /v1/chat/completions"
            ),
        "{out:?}"
    );
    // Declared in its length, or found out while read (chunked).
    for framing in ["", "-H 'transfer-encoding: chunked'"] {
        let out = run(
            &envs,
            id,
            &format!(
                "head -c 9000000 /dev/zero | tr '\\0' ' ' | curl -sS --max-time 20 \
                 -w '\\n%{{http_code}}' {framing} -H 'content-type: application/json' \
                 --data-binary @- \"$OPENAI_BASE_URL/chat/completions\""
            ),
        )
        .await;
        let (body, status) = answer_of(&out);
        assert_eq!(status, 413, "{framing}: {out:?}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("over the relay's limit of 8 MiB"),
            "{framing}: {out:?}"
        );
    }
    assert_eq!(
        fake.seen().len(),
        1,
        "a refused request reached the provider"
    );

    // Without the relay, nothing gets out: the provider's own port is on
    // the machine's loopback, not the sandbox's.
    let out = run(
        &envs,
        id,
        &format!("curl -sS --max-time 5 http://127.0.0.1:{fake_port}/v1/models"),
    )
    .await;
    assert!(!out.success(), "{out:?}");
    let out = run(
        &envs,
        id,
        &format!("echo hi > /dev/tcp/127.0.0.1/{fake_port}"),
    )
    .await;
    assert!(!out.success(), "{out:?}");
    assert_eq!(fake.seen().len(), 1, "the provider was reached directly");
}

#[tokio::test]
async fn a_relayed_stream_flows_as_it_arrives_and_a_client_that_leaves_closes_it() {
    if Sandbox::detect_or_skip("environments_relay").is_none() {
        return;
    }
    let fake = Fake::default();
    let fake_port = fake.start().await;
    let home = TestHome::new();
    let (_rt, envs, id) = environment_with_fake(&home, fake_port, &[]).await;

    // The provider sends its first event and waits until a second call
    // releases it: that call is made only once the first event was read
    // in the sandbox, so a relay that held the stream back would never
    // pass it on.
    let stream = json!({"model": "fake", "stream": true,
                        "messages": [{"role": "user", "content": "stream"}]});
    let command = format!(
        "curl -sSN --max-time 20 -H 'content-type: application/json' -d '{stream}' \
         \"$OPENAI_BASE_URL/chat/completions\" | {{ IFS= read -r first; echo \"FIRST $first\"; \
         curl -sS --max-time 20 -H 'content-type: application/json' -d '{release}' \
         \"$OPENAI_BASE_URL/chat/completions\"; echo; cat; }}",
        release = chat("fake", "release"),
    );
    let out = run(&envs, id, &command).await;
    let lines: Vec<&str> = out.output.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(
        lines.first().copied(),
        Some(format!("FIRST {}", STREAM[0]()).as_str()),
        "{out:?}"
    );
    let released = lines
        .get(1)
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .unwrap_or_else(|| panic!("no released answer: {out:?}"));
    assert_eq!(released["choices"][0]["message"]["content"], "released");
    let rest: Vec<String> = STREAM[1..].iter().map(|line| line()).collect();
    assert_eq!(lines[2..], rest, "{out:?}");

    // A client that reads the first event and hangs up: the relay drops
    // the provider's stream, and goes on serving.
    let body = stream.to_string();
    let command = format!(
        "exec 3<>/dev/tcp/127.0.0.1/3129; body='{body}'; \
         printf 'POST /v1/chat/completions HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\ncontent-type: application/json\\r\\ncontent-length: %d\\r\\n\\r\\n%s' \"${{#body}}\" \"$body\" >&3; \
         while IFS= read -r line <&3; do case \"$line\" in data:*) echo \"GOT $line\"; break;; esac; done; \
         exec 3<&- 3>&-"
    );
    let out = run(&envs, id, &command).await;
    assert!(out.output.starts_with("GOT data: "), "{out:?}");
    let dropped = tokio::time::timeout(WAIT, fake.stream_dropped.notified()).await;
    assert!(
        dropped.is_ok(),
        "the provider's stream was still open after its client left"
    );
    let out = run(
        &envs,
        id,
        &post("/v1/chat/completions", &chat("fake", "again")),
    )
    .await;
    let (body, status) = answer_of(&out);
    assert_eq!(
        (status, &body["choices"][0]["message"]["content"]),
        (200, &json!("fake says hi")),
        "{out:?}"
    );
}

#[tokio::test]
async fn the_relay_is_reached_through_the_egress_proxy_too() {
    if Sandbox::detect_or_skip("environments_relay").is_none() {
        return;
    }
    let fake = Fake::default();
    let fake_port = fake.start().await;
    let home = TestHome::new();
    // Some allow-list: the proxy is on, and `HTTP_PROXY` set for commands.
    let (_rt, envs, id) = environment_with_fake(
        &home,
        fake_port,
        &[("environments.egress", "[\"127.0.0.1:9\"]")],
    )
    .await;
    let body = chat("fake", "hi");
    for how in ["", "-p"] {
        // Plain proxying, then a CONNECT tunnel; neither lists the relay
        // and neither may reach the machine's port 3129.
        let out = run(
            &envs,
            id,
            &format!(
                "curl -sS {how} --max-time 20 -w '\\n%{{http_code}}' -H 'content-type: application/json' \
                 -d '{body}' http://127.0.0.1:3129/v1/chat/completions"
            ),
        )
        .await;
        let (answer, status) = answer_of(&out);
        assert_eq!(
            (status, &answer["choices"][0]["message"]["content"]),
            (200, &json!("fake says hi")),
            "{how}: {out:?}"
        );
    }
    let seen = fake.seen();
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert!(
        seen.iter()
            .all(|s| s.authorization.as_deref() == Some(format!("Bearer {REAL_KEY}").as_str())),
        "{seen:?}"
    );
}
