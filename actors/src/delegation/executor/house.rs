//! `delegate_task`: pi inside a house thread's environment.
//!
//! The harness's installed files are bound read-only into every
//! environment's sandbox at [`INSIDE`]; its state (its `models.json`, its
//! sessions) lives in the workspace at `/workspace/.troupe/<name>`, so a
//! later task can continue a session. It runs as one job of the
//! environment — pi's JSON mode, one task — whose output the instance
//! reads as the sandbox reads it; its model calls go to the environment's
//! own model relay (`127.0.0.1:3129` on the sandbox's loopback), and it
//! reaches nothing else but the house's egress list. A child thread is
//! opened for it; what it says and the tools it runs are posted there by
//! the bot as it works; its report is posted into the parent thread, in
//! the transaction that records its end.

use std::path::PathBuf;

use ractor::ActorRef;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use troupe_runtime::environment::TaskRequest;
use troupe_runtime::house::Seat;
use troupe_runtime::id::{MsgId, ThreadId};
use troupe_runtime::protocol::house::{MemberKind, Post};
use troupe_runtime::protocol::{Address, Envelope, Payload, ToolResult};
use troupe_runtime::tool::ToolContext;

use super::actor::{ExecutorArgs, ExecutorMsg, Output, Place};
use super::host::Started;
use super::pi::{self, Event};
use crate::environment::relay;
use crate::node::Node;

pub use crate::environment::EXECUTORS_INSIDE as INSIDE;

/// The harness a house's `delegate_task` runs.
pub const HARNESS: &str = "pi";

/// The workspace inside an environment.
const WORKSPACE: &str = troupe_runtime::sandbox::jail::WORKSPACE;

/// Which harness session a task continues.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Continue {
    /// A new session.
    #[default]
    No,
    /// The latest session in the workspace.
    Recent,
    /// This one (an id, or a unique part of it).
    Session(String),
}

/// `text` quoted for bash.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', r"'\''"))
}

/// The folder a repository is cloned into: its name, made safe.
fn repo_dir(repo: &str) -> String {
    let name = repo
        .trim_end_matches('/')
        .rsplit(['/', ':'])
        .next()
        .unwrap_or("repo")
        .trim_end_matches(".git");
    let name: String = name
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'))
        .collect();
    match name.trim_start_matches('.') {
        "" => "repo".into(),
        n => n.to_string(),
    }
}

/// The job that runs the task: pi's state prepared in the workspace, the
/// repository cloned, then pi itself in JSON mode.
fn command(name: &str, entry: &str, model: &str, task: &str, place: &Place) -> String {
    let Place::Environment {
        continued, repo, ..
    } = place
    else {
        return String::new();
    };
    let state = format!("{WORKSPACE}/.troupe/{name}");
    let access = pi::ModelAccess {
        base_url: format!("http://127.0.0.1:{}/v1", relay::PORT),
        api: "openai-completions",
        key: relay::PLACEHOLDER_KEY.into(),
        model: model.into(),
        executor: name.into(),
    };
    let mut lines = vec![
        "set -e".to_string(),
        format!("mkdir -p {state}/sessions"),
        format!(
            "cat > {state}/models.json <<'TROUPE_MODELS'\n{}\nTROUPE_MODELS",
            pi::models_json(&access)
        ),
        format!("cd {WORKSPACE}"),
    ];
    if let Some(repo) = repo {
        let dir = repo_dir(repo);
        lines.push(format!(
            "if [ ! -d {dir}/.git ]; then git clone --quiet -- {} {dir} >>{state}/stderr.log 2>&1; fi",
            quote(repo)
        ));
        lines.push(format!("cd {dir}"));
    }
    for (k, v) in pi::environment(std::path::Path::new(&state)) {
        lines.push(format!("export {k}={}", quote(&v)));
    }
    let mut run = format!(
        "exec node {} --mode json -p --provider {} --model {} --session-dir {state}/sessions",
        quote(entry),
        pi::PROVIDER,
        quote(model)
    );
    match continued {
        Continue::No => {}
        Continue::Recent => run.push_str(" --continue"),
        Continue::Session(id) => run.push_str(&format!(" --session {}", quote(id))),
    }
    run.push_str(&format!(
        " {} 2>>{state}/stderr.log </dev/null",
        quote(task)
    ));
    lines.push(run);
    lines.join("\n")
}

