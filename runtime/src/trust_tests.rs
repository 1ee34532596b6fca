use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::guardian::parse_answer;
use super::*;
use crate::home::Home;
use crate::model::{ModelError, ModelEvent, ModelRequest, ModelStream, Provider};
use crate::protocol::{StopReason, ToolCall};
use crate::tool::{GateSubject, ToolSpec};

#[path = "trust_tests/forms.rs"]
mod forms;
#[path = "trust_tests/guardian.rs"]
mod guardian_tests;
#[path = "trust_tests/read_only.rs"]
mod read_only;
#[path = "trust_tests/sandbox.rs"]
mod sandbox;
#[path = "trust_tests/writes.rs"]
mod writes;

/// A temp user home with a troupe home and a project folder in it.
struct Fixture {
    _dir: tempfile::TempDir,
    user_home: PathBuf,
    ctx: GateContext,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let user_home = dir.path().join("home/user");
    let project = user_home.join("project");
    std::fs::create_dir_all(&project).unwrap();
    let home = Home::new(user_home.join(".troupe"));
    let ctx = GateContext::new(home, &user_home, &project);
    Fixture {
        _dir: dir,
        user_home,
        ctx,
    }
}

fn run_command() -> ToolSpec {
    ToolSpec::new("run_command", "runs a command", json!({}))
        .gated_by(GateSubject::Command("command".into()))
}

fn write_file() -> ToolSpec {
    ToolSpec::new("write_file", "writes a file", json!({}))
        .gated_by(GateSubject::WritePath("path".into()))
}

fn command(text: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: "run_command".into(),
        arguments: json!({ "command": text }),
    }
}

fn write(path: &str) -> ToolCall {
    ToolCall {
        id: "call_1".into(),
        name: "write_file".into(),
        arguments: json!({ "path": path, "content": "x" }),
    }
}

fn gate(mode: GateMode) -> Gate {
    Gate::new(&GatePolicy {
        mode,
        ..GatePolicy::default()
    })
    .unwrap()
}

async fn check(gate: &Gate, ctx: &GateContext, text: &str) -> Verdict {
    gate.check(&run_command(), &command(text), ctx).await
}

fn deny(rule: &str, reason: &str) -> Verdict {
    Verdict::Deny {
        rule: rule.into(),
        reason: reason.into(),
    }
}

fn ask(reason: &str) -> Verdict {
    Verdict::Ask {
        reason: reason.into(),
    }
}

fn unanalysable(rule: &str, reason: &str) -> Verdict {
    Verdict::Unanalysable {
        rule: rule.into(),
        reason: reason.into(),
    }
}

fn hardline(snippet: &str, reason: &str, rule: &str) -> Verdict {
    deny(
        rule,
        &format!(
            "Blocked `{snippet}`: it {reason}. This is a hardline rule (`{rule}`): it is blocked in \
             every mode and no approval or allow pattern lifts it. Do the task another way (name \
             the exact files or folders); if the user truly wants this, they run it themselves."
        ),
    )
}

const UNATTENDED: &str = " Nobody is here to approve it: this run is unattended (a routine or a \
                          subagent), so it is refused. Do the task without it, or leave it for a \
                          conversation with the user.";

// ---- step 1: hardline -------------------------------------------------------

#[tokio::test]
async fn rm_rf_root_is_blocked_with_its_rule_and_what_to_do() {
    let f = fixture();
    assert_eq!(
        check(&gate(GateMode::Auto), &f.ctx, "rm -rf /").await,
        deny(
            "rm-root",
            "Blocked `rm -rf /`: it deletes the root, the home or a system folder, everything on \
             the machine or all of the user's files. This is a hardline rule (`rm-root`): it is \
             blocked in every mode and no approval or allow pattern lifts it. Do the task another \
             way (name the exact files or folders); if the user truly wants this, they run it \
             themselves."
        )
    );
}

