//! How a node joins a cluster, and what is refused before it starts.
//!
//! The cookie authenticates nodes to each other (ractor_cluster's
//! challenge); it comes from the environment or a file, never the command
//! line, where other users of the machine could read it. The cookie is
//! not encryption: a node server listening beyond loopback is refused
//! unless its connections are TLS (`tls`, see `super::tls`) or the
//! operator says the network is private (`allow_plaintext`).

use std::net::SocketAddr;

use troupe_runtime::store::StoreError;

/// A node's place in a cluster.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    /// The cluster's name: nodes of another cluster are not met.
    pub cluster: String,
    /// This node's name, unique in the cluster.
    pub node: String,
    /// Where its node server listens.
    pub listen: SocketAddr,
    /// Nodes to connect to (`HOST:PORT`); ractor_cluster meets their peers.
    pub join: Vec<String>,
    /// The shared secret nodes authenticate each other with.
    pub cookie: String,
    /// Listen beyond loopback without encryption.
    pub allow_plaintext: bool,
    /// TLS between the nodes (every node of the cluster, or none).
    pub tls: Option<super::tls::Tls>,
}

/// Why the cluster could not start.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// Refused options.
    #[error("{0}")]
    Refused(String),
    /// The node server or an actor could not start.
    #[error("the cluster could not start: {0}")]
    Start(String),
    /// The store.
    #[error(transparent)]
    Store(#[from] StoreError),
}

impl ClusterOptions {
    /// Refuses what must not run: empty names, an empty cookie, a listen
    /// address beyond loopback without encryption unless allowed.
    pub fn check(&self) -> Result<(), ClusterError> {
        for (what, value) in [("cluster", &self.cluster), ("node name", &self.node)] {
            if value.is_empty()
                || !value
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                return Err(ClusterError::Refused(format!(
                    "the {what} `{value}` is not a name: use letters, digits, `-` and `_`"
                )));
            }
        }
        if self.cookie.trim().is_empty() {
            return Err(ClusterError::Refused(
                "a cluster needs a cookie: set TROUPE_CLUSTER_COOKIE or `[cluster] cookie_file` \
                 (the same on every node)"
                    .into(),
            ));
        }
        if !self.listen.ip().is_loopback() && !self.allow_plaintext && self.tls.is_none() {
            return Err(ClusterError::Refused(format!(
                "the cluster would listen on {} without encryption: give every node \
                 `[cluster] tls_cert`, `tls_key` and `tls_ca` (docs/cluster.md), listen on \
                 127.0.0.1, or set `[cluster] allow_plaintext = true` if the network between \
                 the nodes is private",
                self.listen
            )));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(listen: &str) -> ClusterOptions {
        ClusterOptions {
            cluster: "acme".into(),
            node: "a".into(),
            listen: listen.parse().unwrap(),
            join: vec![],
            cookie: "secret".into(),
            allow_plaintext: false,
            tls: None,
        }
    }

    #[test]
    fn plaintext_beyond_loopback_is_refused_unless_allowed() {
        assert!(options("127.0.0.1:4000").check().is_ok());
        let refused = options("0.0.0.0:4000").check().unwrap_err().to_string();
        assert!(refused.contains("allow_plaintext"), "{refused}");
        assert!(refused.contains("tls_cert"), "{refused}");
        let allowed = ClusterOptions {
            allow_plaintext: true,
            ..options("0.0.0.0:4000")
        };
        assert!(allowed.check().is_ok());
    }

    #[test]
    fn an_empty_cookie_or_a_bad_name_is_refused() {
        let no_cookie = ClusterOptions {
            cookie: " ".into(),
            ..options("127.0.0.1:4000")
        };
        assert!(no_cookie
            .check()
            .unwrap_err()
            .to_string()
            .contains("TROUPE_CLUSTER_COOKIE"));
        let bad = ClusterOptions {
            node: "a b".into(),
            ..options("127.0.0.1:4000")
        };
        assert!(bad.check().is_err());
    }
}
