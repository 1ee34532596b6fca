//! An egress endpoint: a `host:port` an environment's commands may reach
//! through its Sandbox actor's proxy (`[environments] egress`, a house's
//! own policy).
//!
//! Matched exactly, the host without regard to case: `registry.npmjs.org:443`
//! lets commands reach that name on that port and nothing else — not
//! another port, not a subdomain, not the address it resolves to written
//! as a number.

use serde::{Deserialize, Serialize};

/// `host:port`, checked.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Endpoint {
    host: String,
    port: u16,
}

impl Endpoint {
    /// The host (lower case; an IPv6 address without its brackets).
    pub fn host(&self) -> &str {
        &self.host
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Whether a connection to `host:port` is this endpoint.
    pub fn matches(&self, host: &str, port: u16) -> bool {
        self.port == port
            && self
                .host
                .eq_ignore_ascii_case(host.trim_start_matches('[').trim_end_matches(']'))
    }
}

impl std::str::FromStr for Endpoint {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let bad = |why: &str| {
            format!(
                "`{text}` is not an egress endpoint: {why}; give host:port, such as \
                 registry.npmjs.org:443 or 127.0.0.1:8080 ([::1]:8080 for IPv6)"
            )
        };
        let (host, port) = text.rsplit_once(':').ok_or_else(|| bad("no port"))?;
        let port: u16 = port
            .parse()
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| bad("the port is not a number from 1 to 65535"))?;
        let host = match host.strip_prefix('[') {
            Some(inner) => inner
                .strip_suffix(']')
                .filter(|h| h.parse::<std::net::Ipv6Addr>().is_ok())
                .ok_or_else(|| bad("the IPv6 address in brackets is not valid"))?,
            None => host,
        };
        let valid = !host.is_empty()
            && host.len() <= 253
            && (host.parse::<std::net::IpAddr>().is_ok()
                || host
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.'));
        if !valid {
            return Err(bad("the host is not a name or an address"));
        }
        Ok(Endpoint {
            host: host.to_ascii_lowercase(),
            port,
        })
    }
}

impl TryFrom<String> for Endpoint {
    type Error = String;

    fn try_from(text: String) -> Result<Self, String> {
        text.parse()
    }
}

impl From<Endpoint> for String {
    fn from(endpoint: Endpoint) -> String {
        endpoint.to_string()
    }
}

impl std::fmt::Display for Endpoint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Endpoint;

    #[test]
    fn endpoints_parse_and_match_exactly() {
        let npm: Endpoint = "Registry.NPMJS.org:443".parse().unwrap();
        assert_eq!(npm.to_string(), "registry.npmjs.org:443");
        assert!(npm.matches("registry.npmjs.org", 443));
        assert!(npm.matches("REGISTRY.npmjs.org", 443));
        assert!(!npm.matches("registry.npmjs.org", 80));
        assert!(!npm.matches("evil.registry.npmjs.org", 443));
        let v6: Endpoint = "[::1]:8080".parse().unwrap();
        assert!(v6.matches("[::1]", 8080));
        assert_eq!(v6.to_string(), "[::1]:8080");
        for bad in [
            "example.com",
            "example.com:0",
            "example.com:http",
            ":443",
            "a b:1",
            "[x]:1",
        ] {
            let err = bad.parse::<Endpoint>().unwrap_err();
            assert!(err.contains("give host:port"), "{bad}: {err}");
        }
    }
}
