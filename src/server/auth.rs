//! Who a request speaks for, what it may see, and how fast it may ask.
//!
//! A request presents a member's token as `Authorization: Bearer …` (a
//! browser's WebSocket on an event stream, which cannot set headers, as
//! `?access_token=…`; anywhere else a query token is refused).
//! The token speaks for one person of one house: that house is all the
//! request sees, and any other house answers 404, exactly as a house that
//! does not exist.
//!
//! The home's owner is whoever the kernel says is troupe's own user on the
//! owner's Unix socket (`<home>/serve.sock`, mode 0600, see
//! [`super::connections::serve_owner`]): the home's CLI talks there, sees
//! every house and manages the node. No secret is written anywhere a
//! command could read it, and no address is trusted for being loopback.
//! People of the house `home` manage the node with their tokens too.
//!
//! With `server.auth = "open"` (a loopback address only) a request without
//! a token reads and posts in every house as the home's first person, but
//! does not manage the node nor answer the approvals of conversations
//! outside any house: those stay with the owner.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use axum::extract::{ConnectInfo, FromRequestParts, Request, State};
use axum::http::request::Parts;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use dashmap::DashMap;
use troupe_actors::house::HouseRef;
use troupe_runtime::protocol::house::{Member, MemberKind};

use super::error::ApiError;
use super::AppState;

/// Whether requests need a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthMode {
    /// Every request but health presents a member's token.
    Tokens,
    /// No token needed: a request reads and posts in every house as the
    /// home's first person, but manages nothing. Loopback only.
    Open,
}

/// The house every home has, whose people own the machine.
pub const HOME_HOUSE: &str = "home";

/// Who a request speaks for.
#[derive(Debug, Clone)]
pub struct Caller {
    /// The person.
    pub member: Member,
    /// Their house.
    pub house: HouseRef,
    /// Sees every house (the home's CLI, or an open server).
    pub everywhere: bool,
    /// Manages the node: the owner's socket, or a person of house `home`
    /// with their token.
    pub manages: bool,
    /// The token's id, when a token was presented.
    pub token: Option<String>,
}

impl Caller {
    /// The house named `name`, if this caller may see it; else 404, the
    /// same answer as for a house that does not exist.
    pub async fn house(&self, state: &AppState, name: &str) -> Result<HouseRef, ApiError> {
        if self.everywhere {
            return state.node().house(name).await.map_err(|_| no_house(name));
        }
        if self.house.house.name.eq_ignore_ascii_case(name)
            || self.house.house.id.to_string() == name
        {
            return Ok(self.house.clone());
        }
        Err(no_house(name))
    }

    /// Who a write is by: the caller, or — for a caller who sees every
    /// house (the home's own CLI) — the member `asked` names.
    pub fn author(&self, asked: Option<String>) -> Result<String, ApiError> {
        match asked {
            Some(a) if self.everywhere => Ok(a),
            Some(a) if a.eq_ignore_ascii_case(&self.member.handle) => Ok(a),
            Some(_) => Err(ApiError::Forbidden(
                "a member posts and writes as themselves; leave out `as`".into(),
            )),
            None => Ok(self.member.handle.clone()),
        }
    }

    /// Whether this caller manages the node (bots, routines, usage, tree).
    pub fn manages_node(&self) -> bool {
        self.manages
    }

    /// Refuses a caller who does not manage the node.
    pub fn require_owner(&self) -> Result<(), ApiError> {
        if self.manages_node() {
            Ok(())
        } else {
            Err(ApiError::Forbidden(if self.token.is_none() {
                format!(
                    "an open server (`server.auth = \"open\"`) does not let a request without a token manage the node's bots, routines, usage and actors; \
                     use the CLI on this machine, or a token of a person of the house `{HOME_HOUSE}`"
                )
            } else {
                format!(
                    "only people of the house `{HOME_HOUSE}` manage the node's bots, routines, usage and actors; `{}` is a person of `{}`",
                    self.member.handle, self.house.house.name
                )
            }))
        }
    }
}

fn no_house(name: &str) -> ApiError {
    ApiError::NotFound(format!("no house `{name}`"))
}

impl FromRequestParts<AppState> for Caller {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &AppState) -> Result<Self, ApiError> {
        parts
            .extensions
            .get::<Caller>()
            .cloned()
            .ok_or_else(|| ApiError::Unauthorized("no token".into()))
    }
}

/// The token a request presents.
fn presented(request: &Request) -> Option<String> {
    if let Some(value) = request.headers().get(axum::http::header::AUTHORIZATION) {
        let value = value.to_str().ok()?;
        let (scheme, token) = value.split_once(' ')?;
        return scheme
            .eq_ignore_ascii_case("bearer")
            .then(|| token.trim().to_string());
    }
    if super::origin::query_token_allowed(request) {
        let query = request.uri().query()?;
        return query
            .split('&')
            .find_map(|pair| pair.strip_prefix("access_token=").map(percent_decode));
    }
    None
}

