//! Any node answers any client, the rest of it (docs/cluster.md), with two
//! `troupe serve` nodes on 127.0.0.1: a 20 MiB house file put and read
//! through node a for a house on node b comes back whole, at the version b
//! gives it (bodies over one wire frame go in pieces); `GET /api/me` with
//! the token of a person of a house on b, asked on a, answers as b does;
//! a token no node knows is 401 on a, and names b when b is down. A node
//! of the previous wire (1.2, played by this test process) takes a small
//! body from a, and a large one is 413 saying to upgrade it.

use std::hash::{DefaultHasher, Hash, Hasher};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::cli::{text, troupe};
use super::cluster::Node;
use super::cluster_houses::url;

/// Two nodes, a and b, met, taking bodies and files up to 32 MiB; house `acme` on
/// b with its person `ada`, whose token is returned.
fn two_nodes() -> (Node, Node, String) {
    let mut a = Node::new("a", "alice", json!([]));
    let mut b = Node::new("b", "bob", json!([]));
    for node in [&a, &b] {
        let config = node.home.path().join("config.toml");
        // The API's body limit and the house's file limit, both to 32 MiB.
        let mut text = std::fs::read_to_string(&config).unwrap();
        for key in ["max_body_bytes", "max_file_bytes"] {
            let commented = format!("\n#{key} = ");
            assert!(text.contains(&commented), "{key}: {text}");
            text = text.replace(&commented, &format!("\n{key} = 33554432 #"));
        }
        std::fs::write(&config, text).unwrap();
    }
    a.start("secret", None);
    b.start("secret", Some(a.port));
    a.wait_line("met node `b`");
    b.wait_line("met node `a`");
    let out = troupe(&a.home, &["house", "create", "acme", "--node", "b"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = troupe(&a.home, &["house", "add", "acme", "--human", "ada"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let token = text(&out.stdout).lines().last().unwrap().trim().to_string();
    (a, b, token)
}

/// `method base+path` with `token` and raw `body`: status, headers' version,
/// body bytes, and how long it took.
fn call(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: &str,
    body: Vec<u8>,
) -> (u16, Option<String>, Vec<u8>, Duration) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let started = Instant::now();
        let r = troupe::runtime::net::client_builder()
            .timeout(Duration::from_secs(120))
            .build()
            .unwrap()
            .request(method, format!("{base}{path}"))
            .bearer_auth(token)
            .body(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let version = r
            .headers()
            .get("x-troupe-version")
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let bytes = r.bytes().await.unwrap().to_vec();
        (status, version, bytes, started.elapsed())
    })
}

fn digest(bytes: &[u8]) -> u64 {
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    h.finish()
}

fn json_of(bytes: &[u8]) -> Value {
    serde_json::from_slice(bytes).unwrap_or(Value::Null)
}

#[test]
fn a_20_mib_house_file_put_and_read_through_another_node_comes_back_whole() {
    let (a, b, token) = two_nodes();
    // Not a repeating pattern: any piece out of place changes the hash.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let big: Vec<u8> = (0..20 * 1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let path = "/api/houses/acme/files/big.bin?message=big";

    let (status, _, answer, put_via_a) =
        call(&url(&a), reqwest::Method::PUT, path, &token, big.clone());
    assert_eq!(status, 201, "{}", String::from_utf8_lossy(&answer));
    let put = json_of(&answer);
    let (status, version_via_a, got, get_via_a) =
        call(&url(&a), reqwest::Method::GET, path, &token, vec![]);
    assert_eq!(
        status,
        200,
        "{}",
        String::from_utf8_lossy(&got[..got.len().min(500)])
    );
    assert_eq!((got.len(), digest(&got)), (big.len(), digest(&big)));

    // b, asked directly, has the same file at the same version.
    let (status, version_on_b, on_b, get_on_b) =
        call(&url(&b), reqwest::Method::GET, path, &token, vec![]);
    assert_eq!(status, 200);
    assert_eq!(digest(&on_b), digest(&big));
    assert_eq!(version_via_a, version_on_b);
    assert_eq!(version_via_a, Some(put["version"].to_string()), "{put}");
    let listed = |base: &str| {
        json_of(
            &call(
                base,
                reqwest::Method::GET,
                "/api/houses/acme/files",
                &token,
                vec![],
            )
            .2,
        )
    };
    assert_eq!(listed(&url(&a)), listed(&url(&b)));

    // A put as large on b directly, for the figures (other bytes: none of
    // its pieces is stored already).
    let other: Vec<u8> = big.iter().map(|x| x ^ 0x5a).collect();
    let (status, _, _, put_on_b) = call(
        &url(&b),
        reqwest::Method::PUT,
        "/api/houses/acme/files/big2.bin?message=big",
        &token,
        other,
    );
    assert_eq!(status, 201);
    eprintln!(
        "20 MiB: PUT through a {put_via_a:?}, on b {put_on_b:?}; GET through a {get_via_a:?}, \
         on b {get_on_b:?}"
    );
}

#[test]
fn the_routes_outside_a_house_answer_on_any_node_with_a_token_of_another() {
    let (a, mut b, token) = two_nodes();
    let me = |base: &str, token: &str| {
        let (status, _, body, _) = call(base, reqwest::Method::GET, "/api/me", token, vec![]);
        (status, json_of(&body))
    };
    let on_b = me(&url(&b), &token);
    assert_eq!(on_b.0, 200, "{}", on_b.1);
    assert_eq!(me(&url(&a), &token), on_b);
    // Again, by the node a keeps for the token.
    assert_eq!(me(&url(&a), &token), on_b);
    let (status, _, body, _) = call(
        &url(&a),
        reqwest::Method::GET,
        "/api/requests",
        &token,
        vec![],
    );
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&body));

    let (status, body) = me(&url(&a), "troupe_no-such-token");
    assert_eq!(status, 401, "{body}");

    // b down: its person's token is not known to any node asked, and the
    // 401 names the node that could not be.
    b.kill();
    a.wait_line("node `b` is gone");
    let (status, body) = me(&url(&a), &token);
    assert_eq!(status, 401, "{body}");
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("node `b` could not be asked"), "{message}");
}

