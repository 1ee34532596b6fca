//! Hardline rules: commands blocked always, in every mode, whatever the
//! user allowed.
//!
//! These destroy the machine or the user's data beyond repair, or take the
//! machine down: `rm -rf /` in all its spellings, making a file system,
//! writing over a disk, fork bombs, shutting down, opening `/` to everyone,
//! overwriting the account files. No approval, allow pattern or mode lets
//! them through; the user who truly means it runs it themselves.

use std::path::{Path, PathBuf};
use std::sync::LazyLock;

use regex::Regex;

use super::inspect::patterns::{could_match, has_glob, matches_anything};
use super::inspect::{Analysis, Env, Invocation};
use super::rules::{written_targets, Rule, RuleError, Tier};

/// Top-level folders whose loss breaks the machine.
const SYSTEM_DIRS: &[&str] = &[
    "/bin",
    "/boot",
    "/dev",
    "/etc",
    "/home",
    "/lib",
    "/lib32",
    "/lib64",
    "/opt",
    "/proc",
    "/root",
    "/sbin",
    "/srv",
    "/sys",
    "/usr",
    "/var",
    "/snap",
    "/Users",
    "/System",
    "/Library",
    "/Applications",
];

/// The account and privilege files nobody overwrites.
const ACCOUNT_FILES: &[&str] = &[
    "/etc/passwd",
    "/etc/shadow",
    "/etc/group",
    "/etc/gshadow",
    "/etc/sudoers",
    "/etc/master.passwd",
];

/// Whether `text` names the root, the home or a top-level system folder,
/// or everything in one (`/*`, `~/*`, `/[a-z]*`), or is a glob that could
/// match one of these (`/???`, `/u?r`, `/home/*`).
pub fn is_critical_path(text: &str, env: &Env) -> bool {
    let Some(path) = env.resolve(text) else {
        return false;
    };
    let path = strip_trailing_globs(&path);
    let critical = |p: &Path| {
        p == Path::new("/") || p == env.home || SYSTEM_DIRS.iter().any(|d| p == Path::new(d))
    };
    if critical(&path) {
        return true;
    }
    if !has_glob(&path.to_string_lossy()) {
        return false;
    }
    let candidates = SYSTEM_DIRS
        .iter()
        .map(Path::new)
        .chain([env.home.as_path()]);
    candidates.into_iter().any(|c| could_match(&path, c))
}

/// The path without its last components that match nearly anything (`/*`
/// is `/`, `~/[a-z]*` is `~`).
fn strip_trailing_globs(path: &Path) -> PathBuf {
    let mut out = path.to_path_buf();
    while out
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(matches_anything)
    {
        out.pop();
    }
    out
}

/// Whether `text` is a disk, partition or other block device.
pub fn is_block_device(text: &str) -> bool {
    let Some(dev) = text.strip_prefix("/dev/") else {
        return false;
    };
    [
        "sd", "hd", "vd", "xvd", "nvme", "mmcblk", "disk", "rdisk", "md", "dm-", "loop", "mapper/",
        "sr",
    ]
    .iter()
    .any(|p| dev.starts_with(p))
}

fn is_recursive(inv: &Invocation) -> bool {
    inv.has_flag('r', "--recursive") || inv.has_flag('R', "--recursive")
}

fn rm_root(inv: &Invocation, env: &Env) -> bool {
    inv.program == "rm"
        && (inv.arg_texts().any(|a| a == "--no-preserve-root")
            || (is_recursive(inv) && inv.operands().iter().any(|t| is_critical_path(t, env))))
}

/// Options `find` takes before its starting points (`-L`, `-O3`, `-D
/// tree`).
fn find_leading_options<'a>(args: &mut std::iter::Peekable<impl Iterator<Item = &'a str>>) {
    while let Some(a) = args.peek() {
        match *a {
            "-H" | "-L" | "-P" => {}
            "-D" => {
                args.next();
            }
            a if a.starts_with("-O") || (a.starts_with("-D") && a.len() > 2) => {}
            _ => return,
        }
        args.next();
    }
}

/// Whether a program `find -exec` runs (past wrappers, folders and
/// multi-call programs) deletes what it is given.
fn exec_deletes(words: &[&str]) -> bool {
    const WRAPPERS: &[&str] = &[
        "sudo", "doas", "env", "command", "nice", "nohup", "timeout", "busybox", "toybox",
        "stdbuf", "ionice", "setsid", "xargs",
    ];
    words
        .iter()
        .map(|w| w.rsplit('/').next().unwrap_or(w))
        .find(|w| !WRAPPERS.contains(w) && !w.starts_with('-') && !w.contains('='))
        .is_some_and(|p| matches!(p, "rm" | "shred" | "unlink" | "rmdir" | "srm"))
}

