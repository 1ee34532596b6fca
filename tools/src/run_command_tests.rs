use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use tokio::sync::mpsc;
use troupe_runtime::home::Home;
use troupe_runtime::id::ConversationId;

use super::background::CommandNotifier;
use super::*;
use troupe_runtime::tool::Tool as _;

#[path = "run_command_tests/sandbox.rs"]
mod sandbox;
#[path = "run_command_tests/unsandboxed.rs"]
mod unsandboxed;

struct Fixture {
    _dir: tempfile::TempDir,
    ctx: ToolContext,
    cwd: PathBuf,
}

/// Where a test runs its commands: in the machine's sandbox (when it has
/// one) and unsandboxed.
fn placements() -> [SandboxSettings; 2] {
    [sandboxed(), SandboxSettings::off()]
}

/// The default settings without network: this crate's tests have no
/// `troupe` binary to hold the commands' network (`tests/suite/sandbox_network.rs`
/// runs it with the real one).
fn sandboxed() -> SandboxSettings {
    SandboxSettings {
        network: false,
        ..SandboxSettings::default()
    }
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    let ctx = ToolContext::standalone(Home::new(root.join(".troupe")), cwd.clone());
    Fixture {
        _dir: dir,
        ctx,
        cwd,
    }
}

async fn run_cmd(f: &Fixture, args: serde_json::Value) -> ToolResult {
    run_in(f, sandboxed(), args).await
}

async fn run_in(f: &Fixture, sandbox: SandboxSettings, args: serde_json::Value) -> ToolResult {
    tokio::time::timeout(
        Duration::from_secs(60),
        run_command::tool(CommandHost::with_sandbox(sandbox)).call(args, &f.ctx),
    )
    .await
    .expect("run_command returned within a minute")
}

/// The host pids of the processes running exactly `sleep <marker>`: seen
/// from outside, whatever PID namespace they run in.
fn sleeping(marker: &str) -> Vec<u32> {
    let want = format!("sleep\0{marker}\0");
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok())
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c == want.as_bytes())
                && !is_dead(*pid)
        })
        .collect()
}

/// A marker no other test's `sleep` uses: `1000.<test><n>`.
fn marker(test: u32, n: usize) -> String {
    format!("1000.{test}{n}")
}

/// Waits (up to 10 s) until `done` holds, checking every few milliseconds:
/// for states only the file system or /proc shows.
async fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether a process is gone (or a zombie: dead, waiting to be reaped).
fn is_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(") ")
            .is_some_and(|(_, rest)| rest.starts_with('Z') || rest.starts_with('X')),
    }
}

#[tokio::test]
async fn output_and_errors_come_together_with_the_exit_code() {
    let f = fixture();
    let result = run_cmd(
        &f,
        json!({"command": "echo out; echo err >&2; echo again; exit 3"}),
    )
    .await;
    assert!(result.is_error());
    assert_eq!(result.text, "out\nerr\nagain\n[exit 3]");
    assert_eq!(result.data["exit_code"], 3);
    let ok = run_cmd(
        &f,
        json!({"command": "pwd; echo $PAGER $GIT_PAGER $NO_COLOR $TERM"}),
    )
    .await;
    assert!(!ok.is_error());
    assert_eq!(
        ok.text,
        format!("{}\ncat cat 1 dumb\n[exit 0]", f.cwd.display())
    );
}

#[tokio::test]
async fn standard_input_is_closed() {
    let f = fixture();
    let result = run_cmd(&f, json!({"command": "cat; read line; echo \"read=$?\""})).await;
    assert_eq!(result.text, "read=1\n[exit 0]");
}

#[tokio::test]
async fn a_timeout_kills_the_whole_tree() {
    for (n, sandbox) in placements().into_iter().enumerate() {
        let f = fixture();
        let (a, b, c) = (marker(11, n), marker(12, n), marker(13, n));
        let command =
            format!("sleep {a} & (sleep {b} & wait) & sleep 0.2; touch started; sleep {c}");
        let result = run_in(
            &f,
            sandbox.clone(),
            json!({"command": command, "timeout": 1}),
        )
        .await;
        assert!(result.is_error());
        assert_eq!(result.text, "(no output)\n[killed: timeout after 1 s]");
        assert!(f.cwd.join("started").exists(), "{sandbox:?}");
        wait_until("every process of the tree to end", || {
            [&a, &b, &c].iter().all(|m| sleeping(m).is_empty())
        })
        .await;
    }
}