#[tokio::test]
async fn every_spelling_of_rm_rf_root_is_blocked_and_near_misses_pass() {
    let f = fixture();
    // With commands in a sandbox: the near misses are judged by the
    // hardline rule alone, not by where they could reach.
    let gate = gate(GateMode::Auto).with_sandbox(true);
    let blocked = [
        "rm -rf /",
        "rm -fr /",
        "rm -r -f /",
        "rm -R -f /",
        "rm --recursive --force /",
        "rm --force --recursive /",
        "rm -rf /*",
        "rm -rf --no-preserve-root /",
        "rm --no-preserve-root -rf /",
        "rm -rf ~",
        "rm -rf ~/",
        "rm -rf ~/*",
        "rm -rf $HOME",
        "rm -rf \"$HOME\"",
        "rm -rf ${HOME}",
        "rm -rf /.",
        "rm -rf //",
        "rm -rf /./",
        "rm -rf /tmp/../",
        "sudo rm -rf /",
        "sudo -u root rm -rf /",
        "env rm -rf /",
        "env FOO=1 rm -rf /",
        "FOO=1 rm -rf /",
        "command rm -rf /",
        "\\rm -rf /",
        "/bin/rm -rf /",
        "/usr/bin/rm -rf /",
        "'rm' -rf /",
        "r\"m\" -rf '/'",
        "nohup rm -rf / &",
        "timeout 5 rm -rf /",
        "xargs rm -rf /",
        "rm -rf -- /",
        "rm -rf /usr",
        "rm -rf /etc/",
        "cd /tmp && rm -rf /",
        "true; rm -rf /",
        "false || rm -rf /",
        "echo hi | rm -rf /",
        "(rm -rf /)",
        "{ rm -rf /; }",
        "echo $(rm -rf /)",
        "echo `rm -rf /`",
        "sh -c 'rm -rf /'",
        "bash -c \"rm -rf /\"",
        "bash -lc 'rm -rf /'",
        "sudo sh -c 'rm -rf /'",
        "sh -c \"sh -c 'rm -rf /'\"",
        "eval 'rm -rf /'",
        "eval rm -rf /",
        "echo 'rm -rf /' | sh",
        "bash <<< 'rm -rf /'",
        "bash <<EOF\nrm -rf /\nEOF",
        "if true; then rm -rf /; fi",
        "su -c 'rm -rf /'",
        "watch 'rm -rf /'",
        "find . -exec rm -rf / \\;",
        "$'rm' -rf /",
        "rm -rf ..",
        "cd / && rm -rf *",
        "cd ~; rm -rf ./*",
        "cd /tmp && cd .. && rm -rf .",
    ];
    for text in blocked {
        match check(&gate, &f.ctx, text).await {
            Verdict::Deny { rule, .. } => assert_eq!(rule, "rm-root", "{text}"),
            other => panic!("`{text}` was not blocked: {other:?}"),
        }
    }
    let pass = [
        "rm -rf ./build",
        "rm -rf build",
        "rm -rf ~/project/target",
        "rm -rf /tmp/cache",
        "echo rm -rf /",
        "echo 'rm -rf /'",
        "git commit -m \"rm -rf /\"",
        "git commit -m 'sh -c \"rm -rf /\"'",
        "grep -r \"mkfs\" .",
        "grep -rn 'rm -rf /' docs",
        "printf '%s\\n' 'rm -rf /'",
        "ls -rf /",
        "cat <<'EOF'\nrm -rf /\nEOF",
        "echo '$(rm -rf /)'",
        "# rm -rf /",
        "cd /tmp && rm -rf *",
        "cd \"$BUILD\" && rm -rf ..",
    ];
    for text in pass {
        assert_eq!(check(&gate, &f.ctx, text).await, Verdict::Allow, "{text}");
    }
}

#[tokio::test]
async fn mkfs_is_blocked() {
    let f = fixture();
    assert_eq!(
        check(&gate(GateMode::Ask), &f.ctx, "sudo mkfs.ext4 /dev/sdb1").await,
        hardline(
            "mkfs.ext4 /dev/sdb1",
            "makes a new file system, erasing the disk or partition it is given",
            "mkfs"
        )
    );
}

#[tokio::test]
async fn writing_a_block_device_is_blocked() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    let reason = "writes straight onto a disk or partition, destroying what is on it";
    assert_eq!(
        check(&gate, &f.ctx, "dd if=/dev/zero of=/dev/nvme0n1 bs=1M").await,
        hardline(
            "dd if=/dev/zero of=/dev/nvme0n1 bs=1M",
            reason,
            "disk-write"
        )
    );
    assert_eq!(
        check(&gate, &f.ctx, "cat image.iso > /dev/sdb").await,
        hardline("cat image.iso", reason, "disk-write")
    );
}

#[tokio::test]
async fn fork_bombs_are_blocked() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    let reason = "is a fork bomb: it multiplies processes until the machine stops answering";
    assert_eq!(
        check(&gate, &f.ctx, ":(){ :|:& };:").await,
        hardline(":() { :|:& }", reason, "fork-bomb")
    );
    assert_eq!(
        check(&gate, &f.ctx, "boom() {\n  boom | boom &\n}\nboom").await,
        hardline("boom() { boom|boom& }", reason, "fork-bomb")
    );
}

