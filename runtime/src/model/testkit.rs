//! A raw HTTP/1.1 server on 127.0.0.1 for the clients' tests.
//!
//! It answers the n-th request with the n-th scripted reply, writing each
//! body piece as its own chunk (so a stream can be cut at any byte), and can
//! drop the connection or fall silent midway. It records every request.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::limit::ConcurrencyLimit;
use super::retry::{RetryPolicy, Timeouts};
use super::{HttpOptions, ModelError, ModelEvent, ModelStream};

/// How a reply's body ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum End {
    /// The closing chunk is sent.
    Finish,
    /// The connection is dropped without it.
    Drop,
    /// Nothing more is sent; the connection stays open.
    Stall,
}

/// One scripted reply.
#[derive(Debug, Clone)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub chunks: Vec<Vec<u8>>,
    pub end: End,
}

impl Reply {
    /// A 200 SSE stream, its bytes cut every `split` bytes.
    pub fn sse(body: &str, split: usize) -> Self {
        Self {
            status: 200,
            headers: vec![("content-type".into(), "text/event-stream".into())],
            chunks: body
                .as_bytes()
                .chunks(split.max(1))
                .map(<[u8]>::to_vec)
                .collect(),
            end: End::Finish,
        }
    }

    /// An error status with a JSON body.
    pub fn status(status: u16, body: &str) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), "application/json".into())],
            chunks: vec![body.as_bytes().to_vec()],
            end: End::Finish,
        }
    }

    /// A reply with any status, content type and body, sent in pieces of
    /// `split` bytes.
    pub fn body(status: u16, content_type: &str, body: &str, split: usize) -> Self {
        Self {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            chunks: body
                .as_bytes()
                .chunks(split.max(1))
                .map(<[u8]>::to_vec)
                .collect(),
            end: End::Finish,
        }
    }

    /// This reply with a header added.
    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    /// This reply, ending as `end`.
    pub fn ending(mut self, end: End) -> Self {
        self.end = end;
        self
    }
}

/// A request the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub method: String,
    pub path: String,
    /// Lower-case names.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap()
    }
}

pub struct TestServer {
    url: String,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl TestServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let requests = Arc::new(Mutex::new(Vec::new()));
        let recorded = Arc::clone(&requests);
        let replies = Arc::new(replies);
        tokio::spawn(async move {
            loop {
                let Ok((socket, _)) = listener.accept().await else {
                    return;
                };
                let recorded = Arc::clone(&recorded);
                let replies = Arc::clone(&replies);
                tokio::spawn(async move {
                    let _ = serve(socket, recorded, replies).await;
                });
            }
        });
        Self { url, requests }
    }

    pub fn url(&self) -> &str {
        &self.url
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.requests.lock().clone()
    }
}

async fn serve(
    mut socket: TcpStream,
    recorded: Arc<Mutex<Vec<Recorded>>>,
    replies: Arc<Vec<Reply>>,
) -> std::io::Result<()> {
    socket.set_nodelay(true)?;
    let mut buf = Vec::new();
    let head_end = loop {
        let mut piece = [0u8; 4096];
        let n = socket.read(&mut piece).await?;
        if n == 0 {
            return Ok(());
        }
        buf.extend_from_slice(&piece[..n]);
        if let Some(pos) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break pos;
        }
    };
    let head = String::from_utf8_lossy(&buf[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split(' ');
    let method = parts.next().unwrap_or_default().to_string();
    let path = parts.next().unwrap_or_default().to_string();
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_lowercase(), v.trim().to_string()))
        .collect();
    let length: usize = headers
        .iter()
        .find(|(n, _)| n == "content-length")
        .and_then(|(_, v)| v.parse().ok())
        .unwrap_or(0);
    let mut body = buf[head_end + 4..].to_vec();
    while body.len() < length {
        let mut piece = [0u8; 4096];
        let n = socket.read(&mut piece).await?;
        if n == 0 {
            break;
        }
        body.extend_from_slice(&piece[..n]);
    }
    let number = {
        let mut recorded = recorded.lock();
        recorded.push(Recorded {
            method,
            path,
            headers,
            body,
        });
        recorded.len()
    };
    let reply = replies
        .get(number - 1)
        .cloned()
        .unwrap_or_else(|| Reply::status(500, r#"{"error":{"message":"no reply scripted"}}"#));
    let mut head = format!("HTTP/1.1 {} Scripted\r\n", reply.status);
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str("transfer-encoding: chunked\r\nconnection: close\r\n\r\n");
    socket.write_all(head.as_bytes()).await?;
    socket.flush().await?;
    for chunk in &reply.chunks {
        socket
            .write_all(format!("{:x}\r\n", chunk.len()).as_bytes())
            .await?;
        socket.write_all(chunk).await?;
        socket.write_all(b"\r\n").await?;
        socket.flush().await?;
    }
    match reply.end {
        End::Finish => {
            socket.write_all(b"0\r\n\r\n").await?;
            socket.flush().await?;
        }
        End::Drop => {}
        End::Stall => tokio::time::sleep(Duration::from_secs(60)).await,
    }
    Ok(())
}

/// Options for tests: tiny backoffs and timeouts, 3 attempts.
pub fn fast_http() -> HttpOptions {
    HttpOptions::new(
        RetryPolicy {
            max_attempts: 3,
            base_delay: Duration::from_millis(1),
            max_delay: Duration::from_millis(10),
            retry_after_cap: Duration::from_millis(20),
        },
        Timeouts {
            connect: Duration::from_secs(2),
            first_byte: Duration::from_secs(5),
            between_chunks: Duration::from_millis(300),
        },
        ConcurrencyLimit::new(4),
    )
}

/// Every event of a stream, and the error that ended it, if any.
pub async fn collect(mut stream: ModelStream) -> (Vec<ModelEvent>, Option<ModelError>) {
    let mut events = Vec::new();
    let run = async {
        while let Some(item) = stream.next().await {
            match item {
                Ok(event) => events.push(event),
                Err(err) => return Some(err),
            }
        }
        None
    };
    let error = tokio::time::timeout(Duration::from_secs(10), run)
        .await
        .expect("the stream did not end within 10 s");
    (events, error)
}

/// Cuts `text` into pieces of `size` bytes.
pub fn pieces(text: &str, size: usize) -> Vec<&[u8]> {
    text.as_bytes().chunks(size).collect()
}