fn find_root_delete(inv: &Invocation, env: &Env) -> bool {
    if inv.program != "find" {
        return false;
    }
    let mut args = inv.arg_texts().peekable();
    find_leading_options(&mut args);
    let roots: Vec<&str> = args
        .take_while(|a| !a.starts_with('-') && !a.starts_with('(') && *a != "!")
        .collect();
    let words: Vec<&str> = inv.arg_texts().collect();
    let deletes = words.contains(&"-delete")
        || words.iter().enumerate().any(|(i, a)| {
            matches!(*a, "-exec" | "-execdir" | "-ok" | "-okdir") && exec_deletes(&words[i + 1..])
        });
    deletes && roots.iter().any(|r| is_critical_path(r, env))
}

fn make_fs(inv: &Invocation, _env: &Env) -> bool {
    inv.program.starts_with("mkfs")
        || matches!(inv.program.as_str(), "mke2fs" | "wipefs" | "mkswap")
}

fn disk_write(inv: &Invocation, _env: &Env) -> bool {
    written_targets(inv).into_iter().any(is_block_device)
}

fn fork_bomb(analysis: &Analysis, _env: &Env) -> Option<String> {
    static INLINE: LazyLock<Option<Regex>> = LazyLock::new(|| {
        Regex::new(r"fork\s*(\(\s*\))?\s*while\s*fork|while\s*\(?\s*(1|true)\s*\)?\s*\{?\s*fork|os\.fork\(\)\s*while|while\s+True\s*:\s*os\.fork").ok()
    });
    if let Some(f) = analysis
        .functions
        .iter()
        .find(|f| f.calls_itself && f.forks)
    {
        return Some(format!("{}() {{ {}|{}& }}", f.name, f.name, f.name));
    }
    let inline = INLINE.as_ref()?;
    analysis
        .invocations
        .iter()
        .find(|inv| inline.is_match(&inv.text()))
        .map(|inv| inv.text())
}

fn power(inv: &Invocation, _env: &Env) -> bool {
    let first = inv.operands().first().copied();
    match inv.program.as_str() {
        "shutdown" | "reboot" | "halt" | "poweroff" => true,
        "init" | "telinit" => matches!(first, Some("0" | "6")),
        "systemctl" | "loginctl" => matches!(
            first,
            Some("poweroff" | "reboot" | "halt" | "kexec" | "suspend" | "hibernate")
        ),
        _ => false,
    }
}

fn perms_root(inv: &Invocation, env: &Env) -> bool {
    if !matches!(inv.program.as_str(), "chmod" | "chown" | "chgrp") {
        return false;
    }
    let targets = inv.operands().into_iter().skip(1);
    let recursive = inv.has_flag('R', "--recursive");
    targets
        .filter_map(|t| env.resolve(t).map(|p| (t, p)))
        .any(|(t, p)| p == Path::new("/") || (recursive && is_critical_path(t, env)))
}

/// Whether `path` is one of the machine's account or privilege files.
pub fn is_account_file(path: &Path) -> bool {
    ACCOUNT_FILES.iter().any(|f| path == Path::new(f))
}

fn account_files(inv: &Invocation, env: &Env) -> bool {
    written_targets(inv)
        .into_iter()
        .filter_map(|t| env.resolve(t))
        .any(|p| is_account_file(&p))
}

