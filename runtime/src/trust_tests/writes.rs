//! What the gate says about the file tools writing troupe's home and the
//! user's own settings, in every spelling of the path (issue 31, families 3
//! and 4).

use std::os::unix::fs::symlink;
use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

/// A user home (real path, links resolved) holding a troupe home with its
/// approvals and server record, a project, and links a model may meet.
struct Place {
    _dir: tempfile::TempDir,
    user_home: PathBuf,
    home: Home,
    project: PathBuf,
}

fn place() -> Place {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let user_home = root.join("home/user");
    let home = Home::new(user_home.join(".troupe"));
    let project = user_home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::create_dir_all(home.root().join("memory")).unwrap();
    std::fs::create_dir_all(user_home.join(".config")).unwrap();
    std::fs::write(home.root().join("approvals.json"), "[]").unwrap();
    std::fs::write(home.root().join("serve.json"), "{}").unwrap();
    std::fs::write(user_home.join(".bashrc"), "").unwrap();
    symlink(home.root(), project.join("h")).unwrap();
    symlink(home.root().join("approvals.json"), project.join("appr")).unwrap();
    symlink(&user_home, project.join("parent")).unwrap();
    symlink(user_home.join(".bashrc"), project.join("bashrc-link")).unwrap();
    symlink(user_home.join(".config"), project.join("dotconfig")).unwrap();
    Place {
        _dir: dir,
        user_home,
        home,
        project,
    }
}

impl Place {
    fn ctx(&self, cwd: &Path) -> GateContext {
        GateContext::new(self.home.clone(), &self.user_home, cwd)
    }
}

#[tokio::test]
async fn no_spelling_of_a_path_into_troupes_home_is_written_in_any_mode() {
    let p = place();
    let home = p.home.root().display().to_string();
    let in_project = [
        format!("{home}/approvals.json"),
        "~/.troupe/approvals.json".into(),
        "$HOME/.troupe/serve.json".into(),
        "${HOME}/.troupe/new.json".into(),
        "../.troupe/approvals.json".into(),
        "./.././.troupe//serve.json".into(),
        "h/approvals.json".into(),
        "appr".into(),
        "parent/.troupe/serve.json".into(),
        "h/../.troupe/approvals.json".into(),
        "missing/../../.troupe/approvals.json".into(),
        "~/.troupe/".into(),
        "~/.troupe/.".into(),
        "~/.troupe/spill/x.txt".into(),
        "~/.troupe/memory/MEMORY.md".into(),
    ];
    let mut cases: Vec<(PathBuf, String)> = in_project
        .into_iter()
        .map(|path| (p.project.clone(), path))
        .collect();
    // The home inside the working folder, and the working folder inside it.
    cases.push((p.user_home.clone(), ".troupe/approvals.json".into()));
    cases.push((p.user_home.clone(), ".troupe/memory/../serve.json".into()));
    cases.push((p.home.root().join("memory"), "../approvals.json".into()));
    cases.push((p.home.root().to_path_buf(), "x.txt".into()));
    for mode in [GateMode::Ask, GateMode::Auto] {
        let gate = gate(mode);
        for (cwd, path) in &cases {
            let ctx = p.ctx(cwd);
            match gate.check(&write_file(), &write(path), &ctx).await {
                Verdict::Deny { rule, reason } => {
                    assert_eq!(rule, "troupe-home", "{mode:?} {path}: {reason}");
                    assert!(
                        reason.contains("is in troupe's home")
                            && reason.contains("the file tools never write troupe's home"),
                        "{mode:?} {path}: {reason}"
                    );
                }
                other => panic!("{mode:?}: writing `{path}` from {cwd:?} was {other:?}"),
            }
            assert!(
                gate.remember(&write_file(), &write(path), &ctx, ApprovalAnswer::Always)
                    .is_err(),
                "{path}: a write into the home is never approved"
            );
        }
    }
    // The refusal names the file and who owns it.
    let Verdict::Deny { reason, .. } = gate(GateMode::Auto)
        .check(&write_file(), &write("appr"), &p.ctx(&p.project))
        .await
    else {
        panic!("not refused")
    };
    assert_eq!(
        reason,
        format!(
            "refused: `appr` (which resolves to `{home}/approvals.json`) is in troupe's home, and \
             is the list of commands the user approved for always (`approvals.json`); the file \
             tools never write troupe's home. Only the user's own answer to an approval question \
             adds to it."
        )
    );
    // Next to the home is not in it.
    for path in ["notes.md", "../.troupe-notes.md", "~/project/x/y.txt"] {
        assert!(
            !matches!(
                gate(GateMode::Auto)
                    .check(&write_file(), &write(path), &p.ctx(&p.project))
                    .await,
                Verdict::Deny { .. }
            ),
            "{path}"
        );
    }
}

/// Every spelling of a path to one of the user's settings, from the
/// project (or, for the last, from the user's home).
fn settings_forms(p: &Place) -> Vec<(PathBuf, String)> {
    let abs = p.user_home.display().to_string();
    let mut forms: Vec<(PathBuf, String)> = [
        "~/.bashrc".to_string(),
        "$HOME/.profile".into(),
        format!("{abs}/.zshrc"),
        "../.gitconfig".into(),
        "./.././.config/git/config".into(),
        "bashrc-link".into(),
        "dotconfig/fish/config.fish".into(),
        "parent/.bash_profile".into(),
        ".git/hooks/pre-commit".into(),
        ".git/config".into(),
        "~/.local/bin/ls".into(),
        "missing/../../.inputrc".into(),
    ]
    .into_iter()
    .map(|path| (p.project.clone(), path))
    .collect();
    forms.push((p.user_home.clone(), ".bashrc".into()));
    forms.push((
        p.user_home.clone(),
        "./.config/./autostart/x.desktop".into(),
    ));
    forms
}

