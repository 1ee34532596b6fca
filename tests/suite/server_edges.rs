//! The server's edges over real sockets on loopback: connections past the
//! caps and the header timeout while `/api/health` still answers, a foreign
//! `Host` (DNS rebinding), a foreign `Origin` on a WebSocket and on
//! requests that change state, and a token in the query of a plain route.

use std::net::SocketAddr;
use std::time::Duration;

use reqwest::StatusCode;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpSocket, TcpStream};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use troupe::server::auth::AuthMode;
use troupe::server::connections::ConnectionLimits;

use super::server::Served;
use super::support::WAIT;

/// A connection from `source` (any 127.0.0.0/8 address is this machine's).
async fn connect_from(source: &str, to: SocketAddr) -> TcpStream {
    let socket = TcpSocket::new_v4().unwrap();
    socket.bind(format!("{source}:0").parse().unwrap()).unwrap();
    socket.connect(to).await.unwrap()
}

/// Sends `request` raw on a new connection from `source`; the status and
/// the whole answer (the server closes after it: `connection: close`).
async fn raw(source: &str, to: SocketAddr, request: &str) -> (u16, String) {
    let mut stream = connect_from(source, to).await;
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(WAIT, stream.read_to_end(&mut answer))
        .await
        .expect("answered in time")
        .unwrap();
    let text = String::from_utf8_lossy(&answer).into_owned();
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, text)
}

fn health(host: &str) -> String {
    format!("GET /api/health HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n")
}

