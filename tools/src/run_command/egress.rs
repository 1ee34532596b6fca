//! Where a sandboxed local command's network goes: the public internet,
//! through an egress proxy that refuses this machine and its LAN.
//!
//! Commands run in a network namespace of their own
//! ([`troupe_runtime::sandbox::network`]) whose only way out is a proxy on
//! its `127.0.0.1:3128`; `HTTPS_PROXY`/`HTTP_PROXY` point there. Each
//! connection is served here, outside the sandbox, with the rule
//! `web_fetch` follows ([`crate::web::guard`]): a name is resolved here and
//! refused when any of its addresses is loopback, private, link-local,
//! shared, reserved or otherwise not public (in any notation: `127.1`,
//! `0x7f.1`, `[::ffff:127.0.0.1]`, `localhost`); the connection goes to
//! exactly the addresses checked. `[sandbox] allow_addresses` lets single
//! addresses through. So a command cannot reach `troupe serve` or any other
//! service of the machine, whatever address it writes.
//!
//! troupe's browser goes out the same way ([`Egress::for_browser`],
//! [`Egress::listen`]): Chromium is started with this proxy on the machine's
//! loopback as its only way out, so every request a page makes — the
//! navigation, each redirect, images, scripts, `fetch`, WebSockets — is
//! resolved and checked here under `[web]`'s rules, not only the addresses
//! the helpers are asked to open.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;
use troupe_runtime::sandbox::proxy::{answer, Head};
use troupe_runtime::sandbox::zygote::OnConnection;

use crate::web::guard::{
    check_name, loose_ipv4, GuardError, GuardedResolver, Lookup, Policy, Refusal, SystemLookup,
};

/// How long connecting to an endpoint may take.
const CONNECT: Duration = Duration::from_secs(10);

/// The proxy's rule: the public internet, and the allowed addresses.
pub struct Egress {
    resolver: GuardedResolver,
    policy: Policy,
    who: Who,
}

/// Whose traffic the proxy carries, for the words of its refusals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Who {
    /// Sandboxed commands (`[sandbox] allow_addresses` lets an address through).
    Commands,
    /// troupe's browser (`[web]` lets addresses through).
    Browser,
}

impl Egress {
    /// The rule with `allow` (`[sandbox] allow_addresses`), resolving names
    /// through the system.
    pub fn new(allow: Vec<IpAddr>) -> Self {
        Self::with_lookup(allow, Arc::new(SystemLookup))
    }

    /// The rule resolving names through `lookup` (a fixed table in tests).
    pub fn with_lookup(allow: Vec<IpAddr>, lookup: Arc<dyn Lookup>) -> Self {
        let policy = Policy {
            allow_private: false,
            allow,
        };
        Self {
            resolver: GuardedResolver::new(lookup, policy.clone()),
            policy,
            who: Who::Commands,
        }
    }

    /// The rule of troupe's browser: `[web]`'s `policy`, as `web_fetch`
    /// follows it.
    pub fn for_browser(policy: Policy) -> Self {
        Self::for_browser_with_lookup(policy, Arc::new(SystemLookup))
    }

    /// [`Egress::for_browser`] resolving names through `lookup`.
    pub fn for_browser_with_lookup(policy: Policy, lookup: Arc<dyn Lookup>) -> Self {
        Self {
            resolver: GuardedResolver::new(lookup, policy.clone()),
            policy,
            who: Who::Browser,
        }
    }