#[tokio::test]
async fn shutting_down_is_blocked() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    for text in [
        "shutdown -h now",
        "reboot",
        "sudo halt",
        "poweroff",
        "init 0",
        "init 6",
    ] {
        match check(&gate, &f.ctx, text).await {
            Verdict::Deny { rule, .. } => assert_eq!(rule, "power", "{text}"),
            other => panic!("`{text}`: {other:?}"),
        }
    }
    assert_eq!(
        check(&gate, &f.ctx, "systemctl reboot").await,
        hardline(
            "systemctl reboot",
            "shuts down or restarts the machine",
            "power"
        )
    );
}

#[tokio::test]
async fn opening_the_whole_machine_is_blocked() {
    let f = fixture();
    assert_eq!(
        check(&gate(GateMode::Auto), &f.ctx, "chmod -R 777 /").await,
        hardline(
            "chmod -R 777 /",
            "changes the permissions or owner of the whole machine or a system folder",
            "perms-root"
        )
    );
}

#[tokio::test]
async fn overwriting_account_files_is_blocked() {
    let f = fixture();
    assert_eq!(
        check(
            &gate(GateMode::Auto),
            &f.ctx,
            "echo 'x::0:0::/:/bin/sh' >> /etc/passwd"
        )
        .await,
        hardline(
            "echo x::0:0::/:/bin/sh",
            "overwrites the machine's account or privilege files",
            "account-files"
        )
    );
}

#[tokio::test]
async fn find_deleting_from_the_root_is_blocked() {
    let f = fixture();
    assert_eq!(
        check(&gate(GateMode::Auto), &f.ctx, "find / -delete").await,
        hardline(
            "find / -delete",
            "deletes every file under the root, the home or a system folder",
            "find-root-delete"
        )
    );
}

#[tokio::test]
async fn hardline_ignores_the_allow_list_auto_mode_and_approvals() {
    let f = fixture();
    let gate = Gate::new(&GatePolicy {
        mode: GateMode::Auto,
        allow: vec!["*".into()],
        ..GatePolicy::default()
    })
    .unwrap();
    assert!(gate
        .remember(
            &run_command(),
            &command("rm -rf /"),
            &f.ctx,
            ApprovalAnswer::Always
        )
        .is_err());
    assert!(matches!(
        check(&gate, &f.ctx, "rm -rf /").await,
        Verdict::Deny { rule, .. } if rule == "rm-root"
    ));
}

// ---- step 2: the deny list -----------------------------------------------------

#[tokio::test]
async fn the_deny_list_blocks_and_beats_the_allow_list() {
    let f = fixture();
    let gate = Gate::new(&GatePolicy {
        mode: GateMode::Auto,
        deny: vec!["git push*".into()],
        allow: vec!["git push*".into()],
        ..GatePolicy::default()
    })
    .unwrap();
    let expected = deny(
        "deny-list",
        "Blocked `git push origin main`: it matches `git push*` on the user's deny list. Do \
         without it, or ask the user to remove the pattern from the deny list.",
    );
    assert_eq!(check(&gate, &f.ctx, "git push origin main").await, expected);
    assert_eq!(
        check(&gate, &f.ctx, "cd repo && git push origin main").await,
        expected
    );
    assert_eq!(check(&gate, &f.ctx, "git status").await, Verdict::Allow);
}

#[tokio::test]
async fn a_tool_pattern_on_the_deny_list_blocks_every_call_of_the_tool() {
    let f = fixture();
    let gate = Gate::new(&GatePolicy {
        deny: vec!["tool:web_*".into()],
        ..GatePolicy::default()
    })
    .unwrap();
    let spec = ToolSpec::new("web_fetch", "fetches", json!({}));
    let call = ToolCall {
        id: "c".into(),
        name: "web_fetch".into(),
        arguments: json!({"url": "https://example.com"}),
    };
    assert_eq!(
        gate.check(&spec, &call, &f.ctx).await,
        deny(
            "deny-list",
            "Blocked the tool `web_fetch`: it matches `tool:web_*` on the user's deny list. Do \
             without it, or ask the user to remove the pattern from the deny list."
        )
    );
}

// ---- step 3: outside the machine -------------------------------------------------

