//! `troupe serve --cluster NAME …`: the options of a node of a cluster,
//! from the command line over `[cluster]` in config.toml, and the cookie
//! from the environment or a file — never the command line, where every
//! user of the machine could read it (docs/cluster.md).

use std::net::SocketAddr;

use anyhow::Context;
use troupe_actors::cluster::{ClusterOptions, Tls, TlsFiles};
use troupe_runtime::config::Cluster as ClusterConfig;

/// The environment variable holding the cluster's cookie.
pub const COOKIE_VAR: &str = "TROUPE_CLUSTER_COOKIE";

/// `troupe serve`'s cluster flags.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ClusterArgs {
    /// Run as a node of the cluster NAME (`[cluster] name`).
    #[arg(long = "cluster", value_name = "NAME")]
    pub name: Option<String>,
    /// This node's name, unique in the cluster (`[cluster] node_name`).
    #[arg(long, value_name = "N")]
    pub node_name: Option<String>,
    /// Where the node server listens (`[cluster] listen`), e.g. 127.0.0.1:7900.
    #[arg(long, value_name = "ADDR")]
    pub cluster_listen: Option<String>,
    /// A node to connect to, HOST:PORT (repeatable; `[cluster] join`).
    #[arg(long, value_name = "HOST:PORT")]
    pub join: Vec<String>,
}

/// The node's options, or `None` when this serve runs alone.
pub fn options(
    args: &ClusterArgs,
    config: &ClusterConfig,
    cookie_env: Option<String>,
) -> anyhow::Result<Option<ClusterOptions>> {
    let Some(cluster) = args.name.clone().or_else(|| config.name.clone()) else {
        return Ok(None);
    };
    let node = args
        .node_name
        .clone()
        .or_else(|| config.node_name.clone())
        .context("a node of a cluster needs a name: --node-name N or `[cluster] node_name`")?;
    let listen = args
        .cluster_listen
        .clone()
        .or_else(|| config.listen.clone())
        .context("a node of a cluster needs --cluster-listen ADDR or `[cluster] listen`")?;
    let listen: SocketAddr = listen.parse().with_context(|| {
        format!("--cluster-listen `{listen}` is not an address such as 127.0.0.1:7900")
    })?;
    let cookie = match (cookie_env.filter(|c| !c.is_empty()), &config.cookie_file) {
        (Some(c), _) => c,
        (None, Some(file)) => std::fs::read_to_string(file)
            .with_context(|| format!("cannot read the cookie file {}", file.display()))?
            .trim()
            .to_string(),
        (None, None) => anyhow::bail!(
            "a node of a cluster needs the cluster's cookie: set {COOKIE_VAR} or `[cluster] \
             cookie_file` (never on the command line)"
        ),
    };
    let tls = match (&config.tls_cert, &config.tls_key, &config.tls_ca) {
        (None, None, None) => None,
        (Some(cert), Some(key), Some(ca)) => Some(Tls::load(&TlsFiles {
            cert: cert.clone(),
            key: key.clone(),
            ca: ca.clone(),
        })?),
        _ => anyhow::bail!(
            "TLS between nodes needs all three of `[cluster] tls_cert`, `tls_key` and `tls_ca` \
             (docs/cluster.md)"
        ),
    };
    let mut join = config.join.clone();
    join.extend(args.join.iter().cloned());
    Ok(Some(ClusterOptions {
        cluster,
        node,
        listen,
        join,
        cookie,
        allow_plaintext: config.allow_plaintext,
        tls,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args() -> ClusterArgs {
        ClusterArgs {
            name: Some("acme".into()),
            node_name: Some("a".into()),
            cluster_listen: Some("127.0.0.1:7900".into()),
            join: vec![],
        }
    }

    #[test]
    fn tls_takes_all_three_files_or_none_and_names_a_bad_one() {
        let plain = options(&args(), &ClusterConfig::default(), Some("s".into()))
            .unwrap()
            .unwrap();
        assert!(plain.tls.is_none());
        let dir = tempfile::tempdir().unwrap();
        let half = ClusterConfig {
            tls_cert: Some(dir.path().join("node.pem")),
            ..ClusterConfig::default()
        };
        let e = options(&args(), &half, Some("s".into()))
            .unwrap_err()
            .to_string();
        assert!(e.contains("all three"), "{e}");
        let missing = ClusterConfig {
            tls_cert: Some(dir.path().join("node.pem")),
            tls_key: Some(dir.path().join("node.key")),
            tls_ca: Some(dir.path().join("ca.pem")),
            ..ClusterConfig::default()
        };
        let e = options(&args(), &missing, Some("s".into()))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("node.pem") && e.contains("could not be read"),
            "{e}"
        );
    }
}
