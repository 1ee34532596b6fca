//! A sandboxed local command reaches no service of the machine: its
//! network is a namespace of its own whose only way out is troupe's egress
//! proxy, which refuses loopback and private addresses. The commands run
//! through the real `run_command`, in the real sandbox, with this build's
//! `troupe` holding the namespace, against a listener on the machine that
//! must see no connection. `docs/security.md` names these tests.

use std::net::TcpListener;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use troupe::runtime::home::Home;
use troupe::runtime::protocol::ToolResult;
use troupe::runtime::sandbox::{Sandbox, SandboxSettings};
use troupe::tools::run_command::{run_command, CommandHost};
use troupe::{Tool, ToolContext};

use super::support::TestHome;

/// A listener on every address of the machine (IPv4 and IPv6), counting
/// the connections it gets.
struct Listener {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

fn listener() -> Listener {
    let socket = TcpListener::bind("[::]:0").unwrap();
    let port = socket.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counted = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in socket.incoming().flatten() {
            counted.fetch_add(1, Ordering::SeqCst);
            let _ = std::io::Write::write_all(
                &mut &stream,
                b"HTTP/1.1 200 OK\r\nContent-Length: 7\r\nConnection: close\r\n\r\nreached",
            );
        }
    });
    Listener { port, accepted }
}

