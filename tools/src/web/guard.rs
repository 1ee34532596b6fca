//! The SSRF guard: `web_fetch` reaches only the public internet.
//!
//! The model chooses the addresses `web_fetch` reads, and a page it read may
//! have chosen them for it. Without a guard, "fetch http://169.254.169.254/"
//! reads a cloud's instance credentials and "fetch http://127.0.0.1:8080/"
//! drives the user's own services. So every address is checked before a
//! connection is made, on the first request and on every redirect hop:
//!
//! - an IP literal is checked as written, in whatever notation (the URL
//!   parser turns `0x7f.1`, `2130706433`, `0177.0.0.1` and `127.1` into
//!   `127.0.0.1`; names that still look numeric are parsed again here);
//! - a name is resolved by [`GuardedResolver`], which refuses the whole name
//!   if any of its addresses is not public, and hands the connection exactly
//!   the addresses it checked: the socket is opened to a checked address, so
//!   a second, different DNS answer (rebinding) never reaches it;
//! - `localhost`, `localhost.` and `*.localhost` are refused by name.
//!
//! Proxy variables are not obeyed (a proxy would make the checked address
//! meaningless). `[web] allow_private_addresses` turns the address checks
//! off for a user who means to reach their own services; `allow_addresses`
//! lets single addresses through.

use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;

use url::{Host, Url};

/// Which non-public addresses may be reached anyway.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Policy {
    /// Every address may be reached (`[web] allow_private_addresses`).
    pub allow_private: bool,
    /// These addresses may be reached (`[web] allow_addresses`).
    pub allow: Vec<IpAddr>,
}

impl Policy {
    /// The policy `[web]` describes.
    pub fn from_settings(web: &troupe_runtime::config::Web) -> Self {
        Self {
            allow_private: web.allow_private_addresses,
            allow: web.allow_addresses.clone(),
        }
    }

    /// Why `ip` may not be reached, or `None` when it may.
    pub fn refusal(&self, ip: IpAddr) -> Option<&'static str> {
        if self.allow_private || self.allow.contains(&ip) {
            return None;
        }
        non_public(ip)
    }
}

/// Why a URL or an address was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// The scheme is not http or https.
    #[error(
        "`{url}` is not an http or https address; web_fetch reads only http:// and https:// pages"
    )]
    Scheme {
        /// The address.
        url: String,
    },
    /// The URL has no host.
    #[error("`{url}` names no host")]
    NoHost {
        /// The address.
        url: String,
    },
    /// The host is `localhost` or below it.
    #[error(
        "`{host}` is this machine (localhost); web_fetch reaches only the public internet \
         (set [web] allow_private_addresses = true to read your own services)"
    )]
    Localhost {
        /// The host.
        host: String,
    },
    /// The host is, or resolves to, a non-public address.
    #[error(
        "`{host}` is {}a {kind} address ({ip}); web_fetch reaches only the public internet \
         (set [web] allow_private_addresses = true, or list the address in [web] allow_addresses, \
         to read your own services)",
        if *resolved { "resolves to " } else { "" }
    )]
    Address {
        /// The host as written.
        host: String,
        /// The refused address.
        ip: IpAddr,
        /// What kind of address it is.
        kind: &'static str,
        /// Whether it came from DNS rather than from the URL.
        resolved: bool,
    },
}

/// Checks a URL before a request: its scheme, and its host when that is an
/// IP literal (in any notation) or `localhost`. Names are checked again,
/// with their addresses, when they are resolved.
pub fn check_url(url: &Url, policy: &Policy) -> Result<(), Refusal> {
    if !matches!(url.scheme(), "http" | "https") {
        return Err(Refusal::Scheme {
            url: url.to_string(),
        });
    }
    match url.host() {
        None => Err(Refusal::NoHost {
            url: url.to_string(),
        }),
        Some(Host::Ipv4(ip)) => check_ip(&ip.to_string(), IpAddr::V4(ip), policy, false),
        Some(Host::Ipv6(ip)) => check_ip(&format!("[{ip}]"), IpAddr::V6(ip), policy, false),
        Some(Host::Domain(name)) => check_name(name, policy),
    }
}