    /// Serves the proxy on the machine's loopback, on a port of its own
    /// choosing, until `stopped`; returns where it listens.
    ///
    /// # Errors
    ///
    /// The loopback could not be listened on.
    pub async fn listen(
        self: &Arc<Self>,
        stopped: CancellationToken,
    ) -> std::io::Result<SocketAddr> {
        let listener = TcpListener::bind((std::net::Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let egress = Arc::clone(self);
        tokio::spawn(async move {
            loop {
                let client = tokio::select! {
                    () = stopped.cancelled() => return,
                    accepted = listener.accept() => match accepted {
                        Ok((client, _)) => client,
                        Err(e) => {
                            tracing::warn!(error = %e, "the egress proxy stopped accepting");
                            return;
                        }
                    },
                };
                let egress = Arc::clone(&egress);
                let stopped = stopped.clone();
                tokio::spawn(async move {
                    tokio::select! {
                        () = stopped.cancelled() => {}
                        () = egress.serve(client) => {}
                    }
                });
            }
        });
        Ok(addr)
    }

    /// Where a connection to `host:port` may go, or why it may not.
    ///
    /// # Errors
    ///
    /// The refusal, saying what was refused and how to allow it.
    pub async fn decide(&self, host: &str, port: u16) -> Result<Vec<SocketAddr>, String> {
        // An address as written (in any notation) is checked, not looked up.
        check_name(host, &self.policy).map_err(|r| refused(&r, self.who))?;
        let bare = host.trim_matches(['[', ']']);
        if let Some(ip) = bare
            .parse::<IpAddr>()
            .ok()
            .or_else(|| loose_ipv4(bare).map(IpAddr::V4))
        {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        match self.resolver.resolve_checked(host).await {
            Ok(addrs) => Ok(addrs
                .into_iter()
                .map(|ip| SocketAddr::new(ip, port))
                .collect()),
            Err(GuardError::Refused(refusal)) => Err(refused(&refusal, self.who)),
            Err(e @ GuardError::Lookup { .. }) => Err(e.to_string()),
        }
    }

    /// What serves the proxy's connections, for the namespace's process.
    pub fn on_connection(self: &Arc<Self>) -> OnConnection {
        let egress = Arc::clone(self);
        Arc::new(
            move |_port, client: std::net::TcpStream, stopped: CancellationToken| {
                let egress = Arc::clone(&egress);
                tokio::spawn(async move {
                    let Ok(client) = client
                        .set_nonblocking(true)
                        .and_then(|()| TcpStream::from_std(client))
                    else {
                        return;
                    };
                    tokio::select! {
                        () = stopped.cancelled() => {}
                        () = egress.serve(client) => {}
                    }
                });
            },
        )
    }

    /// Serves one connection from inside the sandbox until it closes.
    pub async fn serve(&self, mut client: TcpStream) {
        let head = match Head::read(&mut client).await {
            Ok(head) => head,
            Err(Some((status, text))) => return answer(&mut client, status, &text).await,
            Err(None) => return,
        };
        let endpoint = head.endpoint();
        let addrs = match self.decide(&head.host, head.port).await {
            Ok(addrs) => addrs,
            Err(why) => {
                tracing::info!(endpoint = %endpoint, who = ?self.who, "egress refused");
                return answer(&mut client, 403, &why).await;
            }
        };
        let mut last = String::from("no address");
        for addr in addrs {
            match tokio::time::timeout(CONNECT, TcpStream::connect(addr)).await {
                Ok(Ok(upstream)) => {
                    tracing::debug!(endpoint = %endpoint, who = ?self.who, "egress allowed");
                    return head.forward(client, upstream).await;
                }
                Ok(Err(e)) => last = e.to_string(),
                Err(_) => last = format!("no answer within {} s", CONNECT.as_secs()),
            }
        }
        answer(
            &mut client,
            502,
            &format!("{endpoint} could not be reached: {last}"),
        )
        .await;
    }
}

/// A refusal in the words of whose network it is.
fn refused(refusal: &Refusal, who: Who) -> String {
    let what = match refusal {
        Refusal::Localhost { host } => format!("{host} is this machine (localhost)"),
        Refusal::Address {
            host,
            ip,
            kind,
            resolved,
        } => format!(
            "{host} is {}a {kind} address ({ip})",
            if *resolved { "resolves to " } else { "" }
        ),
        other => other.to_string(),
    };
    match who {
        Who::Commands => format!(
            "{what}; sandboxed commands reach only the public internet, never this machine or \
             its network (list the address in [sandbox] allow_addresses in config.toml to reach it)"
        ),
        Who::Browser => format!(
            "{what}; troupe's browser opens only public pages, never this machine or its network \
             (list the address in [web] allow_addresses in config.toml to open it)"
        ),
    }
}

#[cfg(test)]
#[path = "egress_tests.rs"]
mod tests;
