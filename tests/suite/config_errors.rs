//! Configuration failures through the real binary, as a new user meets
//! them: no key, an unknown model, a script that cannot be read or parsed,
//! a bad `models.toml` entry. Each is said at once in one line naming the
//! cause, with exit status 2, in `run`, `chat` and `serve`; a bot that
//! cannot answer in a thread makes `thread post` say why and exit 1; and
//! nothing is restarted on the way.

use std::process::{Command, Output, Stdio};

use serde_json::json;

use super::cli::{command, house_with_assistant, text, without_model};
use super::support::TestHome;

/// `troupe ARGS` on `home` with no model key in its environment.
fn troupe(home: &TestHome, args: &[&str], model: Option<&str>) -> Output {
    let mut command = command(home, args);
    without_model(&mut command)
        .env_remove("RUST_LOG")
        .env_remove("TROUPE_LOG")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null());
    if let Some(model) = model {
        command.env("TROUPE_MODEL", model);
    }
    command.output().expect("the troupe binary runs")
}

/// Asserts `out` failed with `status` and one line on stderr holding
/// every one of `cause`, and nothing about crashes or restarts.
fn one_line(out: &Output, status: i32, cause: &[&str]) -> String {
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stderr.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(out.status.code(), Some(status), "{stderr}");
    assert_eq!(lines.len(), 1, "one line, not:\n{stderr}");
    for c in cause {
        assert!(lines[0].contains(c), "`{c}` in {stderr}");
    }
    for never in ["restart", "crash", "ERROR", "gave up"] {
        assert!(!stderr.contains(never), "`{never}` in {stderr}");
    }
    lines[0].to_owned()
}

/// The five broken models of a new home, and the words each error names.
fn broken_models(home: &TestHome) -> Vec<(String, Vec<&'static str>)> {
    let bad = home.path().join("bad.json");
    std::fs::write(&bad, "{\"turns\": [{\"text\": ").unwrap();
    vec![
        (
            "openai:gpt-4o-mini".into(),
            vec!["OPENAI_API_KEY is not set"],
        ),
        (
            "nosuch:model".into(),
            vec!["unknown model spec", "nosuch:model"],
        ),
        (
            format!("script:{}", home.path().join("missing.json").display()),
            vec!["cannot read script", "missing.json"],
        ),
        (
            format!("script:{}", bad.display()),
            vec!["bad.json", "line 1"],
        ),
    ]
}