/// Checks a host name (not yet resolved): `localhost` and names that are a
/// number in disguise.
pub fn check_name(name: &str, policy: &Policy) -> Result<(), Refusal> {
    let lower = name.trim_end_matches('.').to_ascii_lowercase();
    if policy.allow_private {
        return Ok(());
    }
    if lower.is_empty() || lower == "localhost" || lower.ends_with(".localhost") {
        return Err(Refusal::Localhost {
            host: name.to_owned(),
        });
    }
    if let Some(ip) = loose_ipv4(&lower) {
        return check_ip(name, IpAddr::V4(ip), policy, false);
    }
    if let Ok(ip) = lower.trim_matches(['[', ']']).parse::<IpAddr>() {
        return check_ip(name, ip, policy, false);
    }
    Ok(())
}

fn check_ip(host: &str, ip: IpAddr, policy: &Policy, resolved: bool) -> Result<(), Refusal> {
    match policy.refusal(ip) {
        None => Ok(()),
        Some(kind) => Err(Refusal::Address {
            host: host.to_owned(),
            ip,
            kind,
            resolved,
        }),
    }
}

/// Why `ip` is not on the public internet, or `None` when it is.
pub fn non_public(ip: IpAddr) -> Option<&'static str> {
    match ip {
        IpAddr::V4(v4) => non_public_v4(v4),
        IpAddr::V6(v6) => non_public_v6(v6),
    }
}

fn in_v4(ip: Ipv4Addr, net: [u8; 4], prefix: u32) -> bool {
    let mask = if prefix == 0 {
        0
    } else {
        u32::MAX << (32 - prefix)
    };
    u32::from(ip) & mask == u32::from(Ipv4Addr::from(net)) & mask
}

fn non_public_v4(ip: Ipv4Addr) -> Option<&'static str> {
    const RANGES: &[([u8; 4], u32, &str)] = &[
        ([0, 0, 0, 0], 8, "unspecified (this-network)"),
        ([10, 0, 0, 0], 8, "private"),
        ([100, 64, 0, 0], 10, "shared (CGNAT)"),
        ([127, 0, 0, 0], 8, "loopback"),
        ([169, 254, 0, 0], 16, "link-local"),
        ([172, 16, 0, 0], 12, "private"),
        ([192, 0, 0, 0], 24, "reserved (IETF protocol assignments)"),
        ([192, 0, 2, 0], 24, "documentation"),
        ([192, 88, 99, 0], 24, "reserved (6to4 relay)"),
        ([192, 168, 0, 0], 16, "private"),
        ([198, 18, 0, 0], 15, "reserved (benchmarking)"),
        ([198, 51, 100, 0], 24, "documentation"),
        ([203, 0, 113, 0], 24, "documentation"),
        ([224, 0, 0, 0], 4, "multicast"),
        ([255, 255, 255, 255], 32, "broadcast"),
        ([240, 0, 0, 0], 4, "reserved"),
    ];
    RANGES
        .iter()
        .find(|(net, prefix, _)| in_v4(ip, *net, *prefix))
        .map(|(_, _, kind)| *kind)
}

fn non_public_v6(ip: Ipv6Addr) -> Option<&'static str> {
    let s = ip.segments();
    let embedded = |hi: u16, lo: u16| Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo));
    if ip.is_unspecified() {
        return Some("unspecified");
    }
    if ip.is_loopback() {
        return Some("loopback");
    }
    // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible): the IPv4 address decides,
    // and the deprecated compatible form is refused even for a public one.
    if s[..5] == [0; 5] && s[5] == 0xffff {
        return non_public_v4(embedded(s[6], s[7]));
    }
    if s[..6] == [0; 6] {
        return Some(non_public_v4(embedded(s[6], s[7])).unwrap_or("reserved (IPv4-compatible)"));
    }
    // 64:ff9b::/96, the well-known NAT64 prefix: the IPv4 address decides.
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return non_public_v4(embedded(s[6], s[7]));
    }
    // 2002::/16, 6to4: the IPv4 address in the next 32 bits decides.
    if s[0] == 0x2002 {
        return non_public_v4(embedded(s[1], s[2]));
    }
    let first = s[0];
    match () {
        () if first & 0xff00 == 0xff00 => Some("multicast"),
        () if first & 0xfe00 == 0xfc00 => Some("unique local (private)"),
        () if first & 0xffc0 == 0xfe80 => Some("link-local"),
        () if first & 0xffc0 == 0xfec0 => Some("site-local (private)"),
        () if s[0] == 0x64 && s[1] == 0xff9b && s[2] == 1 => Some("NAT64 local-use"),
        () if s[..4] == [0x100, 0, 0, 0] => Some("reserved (discard-only)"),
        () if s[0] == 0x2001 && s[1] == 0x0db8 => Some("documentation"),
        () if s[0] & 0xfff0 == 0x3ff0 => Some("documentation"),
        () if s[0] == 0x2001 && s[1] < 0x0200 => Some("reserved (IETF protocol assignments)"),
        () if first & 0xe000 != 0x2000 => Some("reserved (outside global unicast)"),
        () => None,
    }
}

