//! `[cluster]`: this home's node in a cluster of `troupe serve` processes
//! (docs/cluster.md). The command line's `--cluster`, `--node-name`,
//! `--cluster-listen` and `--join` override it; the cookie is never on the
//! command line: `TROUPE_CLUSTER_COOKIE`, or the file `cookie_file` names.

use serde::{Deserialize, Serialize};

/// `[cluster]`: the node this home is in a cluster, if any.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Cluster {
    /// The cluster's name; unset, `troupe serve` runs alone.
    pub name: Option<String>,
    /// This node's name, unique in the cluster.
    pub node_name: Option<String>,
    /// Where its node server listens (`127.0.0.1:7900`).
    pub listen: Option<String>,
    /// Nodes to connect to at start (`HOST:PORT`).
    pub join: Vec<String>,
    /// A file holding the cookie (else `TROUPE_CLUSTER_COOKIE`).
    pub cookie_file: Option<std::path::PathBuf>,
    /// Listen beyond loopback without encryption (a private network only).
    pub allow_plaintext: bool,
    /// This node's TLS certificate chain (PEM); with `tls_key` and
    /// `tls_ca`, every connection between nodes is mutual TLS.
    pub tls_cert: Option<std::path::PathBuf>,
    /// This node's TLS private key (PEM).
    pub tls_key: Option<std::path::PathBuf>,
    /// The authority that signed every node's certificate (PEM).
    pub tls_ca: Option<std::path::PathBuf>,
}
