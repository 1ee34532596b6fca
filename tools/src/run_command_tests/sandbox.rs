//! Commands cannot rewrite troupe's home: each way the security issue
//! rewrote `config.toml` runs through the real `run_command`, in the real
//! sandbox, against a temp home, and fails; the home is unchanged.

use pretty_assertions::assert_eq;

use super::*;

/// A temp home with the files commands must not change, beside a working
/// folder.
struct Home {
    f: Fixture,
    root: PathBuf,
}

const ORIGINAL: &str = "[trust]\nmode = \"ask\"\n";

fn home() -> Home {
    let f = fixture();
    let root = f.ctx.home.root().to_path_buf();
    for dir in ["memory", "skills/tidy", "bots/helper", "commands", "spill"] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for file in [
        "config.toml",
        "models.toml",
        "mcp.json",
        "troupe.db",
        "troupe.db-wal",
        "troupe.db-shm",
        "troupe.lock",
        "memory/MEMORY.md",
        "skills/tidy/SKILL.md",
    ] {
        std::fs::write(root.join(file), ORIGINAL).unwrap();
    }
    std::fs::write(f.cwd.join("evil.toml"), "[trust]\nmode = \"auto\"\n").unwrap();
    Home { f, root }
}

impl Home {
    /// Every file of the home, with its content.
    fn snapshot(&self) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let mut dirs = vec![self.root.clone()];
        while let Some(dir) = dirs.pop() {
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    out.push((path.clone(), "(folder)".into()));
                    dirs.push(path);
                } else {
                    out.push((path.clone(), std::fs::read_to_string(&path).unwrap()));
                }
            }
        }
        out.sort();
        out
    }
}

#[tokio::test]
async fn no_way_of_rewriting_the_config_from_a_command_gets_past_the_sandbox() {
    if Sandbox::detect_or_skip("rewriting the config from a sandboxed command").is_none() {
        return;
    }
    let h = home();
    let before = h.snapshot();
    let config = h.root.join("config.toml").display().to_string();
    let forms = [
        // `>` through a relative path from the working folder
        "echo '[trust]' > ../.troupe/config.toml".to_string(),
        format!("sed -i 's/ask/auto/' {config}"),
        format!("python3 -c \"open('{config}', 'w').write('mode = 1')\""),
        format!("cp evil.toml {config}"),
        format!("cat evil.toml | tee {config}"),
        format!("dd if=evil.toml of={config}"),
        "cd ../.troupe && echo '[trust]' > config.toml".to_string(),
        // an absolute path, appended to
        format!("echo 'mode = \"auto\"' >> {config}"),
        // and the other ways past a file: replace it, remove it
        format!("mv evil.toml {config}"),
        format!("rm -f {config}"),
        format!("ln -sf /dev/null {config}"),
    ];
    for command in &forms {
        let result = run_cmd(&h.f, json!({ "command": command })).await;
        // `rm -f` of a file the hidden home does not show succeeds at
        // nothing: the home's snapshot below is what must hold.
        assert!(
            result.is_error() || command.starts_with("rm -f"),
            "`{command}` succeeded: {}",
            result.text
        );
        assert_eq!(result.data["sandbox"], "bubblewrap", "{command}");
        assert_eq!(
            std::fs::read_to_string(h.root.join("config.toml")).unwrap(),
            ORIGINAL,
            "`{command}` changed config.toml"
        );
    }
    assert_eq!(h.snapshot(), before);
}

#[tokio::test]
async fn the_database_memory_and_skills_are_read_only_from_a_command() {
    if Sandbox::detect_or_skip("the home's other files from a sandboxed command").is_none() {
        return;
    }
    let h = home();
    let before = h.snapshot();
    for file in [
        "troupe.db",
        "troupe.db-wal",
        "troupe.db-shm",
        "troupe.lock",
        "models.toml",
        "mcp.json",
        "memory/MEMORY.md",
        "skills/tidy/SKILL.md",
    ] {
        let path = h.root.join(file).display().to_string();
        for command in [
            format!("echo x >> {path}"),
            format!("truncate -s 0 {path}"),
            format!("rm -f {path}"),
        ] {
            let result = run_cmd(&h.f, json!({ "command": command })).await;
            assert!(
                result.is_error() || command.starts_with("rm -f"),
                "`{command}` succeeded: {}",
                result.text
            );
        }
    }
    for command in [
        "sqlite3 ../.troupe/troupe.db 'CREATE TABLE evil(x)'",
        "mkdir ../.troupe/skills/evil",
        "echo x > ../.troupe/bots/helper/MEMORY.md",
        "echo x > ../.troupe/commands/forged.log",
    ] {
        let result = run_cmd(&h.f, json!({ "command": command })).await;
        assert!(result.is_error(), "`{command}` succeeded: {}", result.text);
    }
    assert_eq!(h.snapshot(), before);
}

