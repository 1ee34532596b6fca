//! Your own actor kind on another node of a cluster: a program on node `a`
//! sends durable messages to a ledger whose kind only node `b` registers,
//! and the ledger answers each back to a clerk on `a`.
//!
//! Both nodes are this program: run plainly it is node `a`, and it starts
//! itself again as node `b` (`--node-b HOME PORT JOIN`), each on a home of
//! its own, on loopback. Node `a` does not register `ledger`: b said it
//! does (in its `hello`), so `send_durable` commits each entry on a and
//! its outbox sends it to b, which commits it before it acknowledges and
//! applies it once. The ledger's answer crosses back the same way.
//!
//! Run it with:
//!
//! ```sh
//! cargo run --example cluster_actors
//! ```

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use troupe::actors::cluster::{Cluster, ClusterOptions};
use troupe::runtime::model::ScriptedProvider;
use troupe::{ActorAddress, ActorError, Context, KindOptions, Runtime, UserActor};

const COOKIE: &str = "example-cookie";

/// An amount entered in the ledger, or the ledger's total sent back.
#[derive(Debug, Serialize, Deserialize)]
struct Amount(u64);

// Never crosses a node as a ractor message: troupe carries it as data.
impl ractor::Message for Amount {}

/// Node b's ledger: adds each amount, tells a's clerk the new total.
struct Ledger;

#[troupe::async_trait]
impl UserActor for Ledger {
    type Msg = Amount;
    type Reply = u64;
    type State = u64;

    async fn handle(
        &self,
        cx: &mut Context<'_, Self>,
        Amount(n): Amount,
    ) -> Result<u64, ActorError> {
        *cx.state_mut() += n;
        cx.save();
        let total = *cx.state();
        // Committed together with the total: sent once this entry is applied.
        cx.tell(&ActorAddress::<Clerk>::new("clerk", "main"), &Amount(total))
            .map_err(ActorError::from)?;
        Ok(total)
    }
}

/// Node a's clerk: hands the totals it is told to the program.
struct Clerk(mpsc::UnboundedSender<u64>);

#[troupe::async_trait]
impl UserActor for Clerk {
    type Msg = Amount;
    type Reply = ();
    type State = ();

    async fn handle(
        &self,
        _cx: &mut Context<'_, Self>,
        Amount(total): Amount,
    ) -> Result<(), ActorError> {
        let _ = self.0.send(total);
        Ok(())
    }
}

async fn runtime(home: &std::path::Path) -> anyhow::Result<Runtime> {
    Ok(Runtime::builder()
        .home(home)
        .cwd(home)
        .provider(Arc::new(ScriptedProvider::new(vec![])))
        .build()
        .await?)
}

async fn join(
    runtime: &Runtime,
    name: &str,
    port: u16,
    join: Option<u16>,
) -> anyhow::Result<Cluster> {
    Ok(Cluster::start(
        runtime.node(),
        ClusterOptions {
            cluster: "example".into(),
            node: name.into(),
            listen: format!("127.0.0.1:{port}").parse()?,
            join: join.map(|p| format!("127.0.0.1:{p}")).into_iter().collect(),
            cookie: COOKIE.into(),
            allow_plaintext: false,
            tls: None,
        },
    )
    .await?)
}

/// Node b: registers `ledger`, joins a, runs until a stops it.
async fn node_b(home: &str, port: u16, join_port: u16) -> anyhow::Result<()> {
    let runtime = runtime(std::path::Path::new(home)).await?;
    runtime
        .register_with("ledger", KindOptions::default(), |_: &str| Ledger)
        .await?;
    let _cluster = join(&runtime, "b", port, Some(join_port)).await?;
    println!("node b ready");
    std::future::pending::<()>().await;
    Ok(())
}

fn free_port() -> anyhow::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if let [_, flag, home, port, join_port] = &args[..] {
        if flag == "--node-b" {
            return node_b(home, port.parse()?, join_port.parse()?).await;
        }
    }
    let (home_a, home_b) = (tempfile::tempdir()?, tempfile::tempdir()?);
    let runtime = runtime(home_a.path()).await?;
    let (tx, mut totals) = mpsc::unbounded_channel();
    runtime
        .register_with("clerk", KindOptions::default(), move |_: &str| {
            Clerk(tx.clone())
        })
        .await?;
    let port_a = free_port()?;
    let cluster = join(&runtime, "a", port_a, None).await?;

    // Node b: this program again.
    let mut b = Command::new(std::env::current_exe()?)
        .arg("--node-b")
        .arg(home_b.path())
        .arg(free_port()?.to_string())
        .arg(port_a.to_string())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stdout = b
        .stdout
        .take()
        .ok_or_else(|| anyhow::anyhow!("node b has no stdout"))?;
    let ready = BufReader::new(stdout).lines().next();
    anyhow::ensure!(
        matches!(ready, Some(Ok(ref l)) if l == "node b ready"),
        "node b did not start: {ready:?}"
    );

    let books = ActorAddress::<Ledger>::new("ledger", "books");
    let deadline = Instant::now() + Duration::from_secs(20);
    while runtime.node().node_of(&books.to_address()).is_none() {
        anyhow::ensure!(
            Instant::now() < deadline,
            "node b never said it hosts `ledger`"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!(
        "`ledger/books` lives on node {}",
        runtime
            .node()
            .node_of(&books.to_address())
            .unwrap_or_default()
    );
    for amount in [5, 10, 20] {
        let id = runtime.send_durable(&books, Amount(amount)).await?;
        println!("sent {amount} (committed on a as {id})");
    }
    let mut last = 0;
    for _ in 0..3 {
        last = tokio::time::timeout(Duration::from_secs(20), totals.recv())
            .await?
            .ok_or_else(|| anyhow::anyhow!("the clerk stopped"))?
            .max(last);
    }
    println!("the ledger on node b says the total is {last}");
    anyhow::ensure!(last == 35, "expected a total of 35, got {last}");

    b.kill()?;
    b.wait()?;
    cluster.stop();
    runtime.shutdown().await;
    Ok(())
}
