//! The workbench over HTTP, for the node's owner: the outside executors'
//! instances (docs/executors.md) — list, one with its record, its events
//! live over a WebSocket, start one of the user's own, steer, stop.

use axum::extract::ws::{Message, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use serde::Deserialize;
use serde_json::{json, Value};
use troupe_actors::delegation::executor::{check_folder, Place};
use troupe_actors::delegation::executors::{Start, USER};
use troupe_actors::delegation::record;
use troupe_runtime::id::ConversationId;

use super::auth::Caller;
use super::error::{ApiError, Body};
use super::AppState;

fn internal(e: impl std::fmt::Display) -> ApiError {
    ApiError::Internal(e.to_string())
}

/// `GET /api/workbench`: running instances first, then the latest ended.
pub async fn list(State(state): State<AppState>, caller: Caller) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let all = state
        .node()
        .store()
        .read(|c| record::instances(c, false, 50))
        .await
        .map_err(internal)?;
    Ok(Json(
        json!({ "instances": all.iter().map(record::Instance::to_json).collect::<Vec<_>>() }),
    ))
}

/// `GET /api/workbench/{id}`: one instance and its record.
pub async fn show(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let key = id.clone();
    let found = state
        .node()
        .store()
        .read(move |c| {
            let all = record::instances(c, false, usize::MAX)?;
            let Some(i) = all.into_iter().find(|i| i.row.id.to_string() == key) else {
                return Ok(None);
            };
            let events = record::events_of(c, i.row.id, 0, usize::MAX)?;
            Ok(Some((i, events)))
        })
        .await
        .map_err(internal)?;
    let (instance, events) =
        found.ok_or_else(|| ApiError::NotFound(format!("no executor instance {id}")))?;
    let mut value = instance.to_json();
    value["events"] = events
        .iter()
        .map(|(seq, kind, text, at)| json!({"seq": seq, "kind": kind, "text": text, "at": at}))
        .collect();
    Ok(Json(json!({ "instance": value })))
}

/// What `POST /api/workbench` starts.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StartBody {
    /// The executor (`pi`).
    executor: String,
    /// The folder it works in, on the server's machine.
    folder: String,
    /// The task.
    task: String,
}

/// `POST /api/workbench`: starts an instance of the user's own; 201 with it.
pub async fn start(
    State(state): State<AppState>,
    caller: Caller,
    Body(body): Body<StartBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    caller.require_owner()?;
    let node = state.node();
    if body.task.trim().is_empty() {
        return Err(ApiError::BadRequest("`task` is empty".into()));
    }
    if troupe_runtime::executors::installed(node.home(), &body.executor).is_none() {
        return Err(ApiError::BadRequest(format!(
            "executor `{}` is not installed; `troupe executors install {}` installs it",
            body.executor, body.executor
        )));
    }
    let folder = check_folder(node.home(), &node.settings().cwd, &body.folder)
        .map_err(ApiError::BadRequest)?;
    let delegations = node
        .delegations()
        .ok_or_else(|| ApiError::Internal("the node's delegations are not running".into()))?;
    let started = delegations
        .start_instances(
            node,
            Start {
                executor: body.executor.clone(),
                owner: USER.into(),
                parent: ConversationId::new(),
                model: node.settings().default_model.clone(),
                // The report stays in the record: nobody's mailbox waits for it.
                waits: true,
                tasks: vec![(body.task, String::new(), folder, Place::Host)],
                report_to: None,
                session: None,
            },
        )
        .await
        .map_err(|e| ApiError::BadRequest(e.text))?;
    Ok((
        StatusCode::CREATED,
        Json(json!({
            "id": started.instances[0].to_string(),
            "delegation": started.delegation.to_string(),
        })),
    ))
}

/// What `POST /api/workbench/{id}/steer` says.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SteerBody {
    /// The message.
    message: String,
}

/// `POST /api/workbench/{id}/steer`.
pub async fn steer(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    Body(body): Body<SteerBody>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let node = state.node();
    let delegations = node
        .delegations()
        .ok_or_else(|| ApiError::Internal("the node's delegations are not running".into()))?;
    delegations
        .steer_by_id(node, &id, body.message)
        .await
        .map_err(ApiError::BadRequest)?;
    Ok(Json(json!({ "steered": id })))
}

/// `POST /api/workbench/{id}/stop`: its report says what it had so far.
pub async fn stop(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    caller.require_owner()?;
    let node = state.node();
    let sub = id
        .parse()
        .map_err(|_| ApiError::NotFound(format!("no executor instance {id}")))?;
    let delegations = node
        .delegations()
        .ok_or_else(|| ApiError::Internal("the node's delegations are not running".into()))?;
    delegations.stop_instance(node, sub).await;
    Ok(Json(json!({ "stopping": id })))
}

/// Events of the record read at a time.
const EVENTS_PAGE: usize = 500;

/// `GET /api/workbench/{id}/events` (WebSocket): the instance's record so
/// far, then each event as it is committed, then its end; the server
/// closes the socket after the end frame. Frames: `{"type": "event",
/// "seq", "kind", "text", "at"}` and `{"type": "end", "status",
/// "result"}`.
pub async fn events(
    State(state): State<AppState>,
    caller: Caller,
    Path(id): Path<String>,
    upgrade: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    caller.require_owner()?;
    let node = state.node().clone();
    let delegations = node
        .delegations()
        .ok_or_else(|| ApiError::Internal("the node runs no delegations".into()))?;
    let key = id.clone();
    let sub = node
        .store()
        .read(move |c| record::instance(c, &key))
        .await
        .map_err(internal)?
        .ok_or_else(|| ApiError::NotFound(format!("no executor instance {id}")))?
        .id;
    // Subscribed before the first read: no commit falls between the two.
    let mut changes = delegations.record_changes();
    let stop = state.stopping().clone();
    Ok(
        super::events::small(upgrade).on_upgrade(move |mut socket| async move {
            let mut seen = 0_i64;
            loop {
                let after = seen;
                let read = node
                    .store()
                    .read(move |c| {
                        let events = record::events_of(c, sub, after, EVENTS_PAGE)?;
                        let row = record::instance(c, &sub.to_string())?;
                        Ok((events, row))
                    })
                    .await;
                let Ok((events, row)) = read else {
                    let _ = socket.send(Message::Close(None)).await;
                    return;
                };
                let full = events.len() == EVENTS_PAGE;
                for (seq, kind, text, at) in events {
                    seen = seq;
                    let frame =
                        json!({"type": "event", "seq": seq, "kind": kind, "text": text, "at": at});
                    if socket
                        .send(Message::Text(frame.to_string().into()))
                        .await
                        .is_err()
                    {
                        return;
                    }
                }
                if full {
                    continue;
                }
                if let Some(row) = row.filter(|r| r.status != "running") {
                    let end = json!({"type": "end", "status": row.status, "result": row.result});
                    let _ = socket.send(Message::Text(end.to_string().into())).await;
                    let _ = socket.send(Message::Close(None)).await;
                    return;
                }
                tokio::select! {
                    biased;
                    () = stop.cancelled() => {
                        let _ = socket.send(Message::Close(None)).await;
                        return;
                    }
                    changed = changes.changed() => if changed.is_err() {
                        let _ = socket.send(Message::Close(None)).await;
                        return;
                    },
                    incoming = socket.recv() => match incoming {
                        None | Some(Err(_)) | Some(Ok(Message::Close(_))) => return,
                        Some(Ok(_)) => {}
                    },
                }
            }
        }),
    )
}