#[tokio::test]
async fn github_writes_ask_every_time_even_in_auto_mode() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    let expected = ask(
        "`gh pr create --fill` changes something on GitHub through `gh`, under the user's \
         account. Commands that act outside this machine need the user's approval every time, \
         even in auto mode (rule `gh-write`).",
    );
    assert_eq!(check(&gate, &f.ctx, "gh pr create --fill").await, expected);
    assert!(gate
        .remember(
            &run_command(),
            &command("gh pr create --fill"),
            &f.ctx,
            ApprovalAnswer::Session
        )
        .is_err());
    assert_eq!(check(&gate, &f.ctx, "gh pr create --fill").await, expected);
    assert_eq!(check(&gate, &f.ctx, "gh pr list").await, Verdict::Allow);
}

#[tokio::test]
async fn printing_a_token_asks() {
    let f = fixture();
    assert_eq!(
        check(
            &gate(GateMode::Auto),
            &f.ctx,
            "gcloud auth print-access-token"
        )
        .await,
        ask(
            "`gcloud auth print-access-token` prints an access token, a credential for the \
             user's accounts. Commands that act outside this machine need the user's approval \
             every time, even in auto mode (rule `print-token`)."
        )
    );
}

#[tokio::test]
async fn touching_the_database_asks_and_is_refused_when_unattended() {
    let f = fixture();
    let ctx = f.ctx.clone().unattended(true);
    let text = "sqlite3 ~/.troupe/troupe.db 'select 1'";
    assert_eq!(
        check(&gate(GateMode::Auto), &ctx, text).await,
        deny(
            "troupe-home",
            &format!(
                "`sqlite3 ~/.troupe/troupe.db select 1` touches troupe's own database, plugins \
                 or plugin data. Commands that act outside this machine need the user's approval \
                 every time, even in auto mode (rule `troupe-home`).{UNATTENDED}"
            )
        )
    );
}

// ---- what cannot be analysed ------------------------------------------------------

#[tokio::test]
async fn a_command_too_long_to_analyse_asks() {
    let f = fixture();
    let text = format!("echo {}", "a".repeat(10_000));
    assert_eq!(
        check(&gate(GateMode::Auto), &f.ctx, &text).await,
        unanalysable(
            "unanalysable",
            "The gate cannot analyse this command: it is 10005 characters long, more than the \
             10000 the gate analyses. It is never run unchecked, so the user decides; to avoid \
             the question, run simpler commands (shorter, quotes closed, less nesting, scripts \
             that exist)."
        )
    );
}

#[tokio::test]
async fn unbalanced_quotes_or_deep_nesting_are_refused_when_unattended() {
    let f = fixture();
    let ctx = f.ctx.clone().unattended(true);
    assert_eq!(
        check(&gate(GateMode::Auto), &ctx, "echo 'unclosed").await,
        deny(
            "unanalysable",
            &format!(
                "The gate cannot analyse this command: it has an unclosed single quote. It is \
                 never run unchecked, so the user decides; to avoid the question, run simpler \
                 commands (shorter, quotes closed, less nesting, scripts that exist).{UNATTENDED}"
            )
        )
    );
    let deep = format!("{}ls{}", "sh -c \"$(".repeat(12), ")\"".repeat(12));
    assert!(matches!(
        check(&gate(GateMode::Auto), &ctx, &deep).await,
        Verdict::Deny { rule, .. } if rule == "unanalysable"
    ));
}

// ---- scripts ------------------------------------------------------------------

#[tokio::test]
async fn scripts_are_judged_on_their_content() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    std::fs::write(
        f.ctx.cwd.join("clean.sh"),
        "#!/bin/sh\necho cleaning\nrm -rf \"$HOME\"\n",
    )
    .unwrap();
    std::fs::write(
        f.ctx.cwd.join("build.sh"),
        "#!/usr/bin/env bash\nset -e\ncargo build\n",
    )
    .unwrap();
    std::fs::create_dir_all(f.ctx.cwd.join("tools")).unwrap();
    std::fs::write(f.ctx.cwd.join("tools/inner.sh"), "sh ../clean.sh\n").unwrap();
    for text in [
        "bash clean.sh",
        "sh clean.sh",
        "./clean.sh",
        "source clean.sh",
        ". ./clean.sh",
        "sudo bash ./clean.sh --fast",
        "cd tools && bash ../clean.sh",
    ] {
        match check(&gate, &f.ctx, text).await {
            Verdict::Deny { rule, .. } => assert_eq!(rule, "rm-root", "{text}"),
            other => panic!("`{text}`: {other:?}"),
        }
    }
    let in_tools = ToolCall {
        id: "c".into(),
        name: "run_command".into(),
        arguments: json!({"command": "bash inner.sh", "cwd": "tools"}),
    };
    assert!(matches!(
        gate.check(&run_command(), &in_tools, &f.ctx).await,
        Verdict::Deny { rule, .. } if rule == "rm-root"
    ));
    assert_eq!(check(&gate, &f.ctx, "bash build.sh").await, Verdict::Allow);
    assert_eq!(check(&gate, &f.ctx, "./build.sh").await, Verdict::Allow);
}