/// A node of wire 1.2, played by this test process: it hosts the house
/// `attic`, answers a request of one frame, and does not know `http_open`.
mod older {
    use ractor::{Actor, ActorProcessingErr, ActorRef};
    use troupe::actors::cluster::inbox::{group, InboxMsg};
    use troupe::runtime::id::HouseId;
    use troupe::runtime::protocol::wire::{
        self, kind, Ack, Hello, HostedHouse, HttpRequest, HttpResponse, Refusal,
    };

    pub(super) struct Older {
        pub(super) listen: String,
    }

    impl Actor for Older {
        type Msg = InboxMsg;
        type State = String;
        type Arguments = ();

        async fn pre_start(
            &self,
            myself: ActorRef<InboxMsg>,
            (): (),
        ) -> Result<String, ActorProcessingErr> {
            ractor::pg::join(group("c"), vec![myself.get_cell()]);
            Ok(self.listen.clone())
        }

        async fn handle(
            &self,
            _: ActorRef<InboxMsg>,
            msg: InboxMsg,
            listen: &mut String,
        ) -> Result<(), ActorProcessingErr> {
            match msg {
                InboxMsg::Call(frame, reply) => {
                    let _ = reply.send(answer(&frame, listen));
                }
            }
            Ok(())
        }
    }

    /// What troupe's inbox of wire 1.2 answers.
    fn answer(frame: &[u8], listen: &str) -> Vec<u8> {
        let (got, id) = wire::head(frame).unwrap();
        match got.as_str() {
            kind::HELLO => {
                let hello = Hello {
                    cluster: "c".into(),
                    node: "older".into(),
                    listen: listen.into(),
                    bots: vec![],
                    houses: vec![HostedHouse {
                        name: "attic".into(),
                        id: HouseId::new(),
                    }],
                    http: None,
                    kinds: vec![],
                };
                wire::encode(kind::HELLO, &id, &hello).unwrap()
            }
            kind::HOUSES => wire::encode(kind::ACK, &id, &Ack { first: true }).unwrap(),
            kind::HTTP => {
                let asked: HttpRequest = wire::decode(frame, kind::HTTP).unwrap().body;
                let body = serde_json::json!({"got": asked.body.0.len()}).to_string();
                let answer = HttpResponse {
                    status: 200,
                    headers: vec![("content-type".into(), "application/json".into())],
                    body: wire::Bytes(body.into_bytes()),
                    more: false,
                };
                wire::encode(kind::HTTP_ANSWER, &id, &answer).unwrap()
            }
            other => {
                let reason =
                    format!("this node does not know frames of kind `{other}`; upgrade it");
                wire::encode(kind::REFUSED, &id, &Refusal { reason }).unwrap()
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_of_the_previous_wire_takes_small_bodies_and_a_large_one_is_413_saying_to_upgrade() {
    use ractor::Actor;
    use ractor_cluster::NodeServer;

    let mut a = Node::new("a", "alice", json!([]));
    a.start("secret", None);
    let port = super::cluster::free_port();
    let server = NodeServer::new(
        port,
        "secret".into(),
        "older".into(),
        "127.0.0.1".into(),
        None,
        None,
    )
    .with_listen_addr("127.0.0.1".parse().unwrap());
    let (server, _) = Actor::spawn(None, server, ()).await.unwrap();
    let listen = format!("127.0.0.1:{port}");
    let (inbox, _) = Actor::spawn(None, older::Older { listen }, ())
        .await
        .unwrap();
    ractor_cluster::client_connect(&server, format!("127.0.0.1:{}", a.port))
        .await
        .unwrap();
    let a = tokio::task::spawn_blocking(move || {
        a.wait_line("met node `older`");
        a
    })
    .await
    .unwrap();

    let client = troupe::runtime::net::client_builder().build().unwrap();
    let put = |size: usize| {
        client
            .put(format!("{}/api/houses/attic/files/a.bin", url(&a)))
            .bearer_auth("troupe_any")
            .body(vec![1u8; size])
            .send()
    };
    let small = put(1024).await.unwrap();
    assert_eq!(small.status().as_u16(), 200);
    assert_eq!(small.json::<Value>().await.unwrap(), json!({"got": 1024}));

    let large = put(5 * 1024 * 1024).await.unwrap();
    assert_eq!(large.status().as_u16(), 413);
    let body: Value = large.json().await.unwrap();
    let message = body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains("node `older` runs an older troupe") && message.contains("upgrade"),
        "{message}"
    );
    inbox.stop(None);
    server.stop(None);
}