#[tokio::test]
async fn half_sent_requests_past_the_caps_are_refused_and_timed_out_while_health_answers() {
    let s = Served::start_with(vec![], |o| {
        o.connections = ConnectionLimits {
            header_timeout: Duration::from_secs(1),
            total: 12,
            per_address: 8,
        };
    })
    .await;
    let addr: SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    // Eight connections from one address, each with half a request head,
    // in three forms: nothing sent, a request line only, headers unfinished.
    let forms = [
        "",
        "GET /api/health HTTP/1.1\r\n",
        "GET /api/me HTTP/1.1\r\nhost: localhost\r\nx-slow: ",
    ];
    let mut slow = Vec::new();
    for i in 0..8 {
        let mut c = connect_from("127.0.0.1", addr).await;
        c.write_all(forms[i % forms.len()].as_bytes())
            .await
            .unwrap();
        slow.push(c);
    }
    // The ninth from that address is refused at once, saying why.
    let (status, text) = raw("127.0.0.1", addr, &health("localhost")).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("max_connections_per_address"), "{text}");
    // Another address is served meanwhile.
    let (status, text) = raw("127.0.0.2", addr, &health("localhost")).await;
    assert_eq!(status, 200, "{text}");
    // Four more from others fill the total; the next is refused.
    let mut others = Vec::new();
    for i in 0..4 {
        others.push(connect_from(&format!("127.0.0.{}", 3 + i), addr).await);
    }
    let (status, text) = raw("127.0.0.9", addr, &health("localhost")).await;
    assert_eq!(status, 503, "{text}");
    assert!(text.contains("`[server] max_connections`"), "{text}");
    // Past the header timeout the server closes every silent connection.
    for c in slow.iter_mut().chain(others.iter_mut()) {
        let mut rest = Vec::new();
        let closed = tokio::time::timeout(WAIT, c.read_to_end(&mut rest)).await;
        assert!(
            closed.is_ok(),
            "a silent connection stayed open past the header timeout"
        );
    }
    // And the first address is served again, once the server has counted
    // the closed connections out (it closes, then gives back the slot).
    let served = tokio::time::timeout(WAIT, async {
        loop {
            let (status, _) = raw("127.0.0.1", addr, &health("localhost")).await;
            if status == 200 {
                break;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(served.is_ok(), "the first address was not served again");
    s.stop().await;
}

#[tokio::test]
async fn a_foreign_host_a_foreign_origin_and_a_query_token_on_a_plain_route_are_refused() {
    // Open auth: the case where nothing else would stop a web page.
    let s = Served::start_with(vec![], |o| {
        o.auth = AuthMode::Open;
        o.allowed_hosts = vec!["troupe.example.org".into()];
    })
    .await;
    let addr: SocketAddr = s.base.trim_start_matches("http://").parse().unwrap();
    let port = addr.port();
    // Hosts: the loopback names, the listen address and the configured
    // name are answered; any other, with or without a port, is not.
    for (host, expected) in [
        (format!("localhost:{port}"), 200),
        (format!("127.0.0.1:{port}"), 200),
        (format!("[::1]:{port}"), 200),
        ("troupe.example.org".to_string(), 200),
        (format!("evil.example:{port}"), 421),
        ("evil.example".to_string(), 421),
        (format!("localhost.evil.example:{port}"), 421),
        (format!("127.0.0.1.nip.io:{port}"), 421),
        (format!("0x7f000001:{port}"), 421),
    ] {
        let request = format!("GET /api/me HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
        let (status, text) = raw("127.0.0.1", addr, &request).await;
        assert_eq!(status, expected, "Host {host}: {text}");
        if expected == 421 {
            assert!(text.contains("allowed_hosts"), "{text}");
        }
    }
    // A request that changes state, or opens a WebSocket, from another
    // origin is refused; from the page's own origin, or with no origin (not
    // a browser), it goes on to the route.
    let post = |origin: Option<&str>| {
        let origin = origin.map_or(String::new(), |o| format!("origin: {o}\r\n"));
        let body = r#"{"text":"hi"}"#;
        format!(
            "POST /api/houses/acme/threads/general/messages HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\n{origin}\
             content-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        )
    };
    for (origin, refused) in [
        (Some("http://evil.example".to_string()), true),
        (Some(format!("http://evil.example:{port}")), true),
        (Some("null".to_string()), true),
        (Some(format!("http://localhost:{port}")), true),
        (Some(format!("https://127.0.0.1:{}", port + 1)), true),
        (Some(format!("http://127.0.0.1:{port}")), false),
        (None, false),
    ] {
        let (status, text) = raw("127.0.0.1", addr, &post(origin.as_deref())).await;
        if refused {
            assert_eq!(status, 403, "Origin {origin:?}: {text}");
            assert!(text.contains("may not"), "{text}");
        } else {
            assert_ne!(status, 403, "Origin {origin:?}: {text}");
        }
    }
    let ws = |origin: &str| {
        let url = format!("ws://127.0.0.1:{port}/api/houses/acme/threads/general/events");
        let mut request = url.into_client_request().unwrap();
        request
            .headers_mut()
            .insert("origin", origin.parse().unwrap());
        request
    };
    for origin in ["http://evil.example", "null", "http://localhost:1"] {
        let refused = tokio_tungstenite::connect_async(ws(origin)).await;
        match refused {
            Err(tokio_tungstenite::tungstenite::Error::Http(r)) => {
                assert_eq!(r.status(), StatusCode::FORBIDDEN, "{origin}")
            }
            other => panic!("a WebSocket from {origin} was not refused: {other:?}"),
        }
    }
    let same = tokio_tungstenite::connect_async(ws(&format!("http://127.0.0.1:{port}"))).await;
    assert!(same.is_ok(), "the page's own WebSocket: {:?}", same.err());
    // A query token counts only on an event stream's WebSocket.
    for path in [
        "/api/me?access_token=x",
        "/api/houses?a=1&access_token=troupe_x",
        "/api/houses/acme/threads/general/events?access_token=x",
    ] {
        let request = format!(
            "GET {path} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\nupgrade: h2c\r\nconnection: close\r\n\r\n"
        );
        let (status, text) = raw("127.0.0.1", addr, &request).await;
        assert_eq!(status, 401, "{path}: {text}");
        assert!(text.contains("Authorization: Bearer"), "{text}");
    }
    s.stop().await;
}

#[tokio::test]
async fn the_event_stream_still_takes_a_query_token_on_its_websocket() {
    let s = Served::start(vec![]).await;
    let url = format!(
        "{}/api/houses/acme/threads/general/events?access_token={}",
        s.base.replacen("http", "ws", 1),
        s.ada
    );
    let opened = tokio_tungstenite::connect_async(url).await;
    assert!(opened.is_ok(), "{:?}", opened.err());
    let (status, _) = s
        .anonymous_get(&format!("/houses/acme?access_token={}", s.ada))
        .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    s.stop().await;
}