/// An IPv4 address written the loose way browsers accept: one to four
/// parts, each decimal, octal (leading `0`) or hex (`0x`), the last filling
/// the remaining bytes (`127.1`, `0x7f000001`, `0177.0.0.1`).
pub fn loose_ipv4(text: &str) -> Option<Ipv4Addr> {
    let text = text.strip_suffix('.').unwrap_or(text);
    let parts: Vec<&str> = text.split('.').collect();
    if parts.is_empty() || parts.len() > 4 {
        return None;
    }
    let mut numbers = Vec::with_capacity(parts.len());
    for part in &parts {
        let (digits, radix) =
            if let Some(hex) = part.strip_prefix("0x").or_else(|| part.strip_prefix("0X")) {
                (hex, 16)
            } else if part.len() > 1 && part.starts_with('0') {
                (&part[1..], 8)
            } else {
                (*part, 10)
            };
        let value = if digits.is_empty() {
            0
        } else {
            u64::from_str_radix(digits, radix).ok()?
        };
        numbers.push(value);
    }
    let (last, head) = numbers.split_last()?;
    if head.iter().any(|n| *n > 255) || *last >= 1u64 << (8 * (5 - numbers.len())) {
        return None;
    }
    let mut value: u64 = 0;
    for (i, n) in head.iter().enumerate() {
        value |= n << (8 * (3 - i));
    }
    value |= last;
    u32::try_from(value).ok().map(Ipv4Addr::from)
}

/// Looks a host name up: the system resolver in use, a fixed table in tests.
pub trait Lookup: Send + Sync + 'static {
    /// The addresses of `host`.
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>>;
}

/// The system resolver (getaddrinfo, off the async threads).
#[derive(Debug, Clone, Copy, Default)]
pub struct SystemLookup;

impl Lookup for SystemLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        let host = host.to_owned();
        Box::pin(async move {
            let addrs = tokio::net::lookup_host((host.as_str(), 0)).await?;
            Ok(addrs.map(|a| a.ip()).collect())
        })
    }
}

/// The resolver `web_fetch`'s HTTP client connects through: it resolves a
/// name, refuses it when any of its addresses is not public, and gives the
/// connection exactly the addresses it checked.
pub struct GuardedResolver {
    lookup: Arc<dyn Lookup>,
    policy: Policy,
}

impl GuardedResolver {
    /// A resolver over `lookup` that applies `policy`.
    pub fn new(lookup: Arc<dyn Lookup>, policy: Policy) -> Self {
        Self { lookup, policy }
    }

    /// The checked addresses of `host`, or why it is refused.
    pub async fn resolve_checked(&self, host: &str) -> Result<Vec<IpAddr>, GuardError> {
        check_name(host, &self.policy)?;
        let addrs = self
            .lookup
            .lookup(host)
            .await
            .map_err(|e| GuardError::Lookup {
                host: host.to_owned(),
                reason: e.to_string(),
            })?;
        if addrs.is_empty() {
            return Err(GuardError::Lookup {
                host: host.to_owned(),
                reason: "no address".into(),
            });
        }
        for ip in &addrs {
            check_ip(host, *ip, &self.policy, true)?;
        }
        Ok(addrs)
    }
}

/// Why the resolver gave no address.
#[derive(Debug, Clone, thiserror::Error)]
pub enum GuardError {
    /// The name or one of its addresses is refused.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// The name could not be resolved.
    #[error("cannot resolve `{host}`: {reason}; check the address")]
    Lookup {
        /// The name.
        host: String,
        /// Why.
        reason: String,
    },
}

impl reqwest::dns::Resolve for GuardedResolver {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let lookup = Arc::clone(&self.lookup);
        let policy = self.policy.clone();
        let host = name.as_str().to_owned();
        Box::pin(async move {
            let this = GuardedResolver { lookup, policy };
            let addrs = this.resolve_checked(&host).await?;
            let addrs: reqwest::dns::Addrs =
                Box::new(addrs.into_iter().map(|ip| SocketAddr::new(ip, 0)));
            Ok(addrs)
        })
    }
}

#[cfg(test)]
#[path = "guard_tests.rs"]
pub(crate) mod tests;
