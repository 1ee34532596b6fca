//! Who is the home's owner to `troupe serve`: whoever the kernel says is
//! troupe's own user on the owner's Unix socket — never a secret in a file
//! a command could read, never "it came from loopback".

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use reqwest::{Method, StatusCode};
use troupe::runtime::model::ScriptedProvider;
use troupe::server::auth::AuthMode;
use troupe::server::{Server, ServerOptions};

use super::server::{Served, OWNER};
use super::support::TestHome;

/// Node routes: what only the owner may call.
const NODE_ROUTES: [&str; 5] = ["/bots", "/routines", "/usage", "/tree", "/workbench"];

#[tokio::test]
async fn the_owners_socket_manages_the_node_and_no_address_does() {
    let s = Served::start(vec![]).await;
    let mode = std::fs::metadata(&s.socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "the socket is the owner's alone");
    for route in NODE_ROUTES {
        let (status, _) = s.call(Method::GET, route, Some(OWNER), None).await;
        assert_eq!(status, StatusCode::OK, "{route} over the owner's socket");
        // The same request from loopback, with no token, is nobody's.
        let (status, body) = s.anonymous_get(route).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{route}: {body}");
    }
    let (_, me) = s.call(Method::GET, "/me", Some(OWNER), None).await;
    assert_eq!(me["every_house"], true);
    assert_eq!(me["manages_node"], true);
    s.stop().await;
}

#[tokio::test]
async fn an_open_server_reads_without_a_token_but_manages_nothing_and_only_on_loopback() {
    let s = Served::start_with(vec![], |o| o.auth = AuthMode::Open).await;
    let (status, me) = s.anonymous_get("/me").await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(me["every_house"], true);
    assert_eq!(me["manages_node"], false);
    let (status, _) = s.anonymous_get("/houses/acme/threads").await;
    assert_eq!(status, StatusCode::OK, "an open server reads every house");
    for route in NODE_ROUTES {
        let (status, body) = s.anonymous_get(route).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{route}: {body}");
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("use the CLI on this machine"), "{message}");
    }
    // The owner still manages it, over the socket.
    let (status, _) = s.call(Method::GET, "/bots", Some(OWNER), None).await;
    assert_eq!(status, StatusCode::OK);
    s.stop().await;

    let home = TestHome::new();
    let runtime = home
        .builder(Arc::new(ScriptedProvider::new(vec![])))
        .build()
        .await
        .unwrap();
    let refused = Server::start(
        runtime.node().clone(),
        ServerOptions {
            listen: "0.0.0.0:0".parse().unwrap(),
            auth: AuthMode::Open,
            ..ServerOptions::default()
        },
    )
    .await;
    assert!(refused.err().unwrap().to_string().contains("loopback"));
    runtime.shutdown().await;
}

/// Even with the socket's mode opened to everyone, a process of another
/// user gets no answer: the kernel's peer credentials decide, not the mode.
#[tokio::test]
async fn another_user_on_the_owners_socket_gets_nothing() {
    let me = std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m));
    if me.ok() != Some(0) {
        eprintln!("skipped: only root can run a process as another user here");
        return;
    }
    let s = Served::start(vec![]).await;
    std::fs::set_permissions(&s.socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let folder = s.socket.parent().unwrap();
    std::fs::set_permissions(folder, std::fs::Permissions::from_mode(0o711)).unwrap();
    let client = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.settimeout(10)
try:
    s.sendall(b"GET /api/bots HTTP/1.1\r\nhost: localhost\r\n\r\n")
    print(s.recv(100).decode() or "closed")
except (BrokenPipeError, ConnectionResetError):
    print("closed")
"#;
    let socket = s.socket.clone();
    let out = tokio::task::spawn_blocking(move || {
        use std::os::unix::process::CommandExt;
        std::process::Command::new("python3")
            .args(["-c", client])
            .arg(&socket)
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(said.trim(), "closed", "another user was answered: {said}");
    // The owner is still served.
    let (status, _) = s.call(Method::GET, "/bots", Some(OWNER), None).await;
    assert_eq!(status, StatusCode::OK);
    s.stop().await;
}
