//! An environment's egress proxy: the only way out of a sandbox that has
//! no network, owned by its Sandbox actor.
//!
//! Inside, process 1 listens on `127.0.0.1:`[`PORT`] and hands each
//! connection over; commands find it through `HTTPS_PROXY` and
//! `HTTP_PROXY`. Here, outside, each connection gets one request head:
//! `CONNECT host:port` (a tunnel, for HTTPS and anything else) or a plain
//! HTTP request with an absolute URL. An endpoint on the allow-list
//! (`[environments] egress` and the house's own) is connected to and the
//! bytes flow both ways; any other is answered `403 Forbidden` with a line
//! saying which endpoint was refused and how the house's owner can allow
//! it. The sandbox never gets a socket of the machine's network: it gets
//! bytes to and from the endpoints it may reach.
//!
//! A request for the environment's model relay (`127.0.0.1:3129`, the
//! sandbox's own loopback as its commands see it) is handed to the relay
//! with what was read of it: a client that sends everything through the
//! proxy still finds the relay, and the proxy never connects to the
//! machine's port of that number.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use troupe_runtime::environment::Endpoint;

use super::relay::{self, Relay};

/// The proxy's port on the sandbox's own loopback.
pub const PORT: u16 = 3128;

/// The largest request head read.
const MAX_HEAD: usize = 16 * 1024;

/// How long connecting to an endpoint may take.
const CONNECT: Duration = Duration::from_secs(10);

/// The variables that point commands at the proxy.
pub fn environment() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PORT}");
    ["HTTPS_PROXY", "HTTP_PROXY", "https_proxy", "http_proxy"]
        .iter()
        .map(|name| (name.to_string(), url.clone()))
        .collect()
}

/// What the proxy allows, and the house it answers for.
#[derive(Debug, Clone)]
pub struct Egress {
    /// The endpoints.
    pub allow: Arc<Vec<Endpoint>>,
    /// The house's name, for the refusal's advice.
    pub house: String,
    /// The environment's model relay, reached through the proxy too.
    pub relay: Option<Relay>,
}

impl Egress {
    /// Serves one connection from inside the sandbox until it closes or
    /// `stopped` is cancelled.
    pub fn serve(&self, client: std::net::TcpStream, stopped: CancellationToken) {
        let egress = self.clone();
        tokio::spawn(async move {
            let Ok(client) = client
                .set_nonblocking(true)
                .and_then(|()| TcpStream::from_std(client))
            else {
                return;
            };
            tokio::select! {
                () = stopped.cancelled() => {}
                () = egress.proxy(client) => {}
            }
        });
    }

