//! What the house reference says of `send_gif`, pins and archiving, pinned
//! down through the tools as a bot calls them (issue 36): a GIF is a
//! message of the bot with an image, from a GIF service served here on
//! loopback; `send_gif` is offered without a key and answers with
//! guidance; a pinned thread is what `list_threads pinned_only` finds,
//! pinned from the CLI; archiving a thread ends its round.

use std::sync::Arc;

use parking_lot::Mutex;
use serde_json::{json, Value};
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::house::{Attachment, ListenMode};
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::runtime::store::{conversations, house as table};
use troupe::{BotSpec, HouseRef, Runtime, RuntimeBuilder, ThreadRef};

use super::cli::{house_with_assistant, text, troupe};
use super::support::{Gate, TestHome, WAIT};

/// A 1×1 GIF, what the service's media address serves.
const PIXEL: &[u8] = b"GIF89a\x01\x00\x01\x00\x80\x00\x00\xff\xff\xff\x00\x00\x00!\xf9\x04\x01\x00\x00\x00\x00,\x00\x00\x00\x00\x01\x00\x01\x00\x00\x02\x02D\x01\x00;";

/// A Giphy-shaped GIF service on 127.0.0.1: `/v1/gifs/search` answers one
/// GIF whose media is `/media/happy.gif` of the same server; the queries
/// asked are recorded.
pub(super) struct GifService {
    /// Its base address, `http://127.0.0.1:PORT`.
    pub(super) base: String,
    /// The `q` of each search, in order.
    pub(super) queries: Arc<Mutex<Vec<String>>>,
}

impl GifService {
    pub(super) async fn start() -> GifService {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let queries = Arc::new(Mutex::new(Vec::new()));
        let (seen, media) = (Arc::clone(&queries), base.clone());
        let app = axum::Router::new()
            .route(
                "/v1/gifs/search",
                axum::routing::get(
                    move |axum::extract::Query(q): axum::extract::Query<
                        std::collections::HashMap<String, String>,
                    >| {
                        let (seen, media) = (Arc::clone(&seen), media.clone());
                        async move {
                            seen.lock().push(q.get("q").cloned().unwrap_or_default());
                            axum::Json(json!({"data": [{
                                "url": "https://giphy.com/gifs/happy-dance-l0MYt5jPR6QX5pnqM",
                                "title": "Happy Dance GIF",
                                "images": {
                                    "original": {"url": format!("{media}/media/happy.gif"),
                                        "width": "480", "height": "270", "size": "1536745"},
                                    "fixed_height_small": {"url": format!("{media}/media/small.gif")}
                                }
                            }]}))
                        }
                    },
                ),
            )
            .route(
                "/media/{name}",
                axum::routing::get(|| async { ([("content-type", "image/gif")], PIXEL) }),
            );
        tokio::spawn(async move { axum::serve(listener, app).await });
        GifService { base, queries }
    }

    /// The `[web]` setting pointing `send_gif` at it.
    pub(super) fn giphy_url(&self) -> String {
        format!("{}/v1/gifs/search", self.base)
    }

    /// The attachment its GIF makes.
    pub(super) fn attachment(&self) -> Attachment {
        Attachment {
            kind: "image".into(),
            url: format!("{}/media/happy.gif", self.base),
            preview: Some(format!("{}/media/small.gif", self.base)),
            width: Some(480),
            height: Some(270),
            bytes: Some(1_536_745),
            title: "Happy Dance GIF".into(),
            attribution: "Powered by GIPHY".into(),
            page: Some("https://giphy.com/gifs/happy-dance-l0MYt5jPR6QX5pnqM".into()),
        }
    }

    /// `builder` with a Giphy key and this service.
    pub(super) fn configure(&self, builder: RuntimeBuilder) -> RuntimeBuilder {
        builder
            .env(|k: &str| (k == "GIPHY_API_KEY").then(|| "test-key".to_string()))
            .set("web.giphy_url", self.giphy_url())
    }
}

/// A runtime from `builder`, house `acme` with person `ada` and the bots
/// `names`, and thread `general` where everyone takes part.
async fn house(
    builder: RuntimeBuilder,
    names: &[(&str, ListenMode)],
) -> (Runtime, HouseRef, ThreadRef) {
    let runtime = builder.build().await.unwrap();
    let acme = runtime.create_house("acme").await.unwrap();
    acme.add_human("ada", Some("Ada")).await.unwrap();
    let mut people = vec!["ada".to_string()];
    for (name, listen) in names {
        runtime
            .spawn_bot(BotSpec::new(*name, *name, "A member of the house."))
            .await
            .unwrap();
        acme.add_bot(name, *listen).await.unwrap();
        people.push(name.to_string());
    }
    let general = acme
        .create_thread(Some("general"), &[], "ada", &people)
        .await
        .unwrap();
    (runtime, acme, general)
}

