//! Executors' accounts: `executor_accounts`' view (through `troupe
//! executors accounts`) with one account at its limit, a task handed to the
//! next account of the same harness in a copy of its session, a task routed
//! to another harness with a handoff packet, and a login refused for an
//! email another account holds. Offline: the harnesses are the stand-ins in
//! `tests/executors` (`fake-pi.mjs`, `fake-codex.mjs`), in the real sandbox.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{json, Value};
use troupe::runtime::model::ScriptedProvider;
use troupe::runtime::sandbox::Sandbox;
use troupe::runtime::store::executor_usage::{self, Limit};
use troupe::runtime::store::Store;
use troupe::Runtime;

use super::cli::{text, troupe};
use super::support::{TestHome, WAIT};

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn at(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .unwrap()
        .to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A fake logged-in Claude Code folder: its `.claude.json` names `email`.
fn logged_in(dir: &Path, email: &str) {
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(
        dir.join(".claude.json"),
        json!({"oauthAccount": {"emailAddress": email}}).to_string(),
    )
    .unwrap();
}

#[test]
fn executor_accounts_shows_two_accounts_one_at_its_limit_with_its_reset_time() {
    let home = TestHome::new();
    let personal = home.path().join("personal-claude");
    logged_in(&personal, "me@example.com");
    std::fs::create_dir_all(home.path()).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        format!(
            r#"
[executors.claude-code.accounts.work]
folders = ["/srv/work"]
windows = [{{ name = "5h", hours = 5, tokens = 1000 }}]
hand_over = 1

[executors.claude-code.accounts.personal]
dir = "{}"
extra_usage = true
windows = [{{ name = "5h", hours = 5, tokens = 1000 }}]
hand_over = 2
"#,
            personal.display()
        ),
    )
    .unwrap();
    // An hour ago `work` used 1200 of its 1000 tokens; `personal` 1500,
    // but it bills past its limits; `main` was told it is at its limit.
    let store = Store::open(&home.path().join("troupe.db")).unwrap();
    let used = now() - 3600;
    let resets = now() + 7200;
    store
        .write_blocking(move |tx| {
            executor_usage::add(tx, ("claude-code", "work"), used, 1200, 0.0, None)?;
            executor_usage::add(tx, ("claude-code", "personal"), used, 1500, 0.42, None)?;
            executor_usage::reach(
                tx,
                ("claude-code", "main"),
                &Limit {
                    reached_at: used,
                    resets_at: Some(resets),
                    why: "Claude AI usage limit reached".into(),
                },
                None,
            )
        })
        .unwrap();
    drop(store);

    let out = troupe(&home, &["executors", "accounts", "claude-code", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let view: Value = serde_json::from_slice(&out.stdout).unwrap();
    let by = |target: &str| -> Value {
        view.as_array()
            .unwrap()
            .iter()
            .find(|a| a["target"] == target)
            .cloned()
            .unwrap_or_else(|| panic!("no {target} in {view:#}"))
    };
    let targets: Vec<&str> = view
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["target"].as_str().unwrap())
        .collect();
    assert_eq!(
        targets,
        [
            "claude-code@main",
            "claude-code@personal",
            "claude-code@work"
        ]
    );
    let work = by("claude-code@work");
    assert_eq!(
        work["at_limit"],
        json!({
            "by": "window",
            "why": "its 5h window is used up (1200 of 1000 tokens)",
            "until": at(used + 5 * 3600),
        })
    );
    assert_eq!(work["windows"][0]["tokens"], 1200);
    assert_eq!(work["folders"], json!(["/srv/work"]));
    assert_eq!(work["hand_over"], 1);
    assert_eq!(work["logged_in_as"], Value::Null);
    let main = by("claude-code@main");
    assert_eq!(
        main["at_limit"],
        json!({"by": "harness", "why": "Claude AI usage limit reached", "until": at(resets)})
    );
    assert_eq!(main["hand_over"], 3);
    let personal = by("claude-code@personal");
    assert_eq!(personal["at_limit"], Value::Null);
    assert_eq!(personal["extra_usage"], true);
    assert_eq!(
        personal["recent"],
        json!({"tokens": 1500, "cost_usd": 0.42})
    );
    assert_eq!(personal["windows"][0]["cost_usd"], 0.42);
    assert_eq!(personal["logged_in_as"], "me@example.com");

    // The same view as text.
    let out = troupe(&home, &["executors", "accounts"]);
    let shown = text(&out.stdout);
    assert!(
        shown.contains("claude-code@work (not installed)\n  logged in as: unknown\n  at its limit: yes, its 5h window is used up (1200 of 1000 tokens)"),
        "{shown}"
    );
    assert!(
        shown.contains("  window 5h (5 h): 1500 of 1000 tokens, $0.42; frees up")
            && shown.contains(
                "  used in the last 7 days: 1500 tokens, $0.42\n  extra usage: yes, it bills past its limits\n"
            ),
        "{shown}"
    );
}

#[test]
fn a_login_as_an_email_another_account_holds_is_refused_naming_it() {
    let home = TestHome::new();
    std::fs::create_dir_all(home.path()).unwrap();
    std::fs::write(
        home.path().join("config.toml"),
        "[executors.claude-code.accounts.work]\n[executors.claude-code.accounts.personal]\n",
    )
    .unwrap();
    logged_in(
        &home.path().join("executors/claude-code/accounts/work"),
        "Me@Example.com",
    );
    let out = troupe(
        &home,
        &[
            "executors",
            "login",
            "claude-code@personal",
            "--email",
            "me@example.com",
        ],
    );
    assert!(!out.status.success());
    let said = text(&out.stderr);
    assert!(
        said.contains("me@example.com is already logged in on claude-code@work"),
        "{said}"
    );
    // An account nobody named is refused too, saying how to name it.
    let out = troupe(&home, &["executors", "login", "claude-code@other"]);
    assert!(text(&out.stderr).contains("[executors.claude-code.accounts.other]"));
}

/// A home with the stand-ins installed as pi and codex, `config` as its
/// config.toml, and a work folder: (dir, home, folder).
fn home_with_fakes(config: &str) -> (tempfile::TempDir, PathBuf, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let (home, folder) = super::executors::fake_home(dir.path());
    std::fs::write(home.join("config.toml"), config).unwrap();
    let codex = troupe::runtime::executors::harness("codex").unwrap();
    let modules = dir.path().join("fake-codex/node_modules");
    let entry = modules.join(codex.entry);
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::fs::create_dir_all(modules.join(codex.package)).unwrap();
    std::fs::write(
        modules.join(codex.package).join("package.json"),
        json!({"name": codex.package, "version": codex.version}).to_string(),
    )
    .unwrap();
    std::fs::write(&entry, include_str!("../executors/fake-codex.mjs")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    troupe::runtime::executors::install_from(
        &troupe::runtime::home::Home::new(&home),
        "codex",
        &modules,
    )
    .unwrap();
    (dir, home, folder)
}

async fn runtime(dir: &Path, home: &Path) -> Runtime {
    Runtime::builder()
        .home(home)
        .cwd(dir)
        .provider(Arc::new(ScriptedProvider::new(Vec::new())))
        .build()
        .await
        .unwrap()
}

/// The record's notes of instance `sub`.
async fn notes(
    node: &troupe::actors::node::Node,
    sub: troupe::runtime::id::SubagentId,
) -> Vec<String> {
    node.store()
        .read(move |c| troupe::actors::delegation::record::events_of(c, sub, 0, 1000))
        .await
        .unwrap()
        .into_iter()
        .filter(|e| e.1 == "note")
        .map(|e| e.2)
        .collect()
}

#[tokio::test]
async fn an_account_at_its_limit_hands_the_task_to_the_next_in_a_copy_of_its_session() {
    if Sandbox::detect_or_skip("an_account_at_its_limit_hands_the_task_over").is_none() {
        return;
    }
    let (dir, home, folder) = home_with_fakes("[executors.pi.accounts.spare]\nhand_over = 1\n");
    let runtime = runtime(dir.path(), &home).await;
    let node = runtime.node().clone();
    let started =
        super::executors::start_users_own(&node, &folder, &["limit-in sessions events 2"]).await;
    let report = tokio::time::timeout(WAIT, started.waiter.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        report.contains("[done]") && report.contains("done 2"),
        "{report}"
    );
    let sub = started.instances[0];
    let copy = home.join("executors/pi/accounts/spare/fake-session.jsonl");
    let notes = notes(&node, sub).await;
    assert!(
        notes.iter().any(
            |n| n.starts_with("hand-over: pi@main reached its plan's limit (429 ")
                && n.ends_with(&format!(
                    "the task goes on on pi@spare in a copy of its session ({})",
                    copy.display()
                ))
        ),
        "{notes:#?}"
    );
    // The copy holds the first account's prompt, then the second's.
    let lines: Vec<Value> = std::fs::read_to_string(&copy)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0]["sessions"]
        .as_str()
        .unwrap()
        .ends_with("executors/pi/sessions"));
    assert!(lines[1]["sessions"]
        .as_str()
        .unwrap()
        .ends_with("executors/pi/accounts/spare"));
    let id = sub.to_string();
    let on = node
        .store()
        .read(move |c| executor_usage::account_of(c, &id))
        .await
        .unwrap();
    assert_eq!(on, Some(("pi".to_string(), "spare".to_string())));
    // pi@main is at its limit for the next hour, as the harness said.
    let config = troupe::runtime::config::Config::load(
        &troupe::runtime::home::Home::new(&home),
        &|_| None,
        &[],
    )
    .unwrap();
    let h = troupe::runtime::home::Home::new(&home);
    let view = node
        .store()
        .read(move |c| {
            troupe::runtime::executors::accounts::view(
                &h,
                &config.executors,
                Some(c),
                chrono::Utc::now(),
                Some("pi"),
            )
        })
        .await
        .unwrap();
    let main = view.iter().find(|a| a.account == "main").unwrap();
    let limit = main.at_limit.as_ref().unwrap();
    assert_eq!(limit.by, "harness");
    let until = limit.until.unwrap().timestamp() - now();
    assert!((3500..=3600).contains(&until), "{until}");
    assert!(view
        .iter()
        .find(|a| a.account == "spare")
        .unwrap()
        .at_limit
        .is_none());
    runtime.shutdown().await;
}

