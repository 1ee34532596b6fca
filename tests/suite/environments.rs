//! House environments through the Rust API and a bot's tools: provisioning
//! and reuse, the tools a house turn sees, idle stop, a crashed actor's
//! lost command, the workdir across a restart, and failing closed.
//!
//! They need a working bubblewrap; where there is none they are skipped
//! (failed where `TROUPE_TEST_REQUIRE_SANDBOX` is set, as on CI).

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe::runtime::environment::{EnvironmentStatus, HouseEnvironmentPolicy};
use troupe::runtime::model::{ScriptedProvider, Turn};
use troupe::runtime::protocol::house::ListenMode;
use troupe::runtime::protocol::{Message, ToolResult};
use troupe::runtime::sandbox::Sandbox;
use troupe::{BotSpec, EnvironmentsRef, HouseRef, Runtime, ThreadRef};

use super::support::{TestHome, WAIT};

/// The settings every environment test uses: small limits, this build's
/// helper.
pub fn settings() -> Vec<(&'static str, String)> {
    vec![
        (
            "environments.helper",
            env!("CARGO_BIN_EXE_troupe").to_string(),
        ),
        ("environments.memory_mib", "96".into()),
        ("environments.processes", "64".into()),
        ("environments.disk_mib", "8".into()),
        ("environments.command_timeout_secs", "30".into()),
        ("trust.mode", "auto".into()),
    ]
}

/// A runtime on `home` with `extra` settings, a house `acme` with `ada`
/// and the bot `alice` (scripted by `model`), and its thread `general`.
pub async fn house_with(
    home: &TestHome,
    model: Arc<ScriptedProvider>,
    extra: &[(&str, &str)],
) -> (Runtime, HouseRef, ThreadRef) {
    let mut builder = home.builder(model);
    for (k, v) in settings() {
        builder = builder.set(k, v);
    }
    for (k, v) in extra {
        builder = builder.set(*k, *v);
    }
    let runtime = builder.build().await.unwrap();
    let acme = match runtime.house("acme").await {
        Ok(h) => h,
        Err(_) => {
            let h = runtime.create_house("acme").await.unwrap();
            h.add_human("ada", Some("Ada")).await.unwrap();
            runtime
                .spawn_bot(BotSpec::new("alice", "alice", "A member of the house."))
                .await
                .unwrap();
            h.add_bot("alice", ListenMode::All).await.unwrap();
            h.create_thread(
                Some("general"),
                &[],
                "ada",
                &["ada".to_string(), "alice".to_string()],
            )
            .await
            .unwrap();
            h
        }
    };
    let general = acme.thread("general").await.unwrap();
    (runtime, acme, general)
}

/// A house with one environment bound to `general`.
pub async fn with_environment(
    home: &TestHome,
    extra: &[(&str, &str)],
) -> (Runtime, EnvironmentsRef, troupe::runtime::id::EnvironmentId) {
    let (runtime, acme, general) = house_with(home, script(vec![]), extra).await;
    let envs = acme.environments();
    let made = envs.create(Some(general.info.id)).await.unwrap();
    (runtime, envs, made.info.id)
}

fn script(turns: Vec<Turn>) -> Arc<ScriptedProvider> {
    Arc::new(ScriptedProvider::per_bot(
        "test".into(),
        [("alice".to_string(), turns)].into_iter().collect(),
    ))
}

