//! An operator's view, through the real binary: a traced turn reaches an
//! OTLP/HTTP receiver on loopback with the GenAI spans and attributes, and
//! `GET /api/metrics` of `troupe serve` counts a scripted round.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::common::v1::any_value::Value;
use opentelemetry_proto::tonic::trace::v1::Span;
use pretty_assertions::assert_eq;
use prost::Message as _;
use serde_json::json;

use super::cli::{command, text, write_script};
use super::support::TestHome;

/// One turn: a tool call that succeeds, one that fails, then an answer.
fn two_calls_then_an_answer(home: &TestHome) -> String {
    std::fs::write(home.path().join("notes.txt"), "the launch is on Friday\n").unwrap();
    write_script(
        home,
        "turns.json",
        json!([
            {"tool_calls": [
                {"name": "read_file", "arguments": {"path": "notes.txt"}},
                {"name": "read_file", "arguments": {"path": "missing.txt"}}
            ]},
            {"text": "Friday"}
        ]),
    )
}

/// An OTLP/HTTP receiver on 127.0.0.1: each `POST /v1/traces` body,
/// decoded, goes to the channel; every request is answered 200.
fn receiver() -> (String, mpsc::Receiver<ExportTraceServiceRequest>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            let tx = tx.clone();
            std::thread::spawn(move || serve_requests(stream, &tx));
        }
    });
    (url, rx)
}

fn serve_requests(stream: TcpStream, tx: &mpsc::Sender<ExportTraceServiceRequest>) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut writer = stream;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        if path == "/v1/traces" {
            tx.send(ExportTraceServiceRequest::decode(body.as_slice()).unwrap())
                .unwrap();
        }
        let answer =
            "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(answer.as_bytes()).is_err() {
            return;
        }
    }
}

/// A span's attributes as strings.
fn attributes(span: &Span) -> HashMap<String, String> {
    span.attributes
        .iter()
        .map(|kv| {
            let value = match kv.value.as_ref().and_then(|v| v.value.as_ref()) {
                Some(Value::StringValue(s)) => s.clone(),
                Some(Value::IntValue(i)) => i.to_string(),
                Some(Value::DoubleValue(d)) => d.to_string(),
                Some(Value::BoolValue(b)) => b.to_string(),
                other => format!("{other:?}"),
            };
            (kv.key.clone(), value)
        })
        .collect()
}

#[test]
fn a_turn_is_traced_to_an_otlp_receiver_with_gen_ai_spans() {
    let home = TestHome::new();
    let model = two_calls_then_an_answer(&home);
    let (url, received) = receiver();
    let out = command(&home, &["run", "--model", &model, "when is the launch?"])
        .env("OTEL_EXPORTER_OTLP_ENDPOINT", &url)
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "Friday");

    // The run flushed its spans before it exited.
    let mut spans = Vec::new();
    let mut service = None;
    while let Ok(request) = received.recv_timeout(Duration::from_secs(5)) {
        for resource in request.resource_spans {
            if let Some(r) = &resource.resource {
                let names: HashMap<_, _> = r
                    .attributes
                    .iter()
                    .map(|kv| (kv.key.clone(), kv.value.clone()))
                    .collect();
                service = names.get("service.name").cloned().flatten();
            }
            for scope in resource.scope_spans {
                spans.extend(scope.spans);
            }
        }
        if spans.len() >= 5 {
            break;
        }
    }
    let mut names: Vec<&str> = spans.iter().map(|s| s.name.as_str()).collect();
    names.sort_unstable();
    // A scripted model's id is `script`.
    assert_eq!(
        names,
        [
            "chat script",
            "chat script",
            "execute_tool read_file",
            "execute_tool read_file",
            "invoke_agent assistant",
        ],
        "{spans:#?}"
    );
    assert!(format!("{service:?}").contains("troupe"), "{service:?}");

    let turn = spans
        .iter()
        .find(|s| s.name.starts_with("invoke_agent"))
        .unwrap();
    let a = attributes(turn);
    assert_eq!(a["gen_ai.operation.name"], "invoke_agent");
    assert_eq!(a["gen_ai.agent.name"], "assistant");
    assert_eq!(a["troupe.turn.outcome"], "finished");
    assert!(!a["gen_ai.conversation.id"].is_empty());
    assert_eq!(turn.parent_span_id, Vec::<u8>::new(), "a turn is a root");
    for span in spans.iter().filter(|s| s != &turn) {
        assert_eq!(
            span.trace_id, turn.trace_id,
            "{} is in the turn's trace",
            span.name
        );
        assert_eq!(
            span.parent_span_id, turn.span_id,
            "{} nests in the turn",
            span.name
        );
    }

    let chats: Vec<_> = spans
        .iter()
        .filter(|s| s.name.starts_with("chat"))
        .map(attributes)
        .collect();
    let mut reasons: Vec<&str> = chats
        .iter()
        .map(|a| a["gen_ai.response.finish_reasons"].as_str())
        .collect();
    reasons.sort_unstable();
    assert_eq!(reasons, ["stop", "tool_calls"]);
    for a in &chats {
        assert_eq!(a["gen_ai.operation.name"], "chat");
        assert_eq!(a["gen_ai.provider.name"], "script");
        assert!(a.contains_key("gen_ai.usage.input_tokens"), "{a:?}");
        assert!(a.contains_key("gen_ai.usage.output_tokens"), "{a:?}");
    }

    let mut tools: Vec<(String, String)> = spans
        .iter()
        .filter(|s| s.name.starts_with("execute_tool"))
        .map(attributes)
        .map(|a| {
            (
                a["gen_ai.tool.name"].clone(),
                a["troupe.tool.outcome"].clone(),
            )
        })
        .collect();
    tools.sort();
    assert_eq!(
        tools,
        [
            ("read_file".to_owned(), "error".to_owned()),
            ("read_file".to_owned(), "ok".to_owned())
        ]
    );
}

