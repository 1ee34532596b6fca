//! An environment's egress proxy: the only way out of a sandbox that has
//! no network, owned by its environment actor.
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

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::sync::CancellationToken;
use troupe_runtime::environment::Endpoint;
use troupe_runtime::sandbox::proxy::{answer, Head};

use super::relay::{self, Relay};

/// The proxy's port on the sandbox's own loopback.
pub const PORT: u16 = 3128;

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
        let head = match Head::read(&mut client).await {
            Ok(head) => head,
            Err(Some((status, text))) => return answer(&mut client, status, &text).await,
            Err(None) => return,
        };
        let (host, port) = (head.host.clone(), head.port);
        if let Some(relay) = self
            .relay
            .as_ref()
            .filter(|_| relay::is_relay(&host, Some(port)))
        {
            // A tunnel carries requests on; a proxied request is served
            // alone (the client's next one may be for another host).
            let Some((pending, keep_alive)) = head.served_here(&mut client).await else {
                return;
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
        let upstream = match upstream {
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
        head.forward(client, upstream).await;
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
