//! The server's accept loop: how many connections it holds and how long a
//! silent one may stay.
//!
//! Every connection costs a task and a socket until it ends. A client that
//! opens many and sends half a request on each would, left alone, hold
//! them forever and leave nothing for anyone else (1,100 were enough). So:
//!
//! - a connection must send a request's head within `header_timeout`, and
//!   may sit idle between requests no longer than that (hyper's
//!   `header_read_timeout`, whose clock runs whenever it waits for a head);
//! - at most `per_address` connections from one address and `total` in all
//!   are served at once. One past either is answered at once with a 503
//!   saying which limit it met, and closed, without reading it.
//!
//! A WebSocket, once upgraded, is its route's to keep (it pings and closes
//! on stop); the slot it held is given back when its HTTP connection ends.
//!
//! The owner's socket ([`serve_owner`]) is the home's own Unix socket: a
//! connection there is accepted only from a process of the user troupe
//! runs as (the kernel's peer credentials, not anything the client says),
//! and each of its requests carries [`OwnerSocket`], which the
//! authentication takes for the home's owner. It holds no slot: the
//! socket's file mode already keeps everyone else out.

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use parking_lot::Mutex;
use tokio::io::AsyncWriteExt;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

/// How many connections, and how long a silent one may stay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectionLimits {
    /// For a request's head to arrive, and between requests.
    pub header_timeout: Duration,
    /// Connections at once, in all.
    pub total: usize,
    /// Connections at once from one address.
    pub per_address: usize,
}

impl Default for ConnectionLimits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            total: 1024,
            per_address: 128,
        }
    }
}

/// Marks a request that came over the owner's socket from a process of
/// troupe's own user.
#[derive(Debug, Clone, Copy)]
pub struct OwnerSocket;

/// The connections open now, by address.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    by_address: HashMap<IpAddr, usize>,
}

/// A connection's slot, given back when dropped.
struct Slot {
    open: Arc<Mutex<Open>>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.open.lock();
        open.total = open.total.saturating_sub(1);
        if let Some(n) = open.by_address.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                open.by_address.remove(&self.ip);
            }
        }
    }
}

/// Takes a slot for `ip`, or names the limit it met.
fn take(open: &Arc<Mutex<Open>>, limits: ConnectionLimits, ip: IpAddr) -> Result<Slot, String> {
    let mut guard = open.lock();
    if guard.total >= limits.total {
        return Err(format!(
            "the server holds its most connections ({}, `[server] max_connections`); try again shortly",
            limits.total
        ));
    }
    let mine = guard.by_address.get(&ip).copied().unwrap_or(0);
    if mine >= limits.per_address {
        return Err(format!(
            "{ip} holds its most connections ({}, `[server] max_connections_per_address`); close some or try again shortly",
            limits.per_address
        ));
    }
    guard.total += 1;
    *guard.by_address.entry(ip).or_insert(0) += 1;
    Ok(Slot {
        open: Arc::clone(open),
        ip,
    })
}

