use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;
use crate::web::guard::tests::TableLookup;

fn egress(allow: Vec<IpAddr>) -> Egress {
    Egress::with_lookup(
        allow,
        TableLookup::with(&[
            ("example.com", &["93.184.216.34"]),
            ("registry.npmjs.org", &["104.16.0.35", "2606:4700::6810:23"]),
            ("internal.corp", &["10.1.2.3"]),
            ("rebind.example", &["93.184.216.34", "127.0.0.1"]),
            ("metadata.example", &["169.254.169.254"]),
        ]),
    )
}

#[tokio::test]
async fn the_public_internet_is_allowed_by_default_and_the_machine_and_lan_are_not() {
    let e = egress(vec![]);
    for (host, port) in [
        ("example.com", 443),
        ("registry.npmjs.org", 443),
        ("93.184.216.34", 80),
        ("2606:4700::6810:23", 443),
    ] {
        assert!(
            e.decide(host, port).await.is_ok(),
            "{host}:{port} was refused"
        );
    }
    assert_eq!(
        e.decide("example.com", 443).await.unwrap(),
        vec!["93.184.216.34:443".parse::<SocketAddr>().unwrap()]
    );
    for host in [
        "127.0.0.1",
        "127.1",
        "0x7f.1",
        "2130706433",
        "0.0.0.0",
        "::1",
        "[::1]",
        "::ffff:127.0.0.1",
        "localhost",
        "LOCALHOST.",
        "serve.localhost",
        "10.0.0.1",
        "192.168.1.10",
        "172.16.5.4",
        "169.254.169.254",
        "100.64.0.1",
        "fd00::1",
        "fe80::1",
        "internal.corp",
        "rebind.example",
        "metadata.example",
    ] {
        let refused = e.decide(host, 7878).await.unwrap_err();
        assert!(
            refused.contains("sandboxed commands reach only the public internet")
                && refused.contains("[sandbox] allow_addresses"),
            "{host}: {refused}"
        );
    }
}

#[tokio::test]
async fn an_allowed_address_is_reached_through_the_proxy_and_others_get_a_403() {
    // A loopback stand-in for an allowed service, and one that is not.
    let allowed = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let allowed_port = allowed.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = allowed.accept().await {
            let mut buf = [0_u8; 1024];
            let _ = s.read(&mut buf).await;
            let _ = s
                .write_all(
                    b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nConnection: close\r\n\r\nhello",
                )
                .await;
        }
    });
    let e = Arc::new(egress(vec!["127.0.0.1".parse().unwrap()]));
    let proxy = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy_addr = proxy.local_addr().unwrap();
    let serving = Arc::clone(&e);
    tokio::spawn(async move {
        while let Ok((client, _)) = proxy.accept().await {
            let e = Arc::clone(&serving);
            tokio::spawn(async move { e.serve(client).await });
        }
    });
    let ask = |request: String| async move {
        let mut s = TcpStream::connect(proxy_addr).await.unwrap();
        s.write_all(request.as_bytes()).await.unwrap();
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), s.read_to_string(&mut out))
            .await
            .unwrap()
            .unwrap();
        out
    };
    let plain = ask(format!(
        "GET http://127.0.0.1:{allowed_port}/x HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
    ))
    .await;
    assert!(plain.ends_with("hello"), "{plain}");
    let tunnel = ask(format!(
        "CONNECT 127.0.0.1:{allowed_port} HTTP/1.1\r\n\r\nGET / HTTP/1.1\r\n\r\n"
    ))
    .await;
    assert!(
        tunnel.starts_with("HTTP/1.1 200 Connection established") && tunnel.ends_with("hello"),
        "{tunnel}"
    );
    for request in [
        format!("CONNECT [::1]:{allowed_port} HTTP/1.1\r\n\r\n"),
        format!("CONNECT localhost:{allowed_port} HTTP/1.1\r\n\r\n"),
        "GET http://10.0.0.1/ HTTP/1.1\r\n\r\n".to_string(),
    ] {
        let refused = ask(request.clone()).await;
        assert!(refused.starts_with("HTTP/1.1 403"), "{request}: {refused}");
    }
    let bad = ask("GET /relative HTTP/1.1\r\n\r\n".to_string()).await;
    assert!(bad.starts_with("HTTP/1.1 400"), "{bad}");
}