/// Starts the task as a job of the thread's environment; a task reports
/// the job's end.
pub(super) async fn launch(
    args: &ExecutorArgs,
    myself: &ActorRef<ExecutorMsg>,
) -> Result<Started, String> {
    let launch = &args.launch;
    let Place::Environment { sandbox, .. } = &launch.place else {
        return Err("not an environment's instance".into());
    };
    let name = launch.executor.as_str();
    let installed = troupe_runtime::executors::installed(args.node.home(), name).ok_or_else(|| {
        format!("{name} is not installed on this machine; the house's owner runs `troupe executors install {name}`")
    })?;
    let entry = PathBuf::from(INSIDE)
        .join(name)
        .join("node_modules")
        .join(installed.harness.entry);
    let model = pi::model_id(&launch.model);
    let job = command(
        name,
        &entry.display().to_string(),
        &model,
        &launch.prompt,
        &launch.place,
    );
    let (tap, output) = tokio::sync::mpsc::unbounded_channel();
    let stop = CancellationToken::new();
    let watch = crate::environment::actor::Watch {
        tap,
        cancel: stop.clone(),
    };
    let (node, id, me) = (args.node.clone(), *sandbox, myself.clone());
    let timeout =
        std::time::Duration::from_secs(node.settings().environments.max_command_timeout_secs);
    tokio::spawn(async move {
        let how =
            match crate::environment::api::run_watched(&node, id, &job, Some(timeout), Some(watch))
                .await
            {
                Ok(outcome) => outcome.ending.trim_matches(['[', ']']).to_string(),
                Err(e) => e.to_string(),
            };
        let _ = me.send_message(ExecutorMsg::Exited(how));
    });
    Ok(Started::job(Output::Tap(output), stop))
}

/// Posts what the harness just did into its child thread, as the bot:
/// its messages, and the tools it runs.
pub(super) async fn progress(node: &Node, thread: ThreadId, bot: &str, event: &Event) {
    let text = match event {
        Event::Assistant { text, .. } if !text.trim().is_empty() => text.trim().to_string(),
        Event::ToolStarted(what) => format!("→ {what}"),
        _ => return,
    };
    post(node, thread, bot, text).await;
}

/// A post by `bot` into `thread`, committed, then handed to the thread.
async fn post(node: &Node, thread: ThreadId, bot: &str, text: String) {
    let envelope = Envelope {
        id: MsgId::new(),
        from: Address::Service(super::KIND.into()),
        to: Address::Thread(thread),
        body: Payload::Post(Post {
            author: bot.to_string(),
            author_kind: MemberKind::Bot,
            text,
            round: None,
            depth: 1,
            via: None,
            answers_offer: false,
            failed: None,
            attachments: Vec::new(),
        }),
        sent_at: chrono::Utc::now(),
    };
    if let Err(e) = node.store().send(envelope.clone()).await {
        tracing::warn!(%thread, error = %e, "an executor's progress could not be posted");
        return;
    }
    if let Err(e) = node.route(envelope).await {
        tracing::debug!(%thread, error = %e, "an executor's progress lands when the thread next runs");
    }
}