#[test]
fn run_and_chat_say_why_a_model_cannot_be_used_at_once() {
    let home = TestHome::new();
    for (model, cause) in broken_models(&home) {
        let out = troupe(&home, &["run", "--model", &model, "hello"], None);
        let line = one_line(&out, 2, &cause);
        assert!(line.starts_with("error: "), "{line}");
        let out = troupe(&home, &["chat", "--model", &model], None);
        one_line(&out, 2, &cause);
    }
    // A bad models.toml entry, in a home of its own (it stops every command there).
    let other = TestHome::new();
    std::fs::write(
        other.path().join("models.toml"),
        "[models.fast]\napi = \"openai\"\nmodle = \"gpt-4o-mini\"\n",
    )
    .unwrap();
    let cause = ["models.toml:3:1", "unknown key `modle` in [models.fast]"];
    let out = troupe(&other, &["run", "--model", "fast", "hello"], None);
    one_line(&out, 2, &cause);
    let out = troupe(&other, &["chat", "--model", "fast"], None);
    one_line(&out, 2, &cause);
    // Nothing was stored for a turn that could not run.
    let out = troupe(&home, &["conversations", "--limit", "5"], None);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        !text(&out.stdout).contains("hello"),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn serve_names_each_bot_whose_model_cannot_be_used_at_start_and_serves() {
    use std::io::BufRead;
    let home = TestHome::new();
    let mut serve = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env_remove("RUST_LOG")
        .env_remove("TROUPE_LOG")
        .env("TROUPE_MODEL", "nosuch:model")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = std::io::BufReader::new(serve.stderr.take().unwrap()).lines();
    let warning = lines.next().unwrap().unwrap();
    let serving = lines.next().unwrap().unwrap();
    let _ = serve.kill();
    let _ = serve.wait();
    for said in ["warning", "bot `assistant`", "unknown model spec"] {
        assert!(warning.contains(said), "`{said}` in {warning}");
    }
    assert!(serving.starts_with("troupe serving"), "{serving}");
}

#[test]
fn thread_post_says_why_a_bot_did_not_answer_and_exits_1() {
    let home = TestHome::new();
    house_with_assistant(&home);
    let post = [
        "thread",
        "post",
        "acme",
        "general",
        "hi @assistant",
        "--as",
        "ada",
    ];
    // No key: the bot's turn fails at once, with the reason.
    let out = troupe(&home, &post, Some("openai:gpt-4o-mini"));
    one_line(
        &out,
        1,
        &["`assistant` did not answer", "OPENAI_API_KEY is not set"],
    );
    // A script whose only turn is spent: the second post says so.
    let script = home.path().join("bots.json");
    std::fs::write(
        &script,
        json!({"bots": {"assistant": {"turns": [{"text": "only once"}]}}}).to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let out = troupe(&home, &post, Some(&model));
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("only once"),
        "{}",
        text(&out.stdout)
    );
    let mut json_post = post.to_vec();
    json_post.push("--json");
    let out = troupe(&home, &json_post, Some(&model));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let failed: serde_json::Value = text(&out.stdout)
        .lines()
        .find_map(|l| {
            serde_json::from_str(l)
                .ok()
                .filter(|v: &serde_json::Value| v["type"] == "turn_failed")
        })
        .expect("a turn_failed object");
    assert_eq!(failed["bot"], "assistant");
    assert!(
        failed["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("has 1 turns"),
        "{failed}"
    );
}

#[tokio::test]
async fn the_api_and_the_rust_api_refuse_a_bot_whose_model_cannot_be_used() {
    troupe::runtime::net::install_crypto_provider();
    let home = TestHome::new();
    let script = home.path().join("ok.json");
    std::fs::write(&script, json!({"turns": [{"text": "fine"}]}).to_string()).unwrap();
    let runtime = troupe::Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .model(format!("script:{}", script.display()))
        .env(|_| None)
        .build()
        .await
        .unwrap();
    let mut spec = troupe::BotSpec::new("broken", "Broken", "A bot on a model that is not there.");
    spec.model = "nosuch:model".into();
    // The Rust API: a conversation whose every turn would fail is refused.
    let error = runtime.spawn_bot(spec).await.err().map(|e| e.to_string());
    let error = error.expect("spawn_bot refuses the bot's model");
    assert!(
        error.contains("unknown model spec \"nosuch:model\""),
        "{error}"
    );

    // The HTTP API: 503 `model_unavailable` with the reason, at once.
    let sockets = tempfile::tempdir().unwrap();
    let socket = sockets.path().join("serve.sock");
    let options = troupe::server::ServerOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        owner_socket: Some(socket.clone()),
        ..troupe::server::ServerOptions::default()
    };
    let server = troupe::server::Server::start(runtime.node().clone(), options)
        .await
        .unwrap();
    // The owner, over the owner's socket.
    let http = reqwest::Client::builder()
        .unix_socket(socket)
        .build()
        .unwrap();
    let response = http
        .post("http://localhost/api/bots/broken/turns")
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), reqwest::StatusCode::SERVICE_UNAVAILABLE);
    let body: serde_json::Value = response.json().await.unwrap();
    assert_eq!(body["error"]["code"], "model_unavailable", "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("unknown model spec"), "{body}");
    // The main agent's model is fine: its turns run.
    let response = http
        .post("http://localhost/api/bots/assistant/turns")
        .json(&json!({"text": "hello"}))
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success());
    assert!(response.text().await.unwrap().contains("fine"));
    server.stop().await;
    runtime.shutdown().await;
}

#[test]
fn thread_post_through_a_server_says_why_a_bot_did_not_answer() {
    use std::io::{BufRead, BufReader};
    let home = TestHome::new();
    house_with_assistant(&home);
    let script = home.path().join("bots.json");
    std::fs::write(
        &script,
        json!({"bots": {"assistant": {"turns": [{"text": "only once"}]}}}).to_string(),
    )
    .unwrap();
    let model = format!("script:{}", script.display());
    let mut server = Command::new(env!("CARGO_BIN_EXE_troupe"))
        .arg("--home")
        .arg(home.path())
        .args(["serve", "--listen", "127.0.0.1:0"])
        .current_dir(home.path())
        .env_remove("TROUPE_HOME")
        .env("TROUPE_MODEL", &model)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(server.stderr.take().unwrap()).lines();
    loop {
        let line = lines.next().expect("serve says where it listens").unwrap();
        if line.contains(" at http://") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let post = [
        "thread",
        "post",
        "acme",
        "general",
        "hi @assistant",
        "--as",
        "ada",
    ];
    let first = troupe(&home, &post, None);
    let second = troupe(&home, &post, None);
    let _ = Command::new("kill").arg(server.id().to_string()).status();
    let _ = server.wait();
    assert!(first.status.success(), "{}", text(&first.stderr));
    assert!(
        text(&first.stdout).contains("only once"),
        "{}",
        text(&first.stdout)
    );
    assert_eq!(second.status.code(), Some(1), "{}", text(&second.stderr));
    let stderr = text(&second.stderr);
    assert!(stderr.contains("through the server"), "{stderr}");
    assert!(
        stderr.contains("`assistant` did not answer") && stderr.contains("has 1 turns"),
        "{stderr}"
    );
}
