//! `delegate action: account`: an account's login, run for a bot only
//! once the user said yes.
//!
//! Logging an account in hands the harness's credentials for a
//! subscription to troupe: only the user decides that, so the user is
//! asked every time — past auto mode and the guardian, which judge calls
//! on the user's behalf, and never in an unattended run (nobody there to
//! ask: refused). Once approved, troupe runs the harness's own login
//! (`troupe_runtime::executors::login`, as `troupe executors login` does)
//! and passes the URL of its browser flow to the user (a notice on the
//! conversation, and the call's result, which the bot relays). A login
//! that ends at once is checked at once (an email another account holds is
//! refused, naming it); one that waits for the browser goes on in the
//! background, for at most [`LOGIN_WAIT`], and its end is a notice.

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader};
use troupe_runtime::executors::login;
use troupe_runtime::protocol::{AgentEvent, ToolCall, ToolResult};
use troupe_runtime::tool::ToolContext;
use troupe_runtime::trust::ApprovalAnswer;

use crate::channel::Reply;
use crate::delegation::Delegations;
use crate::node::Node;

/// How long the login has to show its URL (or end).
const URL_WAIT: Duration = Duration::from_secs(30);

/// How long a login that showed its URL may wait for the browser.
const LOGIN_WAIT: Duration = Duration::from_secs(15 * 60);

/// How long a login that showed its URL has to end on its own before the
/// call returns (a login that needs no browser ends within it).
const END_GRACE: Duration = Duration::from_secs(3);

/// The topic of the notices a login posts.
const TOPIC: &str = "executors";

impl Delegations {
    /// Logs `target` (`NAME@ACCOUNT`) in with its harness's own login, once
    /// the user approved.
    pub(crate) async fn log_in(&self, node: &Node, ctx: &ToolContext, target: &str) -> ToolResult {
        // The accounts as the node read them at its start, like every
        // other use of them (`troupe executors login` reads the file).
        let executors = node.settings().executors.clone();
        let mut prepared = match login::prepare(node.home(), &executors, target, None) {
            Ok(prepared) => prepared,
            Err(e) => return ToolResult::error(e),
        };
        let target = prepared.target();
        if let Err(refused) = approved(node, ctx, &target, &prepared).await {
            return refused;
        }
        let command = std::mem::replace(&mut prepared.command, std::process::Command::new("true"));
        let mut command = tokio::process::Command::from(command);
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = match command.spawn() {
            Ok(child) => child,
            Err(e) => {
                return ToolResult::error(format!(
                    "{}'s login could not start: {e}",
                    prepared.executor
                ))
            }
        };
        // Its words, both streams, line by line, until it ends.
        let (tx, mut lines) = tokio::sync::mpsc::unbounded_channel::<String>();
        for stream in [
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn tokio::io::AsyncRead + Send + Unpin>),
        ]
        .into_iter()
        .flatten()
        {
            let tx = tx.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream).lines();
                while let Ok(Some(line)) = reader.next_line().await {
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            });
        }
        drop(tx);
        let mut said = Vec::new();
        let url = tokio::time::timeout(URL_WAIT, async {
            while let Some(line) = lines.recv().await {
                let found = login::url_in(&line).map(str::to_string);
                said.push(line);
                if found.is_some() {
                    return found;
                }
            }
            None
        })
        .await
        .ok()
        .flatten();
        let notice = node.emitter(ctx.conversation);
        if let Some(url) = &url {
            notice.emit(AgentEvent::Notice {
                topic: TOPIC.into(),
                text: format!("To log {target} in, open {url} in your browser."),
            });
        }
        let ended = tokio::time::timeout(
            if url.is_some() { END_GRACE } else { URL_WAIT },
            child.wait(),
        )
        .await;
        let home = node.home().clone();
        match ended {
            Ok(status) => {
                let ok = status.as_ref().is_ok_and(|s| s.success());
                let how = match status {
                    Ok(s) => s.to_string(),
                    Err(e) => e.to_string(),
                };
                let end = conclude(&home, &executors, &prepared, ok, &how, &said);
                match (end, url) {
                    (Ok(done), Some(url)) => {
                        ToolResult::ok(format!("{target}'s login showed {url}; {done}"))
                    }
                    (Ok(done), None) => ToolResult::ok(done),
                    (Err(e), _) => ToolResult::error(e),
                }
            }
            Err(_) => {
                let Some(url) = url else {
                    let _ = child.kill().await;
                    return ToolResult::error(format!(
                        "{}'s login showed no URL within {} s and was stopped; the user can run \
                         `troupe executors login {target}` in a terminal instead",
                        prepared.executor,
                        URL_WAIT.as_secs()
                    ));
                };
                let waiting = target.clone();
                tokio::spawn(async move {
                    let target = waiting;
                    let ended = tokio::time::timeout(LOGIN_WAIT, child.wait()).await;
                    let text = match ended {
                        Ok(status) => {
                            let ok = status.as_ref().is_ok_and(|s| s.success());
                            let how = match status {
                                Ok(s) => s.to_string(),
                                Err(e) => e.to_string(),
                            };
                            match conclude(&home, &executors, &prepared, ok, &how, &[]) {
                                Ok(done) => done,
                                Err(e) => e,
                            }
                        }
                        Err(_) => {
                            let _ = child.kill().await;
                            format!(
                                "{target}'s login was not completed within {} min and was \
                                 stopped; ask again to log in",
                                LOGIN_WAIT.as_secs() / 60
                            )
                        }
                    };
                    notice.emit(AgentEvent::Notice {
                        topic: TOPIC.into(),
                        text,
                    });
                });
                ToolResult::ok(format!(
                    "{target}'s login waits for the user: they open {url} in their browser (it \
                     was shown to them) and sign in; a notice says when it is done."
                ))
            }
        }
    }
}