#[tokio::test]
async fn the_users_settings_are_asked_in_ask_mode_and_written_in_auto_mode_like_commands() {
    let p = place();
    for (cwd, path) in settings_forms(&p) {
        let ctx = p.ctx(&cwd);
        let asked = gate(GateMode::Ask)
            .check(&write_file(), &write(&path), &ctx)
            .await;
        assert!(
            matches!(&asked, Verdict::Ask { reason } if reason.contains("so the user approves it")),
            "ask mode, writing `{path}` from {cwd:?}: {asked:?}"
        );
        assert_eq!(
            gate(GateMode::Auto)
                .check(&write_file(), &write(&path), &ctx)
                .await,
            Verdict::Allow,
            "auto mode, writing `{path}`"
        );
        // A command writing the same path gets the same verdicts (the
        // sandbox's own rule aside, which the file tools do not run in).
        let text = format!("echo x > {path}");
        let sandboxed = |mode| gate(mode).with_sandbox(true);
        let by_command = sandboxed(GateMode::Ask)
            .check(&run_command(), &command(&text), &ctx)
            .await;
        assert!(
            matches!(&by_command, Verdict::Ask { reason } if reason.contains("`dotfile-write`")),
            "ask mode, `{text}` from {cwd:?}: {by_command:?}"
        );
        assert_eq!(
            sandboxed(GateMode::Auto)
                .check(&run_command(), &command(&text), &ctx)
                .await,
            Verdict::Allow,
            "auto mode, `{text}`"
        );
        // Nobody to ask: refused, by the command's rule.
        let unattended = ctx.clone().unattended(true);
        assert!(
            matches!(
                gate(GateMode::Ask).check(&write_file(), &write(&path), &unattended).await,
                Verdict::Deny { rule, .. } if rule == "dotfile-write"
            ),
            "unattended, `{path}`"
        );
    }
}

#[tokio::test]
async fn an_approved_dotfile_write_is_remembered_by_its_real_path() {
    let p = place();
    let gate = gate(GateMode::Ask);
    let ctx = p.ctx(&p.project);
    let bashrc = p.user_home.join(".bashrc");
    assert_eq!(
        gate.check(&write_file(), &write("~/.bashrc"), &ctx).await,
        ask(&format!(
            "Writing `~/.bashrc` (which resolves to `{}`) changes a shell start-up file, run by \
             every new shell, so the user approves it.",
            bashrc.display()
        ))
    );
    gate.remember(
        &write_file(),
        &write("~/.bashrc"),
        &ctx,
        ApprovalAnswer::Session,
    )
    .unwrap();
    // The same file by another name is the same approval; another file is not.
    for path in ["~/.bashrc", "bashrc-link", "../.bashrc"] {
        assert_eq!(
            gate.check(&write_file(), &write(path), &ctx).await,
            Verdict::Allow,
            "{path}"
        );
    }
    assert!(matches!(
        gate.check(&write_file(), &write("~/.profile"), &ctx).await,
        Verdict::Ask { .. }
    ));
}

#[tokio::test]
async fn ssh_is_asked_in_auto_mode_too_and_plain_files_are_not_asked() {
    let p = place();
    let ctx = p.ctx(&p.project);
    for mode in [GateMode::Ask, GateMode::Auto] {
        for path in ["~/.ssh/authorized_keys", "parent/.ssh/config", "~/.ssh/"] {
            assert!(
                matches!(
                    gate(mode).check(&write_file(), &write(path), &ctx).await,
                    Verdict::Ask { reason } if reason.contains("SSH")
                ),
                "{mode:?} {path}"
            );
        }
        for path in [
            "notes.md",
            "~/notes.txt",
            "~/project/.env",
            "~/docs/.hidden",
            "./~/.bashrc",
        ] {
            assert_eq!(
                gate(mode).check(&write_file(), &write(path), &ctx).await,
                Verdict::Allow,
                "{mode:?} {path}"
            );
        }
    }
}

#[tokio::test]
async fn a_path_the_tool_cannot_resolve_is_refused_saying_what_to_do() {
    let p = place();
    let ctx = p.ctx(&p.project);
    symlink(p.project.join("nowhere"), p.project.join("dangling")).unwrap();
    for (path, says) in [
        (
            "$XDG_CONFIG_HOME/git/config",
            "the variable `$XDG_CONFIG_HOME`",
        ),
        ("~root/.bashrc", "another user's home"),
        ("dangling", "which does not exist"),
    ] {
        match gate(GateMode::Auto)
            .check(&write_file(), &write(path), &ctx)
            .await
        {
            Verdict::Deny { rule, reason } => {
                assert_eq!(rule, "write-path");
                assert!(reason.contains(says), "{path}: {reason}");
            }
            other => panic!("{path}: {other:?}"),
        }
    }
}
