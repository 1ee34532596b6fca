//! Dangerous patterns: risky but often legitimate, so the guardian judges.
//!
//! Deleting a folder, rewriting git history, killing processes, acting as
//! root, installing packages, editing the user's dotfiles or system
//! configuration: each has good uses, and each
//! can do harm an agent cannot undo. These go to the guardian (or, with none,
//! to the user) unless auto mode is on or the user's allow list covers them.

use super::hardline::is_critical_path;
use super::inspect::{Env, Invocation};
use super::path::real_or_given;
use super::protected::user_setting;
use super::rules::{written_targets, Rule, RuleError, Tier};

/// The first operand and the rest of a git command, past its global options.
fn git_sub(inv: &Invocation) -> Option<(&str, Vec<&str>)> {
    if inv.program != "git" {
        return None;
    }
    let mut args = inv.arg_texts();
    while let Some(a) = args.next() {
        if a == "-C" || a == "-c" || a == "--git-dir" || a == "--work-tree" {
            args.next();
        } else if !a.starts_with('-') {
            return Some((a, args.collect()));
        }
    }
    None
}

fn rm_recursive(inv: &Invocation, _env: &Env) -> bool {
    inv.program == "rm" && (inv.has_flag('r', "--recursive") || inv.has_flag('R', "--recursive"))
}

fn find_delete(inv: &Invocation, _env: &Env) -> bool {
    inv.program == "find"
        && inv
            .arg_texts()
            .any(|a| a == "-delete" || a.starts_with("-exec") || a.starts_with("-ok"))
}

fn git_force_push(inv: &Invocation, _env: &Env) -> bool {
    let Some(("push", rest)) = git_sub(inv) else {
        return false;
    };
    rest.iter().any(|a| {
        a.starts_with("--force")
            || a.starts_with("--delete")
            || *a == "--mirror"
            || (a.starts_with('-') && !a.starts_with("--") && a.contains(['f', 'd']))
            || (a.starts_with('+') && a.len() > 1)
            || (a.starts_with(':') && a.len() > 1)
    })
}

fn git_discard(inv: &Invocation, _env: &Env) -> bool {
    let Some((sub, rest)) = git_sub(inv) else {
        return false;
    };
    let short = |c: char| {
        rest.iter()
            .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(c))
    };
    match sub {
        "reset" => rest.contains(&"--hard") || rest.contains(&"--merge"),
        "clean" => short('f') || rest.contains(&"--force"),
        "branch" => rest.contains(&"-D") || (short('d') && short('f')),
        "checkout" => rest.contains(&"-f") || rest.contains(&"--force") || rest.contains(&"."),
        "restore" => !rest.contains(&"--staged"),
        "stash" => matches!(rest.first(), Some(&("drop" | "clear"))),
        "filter-branch" | "filter-repo" => true,
        _ => false,
    }
}

fn recursive_perms(inv: &Invocation, _env: &Env) -> bool {
    matches!(inv.program.as_str(), "chmod" | "chown" | "chgrp")
        && (inv.has_flag('R', "--recursive")
            || inv
                .arg_texts()
                .any(|a| a == "777" || a == "a+rwx" || a == "o+w"))
}

fn kill_processes(inv: &Invocation, _env: &Env) -> bool {
    match inv.program.as_str() {
        "pkill" | "killall" | "killall5" | "xkill" => true,
        "kill" => inv.arg_texts().any(|a| {
            matches!(a, "-9" | "-KILL" | "-SIGKILL" | "-s") || a.ends_with("KILL") || a == "-1"
        }),
        _ => false,
    }
}

fn elevated(inv: &Invocation, _env: &Env) -> bool {
    inv.elevated || matches!(inv.program.as_str(), "sudo" | "doas" | "su" | "pkexec")
}