#[tokio::test]
async fn stopping_the_turn_kills_the_whole_tree() {
    for (n, sandbox) in placements().into_iter().enumerate() {
        let f = fixture();
        let (a, b) = (marker(21, n), marker(22, n));
        let cancel = f.ctx.cancel.clone();
        let call = run_in(
            &f,
            sandbox,
            json!({"command": format!("sleep {a} & sleep {b}; wait")}),
        );
        let stopper = async {
            wait_until("the command to start", || {
                !sleeping(&a).is_empty() && !sleeping(&b).is_empty()
            })
            .await;
            cancel.cancel();
        };
        let (result, ()) = tokio::join!(call, stopper);
        assert_eq!(result.text, "(no output)\n[stopped: the turn was stopped]");
        wait_until("every process of the tree to end", || {
            sleeping(&a).is_empty() && sleeping(&b).is_empty()
        })
        .await;
    }
}

#[tokio::test]
async fn huge_output_keeps_a_bounded_head_and_tail() {
    let f = fixture();
    let result = run_cmd(&f, json!({"command": "yes | head -c 50000000; echo END"})).await;
    assert!(!result.is_error(), "{}", &result.text[..200]);
    assert_eq!(result.data["output_bytes"], 50_000_004);
    assert_eq!(result.data["cut_bytes"], 50_000_004 - 30_000);
    assert!(result.text.len() < 31_000, "{}", result.text.len());
    assert!(result.text.starts_with("y\ny\ny\n"));
    assert!(result
        .text
        .contains("\n[… 49970004 bytes of output cut here;"));
    assert!(result.text.ends_with("y\ny\nEND\n[exit 0]"));
}

#[tokio::test]
async fn a_long_output_is_saved_whole_and_the_note_names_the_file() {
    let mut f = fixture();
    f.ctx.call_id = "call_seq".into();
    let result = run_in(
        &f,
        SandboxSettings::off(),
        json!({"command": "seq 1 40000"}),
    )
    .await;
    let expected: String = (1..=40000).map(|n| format!("{n}\n")).collect();
    let path = f
        .ctx
        .home
        .spill_dir()
        .join(f.ctx.conversation.to_string())
        .join("call_seq.txt");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
    assert_eq!(result.data["output_file"], path.display().to_string());
    assert!(result.text.starts_with("1\n2\n3\n"));
    assert!(
        result.text.ends_with("39999\n40000\n[exit 0]"),
        "{}",
        result.text
    );
    let note = format!(
        "The whole output ({} bytes, 40000 lines) is in {}",
        expected.len(),
        path.display()
    );
    assert!(result.text.contains(&note), "{}", result.text);
    assert!(
        !result.text.contains("\n20000\n"),
        "the middle is left out of the result"
    );
}

#[tokio::test]
async fn an_output_over_the_cap_keeps_its_first_bytes_and_says_so() {
    let f = fixture();
    let tool =
        run_command::tool(CommandHost::with_sandbox(SandboxSettings::off()).output_cap(100_000));
    let result = tool.call(json!({"command": "seq 1 40000"}), &f.ctx).await;
    let path = result.data["output_file"].as_str().unwrap().to_string();
    let kept = std::fs::read(&path).unwrap();
    assert_eq!(kept.len(), 100_000);
    assert!(kept.starts_with(b"1\n2\n"));
    assert!(
        result
            .text
            .contains("The first 100000 of its 228894 bytes are in")
            && result.text.contains("command_output_cap"),
        "{}",
        result.text
    );
}

#[tokio::test]
async fn bad_arguments_are_errors() {
    let f = fixture();
    let long = run_cmd(&f, json!({"command": "true", "timeout": 601})).await;
    assert_eq!(
        long.text,
        "`timeout` is at most 600 seconds; for longer commands use background: true"
    );
    let neither = run_cmd(&f, json!({})).await;
    assert_eq!(
        neither.text,
        "`command` is required: give the command to run"
    );
    let unknown = run_cmd(&f, json!({"stop": "cmd_nope"})).await;
    assert!(unknown.is_error());
    assert_eq!(
        unknown.text,
        "there is no background command `cmd_nope`; use the id that starting it returned (cmd_…)"
    );
}

