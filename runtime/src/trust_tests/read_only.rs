//! Without a sandbox, ask mode asks before every command that is not
//! provably read-only; with one, it asks as before. Only verdicts are asked
//! for: nothing here runs a command.

use pretty_assertions::assert_eq;

use super::*;

/// Commands that delete the user's home, or rewrite troupe's settings,
/// through programs that run commands or paths computed when they run: no
/// pattern rule names them.
const UNREAD_WRITERS: &[&str] = &[
    "awk 'BEGIN { system(\"rm -rf \" ENVIRON[\"HOME\"]) }'",
    "python3 /dev/stdin <<< 'import os, shutil; shutil.rmtree(os.environ[\"HOME\"])'",
    "tar --remove-files -cf /dev/null .",
    "sqlite3 :memory: '.shell rm -rf ~'",
    "git -c alias.x='!rm -rf \"$HOME\"' x",
    "gdb -batch -ex 'shell rm -rf ~'",
    "echo 'exec rm -rf $env(HOME)' | tclsh",
    "printenv HOME | xargs -I{} rm -rf {}",
    "rm -rf \"$(printenv HOME)\"",
    "echo auto | dd of=\"$(printenv TROUPE_HOME)/config.toml\"",
    "vim -c ':!rm -rf ~' -c ':q'",
    "make clean",
    "cargo build",
    "perl script.pl",
    "env -i sh -c 'echo x > f'",
];

/// Read-only programs in forms that write or run something.
const DISQUALIFIED: &[&str] = &[
    "find . -delete",
    "find . -name '*.tmp' -exec rm {} +",
    "find . -fprint out.txt",
    "sort -o out.txt in.txt",
    "sort -uo out.txt in.txt",
    "uniq in.txt out.txt",
    "rg --pre ./x.sh foo",
    "ls > listing.txt",
    "cat a >> b",
    "echo x > notes.txt",
    "git -c core.pager='rm -rf ~' log",
    "git --exec-path=. status",
    "git diff --output=x.patch",
    "git branch -D main",
    "git commit -m x",
    "git checkout .",
    "PATH=. ls",
    "LD_PRELOAD=./x.so cat README.md",
    "./ls",
    "sudo cat /etc/shadow",
    "date -s 2020-01-01",
    "tree -o out.txt",
    "ls && touch x",
    "cat README.md | tee copy.md",
];

/// Provably read-only: these run unasked in ask mode, sandbox or not.
const READ_ONLY: &[&str] = &[
    "ls -la",
    "ls -la src",
    "cat README.md",
    "grep -rn 'fn main' src",
    "head -n 5 README.md | wc -l",
    "find . -name '*.rs' -type f",
    "git status",
    "git log --oneline -5",
    "git diff HEAD~1",
    "git branch --show-current",
    "sort README.md | uniq -c",
    "echo hello 2>/dev/null",
    "wc -l src/*.rs",
    "cd src && ls",
    "stat README.md",
    "jq .name package.json",
];

#[tokio::test]
async fn without_a_sandbox_ask_mode_asks_every_command_that_is_not_read_only() {
    let f = fixture();
    let unsandboxed = gate(GateMode::Ask);
    let sandboxed = gate(GateMode::Ask).with_sandbox(true);
    let mut wrong = Vec::new();
    for form in UNREAD_WRITERS.iter().chain(DISQUALIFIED) {
        match check(&unsandboxed, &f.ctx, form).await {
            Verdict::Ask { .. } | Verdict::Unanalysable { .. } => {}
            other => wrong.push(format!("{form:?} unsandboxed: {other:?}")),
        }
    }
    for form in READ_ONLY {
        for (how, gate) in [("unsandboxed", &unsandboxed), ("sandboxed", &sandboxed)] {
            let got = check(gate, &f.ctx, form).await;
            if got != Verdict::Allow {
                wrong.push(format!("{form:?} {how}: {got:?}"));
            }
        }
    }
    // With a sandbox, ordinary work runs unasked in ask mode, as before.
    for form in [
        "cargo build",
        "make clean",
        "tar --remove-files -cf /dev/null .",
    ] {
        let got = check(&sandboxed, &f.ctx, form).await;
        if got != Verdict::Allow {
            wrong.push(format!("{form:?} sandboxed: {got:?}"));
        }
    }
    assert_eq!(wrong, Vec::<String>::new());
}

#[tokio::test]
async fn paths_computed_when_a_command_runs_are_asked_without_a_sandbox_in_auto_mode_too() {
    let f = fixture();
    let auto = gate(GateMode::Auto);
    for form in [
        "printenv HOME | xargs -I{} rm -rf {}",
        "rm -rf \"$(printenv HOME)\"",
        "echo auto | dd of=\"$(printenv TROUPE_HOME)/config.toml\"",
        "d=`printenv HOME`; rm -rf $d",
        "cp evil.toml \"$PWD/../.troupe/config.toml\"",
    ] {
        match check(&auto, &f.ctx, form).await {
            Verdict::Ask { reason } => assert!(
                reason.contains("runs without a sandbox"),
                "{form}: {reason}"
            ),
            other => panic!("{form:?} was not asked: {other:?}"),
        }
    }
}

#[tokio::test]
async fn the_unsandboxed_question_says_why_and_an_approval_is_remembered() {
    let f = fixture();
    let gate = gate(GateMode::Ask);
    let text = "awk 'BEGIN { system(\"make\") }'";
    let Verdict::Ask { reason } = check(&gate, &f.ctx, text).await else {
        panic!("not asked");
    };
    assert!(reason.contains("(rule `unsandboxed-ask`)"), "{reason}");
    assert!(
        reason.contains("is not on the list of read-only programs"),
        "{reason}"
    );
    assert!(reason.contains("install bubblewrap"), "{reason}");
    // `--auto` lifts it, unlike the home rule: the CLI keys on this phrase.
    assert!(!reason.contains("without a sandbox"), "{reason}");
    gate.remember(
        &run_command(),
        &command(text),
        &f.ctx,
        ApprovalAnswer::Session,
    )
    .unwrap();
    assert_eq!(check(&gate, &f.ctx, text).await, Verdict::Allow);
    // Unattended, nobody can answer: refused.
    let unattended = f.ctx.clone().unattended(true);
    assert!(matches!(
        check(&gate, &unattended, "make").await,
        Verdict::Deny { rule, .. } if rule == "unsandboxed-ask"
    ));
}

#[tokio::test]
async fn a_repository_whose_config_runs_programs_makes_git_status_asked() {
    let f = fixture();
    let gate = gate(GateMode::Ask);
    let git = f.ctx.cwd.join(".git");
    std::fs::create_dir_all(&git).unwrap();
    std::fs::write(git.join("config"), "[core]\n\tbare = false\n").unwrap();
    assert_eq!(check(&gate, &f.ctx, "git status").await, Verdict::Allow);
    for config in [
        "[core]\n\tfsmonitor = \"rm -rf ~\"\n",
        "[diff \"x\"]\n\ttextconv = ./x.sh\n",
        "[include]\n\tpath = ../x\n",
    ] {
        std::fs::write(git.join("config"), config).unwrap();
        assert!(
            matches!(
                check(&gate, &f.ctx, "git status").await,
                Verdict::Ask { .. }
            ),
            "{config}"
        );
    }
}