fn package_install(inv: &Invocation, _env: &Env) -> bool {
    let ops = inv.operands();
    let verb = |verbs: &[&str]| ops.first().is_some_and(|v| verbs.contains(v));
    const CHANGE: &[&str] = &[
        "install",
        "i",
        "add",
        "remove",
        "rm",
        "uninstall",
        "purge",
        "upgrade",
        "reinstall",
        "autoremove",
        "update",
    ];
    match inv.program.as_str() {
        "apt" | "apt-get" | "aptitude" | "yum" | "dnf" | "zypper" | "apk" | "brew" | "port"
        | "snap" | "flatpak" | "pip" | "pip3" | "pipx" | "npm" | "pnpm" | "yarn" | "bun"
        | "gem" | "conda" | "mamba" | "poetry" | "choco" | "winget" | "scoop" => verb(CHANGE),
        "cargo" | "go" => verb(&["install", "uninstall"]),
        "pacman" | "yay" | "paru" => inv
            .arg_texts()
            .any(|a| a.starts_with("-S") || a.starts_with("-R") || a.starts_with("-U")),
        "uv" => {
            ops.first().is_some_and(|v| matches!(*v, "add" | "remove"))
                || (ops.len() > 1 && matches!(ops[0], "pip" | "tool") && CHANGE.contains(&ops[1]))
        }
        "dpkg" | "rpm" => inv.has_flag('i', "--install") || inv.has_flag('r', "--remove"),
        p if p.starts_with("python") => {
            inv.arg_texts().any(|a| a == "pip") && inv.arg_texts().any(|a| CHANGE.contains(&a))
        }
        _ => false,
    }
}

/// A command writing one of the user's own settings ([`user_setting`]: the
/// rule the file tools share), judged on the path as written and as the
/// kernel resolves it; or installing a crontab (`crontab FILE`).
fn dotfile_write(inv: &Invocation, env: &Env) -> bool {
    let installs_crontab = inv.program == "crontab"
        && !inv.arg_texts().any(|a| {
            matches!(a, "-l" | "-r" | "-e" | "--list" | "--remove" | "--edit")
                || (a.starts_with('-') && a.len() > 2 && a.contains(['l', 'r']))
        })
        && !inv.operands().is_empty();
    installs_crontab
        || written_targets(inv)
            .into_iter()
            .filter_map(|t| env.resolve(t))
            .any(|p| {
                user_setting(&env.home, &p).is_some()
                    || user_setting(&env.home, &real_or_given(&p)).is_some()
            })
}

fn system_write(inv: &Invocation, env: &Env) -> bool {
    written_targets(inv)
        .into_iter()
        .filter(|t| !is_critical_path(t, env))
        .filter_map(|t| env.resolve(t))
        .any(|p| {
            [
                "/etc", "/usr", "/boot", "/bin", "/sbin", "/lib", "/lib64", "/var", "/opt", "/sys",
            ]
            .iter()
            .any(|d| p.starts_with(d))
        })
}

fn destroy_data(inv: &Invocation, _env: &Env) -> bool {
    matches!(inv.program.as_str(), "shred" | "wipe" | "srm")
        || (inv.program == "truncate" && inv.arg_texts().any(|a| a == "0" || a == "-s0"))
}

fn services(inv: &Invocation, _env: &Env) -> bool {
    let ops = inv.operands();
    match inv.program.as_str() {
        "systemctl" => ops.first().is_some_and(|v| {
            matches!(
                *v,
                "stop" | "disable" | "mask" | "kill" | "restart" | "isolate"
            )
        }),
        "service" => ops.get(1).is_some_and(|v| matches!(*v, "stop" | "restart")),
        "crontab" => inv.has_flag('r', "--remove"),
        "iptables" | "ip6tables" | "nft" | "ufw" => true,
        "docker" | "podman" => {
            ops.contains(&"prune")
                || matches!(ops.first(), Some(&("rm" | "rmi" | "kill")))
                || (ops.len() > 1 && matches!(ops[1], "rm" | "prune"))
                || inv.arg_texts().any(|a| a == "--privileged")
        }
        _ => false,
    }
}

