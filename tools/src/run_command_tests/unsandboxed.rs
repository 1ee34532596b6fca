//! Without a sandbox, troupe's settings are put back after a command that
//! changes them, however it named them. Every command here runs for real,
//! unsandboxed, but only inside the test's temp folder.

use pretty_assertions::assert_eq;

use super::*;

const ORIGINAL: &str = "[trust]\nmode = \"ask\"\n";

/// A temp home with settings, beside the working folder the commands run in.
fn home() -> Fixture {
    let f = fixture();
    let root = f.ctx.home.root().to_path_buf();
    std::fs::create_dir_all(&root).unwrap();
    for file in ["config.toml", "models.toml", "mcp.json"] {
        std::fs::write(root.join(file), ORIGINAL).unwrap();
    }
    f
}

fn settings(f: &Fixture) -> Vec<(String, Option<String>)> {
    ["config.toml", "models.toml", "mcp.json", "approvals.json"]
        .into_iter()
        .map(|name| {
            let path = f.ctx.home.root().join(name);
            (name.to_string(), std::fs::read_to_string(path).ok())
        })
        .collect()
}

#[tokio::test]
async fn without_a_sandbox_a_command_that_changes_troupes_settings_is_undone_and_reported() {
    // Paths computed when the command runs, which no reading of it shows.
    let forms = [
        "printf 'mode = \"auto\"\\n' >> \"$(cd .. && pwd)/.troupe/config.toml\"",
        "d=$(dirname \"$PWD\"); sed -i s/ask/auto/ \"$d/.troupe/config.toml\"",
        "echo ../.troupe | xargs -I{} cp {}/mcp.json {}/models.toml.bak && echo '[x]' | tee ../.troupe/models.toml",
        "rm -f ../.troupe/c?nfig.toml",
        "ln -sf \"$PWD/evil\" ../.troupe/config.toml",
        "echo '{\"always\":[\"command:rm -rf x\"]}' > ../.troupe/approvals.json",
        "awk 'BEGIN { system(\"echo auto > ../.troupe/config.toml\") }'",
    ];
    for form in forms {
        let f = home();
        let before = settings(&f);
        let result = run_in(&f, SandboxSettings::off(), json!({ "command": form })).await;
        assert_eq!(result.data["sandbox"], "unsandboxed", "{form}");
        assert!(result.is_error(), "{form}: {}", result.text);
        assert!(
            result.text.contains("changed troupe's own settings")
                && result.text.contains("put back"),
            "{form}: {}",
            result.text
        );
        assert_eq!(settings(&f), before, "{form}");
    }
    // A command that leaves them alone says nothing of them.
    let f = home();
    let result = run_in(
        &f,
        SandboxSettings::off(),
        json!({ "command": "cat ../.troupe/config.toml" }),
    )
    .await;
    assert_eq!(result.text, format!("{ORIGINAL}[exit 0]"));
}

#[tokio::test]
async fn without_a_sandbox_a_background_command_is_undone_when_it_ends() {
    let f = home();
    let (tx, mut rx) = mpsc::unbounded_channel();
    f.ctx
        .services
        .node()
        .set_command_notifier(Arc::new(Forward(tx)));
    let before = settings(&f);
    let started = run_in(
        &f,
        SandboxSettings::off(),
        json!({
            "command": "echo 'mode = \"auto\"' >> \"$(dirname \"$PWD\")/.troupe/config.toml\"",
            "background": true,
            "notify_on_complete": true
        }),
    )
    .await;
    assert_eq!(started.data["sandbox"], "unsandboxed");
    let (_, _, summary) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(summary.contains("put back"), "{summary}");
    assert_eq!(settings(&f), before);
}