    async fn proxy(&self, mut client: TcpStream) {
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0_u8; 4096];
        let end = loop {
            if let Some(end) = find_end(&head) {
                break end;
            }
            if head.len() > MAX_HEAD {
                return answer(&mut client, 431, "the request head is too large").await;
            }
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        };
        let (head, rest) = head.split_at(end);
        let text = String::from_utf8_lossy(head);
        let mut lines = text.split("\r\n");
        let request_line = lines.next().unwrap_or_default();
        let mut words = request_line.split(' ');
        let (method, target, version) = (
            words.next().unwrap_or_default(),
            words.next().unwrap_or_default(),
            words.next().unwrap_or("HTTP/1.1"),
        );
        let (host, port, origin_form) = if method.eq_ignore_ascii_case("CONNECT") {
            match split_host_port(target, None) {
                Some((host, port)) => (host, port, None),
                None => return answer(&mut client, 400, "CONNECT needs host:port").await,
            }
        } else if let Some(rest) = target.strip_prefix("http://") {
            let (authority, path) = match rest.find('/') {
                Some(i) => (&rest[..i], &rest[i..]),
                None => (rest, "/"),
            };
            match split_host_port(authority, Some(80)) {
                Some((host, port)) => (host, port, Some(path.to_string())),
                None => return answer(&mut client, 400, "the URL has no host").await,
            }
        } else {
            return answer(
                &mut client,
                400,
                "send requests to this proxy with an absolute http:// URL, or CONNECT host:port \
                 (for https)",
            )
            .await;
        };
        if let Some(relay) = self
            .relay
            .as_ref()
            .filter(|_| relay::is_relay(&host, Some(port)))
        {
            // A tunnel carries requests on; a proxied request is served
            // alone (the client's next one may be for another host).
            let (pending, keep_alive) = match origin_form {
                None => {
                    let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
                    if client.write_all(established).await.is_err() {
                        return;
                    }
                    (rest.to_vec(), true)
                }
                Some(_) => ([head, rest].concat(), false),
            };
            return relay
                .serve_io(Replayed::new(pending, client), keep_alive)
                .await;
        }
        if !self.allow.iter().any(|e| e.matches(&host, port)) {
            tracing::info!(endpoint = %format!("{host}:{port}"), "egress refused");
            let text = format!(
                "{host}:{port} is not on this environment's egress allow-list; the house's owner \
                 can allow it with `troupe env policy {} --allow-egress {host}:{port}` (or \
                 [environments] egress in config.toml)",
                self.house
            );
            return answer(&mut client, 403, &text).await;
        }
        let upstream =
            tokio::time::timeout(CONNECT, TcpStream::connect((host.as_str(), port))).await;
        let mut upstream = match upstream {
            Ok(Ok(stream)) => stream,
            Ok(Err(e)) => {
                return answer(
                    &mut client,
                    502,
                    &format!("{host}:{port} could not be reached: {e}"),
                )
                .await
            }
            Err(_) => {
                return answer(
                    &mut client,
                    504,
                    &format!(
                        "{host}:{port} did not answer within {} s",
                        CONNECT.as_secs()
                    ),
                )
                .await
            }
        };
        tracing::info!(endpoint = %format!("{host}:{port}"), "egress allowed");
        let forwarded = match origin_form {
            None => client
                .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await
                .and(Ok(rest.to_vec())),
            Some(path) => {
                // The request goes on in origin form, the rest of it as sent.
                let mut out = format!("{method} {path} {version}\r\n").into_bytes();
                let after_line = head
                    .iter()
                    .position(|b| *b == b'\n')
                    .map_or(&head[head.len()..], |i| &head[i + 1..]);
                out.extend_from_slice(after_line);
                out.extend_from_slice(rest);
                Ok(out)
            }
        };
        let Ok(pending) = forwarded else { return };
        if upstream.write_all(&pending).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// A connection whose first bytes were already read: they are read again
/// first.
struct Replayed<S> {
    pending: Vec<u8>,
    read: usize,
    stream: S,
}

impl<S> Replayed<S> {
    fn new(pending: Vec<u8>, stream: S) -> Self {
        Self {
            pending,
            read: 0,
            stream,
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Replayed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = &mut *self;
        if this.read < this.pending.len() {
            let n = buf.remaining().min(this.pending.len() - this.read);
            buf.put_slice(&this.pending[this.read..this.read + n]);
            this.read += n;
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut this.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Replayed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

/// Where the head ends (after its blank line).
fn find_end(head: &[u8]) -> Option<usize> {
    head.windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| i + 4)
}

/// `host:port` (or `host` with `default`), an IPv6 host in brackets.
fn split_host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let authority = authority.rsplit_once('@').map_or(authority, |(_, a)| a);
    let (host, port) = if authority.starts_with('[') {
        let close = authority.find(']')?;
        let port = authority[close + 1..].strip_prefix(':');
        (&authority[1..close], port)
    } else {
        match authority.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(p) => p.parse().ok()?,
        None => default?,
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

async fn answer(client: &mut TcpStream, status: u16, text: &str) {
    let reason = match status {
        400 => "Bad Request",
        403 => "Forbidden",
        431 => "Request Header Fields Too Large",
        502 => "Bad Gateway",
        _ => "Gateway Timeout",
    };
    let body = format!("troupe egress proxy: {text}\n");
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = client.write_all(response.as_bytes()).await;
    let _ = client.shutdown().await;
}
