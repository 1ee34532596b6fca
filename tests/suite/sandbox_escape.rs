//! Attempts to get out of an environment's sandbox: each must fail, and
//! the machine must be as it was. `docs/security.md` names each test and
//! what stops it.
//!
//! They run real commands in real sandboxes (bubblewrap, the helper's
//! Landlock, seccomp and rlimits, the control groups where the machine has
//! them), through the same actor a house turn's `run_command` uses. Where
//! no sandbox works they are skipped (failed where
//! `TROUPE_TEST_REQUIRE_SANDBOX` is set, as on CI).

use std::time::Duration;

use troupe::runtime::environment::CommandOutcome;
use troupe::runtime::id::EnvironmentId;
use troupe::runtime::sandbox::Sandbox;
use troupe::{EnvironmentsRef, Runtime};

use super::environments::{until, with_environment};
use super::support::TestHome;

struct Env {
    home: TestHome,
    _rt: Runtime,
    envs: EnvironmentsRef,
    id: EnvironmentId,
}

impl Env {
    async fn new(test: &str) -> Option<Env> {
        Sandbox::detect_or_skip(test)?;
        let home = TestHome::new();
        let (rt, envs, id) = with_environment(&home, &[]).await;
        Some(Env {
            home,
            _rt: rt,
            envs,
            id,
        })
    }

    async fn run(&self, command: &str) -> CommandOutcome {
        self.run_for(command, 30).await
    }

    async fn run_for(&self, command: &str, secs: u64) -> CommandOutcome {
        let out = self
            .envs
            .exec(self.id, command, Some(Duration::from_secs(secs)))
            .await
            .expect("the command ran");
        assert!(out.sandboxed, "{out:?}");
        out
    }

    fn workdir(&self) -> std::path::PathBuf {
        troupe::actors::environment::workdir(&troupe::runtime::Home::new(self.home.path()), self.id)
    }

    fn config(&self) -> std::path::PathBuf {
        self.home.path().join("config.toml")
    }
}

fn failed(out: &CommandOutcome) -> bool {
    !out.success()
}

/// The process ids on the machine whose command line starts with `marker`.
pub fn host_processes(marker: &str) -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|c| c.starts_with(marker.as_bytes()))
        })
        .collect()
}

#[tokio::test]
async fn escape_write_outside_the_workdir_fails() {
    let Some(env) = Env::new("escape_write_outside_the_workdir_fails").await else {
        return;
    };
    let before = std::fs::read(env.config()).unwrap();
    let config = env.config().display().to_string();
    for attempt in [
        "touch /usr/escaped".to_string(),
        "touch /etc/escaped".to_string(),
        "touch /escaped".to_string(),
        "touch /workspace/../escaped".to_string(),
        format!("echo pwned > {config}"),
        "echo x > /proc/self/comm".to_string(),
    ] {
        let out = env.run(&attempt).await;
        assert!(failed(&out), "{attempt}: {out:?}");
    }
    assert!(!std::path::Path::new("/usr/escaped").exists());
    assert!(!std::path::Path::new("/etc/escaped").exists());
    assert!(!std::path::Path::new("/escaped").exists());
    assert_eq!(std::fs::read(env.config()).unwrap(), before);
    // Inside the workdir, writing works.
    assert!(env.run("touch inside").await.success());
    assert!(env.workdir().join("inside").exists());
}

#[tokio::test]
async fn escape_read_etc_shadow_fails() {
    let Some(env) = Env::new("escape_read_etc_shadow_fails").await else {
        return;
    };
    let out = env.run("cat /etc/shadow; cat /etc/gshadow").await;
    assert!(failed(&out), "{out:?}");
    assert!(!out.output.contains("root:"), "{}", out.output);
}

