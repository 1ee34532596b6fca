//! `troupe serve --cluster NAME …`: the options of a node of a cluster,
//! from the command line over `[cluster]` in config.toml, and the cookie
//! from the environment or a file — never the command line, where every
//! user of the machine could read it (docs/cluster.md).

use std::net::SocketAddr;

use anyhow::Context;
use troupe_actors::cluster::ClusterOptions;
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
    let mut join = config.join.clone();
    join.extend(args.join.iter().cloned());
    Ok(Some(ClusterOptions {
        cluster,
        node,
        listen,
        join,
        cookie,
        allow_plaintext: config.allow_plaintext,
    }))
}
