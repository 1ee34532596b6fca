//! Where a request comes from: the `Host` it names and the `Origin` a
//! browser adds.
//!
//! A server on loopback is still reachable from any web page the owner
//! opens. Two ways in, two checks:
//!
//! - **DNS rebinding**: a page of `evil.example` re-points its name at
//!   127.0.0.1 and reads the API as same-origin. Its requests still name
//!   `evil.example` in `Host`, so every request must name an allowed host:
//!   `localhost`, `127.0.0.1`, `[::1]` (any port), the listen address, and
//!   the names in `[server] allowed_hosts`. Anything else is 421.
//! - **Cross-site requests**: a page may open a WebSocket to any address
//!   (no CORS applies) or send a POST. A browser always says which page
//!   asked in `Origin`, so a WebSocket upgrade and every state-changing
//!   request (anything but GET, HEAD, OPTIONS) that carries an `Origin` must
//!   be same-origin: its host the request's own (allowed) `Host`. A request
//!   without `Origin` is not a browser's cross-site request; the token (or,
//!   with `auth = "open"`, the JSON content type a form cannot send) decides.
//!
//! A token in the query (`?access_token=`) is for the one client that
//! cannot set a header — a browser's WebSocket — so it is honoured only on
//! the event-stream routes, opened as a WebSocket ([`query_token_allowed`]).

use std::net::SocketAddr;

use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use super::AppState;

/// The host names requests may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AllowedHosts {
    entries: Vec<HostEntry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct HostEntry {
    /// Lower-cased; an IPv6 address keeps its brackets.
    name: String,
    /// `None`: any port.
    port: Option<u16>,
}

impl AllowedHosts {
    /// The loopback names, the listen address `listen`, and `extra`
    /// (`name` or `name:port` each), or what is wrong with an entry.
    pub fn new(listen: SocketAddr, extra: &[String]) -> Result<Self, String> {
        let mut entries: Vec<HostEntry> = ["localhost", "127.0.0.1", "[::1]"]
            .into_iter()
            .map(|name| HostEntry {
                name: name.into(),
                port: None,
            })
            .collect();
        let ip = match listen {
            SocketAddr::V4(a) => a.ip().to_string(),
            SocketAddr::V6(a) => format!("[{}]", a.ip()),
        };
        entries.push(HostEntry {
            name: ip,
            port: Some(listen.port()),
        });
        for raw in extra {
            let entry = parse_host(raw.trim()).ok_or_else(|| {
                format!(
                    "server.allowed_hosts has `{raw}`, which is not a host name: give a name or an address, \
                     with an optional port (`troupe.example.org`, `troupe.example.org:8443`, `[fd00::1]`)"
                )
            })?;
            entries.push(entry);
        }
        Ok(Self { entries })
    }

    /// Whether `host` (a `Host` header's value) is allowed.
    pub fn allows(&self, host: &str) -> bool {
        let Some(asked) = parse_host(host) else {
            return false;
        };
        self.entries
            .iter()
            .any(|e| e.name == asked.name && e.port.is_none_or(|p| Some(p) == asked.port))
    }
}

/// `name`, `name:port`, `[v6]` or `[v6]:port`, lower-cased; `None` when it
/// is not one (empty, a path, user info, spaces, a bare IPv6 address).
fn parse_host(text: &str) -> Option<HostEntry> {
    let (name, port) = if let Some(rest) = text.strip_prefix('[') {
        let (v6, after) = rest.split_once(']')?;
        v6.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':')?),
        };
        (format!("[{}]", v6.to_ascii_lowercase()), port)
    } else {
        let (name, port) = match text.rsplit_once(':') {
            Some((n, p)) => (n, Some(p)),
            None => (text, None),
        };
        let name_ok = !name.is_empty()
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_');
        if !name_ok {
            return None;
        }
        (name.to_ascii_lowercase(), port)
    };
    let port = match port {
        None => None,
        Some(p) => Some(p.parse::<u16>().ok()?),
    };
    Some(HostEntry { name, port })
}

/// Whether a token in the query may stand for the `Authorization` header:
/// only on an event stream's route, opened as a WebSocket.
pub fn query_token_allowed(request: &Request) -> bool {
    is_websocket(request.headers()) && request.uri().path().ends_with("/events")
}

fn is_websocket(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("websocket"))
}

/// Whether a request changes state (and so must be same-origin when a
/// browser sent it).
fn changes_state(method: &Method) -> bool {
    !matches!(*method, Method::GET | Method::HEAD | Method::OPTIONS)
}

/// What is wrong with where `request` comes from, if anything.
fn check(hosts: &AllowedHosts, request: &Request) -> Result<(), ApiError> {
    let headers = request.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .or_else(|| request.uri().authority().map(|a| a.as_str()))
        .ok_or_else(|| {
            ApiError::BadRequest(
                "the request names no `Host`; send one (every HTTP/1.1 client does)".into(),
            )
        })?;
    if !hosts.allows(host) {
        return Err(ApiError::MisdirectedHost(format!(
            "this server does not answer for the host `{host}`; address it as localhost, 127.0.0.1 or [::1], \
             or add the name to `[server] allowed_hosts` in config.toml"
        )));
    }
    let Some(origin) = headers.get(header::ORIGIN) else {
        return Ok(());
    };
    if !(is_websocket(headers) || changes_state(request.method())) {
        return Ok(());
    }
    let origin = origin.to_str().unwrap_or("");
    let same = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .and_then(parse_host)
        .zip(parse_host(host))
        .is_some_and(|(o, h)| o == h);
    if same {
        Ok(())
    } else {
        Err(ApiError::Forbidden(format!(
            "a page from `{origin}` may not open event streams or change anything here; \
             only the page this server serves (at `{host}`) may"
        )))
    }
}

/// The middleware of every route: the `Host` allow-list, then the
/// `Origin` check.
pub async fn guard(State(state): State<AppState>, request: Request, next: Next) -> Response {
    match check(&state.inner.hosts, &request) {
        Ok(()) => next.run(request).await,
        Err(e) => e.into_response(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hosts_are_the_loopback_names_the_listen_address_and_the_configured_ones() {
        let listen: SocketAddr = "192.168.1.5:7878".parse().unwrap();
        let hosts = AllowedHosts::new(listen, &["Troupe.Example.org".into(), "[fd00::1]:9".into()])
            .unwrap();
        for ok in [
            "localhost",
            "LOCALHOST:7878",
            "127.0.0.1:1",
            "[::1]:7878",
            "192.168.1.5:7878",
            "troupe.example.org:443",
            "[FD00::1]:9",
        ] {
            assert!(hosts.allows(ok), "{ok}");
        }
        for refused in [
            "evil.example",
            "evil.example:7878",
            "192.168.1.5:80",
            "[fd00::1]:10",
            "127.0.0.2",
            "localhost.evil.example",
            "user@localhost",
            "localhost:notaport",
            "",
            "::1",
        ] {
            assert!(!hosts.allows(refused), "{refused}");
        }
        let bad = AllowedHosts::new(listen, &["https://x.org/".into()]).unwrap_err();
        assert!(bad.contains("server.allowed_hosts"), "{bad}");
    }
}
