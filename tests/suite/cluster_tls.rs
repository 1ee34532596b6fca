//! TLS between the nodes of a cluster (docs/cluster.md): two nodes whose
//! certificates one authority signed meet and carry a bot's message and
//! its reply; a node whose certificate another authority signed is refused
//! before the cookie is asked, and says why. And the cluster's actors in
//! the node's supervised tree, restarted when killed.

use std::path::Path;

use super::cluster::{alice_asks_bob, bob_answers, Node, ASKED, HEARD};

/// A certificate authority of the test's own.
struct Authority {
    issuer: rcgen::CertifiedIssuer<'static, rcgen::KeyPair>,
}

impl Authority {
    fn new(name: &str) -> Authority {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        Authority {
            issuer: rcgen::CertifiedIssuer::self_signed(params, key).unwrap(),
        }
    }

    /// A certificate for a node reached at 127.0.0.1, its key and this
    /// authority, written into `home`'s config.toml as `[cluster]`'s TLS.
    fn certify(&self, home: &Path) {
        let params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let (cert_file, key_file, ca_file) = (
            home.join("node.pem"),
            home.join("node.key"),
            home.join("ca.pem"),
        );
        std::fs::write(&cert_file, cert.pem()).unwrap();
        std::fs::write(&key_file, key.serialize_pem()).unwrap();
        std::fs::write(&ca_file, self.issuer.pem()).unwrap();
        let config = home.join("config.toml");
        let text = std::fs::read_to_string(&config).unwrap();
        let tls = format!(
            "[cluster]\ntls_cert = {:?}\ntls_key = {:?}\ntls_ca = {:?}\n",
            cert_file.display().to_string(),
            key_file.display().to_string(),
            ca_file.display().to_string()
        );
        assert!(
            text.contains("\n[cluster]\n"),
            "the default config.toml has [cluster]"
        );
        std::fs::write(&config, text.replacen("[cluster]\n", &tls, 1)).unwrap();
    }
}

#[test]
fn two_nodes_over_tls_carry_a_message_and_its_reply() {
    let ca = Authority::new("acme nodes");
    let mut b = Node::new("b", "bob", bob_answers());
    ca.certify(b.home.path());
    b.start("secret", None);
    let mut a = Node::new("a", "alice", alice_asks_bob());
    ca.certify(a.home.path());
    a.start("secret", Some(b.port));
    a.wait_line("met node `b` (1 bot(s)");
    b.wait_line("met node `a` (1 bot(s)");

    assert_eq!(
        a.run("alice", "ask bob when the launch is").trim(),
        "asked bob"
    );
    b.wait_count(ASKED, 1);
    a.wait_count(HEARD, 1);
}

#[test]
fn a_node_certified_by_another_authority_is_refused_and_says_why() {
    let mut a = Node::new("a", "alice", serde_json::json!([]));
    Authority::new("acme nodes").certify(a.home.path());
    a.start("secret", None);
    let mut c = Node::new("c", "carol", serde_json::json!([]));
    Authority::new("someone else").certify(c.home.path());
    c.start("secret", Some(a.port));
    let said = c.wait_line("TLS with the node at");
    assert!(said.contains(&format!("127.0.0.1:{}", a.port)), "{said}");
    assert!(said.contains("tls_ca"), "{said}");
    assert_eq!(a.count("SELECT count(*) FROM cluster_peers"), 0);
    assert_eq!(c.count("SELECT count(*) FROM cluster_peers"), 0);
}

/// The cluster's actors are children of a supervisor in the node's tree:
/// killed, the inbox comes back in the cluster's process group, and
/// membership comes back with a node server listening again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_clusters_actors_are_supervised_and_restarted_in_the_tree() {
    use std::time::{Duration, Instant};
    use troupe::actors::cluster::{inbox, Cluster, ClusterOptions};
    use troupe::runtime::supervise::SupervisorMsg;

    let home = super::support::TestHome::new();
    let runtime = troupe::Runtime::builder()
        .home(home.path())
        .cwd(home.path())
        .set("review.enabled", "false")
        .build()
        .await
        .unwrap();
    let port = super::cluster::free_port();
    let cluster = Cluster::start(
        runtime.node(),
        ClusterOptions {
            cluster: "sup".into(),
            node: "solo".into(),
            listen: format!("127.0.0.1:{port}").parse().unwrap(),
            join: vec![],
            cookie: "secret".into(),
            allow_plaintext: false,
            tls: None,
        },
    )
    .await
    .unwrap();
    let restarts = |tree: &[troupe::actors::node::ActorInfo], id: &str| {
        tree.iter()
            .find(|a| a.id == id && a.parent.as_deref() == Some("cluster"))
            .map(|a| (a.state.clone(), a.restarts))
    };
    let tree = runtime.tree().await;
    assert!(tree
        .iter()
        .any(|a| a.id == "cluster" && a.parent.as_deref() == Some("node")));
    assert_eq!(restarts(&tree, "inbox"), Some(("running".into(), 0)));
    assert_eq!(restarts(&tree, "membership"), Some(("running".into(), 0)));

    // Waits (polling: the tree has no event to await) until `id` ran again.
    let back = async |id: &str| {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if restarts(&runtime.tree().await, id) == Some(("running".into(), 1)) {
                return;
            }
            assert!(Instant::now() < deadline, "{id} was not restarted");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };

    let first = ractor::registry::where_is("troupe.inbox.solo").unwrap();
    first.kill();
    back("inbox").await;
    let again = ractor::registry::where_is("troupe.inbox.solo").unwrap();
    assert_ne!(again.get_id(), first.get_id());
    assert!(ractor::pg::get_members(&inbox::group("sup"))
        .iter()
        .any(|c| c.get_id() == again.get_id()));

    // Membership owns the node server: killed, both come back, listening.
    ractor::call!(
        cluster.supervisor().unwrap(),
        SupervisorMsg::Child,
        "membership".to_string()
    )
    .unwrap()
    .unwrap()
    .kill();
    back("membership").await;
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "the node server did not listen again"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cluster.stop();
    runtime.shutdown().await;
}