#[tokio::test]
async fn a_background_command_is_logged_and_stopped() {
    for (n, sandbox) in placements().into_iter().enumerate() {
        let f = fixture();
        let (a, b) = (marker(31, n), marker(32, n));
        let started = run_in(
            &f,
            sandbox,
            json!({"command": format!("echo begin; sleep {a} & sleep {b}; wait"), "background": true}),
        )
        .await;
        assert!(!started.is_error(), "{}", started.text);
        let expected = if n == 0 {
            sandbox_label()
        } else {
            "unsandboxed"
        };
        assert_eq!(started.data["sandbox"], expected);
        let id = started.data["id"].as_str().unwrap().to_string();
        let log = PathBuf::from(started.data["log"].as_str().unwrap());
        assert_eq!(log, f.ctx.home.commands_dir().join(format!("{id}.log")));
        wait_until("the command to start", || {
            !sleeping(&a).is_empty() && !sleeping(&b).is_empty()
        })
        .await;
        let stopped = run_cmd(&f, json!({"stop": id})).await;
        assert!(!stopped.is_error(), "{}", stopped.text);
        assert_eq!(
            stopped.text,
            format!(
                "Stopped `{id}`: [stopped]. Its output is in {}.",
                log.display()
            )
        );
        assert_eq!(std::fs::read_to_string(&log).unwrap(), "begin\n[stopped]\n");
        wait_until("every process of the tree to end", || {
            sleeping(&a).is_empty() && sleeping(&b).is_empty()
        })
        .await;
        let again = run_cmd(&f, json!({"stop": id})).await;
        assert_eq!(
            again.text,
            format!(
                "`{id}` had already ended: [stopped]. Its output is in {}.",
                log.display()
            )
        );
    }
}

/// What a result's `sandbox` field says for the default settings here.
fn sandbox_label() -> &'static str {
    match SandboxSettings::default().place() {
        Ok(placement) => placement.label(),
        Err(_) => "none",
    }
}

/// A notifier that hands what it is told to a channel.
struct Forward(mpsc::UnboundedSender<(ConversationId, String, String)>);

#[async_trait::async_trait]
impl CommandNotifier for Forward {
    async fn command_finished(&self, conversation: ConversationId, id: &str, summary: &str) {
        let _ = self
            .0
            .send((conversation, id.to_string(), summary.to_string()));
    }
}

#[tokio::test]
async fn notify_on_complete_reaches_the_notifier() {
    let f = fixture();
    let (tx, mut rx) = mpsc::unbounded_channel();
    f.ctx
        .services
        .node()
        .set_command_notifier(Arc::new(Forward(tx)));
    let started = run_cmd(
        &f,
        json!({"command": "echo done-here", "background": true, "notify_on_complete": true}),
    )
    .await;
    let id = started.data["id"].as_str().unwrap().to_string();
    let log = f.ctx.home.commands_dir().join(format!("{id}.log"));
    let (conversation, told_id, summary) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        (conversation, told_id.as_str()),
        (f.ctx.conversation, id.as_str())
    );
    assert_eq!(
        summary,
        format!(
            "Background command {id} (`echo done-here`) ended: [exit 0]. Its output is in {}; it ends with:\ndone-here\n[exit 0]\n",
            log.display()
        )
    );

    // A background timeout ends it too, and its log's last line says so.
    let timed = run_cmd(
        &f,
        json!({"command": "printf partial; sleep 1000", "background": true, "notify_on_complete": true, "timeout": 1}),
    )
    .await;
    let id = timed.data["id"].as_str().unwrap().to_string();
    let (_, told_id, _) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(told_id, id);
    let log = f.ctx.home.commands_dir().join(format!("{id}.log"));
    assert_eq!(
        std::fs::read_to_string(log).unwrap(),
        "partial\n[killed: timeout after 1 s]\n"
    );
}

#[test]
fn the_spec_is_failure_tolerant_and_gated_by_the_command() {
    let spec = run_command::tool(CommandHost::default()).spec().clone();
    assert!(spec.flags.failure_tolerant && !spec.flags.read_only);
    assert_eq!(spec.gate, GateSubject::Command("command".into()));
    assert_eq!(spec.parameters["properties"]["timeout"]["maximum"], 600);
}

/// The environment variable that makes [`tether_helper`] act: the folder it
/// runs its command in.
const TETHER_HELPER: &str = "TROUPE_TETHER_HELPER";

/// Not a test by itself (without [`TETHER_HELPER`] it returns at once): the
/// stand-in for troupe in
/// `a_command_and_its_children_die_when_troupe_is_sigkilled`, which runs
/// this test binary again as a process of its own. It starts a command with
/// the same code `run_command` uses, writes the shell's pid, and waits to
/// be killed.
#[test]
fn tether_helper() {
    let Some(dir) = std::env::var_os(TETHER_HELPER).map(PathBuf::from) else {
        return;
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    // With a marker, in the sandbox: `sleep <marker>` twice, found by the
    // test from outside.
    let sandboxed = std::env::var(TETHER_SANDBOX_MARKER).ok();
    let confinement = Confinement {
        writable: vec![dir.clone()],
        read_only: vec![],
        network: troupe_runtime::sandbox::Network::None,
        hidden: vec![],
    };
    runtime.block_on(async {
        let (command, sandbox) = match &sandboxed {
            Some(m) => (
                format!("sleep {m} & sleep {m}"),
                Some((Sandbox::detect().unwrap(), &confinement)),
            ),
            None => (
                "sleep 1000 & echo $! > grandchild.tmp && mv grandchild.tmp grandchild.pid; \
                 sleep 1000"
                    .to_string(),
                None,
            ),
        };
        let mut cmd = process::shell(&command, &dir, sandbox, &[]);
        cmd.stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null());
        let running = tether::start(cmd).unwrap();
        std::fs::write(dir.join("leader.tmp"), running.pgid.unwrap().to_string()).unwrap();
        std::fs::rename(dir.join("leader.tmp"), dir.join("leader.pid")).unwrap();
        std::future::pending::<()>().await;
    });
}