#[tokio::test]
async fn a_missing_or_self_written_script_is_not_allowed() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    std::fs::write(f.ctx.cwd.join("ok.sh"), "echo ok\n").unwrap();
    let missing = f.ctx.cwd.join("nope.sh");
    assert_eq!(
        check(&gate, &f.ctx, "bash nope.sh").await,
        unanalysable(
            "unanalysable",
            &format!(
            "The gate cannot analyse this command: it runs the script {}, which does not exist, \
             so the gate cannot read what it would run. It is never run unchecked, so the user \
             decides; to avoid the question, run simpler commands (shorter, quotes closed, less \
             nesting, scripts that exist).",
                missing.display()
            )
        )
    );
    assert!(matches!(
        check(&gate, &f.ctx, "echo 'rm -rf /' > ok.sh && bash ok.sh").await,
        Verdict::Unanalysable { reason, .. } if reason.contains("the same command also changes")
    ));
}

// ---- paths written ------------------------------------------------------------

#[tokio::test]
async fn writing_the_homes_settings_is_blocked() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    let config = f.ctx.home.config_file();
    assert_eq!(
        gate.check(&write_file(), &write(config.to_str().unwrap()), &f.ctx)
            .await,
        deny(
            "troupe-home",
            &format!(
                "refused: `{}` is in troupe's home, and is troupe's own `config.toml`; the file \
                 tools never write troupe's home. Only the user changes it, with an editor or \
                 troupe's own commands; ask them to.",
                config.display()
            )
        )
    );
    for path in [
        "~/.troupe/plugins/x/manifest.json",
        "~/.troupe/troupe.db-wal",
        "../.troupe/mcp.json",
    ] {
        assert!(
            matches!(
                gate.check(&write_file(), &write(path), &f.ctx).await,
                Verdict::Deny { rule, .. } if rule == "troupe-home"
            ),
            "{path}"
        );
    }
    assert_eq!(
        gate.check(&write_file(), &write("notes.md"), &f.ctx).await,
        Verdict::Allow
    );
}

#[tokio::test]
async fn writing_ssh_files_asks_and_remembers_for_the_session() {
    let f = fixture();
    let gate = gate(GateMode::Auto);
    let target = f.user_home.join(".ssh/config");
    let expected = ask(&format!(
        "Writing `~/.ssh/config` (which resolves to `{}`) changes the user's SSH keys or \
         settings (`~/.ssh`), so the user approves it.",
        target.display()
    ));
    assert_eq!(
        gate.check(&write_file(), &write("~/.ssh/config"), &f.ctx)
            .await,
        expected
    );
    gate.remember(
        &write_file(),
        &write("~/.ssh/config"),
        &f.ctx,
        ApprovalAnswer::Session,
    )
    .unwrap();
    assert_eq!(
        gate.check(&write_file(), &write("~/.ssh/config"), &f.ctx)
            .await,
        Verdict::Allow
    );
}

#[tokio::test]
async fn a_non_string_argument_is_refused() {
    let f = fixture();
    let call = ToolCall {
        id: "c".into(),
        name: "run_command".into(),
        arguments: json!({"command": ["rm", "-rf", "/"]}),
    };
    assert_eq!(
        gate(GateMode::Auto)
            .check(&run_command(), &call, &f.ctx)
            .await,
        deny(
            "gate-argument",
            "Blocked the call of `run_command`: its `command` argument is not a string, so the \
             gate cannot judge it. Call it again with `command` as a string."
        )
    );
}

#[test]
fn analysing_a_long_command_is_fast() {
    use super::inspect::{analyse, Env, Limits};
    let text =
        "cd src && grep -rn 'TODO' . | sort | uniq -c > /tmp/todos.txt; echo $(date) && ls -la "
            .repeat(80);
    let start = std::time::Instant::now();
    for _ in 0..100 {
        analyse(&text, &Env::example(), &Limits::default()).unwrap();
    }
    let per_call = start.elapsed() / 100;
    eprintln!("analyse: {per_call:?} per call for {} chars", text.len());
    // Generous bound for a loaded debug build; the figure is in the report.
    assert!(
        per_call < std::time::Duration::from_millis(50),
        "{per_call:?}"
    );
}
