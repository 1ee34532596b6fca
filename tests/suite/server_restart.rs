//! A request waiting on a person outlives a restart of the server's
//! process: `troupe serve` stopped while a bot's turn waits for an
//! approval, started again on the same home, lists the request again
//! under the same id, and answering it lets the turn go on — the call
//! runs once, asked once more, not twice (docs/runtime-semantics.md,
//! "Requests that wait on a person").

use reqwest::StatusCode;
use serde_json::json;
use troupe::runtime::model::Turn;

use super::server::{ask_to_clean, clean_the_build, frame, until, Served, GENERAL};

#[tokio::test]
async fn a_restart_keeps_a_pending_approval_and_its_answer_lets_the_turn_go_on() {
    let mut s = Served::start(vec![clean_the_build()]).await;
    let (mut socket, round) = ask_to_clean(&s).await;
    let asked = until(&mut socket, "request", |_| true).await;
    let id = asked["request_id"].as_str().unwrap().to_string();
    drop(socket);

    // The process stops while the turn waits; the next one resumes it.
    s.restart_process(vec![Turn::text("cleaned up").expecting("removed")])
        .await;
    let mut socket = s.watch(&format!("{GENERAL}/events"), &s.ada).await;
    assert_eq!(frame(&mut socket).await["type"], "ready");
    let (_, listed) = s.get("/requests", &s.ada).await;
    let requests = listed["requests"].as_array().unwrap();
    assert_eq!(requests.len(), 1, "asked once, not twice: {listed}");
    assert_eq!(requests[0]["id"], id.as_str(), "{listed}");
    assert_eq!(requests[0]["kind"], "approval");
    assert_eq!(requests[0]["bot"], "alice");
    assert_eq!(requests[0]["call"]["name"], "run_command");

    let (status, body) = s
        .post(
            &format!("/requests/{id}"),
            &s.ada,
            json!({"answer": "once"}),
        )
        .await;
    assert_eq!(status, StatusCode::OK, "{body}");
    let reply = until(&mut socket, "message", |f| {
        f["message"]["author"] == "alice"
    })
    .await;
    assert_eq!(reply["message"]["text"], "cleaned up");
    assert_eq!(reply["round"], round);
    let (_, after) = s.get("/requests", &s.ada).await;
    assert_eq!(after["requests"], json!([]));
    // The old id, answered, is refused with what to do.
    let (status, body) = s
        .post(
            &format!("/requests/{id}"),
            &s.ada,
            json!({"answer": "once"}),
        )
        .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    assert!(body.to_string().contains("GET /api/requests"), "{body}");
    s.stop().await;
}
