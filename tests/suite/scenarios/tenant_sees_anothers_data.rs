//! **A tenant sees another's data.** Ada is a person of the house `acme`;
//! `beta` is another tenant of the same server. She tries every route the
//! server has against `beta` — read from the server's own route table, so
//! a route added later is tried too, and one nobody has classified fails
//! this story until someone says who may reach it. Every route of `beta`
//! answers 404 (its existence is not confirmed), every route of the
//! node's owner 403, the lists she may read hold nothing of `beta`, and
//! afterwards nothing of `beta` has changed. (A bot of one house trying
//! every tool against another is `house_tenancy.rs`; the older hand-made
//! list of routes is `server.rs`'s
//! `a_member_of_one_house_gets_404_for_everything_of_another`.)

use reqwest::{Method, StatusCode};
use serde_json::{json, Value};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use troupe::runtime::store::house_files::NewFile;

use crate::suite::server::Served;

/// Every `(method, path)` the API serves, from `.route("PATH", get(…).post(…))`
/// in src/server.rs.
fn routes() -> Vec<(Method, String)> {
    let source = include_str!("../../../src/server.rs");
    let mut found = Vec::new();
    for piece in source.split(".route(").skip(1) {
        let piece = piece.trim_start();
        let Some(rest) = piece.strip_prefix('"') else {
            continue;
        };
        let (path, rest) = rest.split_once('"').expect("a closed path literal");
        // The route's handlers end where its parentheses close.
        let mut depth = 1;
        let end = rest
            .char_indices()
            .find(|&(_, c)| {
                match c {
                    '(' => depth += 1,
                    ')' => depth -= 1,
                    _ => {}
                }
                depth == 0
            })
            .map(|(i, _)| i)
            .expect("a closed route call");
        let handlers = &rest[..end];
        for (word, method) in [
            ("get(", Method::GET),
            ("post(", Method::POST),
            ("put(", Method::PUT),
            ("patch(", Method::PATCH),
            ("delete(", Method::DELETE),
        ] {
            let called = handlers.match_indices(word).any(|(i, _)| {
                i == 0
                    || !handlers.as_bytes()[i - 1].is_ascii_alphanumeric()
                        && handlers.as_bytes()[i - 1] != b'_'
            });
            if called {
                found.push((method, path.to_string()));
            }
        }
    }
    found
}

/// Who may reach a route: the answer Ada gets.
#[derive(Debug, PartialEq)]
enum Reach {
    /// Anyone: not tried.
    Public,
    /// Another house's: 404.
    OtherHouse,
    /// The node owner's: 403.
    Owner,
    /// Her own: 200, with nothing of `beta` in it.
    Hers,
}

fn reach(method: &Method, path: &str) -> Option<Reach> {
    Some(match (method.as_str(), path) {
        ("GET", "/health") => Reach::Public,
        ("GET", "/me" | "/houses" | "/requests") => Reach::Hers,
        // Answering a request by id: another's is not found.
        ("POST", "/requests/{id}") => Reach::OtherHouse,
        // Managing a house's people, rules and node is the owner's, whatever the house.
        ("POST", "/houses/{house}/members" | "/houses/{house}/tokens" | "/houses/{house}/move")
        | ("PUT", "/houses/{house}/rules")
        | ("DELETE", "/houses/{house}/members/{handle}") => Reach::Owner,
        (_, p) if p.starts_with("/houses/{house}") => Reach::OtherHouse,
        ("POST", "/houses") => Reach::Owner,
        (_, p)
            if [
                "/people",
                "/tokens/",
                "/bots",
                "/conversations/",
                "/routines",
                "/usage",
                "/tree",
                "/metrics",
                "/workbench",
                "/executors/",
            ]
            .iter()
            .any(|prefix| p.starts_with(prefix)) =>
        {
            Reach::Owner
        }
        _ => return None,
    })
}

/// `path` aimed at the house `house` (`beta`'s thread, person, file, …).
fn aimed(path: &str, house: &str, token_id: &str) -> String {
    path.replace("{house}", house)
        .replace("{thread}", "plans")
        .replace("{handle}", "bob")
        .replace("{*path}", "notes.md?version=1")
        .replace("{bot}", "alice")
        .replace("{action}", "pause")
        .replace("{id}", token_id)
}