/// Serves `app` on `listener` until `stopping`, then lets the connections
/// in flight finish their requests.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: ConnectionLimits,
    stopping: CancellationToken,
) -> std::io::Result<()> {
    let open = Arc::new(Mutex::new(Open::default()));
    let mut tasks = JoinSet::new();
    loop {
        let (stream, peer) = tokio::select! {
            () = stopping.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors and the like: the next accept may do.
                    tracing::warn!(error = %e, "accepting a connection failed");
                    tokio::task::yield_now().await;
                    continue;
                }
            },
        };
        match take(&open, limits, peer.ip()) {
            Ok(slot) => {
                tasks.spawn(connection_with_slot(
                    stream,
                    peer,
                    app.clone(),
                    limits,
                    slot,
                    stopping.clone(),
                ));
            }
            Err(why) => {
                tasks.spawn(refuse(stream, why));
            }
        }
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Serves `app` on the owner's socket until `stopping`: connections from
/// the user `me` (troupe's own, who made the socket) only, each request
/// marked [`OwnerSocket`].
pub async fn serve_owner(
    listener: UnixListener,
    me: u32,
    app: Router,
    limits: ConnectionLimits,
    stopping: CancellationToken,
) -> std::io::Result<()> {
    let local = SocketAddr::from(([127, 0, 0, 1], 0));
    let mut tasks = JoinSet::new();
    loop {
        let stream = tokio::select! {
            () = stopping.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    tracing::warn!(error = %e, "accepting a connection on the owner's socket failed");
                    tokio::task::yield_now().await;
                    continue;
                }
            },
        };
        match stream.peer_cred().map(|c| c.uid()) {
            Ok(uid) if uid == me => {
                tasks.spawn(connection(
                    stream,
                    local,
                    Some(OwnerSocket),
                    app.clone(),
                    limits,
                    stopping.clone(),
                ));
            }
            other => tracing::warn!(
                peer = ?other,
                "refused a connection on the owner's socket from another user"
            ),
        }
    }
    drop(listener);
    while tasks.join_next().await.is_some() {}
    Ok(())
}

/// Serves one connection with its slot held.
async fn connection_with_slot(
    stream: TcpStream,
    peer: SocketAddr,
    app: Router,
    limits: ConnectionLimits,
    slot: Slot,
    stopping: CancellationToken,
) {
    let _ = stream.set_nodelay(true);
    connection(stream, peer, None, app, limits, stopping).await;
    drop(slot);
}

/// Serves one connection: its requests carry `peer` (and `owner`, on the
/// owner's socket).
async fn connection<S>(
    stream: S,
    peer: SocketAddr,
    owner: Option<OwnerSocket>,
    app: Router,
    limits: ConnectionLimits,
    stopping: CancellationToken,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let service = app.map_request(
        move |mut request: axum::http::Request<hyper::body::Incoming>| {
            request.extensions_mut().insert(ConnectInfo(peer));
            if let Some(owner) = owner {
                request.extensions_mut().insert(owner);
            }
            request.map(axum::body::Body::new)
        },
    );
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout);
    let conn = builder
        .serve_connection(TokioIo::new(stream), TowerToHyperService::new(service))
        .with_upgrades();
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        result = conn.as_mut() => {
            if let Err(e) = result {
                tracing::debug!(error = %e, %peer, "connection ended");
            }
        }
        () = stopping.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.as_mut().await;
        }
    }
}

/// Answers a connection past a limit with a 503 naming it, and closes it.
async fn refuse(mut stream: TcpStream, why: String) {
    let body = serde_json::json!({"error": {"code": "unavailable", "message": why}}).to_string();
    let response = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let written = tokio::time::timeout(Duration::from_secs(1), async {
        stream.write_all(response.as_bytes()).await?;
        stream.shutdown().await
    })
    .await;
    if !matches!(written, Ok(Ok(()))) {
        tracing::debug!("a refused connection did not take its 503");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_are_counted_per_address_and_in_all_and_given_back() {
        let open = Arc::new(Mutex::new(Open::default()));
        let limits = ConnectionLimits {
            header_timeout: Duration::from_secs(1),
            total: 3,
            per_address: 2,
        };
        let (a, b, c): (IpAddr, IpAddr, IpAddr) = (
            "127.0.0.1".parse().unwrap(),
            "127.0.0.2".parse().unwrap(),
            "127.0.0.3".parse().unwrap(),
        );
        let a1 = take(&open, limits, a).unwrap();
        let _a2 = take(&open, limits, a).unwrap();
        let per = take(&open, limits, a).err().unwrap();
        assert!(per.contains("max_connections_per_address"), "{per}");
        let _b1 = take(&open, limits, b).unwrap();
        let all = take(&open, limits, c).err().unwrap();
        assert!(all.contains("`[server] max_connections`"), "{all}");
        drop(a1);
        assert!(
            take(&open, limits, c).is_ok(),
            "a slot given back is free again"
        );
    }
}