#[tokio::test]
async fn escape_read_the_homes_database_and_config_fails() {
    let Some(env) = Env::new("escape_read_the_homes_database_and_config_fails").await else {
        return;
    };
    let home = env.home.path().display().to_string();
    assert!(env.home.path().join("troupe.db").exists());
    for file in ["troupe.db", "config.toml", "models.toml"] {
        let out = env.run(&format!("cat {home}/{file}")).await;
        assert!(failed(&out), "{file}: {out:?}");
    }
    let out = env.run(&format!("ls {home}")).await;
    assert!(failed(&out), "{out:?}");
}

#[tokio::test]
async fn escape_follow_a_symlink_planted_in_the_workdir_fails() {
    let Some(env) = Env::new("escape_follow_a_symlink_planted_in_the_workdir_fails").await else {
        return;
    };
    let before = std::fs::read(env.config()).unwrap();
    let work = env.workdir();
    std::os::unix::fs::symlink(env.config(), work.join("to-config")).unwrap();
    std::os::unix::fs::symlink(env.home.path(), work.join("to-home")).unwrap();
    std::os::unix::fs::symlink("/etc/shadow", work.join("to-shadow")).unwrap();
    for attempt in [
        "cat to-config",
        "echo pwned > to-config",
        "cat to-home/troupe.db",
        "echo pwned > to-home/config.toml",
        "cat to-shadow",
    ] {
        let out = env.run(attempt).await;
        assert!(failed(&out), "{attempt}: {out:?}");
    }
    assert_eq!(std::fs::read(env.config()).unwrap(), before);
    // Made inside: a link to the machine's home resolves inside the sandbox.
    let out = env
        .run(&format!(
            "ln -s {} inner && cat inner/config.toml",
            env.home.path().display()
        ))
        .await;
    assert!(failed(&out), "{out:?}");
}