/// A body the route takes, so the refusal is about who asks, never about
/// what was sent.
fn body(method: &Method, path: &str) -> Option<Value> {
    let body = match (method.as_str(), path) {
        ("GET" | "DELETE", _) => return None,
        (_, "/houses") => json!({"name": "gamma"}),
        (_, "/houses/{house}/members") => json!({"human": "eve"}),
        (_, "/houses/{house}/tokens") => json!({"handle": "bob"}),
        (_, "/houses/{house}/move") => json!({"node": "b"}),
        (_, "/houses/{house}/threads") => json!({"name": "x"}),
        (_, "/houses/{house}/threads/{thread}/archive") => json!({"archived": true}),
        (_, "/houses/{house}/threads/{thread}/pin") => json!({"pinned": true}),
        (_, "/houses/{house}/threads/{thread}/messages") => json!({"text": "hi"}),
        (_, "/houses/{house}/files/{*path}") => json!("overwritten"),
        (_, "/requests/{id}") => json!({"answer": "yes"}),
        ("POST", "/bots") => json!({"name": "spy", "title": "Spy", "description": "d"}),
        ("PATCH", "/bots/{bot}") => json!({"description": "d"}),
        (_, "/bots/{bot}/turns") => json!({"text": "hi"}),
        ("POST", "/workbench") => json!({"executor": "pi", "folder": ".", "task": "t"}),
        (_, "/workbench/{id}/steer") => json!({"message": "m"}),
        _ => json!({}),
    };
    Some(body)
}

#[tokio::test]
async fn a_person_of_one_house_reaches_nothing_of_another_by_any_route() {
    let s = Served::start(vec![]).await;
    let beta = s.runtime.house("beta").await.unwrap();
    beta.write_files(
        "bob",
        "",
        vec![NewFile::text("notes.md", "beta's own notes")],
    )
    .await
    .unwrap();
    let bobs_token = beta.tokens().await.unwrap()[0].id.to_string();
    let all = routes();
    assert!(all.len() >= 35, "only {} routes read: {all:?}", all.len());
    let unclassified: Vec<_> = all.iter().filter(|(m, p)| reach(m, p).is_none()).collect();
    assert!(
        unclassified.is_empty(),
        "new routes: say in `reach` who may reach them: {unclassified:?}"
    );

    for (method, path) in &all {
        let target = aimed(path, "beta", &bobs_token);
        let expected = reach(method, path).unwrap();
        if expected == Reach::Public {
            continue;
        }
        if path.ends_with("/events") {
            // A stream refuses before it upgrades.
            let url = format!("{}/api{target}", s.base.replacen("http", "ws", 1));
            let mut request = url.into_client_request().unwrap();
            request.headers_mut().insert(
                "authorization",
                format!("Bearer {}", s.ada).parse().unwrap(),
            );
            let refused = tokio_tungstenite::connect_async(request).await.unwrap_err();
            let code = if expected == Reach::Owner {
                "403"
            } else {
                "404"
            };
            assert!(refused.to_string().contains(code), "{path}: {refused}");
            continue;
        }
        let sent = body(method, path);
        let (status, answer) = s.call(method.clone(), &target, Some(&s.ada), sent).await;
        if path.contains("{house}") {
            // No oracle: `beta` answers as a house that does not exist.
            let nowhere = aimed(path, "nowhere", &bobs_token);
            let (status_nowhere, answer_nowhere) = s
                .call(method.clone(), &nowhere, Some(&s.ada), body(method, path))
                .await;
            assert_eq!(
                (status, answer.to_string()),
                (
                    status_nowhere,
                    answer_nowhere.to_string().replace("nowhere", "beta")
                ),
                "{method} {path}: beta answers unlike a house that does not exist"
            );
        }
        match expected {
            Reach::OtherHouse => {
                assert_eq!(status, StatusCode::NOT_FOUND, "{method} {path}: {answer}")
            }
            Reach::Owner => {
                assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {answer}")
            }
            Reach::Hers => {
                assert_eq!(status, StatusCode::OK, "{method} {path}: {answer}");
                assert!(
                    !answer.to_string().contains("beta"),
                    "{method} {path} shows beta: {answer}"
                );
            }
            Reach::Public => unreachable!(),
        }
    }

    // Nothing of beta changed: its thread, its file, its person, Bob's token.
    let plans = beta.thread("plans").await.unwrap();
    assert_eq!(plans.read(0, 10).await.unwrap().len(), 0);
    assert!(!plans.refresh().await.unwrap().archived);
    let notes = beta.read_file("notes.md", None).await.unwrap();
    assert_eq!(
        (notes.version, notes.bytes.as_slice()),
        (1, &b"beta's own notes"[..])
    );
    let members: Vec<String> = beta
        .members()
        .await
        .unwrap()
        .into_iter()
        .map(|m| m.handle)
        .collect();
    assert_eq!(members, ["bob"]);
    let (status, _) = s.get("/houses/beta/threads", &s.bob).await;
    assert_eq!(status, StatusCode::OK, "Bob's token still works");
    s.stop().await;
}