/// The dangerous rules.
pub fn rules() -> Result<Vec<Rule>, RuleError> {
    let t = Tier::Dangerous;
    Ok(vec![
        Rule::invocation(
            "rm-recursive",
            t,
            "deletes a folder and everything in it",
            rm_recursive,
        )
        .matching(&[
            "rm -rf build",
            "rm -r node_modules",
            "rm --recursive x",
            "sudo rm -R /opt/app",
        ])
        .passing(&["rm file.txt", "rm -f a.o", "echo rm -rf x"]),
        Rule::invocation(
            "find-delete",
            t,
            "deletes or runs a command on every file it finds",
            find_delete,
        )
        .matching(&["find . -name '*.log' -delete", "find . -exec rm {} ;"])
        .passing(&["find . -name '*.rs'"]),
        Rule::invocation(
            "git-force-push",
            t,
            "rewrites or deletes history on a remote",
            git_force_push,
        )
        .matching(&[
            "git push --force",
            "git push -f origin main",
            "git push --force-with-lease",
            "git push origin +main",
            "git push origin --delete old",
            "git -C repo push -f",
        ])
        .passing(&[
            "git push",
            "git push origin main",
            "git push -u origin feature",
        ]),
        Rule::invocation(
            "git-discard",
            t,
            "throws away uncommitted work or history",
            git_discard,
        )
        .matching(&[
            "git reset --hard",
            "git reset --hard HEAD~3",
            "git clean -fd",
            "git clean -xdf",
            "git branch -D topic",
            "git checkout -- .",
            "git stash clear",
            "git restore src/main.rs",
        ])
        .passing(&[
            "git reset HEAD file",
            "git status",
            "git checkout -b new",
            "git restore --staged x",
            "git branch -d merged",
        ]),
        Rule::invocation(
            "recursive-perms",
            t,
            "changes permissions or owners of many files at once, or opens them to everyone",
            recursive_perms,
        )
        .matching(&[
            "chmod -R 755 ./dist",
            "chown -R me:me .",
            "chmod 777 file",
            "chgrp -R staff src",
        ])
        .passing(&["chmod +x run.sh", "chmod 644 a.txt"]),
        Rule::invocation(
            "kill-processes",
            t,
            "kills processes by force or by name",
            kill_processes,
        )
        .matching(&[
            "kill -9 1234",
            "kill -KILL 1",
            "pkill node",
            "killall python3",
            "kill -s KILL 42",
        ])
        .passing(&["kill 1234", "ps aux"]),
        Rule::invocation("elevated", t, "runs as root", elevated)
            .matching(&[
                "sudo ls /root",
                "doas cat /etc/shadow",
                "su -c 'id'",
                "sudo -i",
            ])
            .passing(&["ls /root", "echo sudo"]),
        Rule::invocation(
            "package-install",
            t,
            "installs or removes software packages",
            package_install,
        )
        .matching(&[
            "apt-get install -y curl",
            "sudo apt install x",
            "pip install requests",
            "npm install -g typescript",
            "yarn add react",
            "cargo install ripgrep",
            "brew install jq",
            "python3 -m pip install x",
            "uv pip install x",
            "pacman -S vim",
            "npm i lodash",
        ])
        .passing(&[
            "pip list",
            "npm run build",
            "cargo build",
            "apt list --installed",
            "npm test",
            "uv run pytest",
        ]),
        Rule::invocation(
            "dotfile-write",
            t,
            "changes the user's own settings (dotfiles, SSH, git configuration or hooks, crontabs)",
            dotfile_write,
        )
        .matching(&[
            "echo 'alias x=y' >> ~/.bashrc",
            "cp key.pub ~/.ssh/authorized_keys",
            "sed -i s/a/b/ ~/.profile",
            "tee -a $HOME/.zshrc",
            "mv cfg /home/user/.gitconfig",
            "cp hook .git/hooks/pre-commit",
            "echo '[core] fsmonitor = x' >> ../.git/config",
            "crontab jobs.txt",
            "tee /var/spool/cron/crontabs/user",
        ])
        .passing(&[
            "cat ~/.bashrc",
            "crontab -l",
            "cat .git/config",
            "echo x > ./.env.example",
            "cp a ~/notes.txt",
        ]),
        Rule::invocation(
            "system-write",
            t,
            "changes system files or folders",
            system_write,
        )
        .matching(&[
            "echo 1 > /proc/../etc/hosts",
            "cp app /usr/local/bin/app",
            "sudo tee /etc/hosts",
            "rm /var/log/syslog",
        ])
        .passing(&["cat /etc/hosts", "cp /etc/hosts ./hosts"]),
        Rule::invocation(
            "destroy-data",
            t,
            "destroys file contents beyond recovery",
            destroy_data,
        )
        .matching(&["shred -u secrets.txt", "truncate -s 0 app.log"])
        .passing(&["truncate -s 10M disk.img"]),
        Rule::invocation(
            "services",
            t,
            "stops services, changes the firewall or the scheduler, or removes containers",
            services,
        )
        .matching(&[
            "systemctl stop nginx",
            "sudo service ssh stop",
            "crontab -r",
            "iptables -F",
            "docker system prune -af",
            "docker rm -f web",
            "docker run --privileged x",
        ])
        .passing(&[
            "systemctl status nginx",
            "crontab -l",
            "docker ps",
            "docker run --rm alpine echo hi",
        ]),
    ])
}