/// The machine's addresses other than loopback (`hostname -I`).
fn other_addresses() -> Vec<String> {
    std::process::Command::new("hostname")
        .arg("-I")
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

fn tool(allow: Vec<std::net::IpAddr>) -> impl Tool {
    run_command::tool(CommandHost::with_sandbox(SandboxSettings {
        allow_addresses: allow,
        helper: Some(env!("CARGO_BIN_EXE_troupe").into()),
        ..SandboxSettings::default()
    }))
}

fn context(home: &TestHome) -> ToolContext {
    let root = std::fs::canonicalize(home.path()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    std::fs::create_dir_all(root.join(".troupe")).unwrap();
    ToolContext::standalone(Home::new(root.join(".troupe")), cwd)
}

async fn run(tool: &impl Tool, ctx: &ToolContext, command: &str) -> ToolResult {
    tokio::time::timeout(
        Duration::from_secs(60),
        tool.call(json!({ "command": command, "timeout": 20 }), ctx),
    )
    .await
    .expect("run_command returned within a minute")
}

fn url_host(address: &str) -> String {
    if address.contains(':') {
        format!("[{address}]")
    } else {
        address.to_string()
    }
}

#[tokio::test]
async fn a_sandboxed_command_reaches_no_service_on_the_machine_by_any_address() {
    if Sandbox::detect_or_skip("a sandboxed command's network").is_none() {
        return;
    }
    let home = TestHome::new();
    let ctx = context(&home);
    let tool = tool(vec![]);
    let l = listener();
    let port = l.port;
    let mut hosts: Vec<String> = ["127.0.0.1", "localhost", "::1", "0.0.0.0", "127.0.0.2"]
        .into_iter()
        .map(str::to_string)
        .collect();
    hosts.extend(other_addresses());
    for host in &hosts {
        let h = url_host(host);
        let bare = host.as_str();
        for command in [
            // As a command would: curl obeys HTTP_PROXY, and NO_PROXY,
            // which keeps the loopback names on the namespace's own.
            format!("curl -sS --max-time 10 http://{h}:{port}/"),
            // Through the proxy, whatever the address (`--noproxy ''`
            // overrides NO_PROXY, which applies to `-x` too).
            format!("curl -sS --max-time 10 --noproxy '' -x \"$HTTP_PROXY\" http://{h}:{port}/"),
            // Around the proxy: straight at the address.
            format!("curl -sS --max-time 10 --noproxy '*' http://{h}:{port}/"),
            format!(
                "python3 -c \"import socket; socket.create_connection(('{bare}', {port}), 10); print('reached')\""
            ),
            format!("exec 3<>/dev/tcp/{bare}/{port} && echo reached"),
        ] {
            let result = run(&tool, &ctx, &command).await;
            assert_eq!(result.data["sandbox"], "bubblewrap", "{command}");
            assert!(
                !result.text.contains("reached"),
                "`{command}` reached the machine's listener: {}",
                result.text
            );
        }
    }
    // Through the proxy by CONNECT, too: refused with the reason.
    let tunnel = run(
        &tool,
        &ctx,
        &format!("curl -sS --max-time 10 --noproxy '' -p https://127.0.0.1:{port}/"),
    )
    .await;
    assert!(tunnel.is_error(), "{}", tunnel.text);
    assert!(tunnel.text.contains("403"), "{}", tunnel.text);
    let plain = run(
        &tool,
        &ctx,
        &format!("curl -s --max-time 10 --noproxy '' -x \"$HTTP_PROXY\" http://localhost:{port}/"),
    )
    .await;
    assert!(
        plain
            .text
            .contains("sandboxed commands reach only the public internet"),
        "{}",
        plain.text
    );
    assert_eq!(l.accepted.load(Ordering::SeqCst), 0, "a command connected");
}

#[tokio::test]
async fn the_proxy_carries_a_commands_request_to_an_allowed_address() {
    if Sandbox::detect_or_skip("a sandboxed command through the proxy").is_none() {
        return;
    }
    let home = TestHome::new();
    let ctx = context(&home);
    // The loopback stand-in for the public internet: an allowed address.
    let tool = tool(vec!["127.0.0.1".parse().unwrap()]);
    let l = listener();
    let through = run(
        &tool,
        &ctx,
        &format!(
            "curl -sS --max-time 10 http://127.0.0.1:{}/ -x \"$HTTP_PROXY\"",
            l.port
        ),
    )
    .await;
    assert_eq!(through.text, "reached\n[exit 0]");
    // As a command would, by the proxy variables alone: an allowed
    // loopback address is not kept off the proxy by NO_PROXY.
    let by_default = run(
        &tool,
        &ctx,
        &format!("curl -sS --max-time 10 http://127.0.0.1:{}/", l.port),
    )
    .await;
    assert_eq!(by_default.text, "reached\n[exit 0]");
    // The proxy is the only way: around it, the same address is not there.
    let around = run(
        &tool,
        &ctx,
        &format!(
            "curl -sS --max-time 10 --noproxy '*' http://127.0.0.1:{}/",
            l.port
        ),
    )
    .await;
    assert!(around.is_error(), "{}", around.text);
    assert_eq!(l.accepted.load(Ordering::SeqCst), 2);
}

/// A `browser_exec` program is code run on the machine like a command, so
/// it gets a command's network: through the same proxy, under the same
/// rule (here 127.0.0.1 allowed, the rest of the machine not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_browser_programs_network_is_a_commands() {
    use troupe::tools::browser::{chrome, Browser, BrowserSettings};
    use troupe::tools::browser_exec::{browser_exec, BrowserExecHost};
    use troupe::tools::web::guard::Policy;

    if Sandbox::detect_or_skip("a browser program's network").is_none() {
        return;
    }
    let program = match chrome::find(None) {
        Ok(program) => program,
        Err(why) => {
            assert!(
                std::env::var_os("TROUPE_TEST_REQUIRE_BROWSER").is_none(),
                "a browser is required here (TROUPE_TEST_REQUIRE_BROWSER) but {why}"
            );
            eprintln!("skipping a browser program's network: {why}");
            return;
        }
    };
    let home = TestHome::new();
    let ctx = context(&home);
    let browser = Browser::new(BrowserSettings {
        program,
        dir: ctx.home.root().join("browser"),
        idle: Duration::from_secs(120),
        display: false,
        policy: Policy::default(),
    });
    let commands = CommandHost::with_sandbox(SandboxSettings {
        allow_addresses: vec!["127.0.0.1".parse().unwrap()],
        helper: Some(env!("CARGO_BIN_EXE_troupe").into()),
        ..SandboxSettings::default()
    });
    let tool = browser_exec::tool(BrowserExecHost {
        sandbox: SandboxSettings {
            allow_addresses: vec!["127.0.0.1".parse().unwrap()],
            helper: Some(env!("CARGO_BIN_EXE_troupe").into()),
            ..SandboxSettings::default()
        },
        policy: Policy::default(),
        network: Some(commands.network()),
        browser: Some(Arc::clone(&browser)),
    });
    let l = listener();
    let fetch = |host: &str| {
        json!({
            "code": format!(
                "# fetch a page from Python\nimport urllib.request\ntry:\n    \
                 print(urllib.request.urlopen('http://{host}:{}/', timeout=10).read().decode())\n\
                 except Exception as e:\n    print('refused:', e)",
                l.port
            ),
            "mode": "headless",
        })
    };
    let allowed = tool.call(fetch("127.0.0.1"), &ctx).await;
    assert!(allowed.text.contains("reached"), "{}", allowed.text);
    let refused = tool.call(fetch("127.0.0.2"), &ctx).await;
    assert!(refused.text.contains("refused:"), "{}", refused.text);
    assert!(!refused.text.contains("reached"), "{}", refused.text);
    assert_eq!(l.accepted.load(Ordering::SeqCst), 1);
    browser.stop(None).await.unwrap();
}