/// With [`TETHER_HELPER`]: run the helper's command in the sandbox, as
/// `sleep <this marker>` twice.
const TETHER_SANDBOX_MARKER: &str = "TROUPE_TETHER_SANDBOX_MARKER";

#[tokio::test]
async fn a_sandboxed_command_and_its_children_die_when_troupe_is_sigkilled() {
    if Sandbox::detect_or_skip("a sandboxed command dies with troupe").is_none() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let a = marker(51, 0);
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "run_command::tests::tether_helper",
            "--nocapture",
        ])
        .env(TETHER_HELPER, dir.path())
        .env(TETHER_SANDBOX_MARKER, &a)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let leader = dir.path().join("leader.pid");
    wait_until("the helper to start its sandboxed command", || {
        read_pid(&leader).is_some() && sleeping(&a).len() == 2
    })
    .await;
    // SIGKILL: no clean-up code of the helper runs.
    helper.kill().unwrap();
    helper.wait().unwrap();
    let bwrap = read_pid(&leader).unwrap();
    wait_until("bwrap to die with its parent", || is_dead(bwrap)).await;
    wait_until("what ran inside the sandbox to die with it", || {
        sleeping(&a).is_empty()
    })
    .await;
}

fn read_pid(path: &Path) -> Option<u32> {
    std::fs::read_to_string(path).ok()?.trim().parse().ok()
}

#[tokio::test]
async fn a_command_and_its_children_die_when_troupe_is_sigkilled() {
    let dir = tempfile::tempdir().unwrap();
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "run_command::tests::tether_helper",
            "--nocapture",
        ])
        .env(TETHER_HELPER, dir.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let (leader, grandchild) = (
        dir.path().join("leader.pid"),
        dir.path().join("grandchild.pid"),
    );
    wait_until("the helper to start its command", || {
        read_pid(&leader).is_some() && read_pid(&grandchild).is_some()
    })
    .await;
    let (leader, grandchild) = (read_pid(&leader).unwrap(), read_pid(&grandchild).unwrap());
    assert!(!is_dead(leader) && !is_dead(grandchild));
    // SIGKILL: no clean-up code of the helper runs.
    helper.kill().unwrap();
    helper.wait().unwrap();
    wait_until("the command's shell to die with its parent", || {
        is_dead(leader)
    })
    .await;
    wait_until("what the shell started to die with it", || {
        is_dead(grandchild)
    })
    .await;
}

#[tokio::test]
async fn what_a_finished_command_left_running_is_not_killed_by_its_watchdog() {
    let f = fixture();
    // Unsandboxed: in a sandbox, its PID namespace ends with the command.
    let result = run_in(
        &f,
        SandboxSettings::off(),
        json!({"command": "nohup sleep 1000 >/dev/null 2>&1 & echo $! > left.pid"}),
    )
    .await;
    assert!(!result.is_error(), "{}", result.text);
    let left = read_pid(&f.cwd.join("left.pid")).unwrap();
    // The watchdog was dismissed, not fired: the process is still there.
    assert!(!is_dead(left));
    let pid = rustix::process::Pid::from_raw(i32::try_from(left).unwrap()).unwrap();
    rustix::process::kill_process(pid, rustix::process::Signal::KILL).unwrap();
    wait_until("the left-over sleep to be killed", || is_dead(left)).await;
}

#[tokio::test]
async fn in_the_sandbox_what_a_command_left_running_ends_with_it() {
    if Sandbox::detect_or_skip("what a sandboxed command left running").is_none() {
        return;
    }
    let f = fixture();
    let a = marker(41, 0);
    let result = run_cmd(
        &f,
        json!({"command": format!("nohup sleep {a} >/dev/null 2>&1 & sleep 0.2")}),
    )
    .await;
    assert!(!result.is_error(), "{}", result.text);
    wait_until("the left-over sleep to end with its sandbox", || {
        sleeping(&a).is_empty()
    })
    .await;
}