/// Waits until `check` holds, at most `WAIT`.
pub async fn until(what: &str, mut check: impl FnMut() -> bool) {
    let waited = tokio::time::timeout(WAIT, async {
        while !check() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(waited.is_ok(), "timed out waiting until {what}");
}

fn results(model: &ScriptedProvider) -> Vec<(String, ToolResult)> {
    let requests = model.bot("alice").expect("scripted").requests();
    let last = requests.last().expect("alice was called");
    last.messages
        .iter()
        .filter_map(|m| match m {
            Message::Tool { name, result, .. } => Some((name.clone(), result.clone())),
            _ => None,
        })
        .collect()
}

fn tool_names(model: &ScriptedProvider, request: usize) -> Vec<String> {
    let requests = model.bot("alice").expect("scripted").requests();
    requests[request]
        .tools
        .iter()
        .map(|t| t.name.clone())
        .collect()
}

#[tokio::test]
async fn a_house_turn_runs_commands_in_its_threads_environment_never_on_the_host() {
    if Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let call = |name: &str, args: serde_json::Value| Turn::tool_call(name, args);
    let model = script(vec![
        call("run_command", json!({"cmd": "echo hello > note; pwd"})),
        call("create_environment", json!({})),
        call(
            "run_command",
            json!({"cmd": "echo hello > note; pwd; cat note"}),
        ),
        call("list_sandboxes", json!({})),
        Turn::text("done"),
        Turn::text("again"),
    ]);
    let (_rt, acme, general) = house_with(&home, model.clone(), &[]).await;
    general
        .post_and_wait("ada", "set up a workspace", WAIT)
        .await
        .unwrap();
    let r = results(&model);
    // The next turn's tools are chosen anew: the thread has its environment.
    general.post_and_wait("ada", "thanks", WAIT).await.unwrap();
    let names: Vec<&str> = r.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "run_command",
            "create_environment",
            "run_command",
            "list_sandboxes"
        ]
    );
    // Without an environment: guidance, and nothing ran on the host.
    assert!(
        r[0].1.text.contains("create_environment"),
        "{}",
        r[0].1.text
    );
    assert_eq!(r[0].1.data["ran"], false);
    assert!(!home.path().join("note").exists());
    assert!(!r[1].1.is_error(), "{}", r[1].1.text);
    assert!(!r[2].1.is_error(), "{}", r[2].1.text);
    assert!(r[2].1.text.contains("/workspace\nhello"), "{}", r[2].1.text);
    assert!(
        r[2].1.text.contains("ran in environment"),
        "{}",
        r[2].1.text
    );
    assert_eq!(r[2].1.data["where"], "environment");
    assert!(r[3].1.text.contains("(this thread)"), "{}", r[3].1.text);
    // create_environment is offered only while the thread has none (the
    // tools of a turn are chosen when it starts).
    assert!(tool_names(&model, 0).contains(&"create_environment".to_string()));
    assert!(tool_names(&model, 0).contains(&"list_sandboxes".to_string()));
    let last = model.bot("alice").unwrap().requests().len() - 1;
    assert!(!tool_names(&model, last).contains(&"create_environment".to_string()));
    // The file is in the environment's workdir, on the host side too.
    let envs = acme.environments().list(false, 10).await.unwrap();
    assert_eq!(envs.len(), 1);
    assert_eq!(envs[0].threads, vec![general.info.id]);
    assert_eq!(
        std::fs::read_to_string(envs[0].workdir.join("note")).unwrap(),
        "hello\n"
    );
}

#[tokio::test]
async fn environments_are_reused_when_unbound_and_stop_for_good() {
    if Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let (rt, acme, general) = house_with(&home, script(vec![]), &[]).await;
    let envs = acme.environments();
    let spare = envs.create(None).await.unwrap();
    assert!(!spare.reused);
    let bound = envs.create(Some(general.info.id)).await.unwrap();
    assert!(bound.reused, "the unbound one is reused");
    assert_eq!(bound.info.id, spare.info.id);
    let again = envs.create(Some(general.info.id)).await.unwrap();
    assert_eq!(again.info.id, spare.info.id, "the thread keeps its own");
    // Visible in the actor tree while live.
    let tree = rt.node().tree().await;
    assert!(tree
        .iter()
        .any(|a| a.kind == "environment" && a.id == spare.info.id.to_string()));
    assert!(tree.iter().any(|a| a.kind == "environments"));
    let stopped = envs.stop(spare.info.id).await.unwrap();
    assert_eq!(stopped.status, EnvironmentStatus::Stopped);
    assert!(stopped.threads.is_empty());
    assert!(envs.exec(spare.info.id, "true", None).await.is_err());
    assert!(envs.list(false, 10).await.unwrap().is_empty());
    assert_eq!(envs.list(true, 10).await.unwrap().len(), 1);
    let fresh = envs.create(Some(general.info.id)).await.unwrap();
    assert!(!fresh.reused);
    assert_ne!(fresh.info.id, spare.info.id);
}

