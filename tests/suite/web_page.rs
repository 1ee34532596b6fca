//! The web page in a real browser: Debian's Chromium driven by
//! playwright-core (`tests/browser/page.mjs`) signs in, posts in a thread,
//! sees a scripted bot's answer stream in, approves its command, follows
//! the link to the thread it made, uploads a file and sees it listed. The
//! screenshots of each step are kept in `target/test-artifacts/web-page/`.
//!
//! Needs `chromium` (`apt-get install chromium`) and `npm ci --prefix
//! tests/browser`, which `scripts/test` installs; without them the test
//! says so and passes, unless `TROUPE_TEST_REQUIRE_BROWSER=1` asks it to
//! fail instead (as `scripts/test` does once it has installed them).

use std::path::{Path, PathBuf};
use std::process::Stdio;

use serde_json::json;
use troupe::runtime::model::Turn;

use super::server::Served;

fn chromium() -> PathBuf {
    std::env::var_os("TROUPE_CHROMIUM").map_or_else(|| "/usr/bin/chromium".into(), PathBuf::from)
}

#[tokio::test]
async fn a_person_uses_the_web_page_in_chromium() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let driver = root.join("tests/browser/node_modules/playwright-core");
    if !chromium().exists() || !driver.exists() {
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
    let s = Served::start(vec![
        Turn::tool_call(
            "run_command",
            json!({"command": "rm -rf ./build && echo removed"}),
        ),
        Turn::tool_call("create_thread", json!({"name": "cleanup-log"})),
        Turn::text("cleaned up"),
    ])
    .await;
    s.environment().await;
    let artifacts = root.join("target/test-artifacts/web-page");
    let _ = std::fs::remove_dir_all(&artifacts);
    let run = tokio::process::Command::new("node")
        .arg(root.join("tests/browser/page.mjs"))
        .args([&s.base, &s.ada])
        .arg(&artifacts)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(std::time::Duration::from_secs(120), run)
        .await
        .expect("the browser run ends within 2 minutes")
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert!(
        out.status.success(),
        "{stderr}\n{stdout}\nscreenshots: {}",
        artifacts.display()
    );
    let result: serde_json::Value =
        serde_json::from_str(stdout.lines().last().unwrap_or("{}")).unwrap();
    let first_load = result["first_load_bytes"].as_u64().unwrap();
    assert!(
        first_load <= 100 * 1024,
        "the first load took {first_load} bytes"
    );
    for shot in ["1-sign-in", "2-house", "3-approval", "4-answer", "5-files"] {
        assert!(artifacts.join(format!("{shot}.png")).exists(), "{shot}");
    }
    assert!(
        !s.work.path().join("build").exists(),
        "the approved command ran"
    );
    s.stop().await;
}
