//! The web page in a real browser: Debian's Chromium driven by
//! playwright-core (`tests/browser/page.mjs`) signs in, posts in a thread,
//! sees a scripted bot's answer stream in as Markdown, approves its
//! command, reloads and finds the tool folds, posts with Enter (a
//! `<script>` in it stays text) and sees the bot's failed turn say why,
//! loses the server and gets it back (a banner, a post kept and retried,
//! the missed messages, an unread mark), sees the bot's GIF as an image
//! with its attribution, pins the thread, opens a deep link, is laid out at
//! 375 px and in dark mode, follows the link to the thread the bot made,
//! uploads a file and sees it listed, completes an @mention and recalls the
//! last message with ↑. Then the owner — a person of the house `home` —
//! opens the owner's views, adds a person to `acme` and changes a bot's
//! listen mode, and the new person signs in with the token shown, all while
//! the server runs. axe-core finds no serious violation and no skipped heading level on any view. The
//! screenshots of each step are kept in `target/test-artifacts/web-page/`,
//! with `result.json`: the first load's bytes, the time to render a thread
//! of 1,000 messages, axe's findings.
//!
//! Needs `chromium` (`apt-get install chromium`) and `npm ci --prefix
//! tests/browser` (playwright-core and axe-core), which `scripts/test` installs; without them the test
//! says so and passes, unless `TROUPE_TEST_REQUIRE_BROWSER=1` asks it to
//! fail instead (as `scripts/test` does once it has installed them).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use troupe::runtime::model::{Fault, Turn};

use super::server::Served;

/// The bot's answer, in Markdown: a heading, a table, a code block, a
/// link, a link the page must not follow, a mention and a thread link.
const ANSWER: &str = "## Cleaned up\n\nThe build is **gone**.\n\n\
| step | result |\n|---|---|\n| rm | done |\n\n\
```sh\nrm -rf ./build\n```\n\n\
See [the docs](https://example.com/docs); not [this](javascript:alert(1)). \
Ask @ada, in troupe://thread/general.";

/// The message of the thread of 1,000 the page renders for a figure; the
/// page gets it with its `html` as the server renders it.
const NOTE: &str = "## Note\n\nSome **bold** and `code`, a [link](https://example.com) and @ada.\n\n- one\n- two\n\n```\nx = 1\n```";

fn chromium() -> PathBuf {
    std::env::var_os("TROUPE_CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from)
}

#[tokio::test]
async fn a_person_uses_the_web_page_in_chromium() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let driver = root.join("tests/browser/node_modules/playwright-core");
    let axe = root.join("tests/browser/node_modules/axe-core");
    if !chromium().exists() || !driver.exists() || !axe.exists() {
        let why = format!(
            "needs {} (apt-get install chromium) and {} (npm ci --prefix tests/browser)",
            chromium().display(),
            driver.display()
        );
        assert!(
            std::env::var_os("TROUPE_TEST_REQUIRE_BROWSER").is_none(),
            "the browser test {why}"
        );
        eprintln!("skipped: the browser test {why}");
        return;
    }
    let gifs = super::conformance::GifService::start().await;
    let mut s = Served::start_configured(
        vec![
            Turn::tool_call(
                "run_command",
                json!({"command": "rm -rf ./build && echo removed"}),
            ),
            Turn::tool_call("create_thread", json!({"name": "cleanup-log"})),
            Turn::text(ANSWER),
            // The post sent with Enter: this turn fails, and says why.
            Turn::fault(Fault::Error),
            // The post made while the server was down, then the kept one.
            Turn::text("noted while you were away"),
            Turn::text("welcome back"),
            // A GIF, from the service on loopback.
            Turn::tool_call("send_gif", json!({"query": "happy dance"})),
            Turn::text("there you go"),
        ],
        |b| gifs.configure(b),
        |_| {},
    )
    .await;
    s.environment().await;
    let acme = s.runtime.house("acme").await.unwrap();
    acme.create_thread(Some("notes"), &[], "ada", &["ada".into()])
        .await
        .unwrap();
    let home = s.runtime.house("home").await.unwrap();
    home.add_human("olga", Some("Olga")).await.unwrap();
    let olga = home.issue_token("olga").await.unwrap().secret;
    let artifacts = root.join("target/test-artifacts/web-page");
    let _ = std::fs::remove_dir_all(&artifacts);
    let mut child = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/page.mjs"))
        .args([&s.base, &s.ada, &olga])
        .arg(&artifacts)
        .env("TROUPE_NOTE", NOTE)
        .env("TROUPE_NOTE_HTML", troupe::server::markdown::render(NOTE))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    // The script asks for the server to stop and start again; it reads
    // `done` on its input when that happened.
    let mut asks = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut input = child.stdin.take().unwrap();
    let mut stdout = String::new();
    let talk = async {
        while let Some(line) = asks.next_line().await.unwrap() {
            match line.as_str() {
                "ask: stop the server" => s.stop_server().await,
                "ask: start the server" => {
                    let general = acme.thread("general").await.unwrap();
                    general.post("ada", "missed while away").await.unwrap();
                    let notes = acme.thread("notes").await.unwrap();
                    notes.post("ada", "a note to read later").await.unwrap();
                    s.restart().await;
                }
                _ => {
                    stdout.push_str(&line);
                    stdout.push('\n');
                    continue;
                }
            }
            input.write_all(b"done\n").await.unwrap();
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(150), talk)
        .await
        .expect("the browser run ends within 150 s");
    let out = child.wait_with_output().await.unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{stderr}\n{stdout}\nscreenshots: {}",
        artifacts.display()
    );
    let result: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap();
    let first_load = result["first_load_bytes"].as_u64().unwrap();
    assert!(
        first_load <= 60 * 1024,
        "the first load took {first_load} bytes"
    );
    eprintln!(
        "web page: first load {first_load} B; a thread of 1,000 messages opens in {} ms (its newest {}), all 1,000 render in {} ms",
        result["render_thread_of_1000_ms"], result["rendered_on_open"], result["render_all_1000_ms"]
    );
    for shot in [
        "1-sign-in",
        "2-house",
        "3-approval",
        "4-answer",
        "5-reloaded",
        "6-failed-turn",
        "6-completion",
        "7-server-down",
        "8-gif",
        "8-back",
        "9-narrow",
        "10-dark",
        "11-files",
        "12-owner",
        "13-new-person",
    ] {
        assert!(artifacts.join(format!("{shot}.png")).exists(), "{shot}");
    }
    assert!(
        !s.work.path().join("build").exists(),
        "the approved command ran"
    );
    s.stop().await;
}
