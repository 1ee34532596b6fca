//! `troupe bench browser`: troupe's own browser, headless, driven by
//! `browser_exec` as an agent drives it.
//!
//! It measures a browser's start (process exec to its DevTools connection
//! and first tab, `--n` starts of 5 at most), then `--n` warm calls that
//! each navigate to a local page and read its title — the whole call: the
//! sandboxed Python program, its helpers over the control socket, the
//! navigation and the load — and the idle browser's resident memory (the proportional set
//! size of every process of its group, after the calls). The page is served on
//! 127.0.0.1 and the tool allows private addresses, as a user reaching
//! their own service would.

use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use troupe_runtime::home::Home;
use troupe_runtime::sandbox::SandboxSettings;
use troupe_runtime::tool::{Tool, ToolContext};
use troupe_tools::browser::{chrome, Browser, BrowserSettings, Mode};
use troupe_tools::browser_exec::{browser_exec, BrowserExecHost};
use troupe_tools::web::guard::Policy;

/// Serves a small page titled `Bench` to every request.
async fn serve() -> anyhow::Result<(String, tokio::task::JoinHandle<()>)> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let body =
        "<!doctype html><html><head><title>Bench</title></head><body><p>hello</p></body></html>";
    let response = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/html\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    let task = tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let response = response.clone();
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut seen = Vec::new();
                while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                    match stream.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = stream.write_all(response.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
        }
    });
    Ok((format!("http://{addr}/page"), task))
}

/// The resident memory of every process in the group `pgid`, in KiB
/// (proportional set size, so shared pages are not counted twice).
fn group_rss_kib(pgid: u32) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // Fields after the command's closing parenthesis: state, ppid, pgrp.
        let fields: Vec<&str> = stat.rsplit(") ").next().unwrap_or("").split(' ').collect();
        if fields.get(2).and_then(|g| g.parse::<u32>().ok()) != Some(pgid) {
            continue;
        }
        // Proportional: pages the browser's processes share count once.
        let rollup =
            std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup")).unwrap_or_default();
        total += rollup
            .lines()
            .find_map(|l| l.strip_prefix("Pss:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    total
}

/// Browser starts, then `n` warm navigate-and-title calls, then idle memory.
pub async fn run(n: usize) -> anyhow::Result<serde_json::Value> {
    let program = chrome::find(None).map_err(|why| anyhow::anyhow!("{why}"))?;
    let (url, server) = serve().await?;
    let dir = tempfile::tempdir()?;
    let root = std::fs::canonicalize(dir.path())?;
    let home = Home::new(root.join("home"));
    let settings = BrowserSettings {
        program,
        dir: home.root().join("browser"),
        idle: Duration::from_secs(600),
        display: false,
        policy: Policy {
            allow_private: true,
            allow: vec![],
        },
    };
    // Starts: each a fresh browser, to its connection and first tab.
    let mut starts = Vec::new();
    for _ in 0..n.clamp(1, 5) {
        let browser = Browser::new(settings.clone());
        let started = Instant::now();
        let instance = browser
            .acquire(Mode::Headless)
            .await
            .map_err(anyhow::Error::msg)?;
        let tab = instance
            .helper(
                "ensure_real_tab",
                &json!({}),
                &Policy::default(),
                &settings.workspace(),
            )
            .await
            .map_err(anyhow::Error::msg)?;
        starts.push(started.elapsed());
        anyhow::ensure!(tab.get("target_id").is_some(), "no tab: {tab}");
        drop(instance);
        browser.stop(None).await.map_err(anyhow::Error::msg)?;
    }
    let browser = Browser::new(settings.clone());
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd)?;
    let ctx = ToolContext::standalone(home, cwd);
    let tool = browser_exec::tool(BrowserExecHost {
        sandbox: SandboxSettings {
            network: false,
            ..SandboxSettings::default()
        },
        policy: Policy {
            allow_private: true,
            allow: vec![],
        },
        network: None,
        browser: Some(std::sync::Arc::clone(&browser)),
    });
    let args = json!({
        "code": format!("# read the title\nprint(goto_url({url:?})['title'])"),
        "mode": "headless",
    });
    // The first call starts the browser; it is not counted.
    let first = tool.call(args.clone(), &ctx).await;
    anyhow::ensure!(!first.is_error(), "browser_exec failed: {}", first.text);
    let sandbox = first.data["sandbox"].as_str().unwrap_or("").to_owned();
    let mut warm = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        let result = tool.call(args.clone(), &ctx).await;
        warm.push(started.elapsed());
        anyhow::ensure!(
            result.text.contains("\nBench\n"),
            "no title: {}",
            result.text
        );
    }
    let running = browser.status().await.map_err(anyhow::Error::msg)?;
    let pid = running
        .first()
        .and_then(|r| r.pid)
        .context("no browser running")?;
    let idle_rss_kib = group_rss_kib(pid);
    browser.stop(None).await.map_err(anyhow::Error::msg)?;
    server.abort();
    Ok(json!({
        "workload": "browser",
        "n": n,
        "sandbox": sandbox,
        "start": super::percentiles(starts),
        "warm_call": super::percentiles(warm),
        "idle_pss_mib": idle_rss_kib as f64 / 1024.0,
    }))
}