#[tokio::test]
async fn in_the_sandbox_the_working_folder_is_writable_and_tmp_is_private() {
    if Sandbox::detect_or_skip("the sandbox's working folder and /tmp").is_none() {
        return;
    }
    let h = home();
    let name = format!("troupe-private-{}", std::process::id());
    let result = run_cmd(
        &h.f,
        json!({ "command": format!(
            "mkdir -p out && echo made > out/file && echo hidden > /tmp/{name} && cat /tmp/{name}"
        ) }),
    )
    .await;
    assert_eq!(
        (result.text.as_str(), &result.data["sandbox"]),
        ("hidden\n[exit 0]", &json!("bubblewrap"))
    );
    assert_eq!(
        std::fs::read_to_string(h.f.cwd.join("out/file")).unwrap(),
        "made\n"
    );
    assert!(
        !Path::new("/tmp").join(&name).exists(),
        "a file written to /tmp in the sandbox is visible outside it"
    );
}

#[tokio::test]
async fn nothing_of_troupes_home_is_visible_to_a_command() {
    if Sandbox::detect_or_skip("the home hidden from a sandboxed command").is_none() {
        return;
    }
    let h = home();
    std::fs::write(h.root.join("serve.json"), "{\"token\": \"secret\"}").unwrap();
    let before = h.snapshot();
    let root = h.root.display().to_string();
    let forms = [
        format!("cat {root}/serve.json"),
        "cat ../.troupe/serve.json".to_string(),
        format!("cat {root}/config.toml"),
        format!("sqlite3 {root}/troupe.db .tables"),
        format!("python3 -c \"print(open('{root}/troupe.db-shm').read())\""),
        format!("cat {root}/memory/MEMORY.md"),
        format!("ls {root}/skills/tidy"),
        "cat \"$TROUPE_HOME/serve.json\"".to_string(),
        format!("find {root} -type f | grep ."),
        format!("ls -A {root} | grep ."),
        format!("echo x > {root}/planted && cat {root}/planted"),
    ];
    for command in &forms {
        let result = run_cmd(&h.f, json!({ "command": command })).await;
        assert!(
            result.is_error()
                && !result.text.contains("secret")
                && !result.text.contains("[trust]"),
            "`{command}` saw the home: {}",
            result.text
        );
        assert_eq!(result.data["sandbox"], "bubblewrap", "{command}");
    }
    assert_eq!(h.snapshot(), before);
}

#[tokio::test]
async fn a_working_folder_holding_the_home_does_not_show_it_and_one_inside_is_refused() {
    if Sandbox::detect_or_skip("a working folder around or inside the home").is_none() {
        return;
    }
    let h = home();
    // The working folder holds the home (troupe started in the user's home).
    let outer = h.root.parent().unwrap().to_path_buf();
    let mut ctx = h.f.ctx.clone();
    ctx.cwd = outer.clone();
    let listed = run_command::tool(CommandHost::with_sandbox(super::sandboxed()))
        .call(
            json!({"command": "ls -A .troupe | wc -l; cat .troupe/config.toml; echo x > .troupe/new"}),
            &ctx,
        )
        .await;
    assert!(listed.text.starts_with("0\n"), "{}", listed.text);
    assert!(!listed.text.contains("[trust]"), "{}", listed.text);
    assert!(!h.root.join("new").exists());
    // A working folder inside the home, as the session's or as `cwd`.
    for (session, cwd) in [
        (h.root.clone(), None),
        (h.root.join("memory"), None),
        (outer.clone(), Some(".troupe/skills")),
    ] {
        let mut ctx = h.f.ctx.clone();
        ctx.cwd = session.clone();
        let mut args = json!({"command": "true"});
        if let Some(cwd) = cwd {
            args["cwd"] = json!(cwd);
        }
        let refused = run_command::tool(CommandHost::with_sandbox(super::sandboxed()))
            .call(args, &ctx)
            .await;
        assert!(
            refused.is_error() && refused.text.contains("inside troupe's home"),
            "{}: {}",
            session.display(),
            refused.text
        );
    }
}

#[tokio::test]
async fn a_background_command_cannot_rewrite_the_config_either() {
    if Sandbox::detect_or_skip("a sandboxed background command").is_none() {
        return;
    }
    let h = home();
    let (tx, mut rx) = mpsc::unbounded_channel();
    h.f.ctx
        .services
        .node()
        .set_command_notifier(Arc::new(Forward(tx)));
    let started = run_cmd(
        &h.f,
        json!({"command": "cp evil.toml ../.troupe/config.toml", "background": true, "notify_on_complete": true}),
    )
    .await;
    assert_eq!(started.data["sandbox"], "bubblewrap");
    let (_, _, summary) = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(summary.contains("[exit 1]"), "{summary}");
    assert_eq!(
        std::fs::read_to_string(h.root.join("config.toml")).unwrap(),
        ORIGINAL
    );
}

#[tokio::test]
async fn without_a_sandbox_the_result_says_it_ran_unsandboxed() {
    let h = home();
    let result = run_in(
        &h.f,
        SandboxSettings::off(),
        json!({"command": "echo here > here.txt"}),
    )
    .await;
    assert_eq!(result.data["sandbox"], "unsandboxed");
    assert_eq!(result.text, "(no output)\n[exit 0]");
}