#[tokio::test]
async fn an_idle_environment_stops_and_kills_what_it_ran_then_comes_back() {
    if Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let (rt, envs, id) = with_environment(&home, &[("environments.idle_secs", "1")]).await;
    let out = envs.exec(id, "echo kept > f", None).await.unwrap();
    assert!(out.success(), "{out:?}");
    let stopped = tokio::time::timeout(WAIT, async {
        while rt
            .node()
            .tree()
            .await
            .iter()
            .any(|a| a.kind == "environment")
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert!(stopped.is_ok(), "the idle environment did not stop");
    assert_eq!(envs.get(id).await.unwrap().status, EnvironmentStatus::Idle);
    let out = envs.exec(id, "cat f", None).await.unwrap();
    assert_eq!(out.output, "kept\n");
}

#[tokio::test]
async fn a_crashed_sandbox_reports_its_running_command_lost_and_never_reruns_it() {
    if Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let (_rt, envs, id) = with_environment(&home, &[]).await;
    let running = {
        let envs = envs.clone();
        tokio::spawn(async move { envs.exec(id, "echo run >> runs; exec sleep 60", None).await })
    };
    let workdir = envs.get(id).await.unwrap().workdir;
    until("the command runs", || workdir.join("runs").exists()).await;
    envs.inject_failure(id).await.unwrap();
    let answer = tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    let err = answer.unwrap_err().to_string();
    assert!(err.contains("lost"), "{err}");
    assert!(err.contains("not run again"), "{err}");
    // The restarted actor takes commands; the lost one is counted, not re-run.
    let out = envs.exec(id, "cat runs", None).await.unwrap();
    assert_eq!(out.output, "run\n");
    assert_eq!(envs.get(id).await.unwrap().lost_commands, 1);
}

#[tokio::test]
async fn a_killed_sandbox_process_reports_its_running_command_lost_and_the_next_starts_anew() {
    if Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let (_rt, envs, id) = with_environment(&home, &[]).await;
    let marker = format!("troupe-zygote-victim-{}", std::process::id());
    let running = {
        let (envs, marker) = (envs.clone(), marker.clone());
        tokio::spawn(async move {
            envs.exec(
                id,
                &format!("echo run >> runs; exec -a {marker} sleep 60"),
                None,
            )
            .await
        })
    };
    until("the command runs", || {
        !super::sandbox_escape::host_processes(&marker).is_empty()
    })
    .await;
    // The command's parent is the environment's process 1: kill it from
    // the machine, as an out-of-memory kill would.
    let victim = super::sandbox_escape::host_processes(&marker)[0];
    let stat = std::fs::read_to_string(format!("/proc/{victim}/stat")).unwrap();
    let init: i32 = stat[stat.rfind(')').unwrap() + 1..]
        .split_whitespace()
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let cmdline = std::fs::read(format!("/proc/{init}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).contains("__sandbox\0init"),
        "{}",
        String::from_utf8_lossy(&cmdline)
    );
    let status = std::process::Command::new("kill")
        .args(["-9", &init.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let answer = tokio::time::timeout(WAIT, running).await.unwrap().unwrap();
    let err = answer.unwrap_err().to_string();
    assert!(err.contains("lost"), "{err}");
    assert!(err.contains("not run again"), "{err}");
    until("the command's process is gone", || {
        super::sandbox_escape::host_processes(&marker).is_empty()
    })
    .await;
    // The next command starts a new sandbox process; the lost one is
    // counted, not re-run.
    let out = envs.exec(id, "cat runs", None).await.unwrap();
    assert_eq!(out.output, "run\n");
    assert_eq!(envs.get(id).await.unwrap().lost_commands, 1);
}

#[tokio::test]
async fn the_workdir_and_binding_persist_across_a_restart_of_troupe() {
    if Sandbox::detect_or_skip("environments").is_none() {
        return;
    }
    let home = TestHome::new();
    let id = {
        let (rt, envs, id) = with_environment(&home, &[]).await;
        let out = envs.exec(id, "echo durable > kept", None).await.unwrap();
        assert!(out.success());
        rt.shutdown().await;
        id
    };
    let (rt, acme, general) = house_with(&home, script(vec![]), &[]).await;
    let envs = acme.environments();
    let found = envs.find("general").await.unwrap();
    assert_eq!(found.id, id);
    assert_eq!(found.threads, vec![general.info.id]);
    let out = envs.exec(id, "cat kept", None).await.unwrap();
    assert_eq!(out.output, "durable\n");
    rt.shutdown().await;
}

#[tokio::test]
async fn without_a_working_sandbox_creation_fails_closed_unless_the_house_allows_it() {
    let home = TestHome::new();
    let (_rt, acme, general) = house_with(
        &home,
        script(vec![]),
        &[("environments.helper", "/nonexistent/troupe")],
    )
    .await;
    let envs = acme.environments();
    let err = envs
        .create(Some(general.info.id))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("no environment was made"), "{err}");
    assert!(err.contains("helper"), "{err}");
    assert!(err.contains("--allow-unsandboxed"), "{err}");
    assert!(envs.list(true, 10).await.unwrap().is_empty());
    envs.set_policy(HouseEnvironmentPolicy {
        allow_unsandboxed: true,
        ..HouseEnvironmentPolicy::default()
    })
    .await
    .unwrap();
    let made = envs.create(Some(general.info.id)).await.unwrap();
    assert!(!made.info.sandboxed);
    let out = envs.exec(made.info.id, "echo $HOME", None).await.unwrap();
    assert!(!out.sandboxed, "every such result says so");
    assert_eq!(out.output.trim(), made.info.workdir.display().to_string());
}