/// What a login that ended came to: whom the account is logged in as, or
/// why it is not.
fn conclude(
    home: &troupe_runtime::home::Home,
    executors: &troupe_runtime::config::Executors,
    prepared: &login::Prepared,
    succeeded: bool,
    how: &str,
    said: &[String],
) -> Result<String, String> {
    let target = prepared.target();
    if !succeeded {
        let tail: Vec<&str> = said
            .iter()
            .rev()
            .take(5)
            .rev()
            .map(String::as_str)
            .collect();
        return Err(format!(
            "{}'s login ended without logging {target} in ({how}){}; ask again, or the user runs \
             `troupe executors login {target}` in a terminal",
            prepared.executor,
            if tail.is_empty() {
                String::new()
            } else {
                format!(": {}", tail.join(" / "))
            }
        ));
    }
    Ok(match login::finish(home, executors, prepared)? {
        Some(email) => format!("{target} is logged in as {email}."),
        None => format!("{target} is logged in."),
    })
}

/// Asks the user whether `target` may be logged in: every time, whatever
/// the trust mode; `Err` is the refusal to return.
async fn approved(
    node: &Node,
    ctx: &ToolContext,
    target: &str,
    prepared: &login::Prepared,
) -> Result<(), ToolResult> {
    let reason = format!(
        "`{}` asks to log {target} in: troupe runs {}'s own login (its browser flow; you open \
         its URL and sign in), its credentials kept in {}. Logging an account in is asked \
         about every time",
        ctx.agent,
        prepared.executor,
        prepared.dir.display()
    );
    let call = ToolCall {
        id: ctx.call_id.clone(),
        name: "delegate".into(),
        arguments: serde_json::json!({"action": "account", "executor": target}),
    };
    let timeout = node.settings().ask_timeout;
    let reply = node
        .questions()
        .ask(ctx, timeout, |request_id| AgentEvent::ApprovalRequested {
            request_id,
            call,
            reason: reason.clone(),
        })
        .await;
    let refused = |how: &str| {
        Err(ToolResult::error(format!(
            "logging {target} in needs the user's approval, and {how}; nothing was run. The user \
             can run `troupe executors login {target}` in a terminal."
        )))
    };
    match reply {
        Reply::Submitted { answer } => match crate::gate::parse_approval(&answer) {
            Some(ApprovalAnswer::Deny) | None => refused("the user refused"),
            Some(_) => Ok(()),
        },
        Reply::Cancelled => refused("the request was cancelled"),
        Reply::TimedOut => refused("nobody answered in time"),
        Reply::Undelivered { reason } => refused(&format!("it could not be asked: {reason}")),
    }
}
