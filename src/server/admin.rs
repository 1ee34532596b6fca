//! The node's own routes, for the people who manage it (the house `home`):
//! bots, turns with a bot, routines, usage, the actor tree.

use axum::body::Body as HttpBody;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use troupe_actors::bot::BotSpec;
use troupe_actors::bot_edit::BotEdit;
use troupe_actors::routine::manage::manage_as;
use troupe_runtime::agents::RoutineRequest;
use troupe_runtime::home::MAIN_AGENT;
use troupe_runtime::id::ConversationId;
use troupe_runtime::protocol::ToolStatus;
use troupe_runtime::store::usage;

use super::auth::Caller;
use super::error::{ApiError, Body};
use super::AppState;

/// `GET /api/bots`: every bot with its definition.
pub async fn bots(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    Ok(Json(json!({ "bots": state.node().bots() })))
}

/// `POST /api/bots`: makes a bot from its definition (`name`, `mission`,
/// `model`, `tools`, … as in `troupe bots`); 201 with it.
pub async fn create_bot(
    State(state): State<AppState>,
    caller: Caller,
    Body(spec): Body<BotSpec>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require_owner()?;
    let record = state.node().create_bot(spec).await?;
    Ok((StatusCode::CREATED, Json(json!({ "bot": record }))))
}

/// `PATCH /api/bots/{bot}`: changes a bot's model, title, description or
/// mission (what the body names); the conversations it starts from now on
/// run with them. A model that cannot be used is refused with why.
pub async fn edit_bot(
    State(state): State<AppState>,
    caller: Caller,
    Path(bot): Path<String>,
    Body(edit): Body<BotEdit>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let spec = state.node().edit_bot(&bot, edit).await?;
    Ok(Json(json!({ "bot": state.node().bot(&spec.name)? })))
}

/// `DELETE /api/bots/{bot}`: removes a bot — archived with its history,
/// out of every house, its routines deleted. 404 for an unknown bot, 400
/// for the main agent.
pub async fn remove_bot(
    State(state): State<AppState>,
    caller: Caller,
    Path(bot): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let removed = state.node().remove_bot(&bot).await?;
    Ok(Json(json!({ "removed": removed })))
}

/// Body of `POST /api/bots/{bot}/turns`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTurn {
    /// The user message.
    text: String,
    /// The conversation (the bot's latest when left out).
    conversation: Option<String>,
    /// Start a new conversation instead.
    #[serde(default)]
    new_conversation: bool,
}

/// `POST /api/bots/{bot}/turns`: one turn, streamed as NDJSON — one
/// `AgentEvent` per line as it happens, then `{"report": TurnReport}`.
/// Approvals and questions asked on the way are answered through
/// `/api/requests`.
pub async fn turn(
    State(state): State<AppState>,
    caller: Caller,
    Path(bot): Path<String>,
    Body(body): Body<NewTurn>,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let node = state.node();
    // Refused at once, with the reason, when the bot's model cannot be used.
    node.check_model(&bot)?;
    let conversation = match (body.conversation, body.new_conversation) {
        (Some(_), true) => {
            return Err(ApiError::BadRequest(
                "give `conversation` or `new_conversation`, not both".into(),
            ))
        }
        (Some(id), false) => id
            .parse::<ConversationId>()
            .map_err(|e| ApiError::BadRequest(format!("`{id}` is not a conversation id: {e}")))?,
        (None, true) => node.new_conversation(&bot, Default::default()).await?,
        (None, false) => node.latest_conversation(&bot).await?,
    };
    let (mut events, done) = node.send(conversation, body.text).await?;
    let lines = async_stream(move |tx| async move {
        while let Some(event) = events.recv().await {
            if let Ok(line) = serde_json::to_string(&event) {
                if tx.send(format!("{line}\n")).await.is_err() {
                    return;
                }
            }
        }
        let last = match done.await {
            Ok(report) => json!({ "report": report }),
            Err(_) => {
                json!({ "error": "the turn's conversation stopped before it ended; it resumes at the next start" })
            }
        };
        let _ = tx.send(format!("{last}\n")).await;
    });
    Ok((
        [(header::CONTENT_TYPE, "application/x-ndjson")],
        HttpBody::from_stream(lines),
    )
        .into_response())
}

/// A stream of the lines `fill` sends.
fn async_stream<F, Fut>(
    fill: F,
) -> impl futures::Stream<Item = Result<String, std::convert::Infallible>>
where
    F: FnOnce(tokio::sync::mpsc::Sender<String>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = tokio::sync::mpsc::channel(64);
    tokio::spawn(fill(tx));
    futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|line| (Ok(line), rx))
    })
}

/// `GET /api/routines`: every bot's routines, with their next fire.
pub async fn routines(
    State(state): State<AppState>,
    caller: Caller,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let result = manage_as(
        state.node(),
        MAIN_AGENT,
        RoutineRequest {
            action: "list".into(),
            job_id: None,
            name: None,
            prompt: None,
            schedule: None,
        },
    )
    .await;
    Ok(Json(
        json!({ "routines": result.data.get("routines").cloned().unwrap_or(result.data), "text": result.text }),
    ))
}

/// `POST /api/routines/{id}/{pause|resume|run}`.
pub async fn routine_action(
    State(state): State<AppState>,
    caller: Caller,
    Path((id, action)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    if !matches!(action.as_str(), "pause" | "resume" | "run") {
        return Err(ApiError::NotFound(format!(
            "no routine action `{action}`: use pause, resume or run"
        )));
    }
    let result = manage_as(
        state.node(),
        MAIN_AGENT,
        RoutineRequest {
            action,
            job_id: Some(id),
            name: None,
            prompt: None,
            schedule: None,
        },
    )
    .await;
    match result.status {
        ToolStatus::Ok => Ok(Json(json!({ "text": result.text, "routine": result.data }))),
        _ if result.text.contains("no routine") => Err(ApiError::NotFound(result.text)),
        _ => Err(ApiError::BadRequest(result.text)),
    }
}

/// `GET /api/usage`: tokens and cost by bot and day, the latest day first.
pub async fn usage(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let rows = state
        .node()
        .store()
        .read(usage::by_bot_and_day)
        .await
        .map_err(|e| ApiError::Internal(e.to_string()))?;
    let bots = state.node().bots();
    let rows: Vec<Value> = rows
        .into_iter()
        .map(|r| {
            let name = bots
                .iter()
                .find(|b| b.id == r.bot)
                .map(|b| b.spec.name.clone());
            json!({
                "day": r.day, "bot": name, "bot_id": r.bot, "calls": r.total.calls,
                "usage": r.total.usage, "cost_usd": r.total.cost_usd,
            })
        })
        .collect();
    Ok(Json(json!({ "usage": rows })))
}

/// `GET /api/tree`: the live actors (kind, id, parent, state, restarts).
pub async fn tree(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let mut tree = json!({ "actors": state.node().tree().await });
    if let Some(cluster) = state.inner.options.cluster.as_ref() {
        tree["cluster"] = cluster.members_with_houses().await;
    } else if let Some(cluster) = state.node().cluster_members() {
        tree["cluster"] = cluster;
    }
    Ok(Json(tree))
}