/// The hardline rules.
pub fn rules() -> Result<Vec<Rule>, RuleError> {
    let t = Tier::Hardline;
    Ok(vec![
        Rule::invocation("rm-root", t, "deletes the root, the home or a system folder, everything on the machine or all of the user's files", rm_root)
            .matching(&[
                "rm -rf /", "rm -fr /", "rm -r -f /", "rm -Rf /", "rm --recursive --force /",
                "rm -rf /*", "rm -rf --no-preserve-root /", "rm -rf ~", "rm -rf ~/", "rm -rf $HOME",
                "rm -rf \"$HOME\"", "rm -rf ${HOME}/*", "rm -rf /.", "sudo rm -rf /",
                "env X=1 rm -rf /", "command rm -rf /", "\\rm -rf /", "/bin/rm -rf /",
                "rm -rf //", "rm -rf /usr", "rm -rf /etc/", "rm -rf ..", "rm -rf -- /",
                "sudo -u root /usr/bin/rm -rf /*", "nohup rm -rf / &", "r\"m\" -rf /",
                "rm -rf '/'", "cd /tmp && rm -rf /", "xargs rm -rf /",
                "rm -rf /[a-z]*", "rm -rf /???", "/???/r? -rf /", "{rm,-rf,~}", "{rm,-rf,/}",
                "busybox rm -rf /", "toybox rm -rf ~", "/bin/busybox rm -rf /usr", "rm -rf ~/[!.]*",
                "rm -rf /u?r", "pkexec rm -rf /",
            ])
            .passing(&[
                "rm -rf ./build", "rm -rf build", "echo rm -rf /", "git commit -m \"rm -rf /\"",
                "rm /tmp/x", "rm -rf /tmp/cache", "rm -rf ~/project/target", "ls -rf /",
                "rm -f /", "grep -r \"rm -rf /\" .", "rm -rf ./build*", "rm -rf ~/*.log",
                "echo {rm,-rf,/}", "ls /usr/*", "busybox ls /", "rm -rf /tmp/[a-z]*",
            ]),
        Rule::invocation("find-root-delete", t, "deletes every file under the root, the home or a system folder", find_root_delete)
            .matching(&[
                "find / -delete", "find ~ -type f -delete", "find / -exec rm -rf {} +",
                "find -L / -delete", "find -H -O3 ~ -delete", "find -D tree / -delete",
                "find / -exec /usr/bin/rm -rf {} +", "find /usr -execdir busybox rm {} \\;",
                "find / -exec sudo /bin/rm -f {} +", "find /[a-z]* -delete",
            ])
            .passing(&["find . -name '*.o' -delete", "find / -name x.txt", "find -L . -delete", "find -L / -name x -exec cat {} +"]),
        Rule::invocation("mkfs", t, "makes a new file system, erasing the disk or partition it is given", make_fs)
            .matching(&["mkfs /dev/sda1", "mkfs.ext4 /dev/sdb", "sudo mkfs.vfat /dev/sdc1", "wipefs -a /dev/sda"])
            .passing(&["echo mkfs", "grep -r \"mkfs\" .", "man mkfs"]),
        Rule::invocation("disk-write", t, "writes straight onto a disk or partition, destroying what is on it", disk_write)
            .matching(&[
                "dd if=/dev/zero of=/dev/sda", "dd if=x.img of=/dev/nvme0n1 bs=4M",
                "cat /dev/urandom > /dev/sdb", "echo x > /dev/vda", "shred /dev/sda",
                "cp disk.img /dev/mmcblk0", "sudo dd of=/dev/xvda if=/dev/zero",
            ])
            .passing(&["dd if=/dev/sda of=disk.img", "echo x > /dev/null", "ls /dev/sda", "dd if=/dev/zero of=file bs=1M count=1"]),
        Rule::whole("fork-bomb", t, "is a fork bomb: it multiplies processes until the machine stops answering", fork_bomb)
            .matching(&[":(){ :|:& };:", ":(){ :|: & };:", "bomb() { bomb | bomb & }; bomb", "f(){ f|f& }; f", "perl -e \"fork while fork\""])
            .passing(&["f() { echo hi; }; f", "echo ':(){ :|:& };:'"]),
        Rule::invocation("power", t, "shuts down or restarts the machine", power)
            .matching(&["shutdown -h now", "sudo reboot", "halt", "poweroff", "init 0", "init 6", "systemctl reboot", "sudo systemctl poweroff"])
            .passing(&["echo reboot", "systemctl status nginx", "init-project", "git commit -m reboot"]),
        Rule::invocation("perms-root", t, "changes the permissions or owner of the whole machine or a system folder", perms_root)
            .matching(&["chmod -R 777 /", "sudo chmod -R 777 /", "chown -R me /", "chmod 777 /", "chmod -R a+rwx /usr", "chgrp -R staff ~"])
            .passing(&["chmod -R 755 ./dist", "chmod +x run.sh", "chown me file.txt"]),
        Rule::invocation("account-files", t, "overwrites the machine's account or privilege files", account_files)
            .matching(&["echo x > /etc/passwd", "cp passwd /etc/passwd", "echo 'me ALL=(ALL) NOPASSWD:ALL' >> /etc/sudoers", "tee /etc/shadow", "sudo rm /etc/passwd"])
            .passing(&["cat /etc/passwd", "grep root /etc/passwd", "cp /etc/passwd ./backup"]),
    ])
}
