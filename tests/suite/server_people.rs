//! The owner's routes for people, tokens and bots over real HTTP, while
//! the server runs: a person of the house `home` adds someone to `acme`
//! and their new token signs in at once; tokens issued and revoked;
//! members taken out; a bot's listen mode and definition changed; and
//! every refusal (a person of another house, bad bodies, unknown names).

use reqwest::{Method, StatusCode};
use serde_json::json;
use troupe::runtime::model::Turn;

use super::server::Served;

#[tokio::test]
async fn the_owner_adds_a_person_whose_new_token_signs_in_while_the_server_runs() {
    let s = Served::start(vec![Turn::text("hi")]).await;
    let home = s.runtime.house("home").await.unwrap();
    home.add_human("olga", Some("Olga")).await.unwrap();
    let olga = home.issue_token("olga").await.unwrap().secret;

    // A person of another house manages nothing here.
    for (method, path, body) in [
        (Method::GET, "/people", None),
        (Method::POST, "/houses", Some(json!({"name": "gamma"}))),
        (
            Method::POST,
            "/houses/acme/members",
            Some(json!({"human": "eve"})),
        ),
        (Method::DELETE, "/houses/acme/members/alice", None),
        (
            Method::POST,
            "/houses/acme/tokens",
            Some(json!({"handle": "ada"})),
        ),
        (Method::DELETE, "/tokens/anything", None),
        (
            Method::PATCH,
            "/bots/alice",
            Some(json!({"title": "Mallory"})),
        ),
    ] {
        let (status, body) = s.call(method.clone(), path, Some(&s.ada), body).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{method} {path}: {body}");
    }

    // Olga, of the house `home`, adds Carol to `acme`: her token comes back.
    let (status, added) = s
        .post(
            "/houses/acme/members",
            &olga,
            json!({"human": "carol", "name": "Carol"}),
        )
        .await;
    assert_eq!(status, StatusCode::CREATED, "{added}");
    assert_eq!(added["member"]["display_name"], "Carol");
    let carol = added["token"]["secret"].as_str().unwrap().to_string();
    let first_id = added["token"]["id"].as_str().unwrap().to_string();
    let (status, me) = s.get("/me", &carol).await;
    assert_eq!(status, StatusCode::OK, "{me}");
    assert_eq!(
        (me["handle"].as_str(), me["house"]["name"].as_str()),
        (Some("carol"), Some("acme"))
    );
    let (status, threads) = s.get("/houses/acme/threads", &carol).await;
    assert_eq!(status, StatusCode::OK, "{threads}");
    // Again: her name changes, no second token.
    let (status, again) = s
        .post(
            "/houses/acme/members",
            &olga,
            json!({"human": "carol", "name": "Carol B."}),
        )
        .await;
    assert_eq!(
        (status, again.get("token")),
        (StatusCode::OK, None),
        "{again}"
    );

    // The people view lists her and her token, never a secret.
    let (status, people) = s.get("/people", &olga).await;
    assert_eq!(status, StatusCode::OK);
    let acme = people["houses"]
        .as_array()
        .unwrap()
        .iter()
        .find(|h| h["house"]["name"] == "acme")
        .unwrap();
    assert!(acme["members"]
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["display_name"] == "Carol B."));
    let tokens = acme["tokens"].as_array().unwrap();
    assert!(tokens
        .iter()
        .any(|t| t["id"] == first_id.as_str() && t["handle"] == "carol"));
    assert!(!people.to_string().contains(&carol), "a secret is listed");

    // A second token; the first revoked stops working, the second does not.
    let (status, second) = s
        .post("/houses/acme/tokens", &s.owner, json!({"handle": "carol"}))
        .await;
    assert_eq!(status, StatusCode::CREATED, "{second}");
    let second = second["token"]["secret"].as_str().unwrap().to_string();
    let (status, _) = s
        .call(
            Method::DELETE,
            &format!("/tokens/{first_id}"),
            Some(&olga),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.get("/me", &carol).await.0, StatusCode::UNAUTHORIZED);
    assert_eq!(s.get("/me", &second).await.0, StatusCode::OK);
    let (status, gone) = s
        .call(
            Method::DELETE,
            &format!("/tokens/{first_id}"),
            Some(&olga),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{gone}");

    // Refusals say what was wrong.
    for (path, body, want) in [
        (
            "/houses/acme/members",
            json!({"human": "x", "bot": "alice"}),
            StatusCode::BAD_REQUEST,
        ),
        ("/houses/acme/members", json!({}), StatusCode::BAD_REQUEST),
        (
            "/houses/acme/members",
            json!({"bot": "alice", "listen": "loud"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/houses/acme/members",
            json!({"human": "alice"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/houses/acme/members",
            json!({"human": "bad handle!"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/houses/nope/members",
            json!({"human": "x"}),
            StatusCode::NOT_FOUND,
        ),
        (
            "/houses/acme/tokens",
            json!({"handle": "alice"}),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/houses/acme/tokens",
            json!({"handle": "nobody"}),
            StatusCode::BAD_REQUEST,
        ),
    ] {
        let (status, body) = s.post(path, &olga, body.clone()).await;
        assert_eq!(status, want, "{path}: {body}");
        assert!(!body["error"]["message"].as_str().unwrap().is_empty());
    }
    let (_, bad) = s
        .post(
            "/houses/acme/members",
            &olga,
            json!({"bot": "alice", "listen": "loud"}),
        )
        .await;
    assert_eq!(
        bad["error"]["message"],
        "`listen` must be all, mentions or off, not `loud`"
    );

    // A bot's listen mode, then its definition.
    let (status, bot) = s
        .post(
            "/houses/acme/members",
            &olga,
            json!({"bot": "alice", "listen": "mentions"}),
        )
        .await;
    assert_eq!(
        (status, bot["member"]["listen"].as_str()),
        (StatusCode::OK, Some("mentions"))
    );
    let (status, edited) = s
        .call(
            Method::PATCH,
            "/bots/alice",
            Some(&olga),
            Some(json!({"title": "Alice II"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["bot"]["spec"]["title"], "Alice II");
    let (_, bots) = s.get("/bots", &olga).await;
    assert!(bots["bots"]
        .as_array()
        .unwrap()
        .iter()
        .any(|b| b["spec"]["title"] == "Alice II"));
    // (This home's model is the test's script, so every model spec resolves.)
    let (status, edited) = s
        .call(
            Method::PATCH,
            "/bots/alice",
            Some(&olga),
            Some(json!({"model": "openai:gpt-5-mini"})),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{edited}");
    assert_eq!(edited["bot"]["spec"]["model"], "openai:gpt-5-mini");
    assert_eq!(edited["bot"]["spec"]["title"], "Alice II");
    let (status, _) = s
        .call(
            Method::PATCH,
            "/bots/alice",
            Some(&olga),
            Some(json!({"colour": "red"})),
        )
        .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _) = s
        .call(
            Method::PATCH,
            "/bots/nobody",
            Some(&olga),
            Some(json!({"title": "x"})),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A house made, once.
    let (status, made) = s.post("/houses", &olga, json!({"name": "gamma"})).await;
    assert_eq!(
        (status, made["house"]["name"].as_str()),
        (StatusCode::CREATED, Some("gamma"))
    );
    assert_eq!(
        s.post("/houses", &olga, json!({"name": "gamma"})).await.0,
        StatusCode::CONFLICT
    );

    // Carol taken out: her other token stops working at once.
    let (status, _) = s
        .call(
            Method::DELETE,
            "/houses/acme/members/carol",
            Some(&olga),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(s.get("/me", &second).await.0, StatusCode::UNAUTHORIZED);
    let (status, _) = s
        .call(
            Method::DELETE,
            "/houses/acme/members/carol",
            Some(&olga),
            None,
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    s.stop().await;
}