/// `delegate_task` for the conversation of `ctx`, seated in a house thread.
pub async fn delegate_task(node: &Node, ctx: &ToolContext, task: TaskRequest) -> ToolResult {
    let Some(seat) = Seat::of(ctx) else {
        return ToolResult::error("this conversation is not in a house thread.");
    };
    let Some(env) = node.environments().bound(seat.thread) else {
        return ToolResult::ok_with(
            "This thread has no environment yet, so pi was not started. delegate_task runs the pi \
             coding agent inside the thread's environment (a sandbox), never on the host: call \
             create_environment first, then delegate the task again.",
            json!({"started": false, "guidance": "create_environment"}),
        );
    };
    if troupe_runtime::executors::installed(node.home(), HARNESS).is_none() {
        return ToolResult::error(format!(
            "pi is not installed on this machine, so delegate_task cannot start it; the house's \
             owner installs it with `troupe executors install {HARNESS}`. Until then, work with \
             run_command in the environment."
        ));
    }
    let house = match node
        .store()
        .read(move |c| troupe_runtime::store::house::house(c, seat.house))
        .await
    {
        Ok(Some(house)) => house,
        Ok(None) => return ToolResult::error("this conversation's house is gone."),
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let house = match node.house(&house.name).await {
        Ok(h) => h,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let id = MsgId::new().to_string().to_lowercase();
    let short: String = id
        .chars()
        .rev()
        .take(6)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let child_name = format!("pi-{short}");
    let child = match house
        .create_thread(
            Some(&child_name),
            &[],
            &ctx.agent,
            std::slice::from_ref(&ctx.agent),
        )
        .await
    {
        Ok(t) => t,
        Err(e) => {
            return ToolResult::error(format!(
                "the thread for pi's progress could not be opened: {e}"
            ))
        }
    };
    post(
        node,
        child.info.id,
        &ctx.agent,
        format!(
            "pi is working on this task (from thread {}):\n\n{}",
            seat.thread,
            task.task.trim()
        ),
    )
    .await;
    let continued = match (&task.continue_session, task.continue_recent) {
        (Some(id), _) => Continue::Session(id.clone()),
        (None, true) => Continue::Recent,
        (None, false) => Continue::No,
    };
    let place = Place::Environment {
        sandbox: env,
        thread: child.info.id,
        bot: ctx.agent.clone(),
        continued,
        repo: task.repo.clone(),
    };
    let delegations = std::sync::Arc::clone(&node.features().delegations);
    let model = match crate::delegation::executors::model_of(node, &ctx.agent) {
        Ok(model) => model,
        Err(e) => return e,
    };
    let start = crate::delegation::executors::Start {
        executor: HARNESS.into(),
        owner: ctx.agent.clone(),
        parent: ctx.conversation,
        model,
        waits: false,
        tasks: vec![(
            task.task.clone(),
            String::new(),
            PathBuf::from(WORKSPACE),
            place,
        )],
        report_to: Some(seat.thread),
        session: None,
    };
    let started = match delegations.start_instances(node, start).await {
        Ok(started) => started,
        Err(e) => return e,
    };
    let link = child.info.link();
    let mut data = json!({
        "started": true,
        "thread_id": child.info.id.to_string(),
        "name": child.info.name,
        "link": link,
        "environment": env.to_string(),
    });
    data["delegation_id"] = json!(started.delegation.to_string());
    data["instance_id"] = json!(started.instances.first().map(|s| s.to_string()));
    ToolResult::ok_with(
        format!(
            "pi started on environment {env}. Its progress is posted in thread `{child_name}` \
             ({link}); its result is posted here when it ends. Your turn can end now."
        ),
        data,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_prepares_pi_s_state_and_quotes_what_it_is_given() {
        let place = Place::Environment {
            sandbox: troupe_runtime::id::EnvironmentId::new(),
            thread: ThreadId::new(),
            bot: "b".into(),
            continued: Continue::Recent,
            repo: Some("file:///srv/it's.git".into()),
        };
        let job = command(
            "pi",
            "/run/troupe/executors/pi/node_modules/x/cli.js",
            "m",
            "say 'hi'",
            &place,
        );
        assert!(
            job.contains("cat > /workspace/.troupe/pi/models.json <<'TROUPE_MODELS'"),
            "{job}"
        );
        assert!(
            job.contains("\"baseUrl\":\"http://127.0.0.1:3129/v1\""),
            "{job}"
        );
        assert!(
            job.contains("git clone --quiet -- 'file:///srv/it'\\''s.git' its"),
            "{job}"
        );
        assert!(job.contains("--continue 'say '\\''hi'\\''' 2>>"), "{job}");
        assert_eq!(repo_dir("https://example.com/a/b.git/"), "b");
        assert_eq!(repo_dir("..."), "repo");
    }
}
