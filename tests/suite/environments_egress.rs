//! An environment's egress proxy, owned by its environment actor: commands
//! reach the endpoints on the allow-list through it (plain HTTP and
//! `CONNECT` tunnels), any other endpoint is refused with a 403 that names
//! it, and nothing reaches the machine's network directly. Loopback only:
//! the "endpoints" are servers of the test on 127.0.0.1.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use troupe::runtime::environment::{Endpoint, HouseEnvironmentPolicy};
use troupe::runtime::sandbox::Sandbox;

use super::environments::with_environment;
use super::support::TestHome;

/// A server on 127.0.0.1 answering every request with `body`; its port.
async fn serve(body: &'static str) -> u16 {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut head = Vec::new();
                let mut buf = [0_u8; 1024];
                while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => head.extend_from_slice(&buf[..n]),
                    }
                }
                let response = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(response.as_bytes()).await;
            });
        }
    });
    port
}

#[tokio::test]
async fn egress_reaches_only_the_listed_endpoints_and_only_through_the_proxy() {
    if Sandbox::detect_or_skip("environments_egress").is_none() {
        return;
    }
    let allowed = serve("allowed").await;
    let listed_later = serve("listed by the house").await;
    let unlisted = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    unlisted.set_nonblocking(true).unwrap();
    let unlisted_port = unlisted.local_addr().unwrap().port();
    let home = TestHome::new();
    let egress = format!("[\"127.0.0.1:{allowed}\"]");
    let (_rt, envs, id) = with_environment(&home, &[("environments.egress", &egress)]).await;
    let run = |command: String| {
        let envs = envs.clone();
        async move {
            let out = envs
                .exec(id, &command, Some(Duration::from_secs(30)))
                .await
                .unwrap();
            assert!(out.sandboxed, "{out:?}");
            out
        }
    };

    // Plain HTTP and a CONNECT tunnel to a listed endpoint.
    let out = run(format!(
        "curl -sS --max-time 10 http://127.0.0.1:{allowed}/x"
    ))
    .await;
    assert_eq!(
        (out.output.as_str(), out.exit_code),
        ("allowed", Some(0)),
        "{out:?}"
    );
    let out = run(format!(
        "curl -sS -p --max-time 10 http://127.0.0.1:{allowed}/x"
    ))
    .await;
    assert_eq!(
        (out.output.as_str(), out.exit_code),
        ("allowed", Some(0)),
        "{out:?}"
    );

    // Another endpoint is refused by the proxy, saying which and how to allow it.
    let out = run(format!(
        "curl -sS --max-time 10 http://127.0.0.1:{unlisted_port}/"
    ))
    .await;
    assert!(
        out.output.contains(&format!(
            "127.0.0.1:{unlisted_port} is not on this environment's egress allow-list"
        )),
        "{out:?}"
    );
    assert!(out.output.contains("--allow-egress"), "{out:?}");
    let out = run(format!(
        "curl -sS -p --max-time 10 -o /dev/null -w '%{{http_code}}' http://127.0.0.1:{unlisted_port}/"
    ))
    .await;
    assert!(!out.success(), "{out:?}");
    assert!(out.output.contains("403"), "{out:?}");

    // Without the proxy nothing gets out, the listed endpoint included.
    for port in [allowed, unlisted_port] {
        let out = run(format!(
            "curl -sS --noproxy '*' --max-time 5 http://127.0.0.1:{port}/"
        ))
        .await;
        assert!(!out.success(), "{out:?}");
    }
    let out = run(format!("echo hi > /dev/tcp/127.0.0.1/{unlisted_port}")).await;
    assert!(!out.success(), "{out:?}");
    let accepted = unlisted.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection reached the unlisted endpoint: {accepted:?}"
    );

    // The house's own list adds to the configured one, for environments
    // whose actor starts after it changed.
    let endpoint: Endpoint = format!("127.0.0.1:{listed_later}").parse().unwrap();
    envs.set_policy(HouseEnvironmentPolicy {
        egress: vec![endpoint],
        ..HouseEnvironmentPolicy::default()
    })
    .await
    .unwrap();
    let other = envs.create(None).await.unwrap().info.id;
    let out = envs
        .exec(
            other,
            &format!("curl -sS --max-time 10 http://127.0.0.1:{listed_later}/"),
            None,
        )
        .await
        .unwrap();
    assert_eq!(out.output, "listed by the house", "{out:?}");
}
