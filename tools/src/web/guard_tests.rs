use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use pretty_assertions::assert_eq;

use super::*;
use crate::web::client::{FetchError, Fetcher, Outcome};
use crate::web::testserver::{Reply, TestServer};

/// A DNS stand-in: each name answers its scripted address lists in turn
/// (the last one repeating); an unknown name does not resolve.
#[derive(Default)]
pub(crate) struct TableLookup {
    answers: Mutex<HashMap<String, Vec<Vec<IpAddr>>>>,
    pub(crate) asked: Mutex<Vec<String>>,
}

impl TableLookup {
    pub(crate) fn with(entries: &[(&str, &[&str])]) -> Arc<Self> {
        let table = Self::default();
        for (name, addrs) in entries {
            table.answer(name, addrs);
        }
        Arc::new(table)
    }

    pub(crate) fn answer(&self, name: &str, addrs: &[&str]) {
        self.answers
            .lock()
            .entry(name.to_owned())
            .or_default()
            .push(addrs.iter().map(|a| a.parse().unwrap()).collect());
    }
}

impl Lookup for TableLookup {
    fn lookup(&self, host: &str) -> Pin<Box<dyn Future<Output = io::Result<Vec<IpAddr>>> + Send>> {
        self.asked.lock().push(host.to_owned());
        let mut answers = self.answers.lock();
        let found = answers.get_mut(host).map(|list| {
            if list.len() > 1 {
                list.remove(0)
            } else {
                list[0].clone()
            }
        });
        Box::pin(async move {
            found.ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, "no such host"))
        })
    }
}

fn closed() -> Policy {
    Policy::default()
}

/// Every one of these is refused, by the URL check or by the resolver.
const REFUSED: &[&str] = &[
    "http://127.0.0.1/",
    "http://127.1/",
    "http://0x7f.1/",
    "http://0x7f000001/",
    "http://2130706433/",
    "http://0177.0.0.1/",
    "http://017700000001/",
    "http://0/",
    "http://0.0.0.0/",
    "http://localhost/",
    "http://localhost./",
    "http://LOCALHOST:8080/",
    "http://api.localhost/",
    "http://[::1]/",
    "http://[::]/",
    "http://[::ffff:127.0.0.1]/",
    "http://[::ffff:7f00:1]/",
    "http://[::127.0.0.1]/",
    "http://[::ffff:10.0.0.1]/",
    "http://[64:ff9b::a9fe:a9fe]/",
    "http://[64:ff9b:1::1]/",
    "http://[2002:c0a8:101::1]/",
    "http://[fc00::1]/",
    "http://[fd12:3456::1]/",
    "http://[fe80::1]/",
    "http://[fec0::1]/",
    "http://[ff02::1]/",
    "http://[2001:db8::1]/",
    "http://10.0.0.1/",
    "http://10.255.255.255:8080/",
    "http://172.16.0.1/",
    "http://172.31.255.254/",
    "http://192.168.1.1/",
    "http://169.254.169.254/latest/meta-data/",
    "http://100.64.0.1/",
    "http://100.127.255.254/",
    "http://192.0.0.8/",
    "http://192.0.2.1/",
    "http://198.18.0.1/",
    "http://198.51.100.7/",
    "http://203.0.113.9/",
    "http://224.0.0.1/",
    "http://239.255.255.250/",
    "http://240.0.0.1/",
    "http://255.255.255.255/",
    "http://user:pass@127.0.0.1/",
    "http://internal.test/",
    "http://rebound.test/",
    "http://mixed.test/",
    "http://mapped.test/",
    "file:///etc/passwd",
    "ftp://example.com/",
    "gopher://127.0.0.1:6379/_",
];

fn table() -> Arc<TableLookup> {
    TableLookup::with(&[
        ("internal.test", &["10.1.2.3"]),
        ("rebound.test", &["127.0.0.1"]),
        // One public and one private address: the name is refused whole.
        ("mixed.test", &["93.184.216.34", "192.168.0.10"]),
        ("mapped.test", &["::ffff:169.254.169.254"]),
    ])
}

async fn verdict(resolver: &GuardedResolver, text: &str) -> Result<(), String> {
    let url = Url::parse(text).map_err(|e| format!("unparsable: {e}"))?;
    check_url(&url, &closed()).map_err(|e| e.to_string())?;
    if let Some(Host::Domain(name)) = url.host() {
        resolver
            .resolve_checked(name)
            .await
            .map_err(|e| e.to_string())?;
    }
    Ok(())
}

#[tokio::test]
async fn an_ssrf_table_of_addresses_and_tricks_is_refused_whole() {
    assert!(REFUSED.len() >= 25);
    let resolver = GuardedResolver::new(table(), closed());
    let mut let_through = Vec::new();
    for text in REFUSED {
        if let Ok(()) = verdict(&resolver, text).await {
            let_through.push(*text);
        }
    }
    assert_eq!(let_through, Vec::<&str>::new());
}