/// Whether the query carries `access_token`.
fn has_query_token(request: &Request) -> bool {
    request
        .uri()
        .query()
        .is_some_and(|q| q.split('&').any(|pair| pair.starts_with("access_token=")))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match (bytes[i], bytes.get(i + 1..i + 3)) {
            (b'%', Some(hex)) => match std::str::from_utf8(hex)
                .ok()
                .and_then(|h| u8::from_str_radix(h, 16).ok())
            {
                Some(b) => {
                    out.push(b);
                    i += 3;
                    continue;
                }
                None => out.push(b'%'),
            },
            (b'+', _) => out.push(b' '),
            (b, _) => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The middleware of every `/api/` route but health: authenticates, then
/// rate-limits by token.
pub async fn require(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    let peer = request
        .extensions()
        .get::<ConnectInfo<SocketAddr>>()
        .map(|c| c.0.ip().to_string())
        .unwrap_or_default();
    if !super::origin::query_token_allowed(&request) && has_query_token(&request) {
        return ApiError::Unauthorized(
            "a token in the query (`access_token`) is taken only when opening an event stream's WebSocket; \
             send it as `Authorization: Bearer <token>`"
                .into(),
        )
        .into_response();
    }
    if request
        .extensions()
        .get::<super::connections::OwnerSocket>()
        .is_some()
    {
        // The owner's own socket: no token, no rate limit.
        return match owner(&state, true).await {
            Ok(caller) => {
                request.extensions_mut().insert(caller);
                next.run(request).await
            }
            Err(e) => e.into_response(),
        };
    }
    let secret = presented(&request);
    let caller = match identify(&state, secret.as_deref()).await {
        Ok(c) => c,
        Err(e) => {
            // Failed attempts are limited by address, so guessing is slow.
            if let Err(limited) = state.inner.limiter.take(&format!("addr:{peer}")) {
                return limited.into_response();
            }
            return e.into_response();
        }
    };
    let key = caller
        .token
        .clone()
        .map_or_else(|| format!("addr:{peer}"), |t| format!("token:{t}"));
    if let Err(limited) = state.inner.limiter.take(&key) {
        return limited.into_response();
    }
    request.extensions_mut().insert(caller);
    next.run(request).await
}

async fn identify(state: &AppState, secret: Option<&str>) -> Result<Caller, ApiError> {
    match secret {
        Some(s) => match state.node().authenticate(s).await? {
            Some(found) => Ok(Caller {
                member: found.member,
                manages: found.house.house.name == HOME_HOUSE,
                house: found.house,
                everywhere: false,
                token: Some(found.token),
            }),
            None => Err(ApiError::Unauthorized(
                "this token is unknown or revoked; ask the house's owner for a new one (`troupe token issue HOUSE HANDLE`)".into(),
            )),
        },
        None if state.inner.options.auth == AuthMode::Open => owner(state, false).await,
        None => Err(ApiError::Unauthorized(
            "send a member's token as `Authorization: Bearer <token>`; `troupe house add HOUSE --human HANDLE` prints one".into(),
        )),
    }
}

/// The first person of the house `home`, seeing every house; managing the
/// node when `manages` (the owner's socket, not an open server).
async fn owner(state: &AppState, manages: bool) -> Result<Caller, ApiError> {
    let house = state.node().house(HOME_HOUSE).await?;
    let member = house
        .members()
        .await?
        .into_iter()
        .find(|m| m.kind == MemberKind::Human)
        .unwrap_or_else(|| Member {
            handle: "owner".into(),
            kind: MemberKind::Human,
            display_name: "owner".into(),
            listen: None,
            bot: None,
        });
    Ok(Caller {
        member,
        house,
        everywhere: true,
        manages,
        token: None,
    })
}

/// Requests allowed per key: a bucket of `burst` refilled at `per_second`.
#[derive(Debug, Clone, Copy)]
pub struct RateLimit {
    /// Sustained requests per second.
    pub per_second: f64,
    /// Requests allowed at once.
    pub burst: f64,
}

impl Default for RateLimit {
    fn default() -> Self {
        Self {
            per_second: 50.0,
            burst: 200.0,
        }
    }
}

/// Token buckets by key.
pub(crate) struct Limiter {
    limit: RateLimit,
    buckets: Arc<DashMap<String, (f64, Instant)>>,
}

impl Limiter {
    pub(crate) fn new(limit: RateLimit) -> Self {
        Self {
            limit,
            buckets: Arc::default(),
        }
    }

    /// Takes one request from `key`'s bucket, or says when to come back.
    pub(crate) fn take(&self, key: &str) -> Result<(), ApiError> {
        let now = Instant::now();
        let mut entry = self
            .buckets
            .entry(key.to_string())
            .or_insert((self.limit.burst, now));
        let (tokens, at) = *entry;
        let tokens = (tokens + now.duration_since(at).as_secs_f64() * self.limit.per_second)
            .min(self.limit.burst);
        if tokens >= 1.0 {
            *entry = (tokens - 1.0, now);
            Ok(())
        } else {
            *entry = (tokens, now);
            let wait = ((1.0 - tokens) / self.limit.per_second).ceil().max(1.0) as u64;
            Err(ApiError::RateLimited(wait))
        }
    }
}