fn bots(scripts: Vec<(&str, Vec<Turn>)>) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        scripts
            .into_iter()
            .map(|(n, t)| (n.to_string(), t))
            .collect(),
    ))
}

/// The results of the tools `bot` called, in order, from its latest request.
fn results(model: &ScriptedProvider, bot: &str) -> Vec<(String, ToolResult)> {
    let requests = model.bot(bot).expect("scripted").requests();
    let last = requests.last().expect("the bot was called");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } => Some((name.clone(), result.clone())),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn send_gif_posts_the_gif_as_a_message_of_the_bot_with_an_image() {
    let home = TestHome::new();
    let gifs = GifService::start().await;
    let model = bots(vec![
        (
            "alice",
            vec![
                Turn::tool_call("send_gif", json!({"query": "happy dance"})),
                Turn::text("there you go"),
            ],
        ),
        ("bob", vec![Turn::text("nice dance")]),
    ]);
    let (_rt, _acme, general) = house(
        gifs.configure(home.builder(model.clone())),
        &[("alice", ListenMode::All), ("bob", ListenMode::Mentions)],
    )
    .await;
    general
        .post_and_wait("ada", "@alice a happy dance please", WAIT)
        .await
        .unwrap();
    assert_eq!(*gifs.queries.lock(), ["happy dance"]);
    let r = results(&model, "alice");
    assert!(!r[0].1.is_error(), "{}", r[0].1.text);
    assert!(
        r[0].1.text.starts_with("Posted a GIF into this thread"),
        "{}",
        r[0].1.text
    );
    // The thread holds the GIF as alice's message, then her answer.
    let messages = general.read(0, 10).await.unwrap();
    let shown: Vec<(&str, &str, &[Attachment])> = messages
        .iter()
        .map(|m| (m.author.as_str(), m.text.as_str(), m.attachments.as_slice()))
        .collect();
    let gif = [gifs.attachment()];
    assert_eq!(
        shown,
        [
            ("ada", "@alice a happy dance please", &[][..]),
            ("alice", "", &gif[..]),
            ("alice", "there you go", &[][..]),
        ]
    );
    // The CLI prints it as a link, with its size and attribution.
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["thread", "read", "acme", "general"])
        .env_remove("TROUPE_HOME")
        .output()
        .await
        .unwrap();
    let printed = text(&out.stdout);
    let link = format!(
        "[alice] 🖼 Happy Dance GIF <{}/media/happy.gif>, 480×270 · Powered by GIPHY",
        gifs.base
    );
    assert!(printed.contains(&link), "{printed}{}", text(&out.stderr));
    // Another bot sees it in its transcript, as an image with its link.
    general
        .post_and_wait("ada", "@bob what did alice post?", WAIT)
        .await
        .unwrap();
    let offer = model.bot("bob").unwrap().requests()[0]
        .messages
        .last()
        .unwrap()
        .text()
        .to_string();
    let line = format!(
        "[alice] [image: Happy Dance GIF <{}/media/happy.gif>, Powered by GIPHY]",
        gifs.base
    );
    assert!(offer.contains(&line), "{offer}");
}

#[tokio::test]
async fn without_a_key_send_gif_is_offered_and_answers_with_guidance_as_an_error() {
    let home = TestHome::new();
    let model = bots(vec![(
        "alice",
        vec![
            Turn::tool_call("send_gif", json!({"query": "facepalm"})),
            Turn::text("no GIFs here"),
        ],
    )]);
    let builder = home.builder(model.clone()).env(|_: &str| None);
    let (_rt, _acme, general) = house(builder, &[("alice", ListenMode::All)]).await;
    general
        .post_and_wait("ada", "send a facepalm", WAIT)
        .await
        .unwrap();
    let first = &model.bot("alice").unwrap().requests()[0];
    assert!(
        first.tools.iter().any(|t| t.name == "send_gif"),
        "send_gif is offered every turn"
    );
    let r = results(&model, "alice");
    assert!(r[0].1.is_error(), "{}", r[0].1.text);
    assert!(
        r[0].1.text.contains("GIPHY_API_KEY") && r[0].1.text.contains("in words"),
        "{}",
        r[0].1.text
    );
    let messages = general.read(0, 10).await.unwrap();
    assert!(messages.iter().all(|m| m.attachments.is_empty()));
}