/// `troupe serve` on a free loopback port.
pub(super) fn serve(home: &TestHome, model: &str) -> (Child, String) {
    let mut child = command(home, &["serve", "--listen", "127.0.0.1:0"])
        .env("TROUPE_MODEL", model)
        .env_remove("OTEL_EXPORTER_OTLP_ENDPOINT")
        .env_remove("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let url = loop {
        let line = lines.next().expect("serve says where it listens").unwrap();
        if let Some(at) = line.split(" at ").nth(1) {
            break at.split_whitespace().next().unwrap().to_string();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (child, url)
}

/// `GET path` over HTTP/1.1 with `token`: the status line and the body.
fn get(url: &str, path: &str, token: &str) -> (String, String) {
    let host = url.trim_start_matches("http://");
    let mut stream = TcpStream::connect(host).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nhost: {host}\r\nauthorization: Bearer {token}\r\nconnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (head, body) = answer.split_once("\r\n\r\n").unwrap();
    (head.lines().next().unwrap().to_owned(), body.to_owned())
}

/// The value of the sample `series` (name and labels as printed).
fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn metrics_count_a_scripted_round_of_serve() {
    let home = TestHome::new();
    let model = two_calls_then_an_answer(&home);
    // The scraper's token: a person of the house `home`, who manages the node.
    let out = command(&home, &["house", "add", "home", "--human", "prometheus"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let printed = text(&out.stdout);
    let token = printed.lines().last().unwrap_or_default().trim().to_owned();
    assert!(
        printed.contains("their token") && !token.is_empty(),
        "{printed}"
    );
    let (mut server, url) = serve(&home, &model);
    let (status, _) = get(&url, "/api/metrics", "not-a-token");
    assert!(status.contains("401"), "{status}");

    let out = command(&home, &["run", "when is the launch?"])
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).trim(), "Friday");

    let (status, body) = get(&url, "/api/metrics", &token);
    assert!(status.contains("200"), "{status}\n{body}");
    for (series, value) in [
        (
            "troupe_turns_total{agent=\"assistant\",outcome=\"finished\"}".to_owned(),
            1.0,
        ),
        (
            "troupe_tool_calls_total{tool=\"read_file\",outcome=\"ok\"}".to_owned(),
            1.0,
        ),
        (
            "troupe_tool_calls_total{tool=\"read_file\",outcome=\"error\"}".to_owned(),
            1.0,
        ),
        (
            "troupe_model_calls_total{model=\"script\",provider=\"script\",outcome=\"ok\"}"
                .to_owned(),
            2.0,
        ),
        (
            "troupe_model_call_duration_seconds_count{model=\"script\"}".to_owned(),
            2.0,
        ),
        ("troupe_mailbox_pending".to_owned(), 0.0),
        ("troupe_executors".to_owned(), 0.0),
    ] {
        assert_eq!(sample(&body, &series), Some(value), "{series} in:\n{body}");
    }
    assert!(
        sample(&body, "troupe_live_actors{kind=\"node\"}").is_some_and(|n| n >= 1.0),
        "{body}"
    );
    assert!(
        body.contains("# TYPE troupe_model_call_duration_seconds histogram"),
        "{body}"
    );
    assert!(body.contains("troupe_model_input_tokens_total{"), "{body}");

    let killed = std::process::Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    assert!(server.wait().unwrap().success());
}