#[tokio::test]
async fn public_addresses_and_names_pass() {
    let lookup = TableLookup::with(&[("example.test", &["93.184.216.34", "2606:2800:220:1::1"])]);
    let resolver = GuardedResolver::new(lookup, closed());
    for text in [
        "https://93.184.216.34/",
        "http://[2606:2800:220:1::1]/",
        "http://[::ffff:93.184.216.34]/",
        "http://[64:ff9b::5db8:d822]/",
        "https://example.test/page",
        "http://8.8.8.8:8080/",
    ] {
        assert_eq!(verdict(&resolver, text).await, Ok(()), "{text}");
    }
}

#[test]
fn refusals_say_what_the_address_is_and_how_to_open_the_way() {
    let url = Url::parse("http://0x7f.1/").unwrap();
    let text = check_url(&url, &closed()).unwrap_err().to_string();
    assert_eq!(
        text,
        "`127.0.0.1` is a loopback address (127.0.0.1); web_fetch reaches only the public \
         internet (set [web] allow_private_addresses = true, or list the address in [web] \
         allow_addresses, to read your own services)"
    );
}

#[test]
fn loose_ipv4_notations_are_read_as_browsers_read_them() {
    for (text, ip) in [
        ("127.1", "127.0.0.1"),
        ("0x7f.1", "127.0.0.1"),
        ("2130706433", "127.0.0.1"),
        ("0177.0.0.1", "127.0.0.1"),
        ("0x7f.0.0.0x1", "127.0.0.1"),
        ("10.1.65535", "10.1.255.255"),
        ("192.168.257", "192.168.1.1"),
    ] {
        assert_eq!(loose_ipv4(text), Some(ip.parse().unwrap()), "{text}");
    }
    for text in [
        "example.com",
        "1.2.3.4.5",
        "256.1.1.1",
        "08.1.1.1",
        "1.2.3.x",
    ] {
        assert_eq!(loose_ipv4(text), None, "{text}");
    }
}

#[test]
fn the_settings_open_the_way_on_purpose() {
    let open = Policy {
        allow_private: true,
        allow: vec![],
    };
    assert_eq!(open.refusal("127.0.0.1".parse().unwrap()), None);
    assert!(check_name("localhost", &open).is_ok());
    let one = Policy {
        allow_private: false,
        allow: vec!["192.168.1.20".parse().unwrap()],
    };
    assert_eq!(one.refusal("192.168.1.20".parse().unwrap()), None);
    assert_eq!(
        one.refusal("192.168.1.21".parse().unwrap()),
        Some("private")
    );
}

fn fetcher(policy: Policy, lookup: Arc<TableLookup>) -> Fetcher {
    Fetcher::new(policy, lookup, Duration::from_secs(10)).unwrap()
}

fn only_loopback_one() -> Policy {
    Policy {
        allow_private: false,
        allow: vec!["127.0.0.1".parse().unwrap()],
    }
}

#[tokio::test]
async fn a_redirect_to_loopback_is_refused_not_returned() {
    let server = TestServer::start(vec![
        (
            "/to-v6",
            Reply::redirect(302, "http://[::ffff:127.0.0.2]/admin"),
        ),
        ("/to-name", Reply::redirect(301, "http://localhost./admin")),
        (
            "/to-dns",
            Reply::redirect(307, "http://internal.test/admin"),
        ),
    ])
    .await;
    let fetcher = fetcher(only_loopback_one(), table());
    for path in ["/to-v6", "/to-name", "/to-dns"] {
        let outcome = fetcher.get(Url::parse(&server.url(path)).unwrap()).await;
        match outcome {
            Err(FetchError::RedirectRefused { to, .. }) => {
                assert!(to.contains("/admin"), "{path}: {to}")
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}

#[tokio::test]
async fn a_name_is_connected_to_the_address_that_was_checked() {
    let server = TestServer::start(vec![("/a", Reply::html("<p>hello</p>"))]).await;
    // The first answer is allowed; the name then "rebinds" to a private address.
    let lookup = TableLookup::with(&[("rebind.test", &["127.0.0.1"])]);
    lookup.answer("rebind.test", &["10.0.0.1"]);
    let fetcher = fetcher(only_loopback_one(), Arc::clone(&lookup));
    let url = Url::parse(&format!("http://rebind.test:{}/a", server.port())).unwrap();
    match fetcher.get(url.clone()).await {
        Ok(Outcome::Page(page)) => assert_eq!(page.body, b"<p>hello</p>"),
        other => panic!("{other:?}"),
    }
    // The server closes each connection, so the next request resolves again:
    // the new, private answer is refused before any connection is made.
    match fetcher.get(url).await {
        Err(FetchError::Refused(Refusal::Address { ip, resolved, .. })) => {
            assert_eq!(ip, "10.0.0.1".parse::<IpAddr>().unwrap());
            assert!(resolved);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1);
    assert_eq!(lookup.asked.lock().len(), 2);
}

#[tokio::test]
async fn a_loopback_server_is_refused_without_the_setting() {
    let server = TestServer::start(vec![("/", Reply::html("secret"))]).await;
    let fetcher = fetcher(closed(), table());
    let result = fetcher.get(Url::parse(&server.url("/")).unwrap()).await;
    assert!(
        matches!(result, Err(FetchError::Refused(Refusal::Address { .. }))),
        "{result:?}"
    );
    assert!(server.requests().is_empty());
}