#[tokio::test]
async fn escape_connect_to_the_hosts_loopback_fails() {
    let Some(env) = Env::new("escape_connect_to_the_hosts_loopback_fails").await else {
        return;
    };
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let out = env
        .run(&format!("echo hello > /dev/tcp/127.0.0.1/{port}"))
        .await;
    assert!(failed(&out), "{out:?}");
    let accepted = listener.accept();
    assert!(
        matches!(&accepted, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "a connection reached the host: {accepted:?}"
    );
}

#[tokio::test]
async fn escape_resolve_a_name_fails() {
    let Some(env) = Env::new("escape_resolve_a_name_fails").await else {
        return;
    };
    let out = env.run("getent hosts example.com").await;
    assert!(failed(&out), "{out:?}");
    let out = env
        .run("cat /sys/class/net/*/address; ls /sys/class/net")
        .await;
    assert!(!out.output.contains("eth"), "{}", out.output);
}

#[tokio::test]
async fn escape_fork_bomb_is_stopped_by_the_process_limit() {
    let Some(env) = Env::new("escape_fork_bomb_is_stopped_by_the_process_limit").await else {
        return;
    };
    let bomb = "python3 -c '
import os, time
n = 0
try:
    while n < 5000:
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
        n += 1
    print(\"unlimited\", n)
except OSError as e:
    print(\"stopped after\", n, e.errno)
'";
    let started = std::time::Instant::now();
    let out = env.run_for(bomb, 20).await;
    assert!(out.output.contains("stopped after"), "{out:?}");
    let forked: u32 = out
        .output
        .split_whitespace()
        .nth(2)
        .and_then(|n| n.parse().ok())
        .unwrap();
    assert!(forked < 64, "{forked} processes");
    assert!(started.elapsed() < Duration::from_secs(20));
    // The machine still starts processes at once, and none was left behind.
    let host = std::time::Instant::now();
    assert!(std::process::Command::new("true")
        .status()
        .unwrap()
        .success());
    assert!(host.elapsed() < Duration::from_secs(2));
    assert!(env.run("true").await.success());
}

#[tokio::test]
async fn escape_memory_hog_is_killed_at_the_limit() {
    let Some(env) = Env::new("escape_memory_hog_is_killed_at_the_limit").await else {
        return;
    };
    let out = env
        .run("python3 -c 'b = bytearray(512 * 1024 * 1024); b[::4096] = b\"x\" * len(b[::4096]); print(\"survived\")'")
        .await;
    assert!(failed(&out), "{out:?}");
    assert!(!out.output.contains("survived"), "{}", out.output);
    assert!(
        env.run("echo alive").await.success(),
        "the environment lives on"
    );
}

#[tokio::test]
async fn escape_disk_fill_is_stopped_at_the_quota() {
    let Some(env) = Env::new("escape_disk_fill_is_stopped_at_the_quota").await else {
        return;
    };
    let out = env.run("head -c 64M /dev/zero > big").await;
    assert!(failed(&out), "{out:?}");
    let size = std::fs::metadata(env.workdir().join("big")).unwrap().len();
    assert!(size <= 8 * 1024 * 1024, "{size} bytes written");
    // Many files below the per-file cap: the workdir's watcher stops it.
    let out = env
        .run_for(
            "rm -f big; for i in $(seq 1 100); do head -c 7M /dev/zero > f$i || exit 1; done",
            20,
        )
        .await;
    assert!(out.ending.contains("quota"), "{out:?}");
    // While over its quota, the environment runs nothing.
    let refused = env.envs.exec(env.id, "true", None).await.unwrap_err();
    assert!(refused.to_string().contains("quota"), "{refused}");
}

#[tokio::test]
async fn escape_ptrace_another_process_fails() {
    let Some(env) = Env::new("escape_ptrace_another_process_fails").await else {
        return;
    };
    let out = env
        .run(
            "sleep 30 & python3 -c '
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.ptrace(16, int(sys.argv[1]), 0, 0)
print(r, ctypes.get_errno())
' $!; kill %1",
        )
        .await;
    assert_eq!(out.output.trim(), "-1 1", "{out:?}");
}

#[tokio::test]
async fn escape_mount_fails() {
    let Some(env) = Env::new("escape_mount_fails").await else {
        return;
    };
    for attempt in [
        "mount -t tmpfs none /tmp",
        "mount --bind /workspace /tmp",
        "unshare -r -m true",
    ] {
        let out = env.run(attempt).await;
        assert!(failed(&out), "{attempt}: {out:?}");
    }
}

#[tokio::test]
async fn escape_setuid_binary_gains_nothing() {
    let Some(env) = Env::new("escape_setuid_binary_gains_nothing").await else {
        return;
    };
    // A set-user-id copy of `id`, owned by the machine's root.
    let planted = env.workdir().join("suid-id");
    std::fs::copy("/usr/bin/id", &planted).unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&planted, std::fs::Permissions::from_mode(0o4755)).unwrap();
    let out = env.run("./suid-id -u").await;
    assert!(out.success(), "{out:?}");
    let uid = std::fs::metadata(env.workdir()).map(|m| {
        use std::os::unix::fs::MetadataExt;
        m.uid()
    });
    assert_ne!(out.output.trim(), "0", "the setuid bit took effect");
    assert_eq!(out.output.trim(), uid.unwrap().to_string());
}

#[tokio::test]
async fn escape_read_another_sandboxs_workdir_fails() {
    let Some(env) = Env::new("escape_read_another_sandboxs_workdir_fails").await else {
        return;
    };
    assert!(env.run("echo SECRET-A > secret").await.success());
    let other = env.envs.create(None).await.unwrap().info;
    assert_ne!(other.id, env.id);
    let path = env.workdir().join("secret");
    let out = env
        .envs
        .exec(other.id, &format!("cat {}", path.display()), None)
        .await
        .unwrap();
    assert!(failed(&out), "{out:?}");
    assert!(!out.output.contains("SECRET-A"));
    let out = env
        .envs
        .exec(other.id, "ls -a /workspace; ls /", None)
        .await
        .unwrap();
    assert!(!out.output.contains("secret"), "{}", out.output);
}

#[tokio::test]
async fn escape_kill_another_sandboxs_process_fails() {
    let Some(env) = Env::new("escape_kill_another_sandboxs_process_fails").await else {
        return;
    };
    let marker = format!("troupe-victim-{}", std::process::id());
    let victim = {
        let (envs, id, marker) = (env.envs.clone(), env.id, marker.clone());
        tokio::spawn(async move {
            envs.exec(id, &format!("exec -a {marker} sleep 60"), None)
                .await
        })
    };
    until("the victim runs", || !host_processes(&marker).is_empty()).await;
    let pid = host_processes(&marker)[0];
    let other = env.envs.create(None).await.unwrap().info;
    let out = env
        .envs
        .exec(
            other.id,
            &format!("kill -9 {pid}; pkill -9 -f {marker}; kill -9 -1"),
            None,
        )
        .await
        .unwrap();
    assert!(failed(&out), "{out:?}");
    assert!(
        std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "the victim was killed"
    );
    env.envs.stop(env.id).await.unwrap();
    let ended = tokio::time::timeout(super::support::WAIT, victim)
        .await
        .unwrap()
        .unwrap();
    assert!(ended.is_err(), "stopping the environment ends its command");
    until("the victim is gone", || host_processes(&marker).is_empty()).await;
}

#[tokio::test]
async fn escape_read_the_hosts_proc_1_environ_fails() {
    let Some(env) = Env::new("escape_read_the_hosts_proc_1_environ_fails").await else {
        return;
    };
    let out = env
        .run("cat /proc/1/environ; echo; ls /proc | grep -c '^[0-9]'")
        .await;
    if let Ok(host) = std::fs::read("/proc/1/environ") {
        let host = String::from_utf8_lossy(&host).replace('\0', "");
        if !host.is_empty() {
            assert!(!out.output.contains(&host), "{}", out.output);
        }
    }
    let visible: u32 = out
        .output
        .lines()
        .last()
        .and_then(|n| n.trim().parse().ok())
        .unwrap();
    assert!(visible < 10, "{visible} processes visible: {}", out.output);
}

#[tokio::test]
async fn escape_a_process_left_running_is_reaped_when_its_command_ends() {
    let Some(env) = Env::new("escape_a_process_left_running_is_reaped_when_its_command_ends").await
    else {
        return;
    };
    let marker = format!("troupe-straggler-{}", std::process::id());
    let out = env
        .run(&format!(
            "(exec -a {marker} sleep 300) > /dev/null 2>&1 & disown; setsid sh -c 'exec -a {marker} sleep 300' > /dev/null 2>&1 & echo left"
        ))
        .await;
    assert!(out.success(), "{out:?}");
    until("the stragglers are reaped", || {
        host_processes(&marker).is_empty()
    })
    .await;
}

#[tokio::test]
async fn escape_troupes_environment_variables_do_not_reach_a_command() {
    let Some(env) = Env::new("escape_troupes_environment_variables_do_not_reach_a_command").await
    else {
        return;
    };
    let out = env.run("env | cut -d= -f1 | sort").await;
    let names: Vec<&str> = out.output.lines().collect();
    // The model relay's: where it is, and placeholder keys.
    let relay: Vec<(String, String)> = troupe::actors::environment::relay::environment();
    for name in &names {
        assert!(
            relay.iter().any(|(relayed, _)| relayed == name)
                || [
                    "PATH",
                    "HOME",
                    "USER",
                    "LANG",
                    "TERM",
                    "PAGER",
                    "GIT_PAGER",
                    "NO_COLOR",
                    "TMPDIR",
                    "PWD",
                    "SHLVL",
                    "_",
                    "OLDPWD"
                ]
                .contains(name),
            "{name} leaked into the sandbox: {names:?}"
        );
    }
    let out = env.run("env | grep -E '^(OPENAI|ANTHROPIC)_' | sort").await;
    let mut expected: Vec<String> = relay
        .iter()
        .filter(|(name, _)| name.starts_with("OPENAI_") || name.starts_with("ANTHROPIC_"))
        .map(|(name, value)| format!("{name}={value}"))
        .collect();
    expected.sort();
    assert_eq!(out.output.lines().collect::<Vec<_>>(), expected, "{out:?}");
}
