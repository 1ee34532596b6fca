//! A house's WebSocket streams through any node of a cluster, several
//! `troupe serve` processes on 127.0.0.1 (docs/cluster.md): a person
//! connected to node a watches a thread of a house on node b, posts
//! through a and sees the bot's answer stream; a wrong token through a is
//! refused as b refuses it; b killed, a closes the socket naming b.

use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::{self, Message as Ws};

use super::cli::{text, troupe};
use super::cluster::{Node, WAIT};
use super::cluster_houses::url;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

const LAUNCH: &str = "/api/houses/acme/threads/launch";

/// `troupe house …` on `node`'s home (through its running server).
fn house(node: &Node, args: &[&str]) -> String {
    let mut all = vec!["house"];
    all.extend_from_slice(args);
    let out = troupe(&node.home, &all);
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// A WebSocket to `path` on `base` with `token`.
pub(super) async fn watch(
    base: &str,
    path: &str,
    token: &str,
) -> Result<Socket, tungstenite::Error> {
    let mut request = format!("{}{path}", base.replacen("http", "ws", 1))
        .into_client_request()
        .unwrap();
    request
        .headers_mut()
        .insert("authorization", format!("Bearer {token}").parse().unwrap());
    tokio_tungstenite::connect_async(request)
        .await
        .map(|(socket, _)| socket)
}

/// `POST path` on `base` with `token` and `body`: status and JSON body.
async fn post(base: &str, path: &str, token: &str, body: Value) -> (u16, Value) {
    let r = troupe::runtime::net::client_builder()
        .build()
        .unwrap()
        .post(format!("{base}{path}"))
        .bearer_auth(token)
        .json(&body)
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.json().await.unwrap_or(Value::Null))
}

/// The next text frame of `socket` (its JSON), within [`WAIT`].
async fn frame(socket: &mut Socket) -> Value {
    loop {
        let next = tokio::time::timeout(WAIT, socket.next())
            .await
            .expect("a frame in time")
            .expect("the stream is open")
            .unwrap();
        match next {
            Ws::Text(text) => return serde_json::from_str(&text).unwrap(),
            Ws::Close(close) => panic!("the stream closed: {close:?}"),
            _ => {}
        }
    }
}

/// Frames until a message by `author`; its text.
async fn message_by(socket: &mut Socket, author: &str) -> String {
    loop {
        let f = frame(socket).await;
        if f["type"] == "message" && f["message"]["author"] == author {
            return f["message"]["text"].as_str().unwrap().to_string();
        }
    }
}

/// The status and body of a refused upgrade.
fn refusal(e: tungstenite::Error) -> (u16, Value) {
    match e {
        tungstenite::Error::Http(response) => (
            response.status().as_u16(),
            serde_json::from_slice(response.body().as_deref().unwrap_or_default())
                .unwrap_or(Value::Null),
        ),
        other => panic!("not refused by HTTP: {other}"),
    }
}

#[test]
fn a_thread_on_another_node_streams_through_this_one_until_that_node_goes_down() {
    let mut a = Node::new("a", "alice", json!([]));
    a.start("secret", None);
    let mut b = Node::new("b", "bob", json!([{"text": "Friday, as planned"}]));
    b.start("secret", Some(a.port));
    a.wait_line("met node `b`");
    b.wait_line("met node `a`");

    // A house on b, made, peopled and given its bot through a.
    house(&a, &["create", "acme", "--node", "b"]);
    let out = house(&a, &["add", "acme", "--human", "ada"]);
    let token = out.lines().last().unwrap().trim().to_string();
    house(&a, &["add", "acme", "--bot", "bob", "--listen", "all"]);
    let (through, home) = (url(&a), url(&b));

    let rt = tokio::runtime::Runtime::new().unwrap();
    let mut socket = rt.block_on(async {
        let (status, body) = post(
            &through,
            "/api/houses/acme/threads",
            &token,
            json!({"name": "launch", "with": ["bob"]}),
        )
        .await;
        assert_eq!(status, 201, "{body}");

        // Watched through a, posted through a: the post and bob's answer
        // stream from b.
        let mut socket = watch(&through, &format!("{LAUNCH}/events"), &token)
            .await
            .unwrap();
        assert_eq!(frame(&mut socket).await["type"], "ready");
        let posted = Instant::now();
        let (status, body) = post(
            &through,
            &format!("{LAUNCH}/messages"),
            &token,
            json!({"text": "when is the launch?"}),
        )
        .await;
        assert_eq!(status, 202, "{body}");
        assert_eq!(message_by(&mut socket, "ada").await, "when is the launch?");
        assert_eq!(message_by(&mut socket, "bob").await, "Friday, as planned");
        eprintln!(
            "a post through a to bob's answer on the stream through a: {:?}",
            posted.elapsed()
        );

        // A wrong token, another house's thread: refused through a as b
        // refuses them, before any upgrade.
        for (path, token, status) in [
            (format!("{LAUNCH}/events"), "not-a-token", 401),
            (
                "/api/houses/acme/threads/nope/events".to_string(),
                token.as_str(),
                404,
            ),
        ] {
            let through_a = refusal(watch(&through, &path, token).await.err().unwrap());
            let on_b = refusal(watch(&home, &path, token).await.err().unwrap());
            assert_eq!(through_a.0, status, "{path}: {}", through_a.1);
            assert_eq!(through_a, on_b, "{path}");
        }
        socket
    });

    // b killed: a closes the socket, saying b went down.
    b.kill();
    rt.block_on(async {
        let deadline = Instant::now() + WAIT;
        let close = loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left.max(Duration::from_millis(1)), socket.next()).await {
                Ok(Some(Ok(Ws::Close(close)))) => break close,
                Ok(Some(Ok(_))) => {}
                other => panic!("no close frame from a: {other:?}"),
            }
        };
        let close = close.expect("a close frame with a reason");
        assert!(
            close.reason.contains("node `b`") && close.reason.contains("down"),
            "{close:?}"
        );
    });
    a.wait_line("node `b` is gone");
}