#[test]
fn a_thread_pinned_from_the_cli_is_what_list_threads_pinned_only_finds() {
    let home = TestHome::new();
    house_with_assistant(&home);
    // The bot's second turn requires the tool's answer to name `general` alone.
    let script = home.path().join("pins.json");
    std::fs::write(
        &script,
        json!({"bots": {"assistant": {"turns": [
            {"tool_calls": [{"name": "list_threads", "arguments": {"pinned_only": true}}]},
            {"text": "only general is pinned",
             "expect": "1 threads, most recently active first:\n- `general`"}
        ]}}})
        .to_string(),
    )
    .unwrap();
    let model = format!("agent.model=script:{}", script.display());
    let run = |args: &[&str]| {
        let mut all = vec!["--set", model.as_str()];
        all.extend_from_slice(args);
        troupe(&home, &all)
    };
    for args in [
        &["thread", "create", "acme", "notes", "--with", "assistant"][..],
        &["thread", "pin", "acme", "general"],
    ] {
        let out = run(args);
        assert!(out.status.success(), "{args:?}: {}", text(&out.stderr));
    }
    let again = run(&["thread", "pin", "acme", "general"]);
    assert!(!again.status.success());
    assert!(
        text(&again.stderr).contains("thread `general` is pinned already"),
        "{}",
        text(&again.stderr)
    );
    let listed = text(&run(&["thread", "list", "acme", "--json"]).stdout);
    let pinned: Vec<(String, bool)> = listed
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|t| (t["name"].as_str().unwrap().to_string(), t["pinned"] == true))
        .collect();
    assert_eq!(
        pinned,
        [("general".to_string(), true), ("notes".to_string(), false)],
        "pinned first"
    );
    let out = run(&[
        "thread",
        "post",
        "acme",
        "notes",
        "which threads are pinned?",
    ]);
    assert!(
        out.status.success() && text(&out.stdout).contains("only general is pinned"),
        "{}{}",
        text(&out.stdout),
        text(&out.stderr)
    );
    let out = run(&["thread", "unpin", "acme", "general"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let listed = text(&run(&["thread", "list", "acme", "--json"]).stdout);
    assert!(!listed.contains("\"pinned\":true"), "{listed}");
}

#[tokio::test]
async fn archiving_a_thread_stops_its_turns_and_posts_no_answer_there() {
    let home = TestHome::new();
    let hold = Gate::new("hold");
    let model = bots(vec![
        (
            "alice",
            vec![
                Turn::tool_call("archive_thread", json!({})),
                Turn::text("archived it"),
            ],
        ),
        (
            "bob",
            vec![
                Turn::tool_call("hold", json!({})),
                Turn::text("bob's late answer"),
            ],
        ),
    ]);
    let builder = home.builder(model.clone()).tool(hold.clone());
    let (rt, _acme, general) = house(
        builder,
        &[
            ("alice", ListenMode::Mentions),
            ("bob", ListenMode::Mentions),
        ],
    )
    .await;
    // bob's turn is running, inside its tool.
    let mut events = rt.node().thread_events();
    let entered = hold.entered.notified();
    general.post("ada", "@bob take your time").await.unwrap();
    tokio::time::timeout(WAIT, entered)
        .await
        .expect("bob's turn holds");
    // alice archives the thread: her round settles with nothing posted.
    let landed = general
        .post_and_wait("ada", "@alice archive this thread", WAIT)
        .await
        .unwrap();
    assert!(landed.is_empty(), "{landed:?}");
    // bob's turn was stopped, and its round settles too.
    tokio::time::timeout(WAIT, async {
        loop {
            if let Ok(troupe::ThreadEvent::TurnFailed { bot, .. }) = events.recv().await {
                if bot == "bob" {
                    return;
                }
            }
        }
    })
    .await
    .expect("bob's turn is stopped");
    let texts: Vec<String> = general
        .read(0, 10)
        .await
        .unwrap()
        .into_iter()
        .map(|m| format!("[{}] {}", m.author, m.text))
        .collect();
    assert_eq!(
        texts,
        [
            "[ada] @bob take your time",
            "[ada] @alice archive this thread"
        ]
    );
    // alice's answer stays in her conversation.
    let thread = general.info.id;
    let seat = rt
        .node()
        .store()
        .read(move |c| table::seat(c, thread, "alice"))
        .await
        .unwrap()
        .expect("alice has a seat");
    let kept = rt
        .node()
        .store()
        .read(move |c| conversations::load_messages(c, seat.conversation))
        .await
        .unwrap();
    assert!(
        kept.iter()
            .any(|m| matches!(&m.message, Message::Assistant { .. })
                && m.message.text() == "archived it"),
        "{kept:?}"
    );
}

#[tokio::test]
async fn a_house_run_command_offers_cmd_and_each_parameter_works_in_the_environment() {
    if troupe::runtime::sandbox::Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let call = |args: Value| Turn::tool_call("run_command", args);
    let model = bots(vec![(
        "alice",
        vec![
            call(json!({"cmd": "pwd", "background": true})),
            Turn::tool_call("create_environment", json!({})),
            call(json!({"cmd": "mkdir -p sub && echo made"})),
            call(json!({"cmd": "pwd", "cwd": "sub"})),
            call(json!({"cmd": "sleep 20", "timeout": 1})),
            call(json!({"command": "echo by its alias"})),
            Turn::text("done"),
        ],
    )]);
    let (_rt, _acme, general) = super::environments::house_with(&home, model.clone(), &[]).await;
    general
        .post_and_wait("ada", "try the environment", WAIT)
        .await
        .unwrap();
    // The house's schema: `cmd`, and what an environment supports.
    let offered = &model.bot("alice").unwrap().requests()[0];
    let run = offered
        .tools
        .iter()
        .find(|t| t.name == "run_command")
        .unwrap();
    let mut names: Vec<&String> = run.parameters["properties"]
        .as_object()
        .unwrap()
        .keys()
        .collect();
    names.sort();
    assert_eq!(names, ["cmd", "cwd", "timeout"]);
    assert_eq!(run.parameters["required"], json!(["cmd"]));
    let r = results(&model, "alice");
    assert!(
        r[0].1.is_error() && r[0].1.text.contains("background"),
        "{}",
        r[0].1.text
    );
    for (i, says) in [(2, "made"), (3, "/workspace/sub"), (5, "by its alias")] {
        assert!(
            !r[i].1.is_error() && r[i].1.text.contains(says),
            "{i}: {}",
            r[i].1.text
        );
    }
    assert!(
        r[4].1.text.contains("timed out") || r[4].1.text.contains("timeout"),
        "{}",
        r[4].1.text
    );
}

/// What the usage-reporting provider counts for one tool definition: a
/// token per four bytes of its JSON, rounded up.
fn counted(tool: &Value) -> u64 {
    (tool.to_string().len() as u64).div_ceil(4)
}

/// An OpenAI-compatible provider on 127.0.0.1 that streams "ok" and
/// reports as input tokens 7 plus [`counted`] of each tool it was sent;
/// every request body is recorded.
async fn usage_provider() -> (u16, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorded = Arc::clone(&seen);
    let app = axum::Router::new().route(
        "/v1/chat/completions",
        axum::routing::post(move |axum::Json(body): axum::Json<Value>| {
            let recorded = Arc::clone(&recorded);
            async move {
                let tools = body["tools"].as_array().cloned().unwrap_or_default();
                let prompt: u64 = 7 + tools.iter().map(counted).sum::<u64>();
                recorded.lock().push(body);
                let events = [
                    json!({"choices": [{"index": 0, "delta": {"content": "ok"}}]}),
                    json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
                    json!({"choices": [], "usage": {"prompt_tokens": prompt, "completion_tokens": 1}}),
                ];
                let mut text: String = events.iter().map(|e| format!("data: {e}\n\n")).collect();
                text.push_str("data: [DONE]\n\n");
                ([("content-type", "text/event-stream")], text)
            }
        }),
    );
    tokio::spawn(async move { axum::serve(listener, app).await });
    (port, seen)
}

#[tokio::test]
async fn tools_cost_each_asks_the_model_what_each_always_on_tool_costs() {
    let home = TestHome::new();
    let (port, seen) = usage_provider().await;
    std::fs::write(
        home.path().join("models.toml"),
        format!(
            "[models.counter]\napi = \"openai\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n\
             key_env = \"COUNTER_KEY\"\nmodel = \"counter-1\"\n"
        ),
    )
    .unwrap();
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["tools", "--cost", "--each", "--model", "counter", "--json"])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env("COUNTER_KEY", "test-key")
        .stdin(std::process::Stdio::null())
        .output()
        .await
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("spends credit"),
        "{}",
        text(&out.stderr)
    );
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    let requests = seen.lock().clone();
    // One request without tools, then one per tool, each with that tool alone.
    assert!(requests[0]["tools"].as_array().is_none_or(Vec::is_empty));
    let sent: Vec<(String, u64)> = requests[1..]
        .iter()
        .map(|r| {
            let tools = r["tools"].as_array().unwrap();
            assert_eq!(tools.len(), 1);
            (
                tools[0]["function"]["name"].as_str().unwrap().to_string(),
                counted(&tools[0]),
            )
        })
        .collect();
    let reported: Vec<(String, u64)> = report["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["name"].as_str().unwrap().to_string(),
                t["tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(reported, sent);
    assert!(reported.iter().any(|(n, _)| n == "read_file"));
    assert_eq!(report["baseline_tokens"], 7);
    assert_eq!(
        report["total_tokens"].as_u64().unwrap(),
        sent.iter().map(|(_, t)| t).sum::<u64>()
    );
    assert!(requests
        .iter()
        .all(|r| r["max_tokens"] == 1 || r["max_completion_tokens"] == 1));
}