#[tokio::test]
async fn a_route_to_another_harness_hands_over_with_a_handoff_packet() {
    if Sandbox::detect_or_skip("a_route_to_another_harness_hands_over").is_none() {
        return;
    }
    let (dir, home, folder) = home_with_fakes("");
    let runtime = runtime(dir.path(), &home).await;
    let node = runtime.node().clone();
    use troupe::actors::delegation::executor::Place;
    use troupe::actors::delegation::executors::{Start, USER};
    let started = node
        .delegations()
        .unwrap()
        .start_routed(
            &node,
            Start {
                executor: "pi".into(),
                owner: USER.into(),
                parent: troupe::runtime::id::ConversationId::new(),
                model: "script:none".into(),
                waits: true,
                tasks: vec![(
                    "limit-in sessions touch notes.txt events 2".into(),
                    String::new(),
                    folder.clone(),
                    Place::Host,
                )],
                report_to: None,
                session: None,
            },
            vec!["codex".into()],
        )
        .await
        .map_err(|e| e.text)
        .unwrap();
    let report = tokio::time::timeout(WAIT, started.waiter.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(
        report.contains("[done]") && report.contains("took over from the packet"),
        "{report}"
    );
    let received = std::fs::read_to_string(folder.join("received.txt")).unwrap();
    assert!(
        received.starts_with("Handoff packet: this task moves from pi@main to codex@main (pi@main reached its plan's limit: 429 "),
        "{received}"
    );
    for part in [
        "\n\n## Task\nlimit-in sessions touch notes.txt events 2\n",
        "\n## What was done\n(it gave no summary before it stopped)\n",
        "\n## Files changed\n- modified notes.txt\n",
        "\n## Last commands and their results\n- bash step 1 o=",
        "\n## What is left\npi@main stopped at its usage limit before it said the task was done.",
    ] {
        assert!(received.contains(part), "{part:?} not in:\n{received}");
    }
    // The packet is in the record, and the instance is codex's now.
    let sub = started.instances[0];
    assert!(notes(&node, sub).await.contains(&received));
    let id = sub.to_string();
    let on = node
        .store()
        .read(move |c| executor_usage::account_of(c, &id))
        .await
        .unwrap();
    assert_eq!(on, Some(("codex".to_string(), "main".to_string())));
    runtime.shutdown().await;
}

/// `delegate action: account` runs the account's login only once the user
/// said yes — asked every time, in auto mode too — and passes its URL on.
/// The login is a stand-in (`fake-login.mjs`) installed as Claude Code.
#[tokio::test]
async fn delegate_logs_an_account_in_only_once_the_user_says_yes() {
    use troupe::AgentEvent;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(
        home.join("config.toml"),
        "[executors.claude-code.accounts.work]\n",
    )
    .unwrap();
    let claude = troupe::runtime::executors::harness("claude-code").unwrap();
    let modules = dir.path().join("fake-claude/node_modules");
    let entry = modules.join(claude.entry);
    std::fs::create_dir_all(entry.parent().unwrap()).unwrap();
    std::fs::create_dir_all(modules.join(claude.package)).unwrap();
    std::fs::write(
        modules.join(claude.package).join("package.json"),
        json!({"name": claude.package, "version": claude.version}).to_string(),
    )
    .unwrap();
    std::fs::write(&entry, include_str!("../executors/fake-login.mjs")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&entry, std::fs::Permissions::from_mode(0o755)).unwrap();
    troupe::runtime::executors::install_from(
        &troupe::runtime::home::Home::new(&home),
        "claude-code",
        &modules,
    )
    .unwrap();
    let model = Arc::new(ScriptedProvider::from_fn(|req| {
        use troupe::runtime::protocol::Message;
        match req.messages.last() {
            Some(Message::User { .. }) => troupe::runtime::model::Turn::tool_call(
                "delegate",
                json!({"action": "account", "executor": "claude-code@work"}),
            ),
            _ => troupe::runtime::model::Turn::text("done"),
        }
    }));
    let runtime = Runtime::builder()
        .home(&home)
        .cwd(dir.path())
        .provider(model)
        .set("trust.mode", "auto")
        .build()
        .await
        .unwrap();
    let credentials = home.join("executors/claude-code/accounts/work/.claude.json");
    let bot = runtime.bot("assistant").await.unwrap();
    for answer in ["no", "yes"] {
        let mut turn = bot.send("log my work account in").await.unwrap();
        let (request, reason) = super::support::wait_for(&mut turn, |e| match e {
            AgentEvent::ApprovalRequested {
                request_id, reason, ..
            } => Some((request_id.clone(), reason.clone())),
            _ => None,
        })
        .await;
        assert!(
            reason.contains("asks to log claude-code@work in"),
            "{reason}"
        );
        assert!(runtime.node().answer(&request, Some(json!(answer))));
        let result = super::support::wait_for(&mut turn, |e| match e {
            AgentEvent::ToolCallFinished { result, .. } => Some(result.text.clone()),
            _ => None,
        })
        .await;
        turn.result().await.unwrap();
        if answer == "no" {
            assert!(result.contains("the user refused"), "{result}");
            assert!(!credentials.exists());
        } else {
            assert!(
                result.contains("https://login.example.test/oauth/authorize?code=fake"),
                "{result}"
            );
            assert!(
                result.contains("claude-code@work is logged in as me@example.com"),
                "{result}"
            );
            assert!(credentials.is_file());
        }
    }
    runtime.shutdown().await;
}

/// A harness's reported cost is kept with its account's usage (the
/// stand-in reports it as pi does, in its message's `usage.cost`).
#[tokio::test]
async fn a_harness_reported_cost_is_kept_for_its_account() {
    if Sandbox::detect_or_skip("a_harness_reported_cost_is_kept_for_its_account").is_none() {
        return;
    }
    let (dir, home, folder) = home_with_fakes("");
    let runtime = runtime(dir.path(), &home).await;
    let node = runtime.node().clone();
    let started = super::executors::start_users_own(&node, &folder, &["events 1 cost 0.25"]).await;
    let report = tokio::time::timeout(WAIT, started.waiter.unwrap())
        .await
        .unwrap()
        .unwrap();
    assert!(report.contains("[done]"), "{report}");
    let (tokens, cost, _) = node
        .store()
        .read(|c| executor_usage::since(c, ("pi", "main"), 0))
        .await
        .unwrap();
    assert_eq!((tokens, cost), (2, 0.25));
    runtime.shutdown().await;
}
