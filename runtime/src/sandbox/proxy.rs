//! The HTTP proxy protocol a sandbox's egress proxy speaks, without its
//! policy: read one request head, answer a refusal, or forward to an
//! upstream that the policy chose.
//!
//! A client inside a sandbox sends `CONNECT host:port` (a tunnel, for HTTPS
//! and anything else) or a plain HTTP request with an absolute
//! `http://` URL; nothing else is understood. Who may be reached is the
//! caller's decision (a local command's proxy reaches the public internet,
//! [`super::network`]); this module only carries the bytes.

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// The largest request head read.
pub const MAX_HEAD: usize = 16 * 1024;

/// The variables that point commands at a proxy on `127.0.0.1:port`, and
/// keep their own loopback (a server a command started) off it.
///
/// An address in `through` (`[sandbox] allow_addresses`) is one the proxy
/// reaches on the machine, so it is not kept off the proxy even when it is a
/// loopback one: going around the proxy, it would be the namespace's own.
/// `NO_PROXY` applies to a proxy given by hand too (`curl -x`).
pub fn environment(port: u16, through: &[std::net::IpAddr]) -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{port}");
    let mut vars: Vec<(String, String)> = [
        "HTTPS_PROXY",
        "HTTP_PROXY",
        "https_proxy",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ]
    .iter()
    .map(|name| (name.to_string(), url.clone()))
    .collect();
    let local: Vec<&str> = ["localhost", "127.0.0.1", "::1"]
        .into_iter()
        .filter(|name| {
            name.parse::<std::net::IpAddr>()
                .map_or(true, |ip| !through.contains(&ip))
        })
        .collect();
    for name in ["NO_PROXY", "no_proxy"] {
        vars.push((name.to_string(), local.join(",")));
    }
    vars
}

/// One request head, read from a client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// The host asked for, in lower case (an IPv6 literal without brackets).
    pub host: String,
    /// The port asked for.
    pub port: u16,
    /// For a plain request, the path it goes on with (origin form); `None`
    /// for a `CONNECT` tunnel.
    pub origin_form: Option<String>,
    method: String,
    version: String,
    head: Vec<u8>,
    rest: Vec<u8>,
}

/// Why no head could be read: an answer to send, or nothing (the client
/// went away).
pub type Unread = Option<(u16, String)>;

impl Head {
    /// Reads one request head from `client`.
    ///
    /// # Errors
    ///
    /// The status and text to answer with, or `None` when the client left.
    pub async fn read(client: &mut TcpStream) -> Result<Head, Unread> {
        let mut head = Vec::with_capacity(1024);
        let mut buf = [0_u8; 4096];
        let end = loop {
            if let Some(end) = find_end(&head) {
                break end;
            }
            if head.len() > MAX_HEAD {
                return Err(Some((431, "the request head is too large".into())));
            }
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return Err(None),
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        };
        let rest = head.split_off(end);
        let text = String::from_utf8_lossy(&head).into_owned();
        let request_line = text.split("\r\n").next().unwrap_or_default();
        let mut words = request_line.split(' ');
        let (method, target, version) = (
            words.next().unwrap_or_default().to_string(),
            words.next().unwrap_or_default(),
            words.next().unwrap_or("HTTP/1.1").to_string(),
        );
        let (host, port, origin_form) = if method.eq_ignore_ascii_case("CONNECT") {
            match split_host_port(target, None) {
                Some((host, port)) => (host, port, None),
                None => return Err(Some((400, "CONNECT needs host:port".into()))),
            }
        } else if let Some(after) = target.strip_prefix("http://") {
            let (authority, path) = match after.find('/') {
                Some(i) => (&after[..i], &after[i..]),
                None => (after, "/"),
            };
            match split_host_port(authority, Some(80)) {
                Some((host, port)) => (host, port, Some(path.to_string())),
                None => return Err(Some((400, "the URL has no host".into()))),
            }
        } else {
            return Err(Some((
                400,
                "send requests to this proxy with an absolute http:// URL, or CONNECT host:port \
                 (for https)"
                    .into(),
            )));
        };
        Ok(Head {
            host,
            port,
            origin_form,
            method,
            version,
            head,
            rest,
        })
    }

    /// `host:port` as asked for.
    pub fn endpoint(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// Takes the connection to be served here rather than forwarded (a
    /// server of the proxy's own, such as an environment's model relay):
    /// a tunnel is told it is established and `(what followed the head,
    /// true)` is returned, for a server to read on request after request;
    /// a plain request gives `(the whole request as sent, false)`, to be
    /// served alone (the client's next one may be for another host).
    /// `None` when the client went away.
    pub async fn served_here(self, client: &mut TcpStream) -> Option<(Vec<u8>, bool)> {
        match self.origin_form {
            None => {
                let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
                client.write_all(established).await.ok()?;
                Some((self.rest, true))
            }
            Some(_) => Some(([self.head, self.rest].concat(), false)),
        }
    }

    /// Carries the request on to `upstream` and the bytes both ways until
    /// either side closes: a tunnel is told it is established; a plain
    /// request goes on in origin form, the rest of it as sent, with
    /// `Connection: close` (one request per plain connection).
    pub async fn forward(self, mut client: TcpStream, mut upstream: TcpStream) {
        let pending = match &self.origin_form {
            None => {
                let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
                if client.write_all(established).await.is_err() {
                    return;
                }
                self.rest
            }
            Some(path) => {
                let mut out = format!("{} {path} {}\r\n", self.method, self.version).into_bytes();
                out.extend_from_slice(&one_request_headers(&self.head));
                out.extend_from_slice(&self.rest);
                out
            }
        };
        if upstream.write_all(&pending).await.is_err() {
            return;
        }
        let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
    }
}

/// A plain request's header lines (after its request line, through the
/// blank line) with `Connection: close` in place of whatever the client
/// asked: the connection is spliced to one upstream after this request, so
/// a client keeping it alive (a browser does, across hosts) must not send
/// its next request, meant for another host, down it.
fn one_request_headers(head: &[u8]) -> Vec<u8> {
    let text = String::from_utf8_lossy(head);
    let mut out = String::with_capacity(text.len() + 20);
    for line in text.split("\r\n").skip(1) {
        if line.is_empty() {
            break;
        }
        let name = line.split(':').next().unwrap_or_default().trim();
        if ["connection", "proxy-connection", "keep-alive"]
            .iter()
            .any(|hop| name.eq_ignore_ascii_case(hop))
        {
            continue;
        }
        out.push_str(line);
        out.push_str("\r\n");
    }
    out.push_str("Connection: close\r\n\r\n");
    out.into_bytes()
}

/// Answers `status` with `text` as a short plain-text body, and closes.
pub async fn answer(client: &mut TcpStream, status: u16, text: &str) {
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

#[cfg(test)]
mod tests {
    use super::one_request_headers;

    #[test]
    fn a_kept_alive_plain_request_goes_on_with_connection_close() {
        let head = b"GET http://example.com/a HTTP/1.1\r\nHost: example.com\r\n\
            Proxy-Connection: keep-alive\r\nconnection: Keep-Alive\r\nKeep-Alive: timeout=5\r\n\
            Accept: */*\r\n\r\n";
        assert_eq!(
            String::from_utf8(one_request_headers(head)).unwrap(),
            "Host: example.com\r\nAccept: */*\r\nConnection: close\r\n\r\n"
        );
    }
}
