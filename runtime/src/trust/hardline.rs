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
/// or everything in one (`/*`, `~/*`).
pub fn is_critical_path(text: &str, env: &Env) -> bool {
    let Some(path) = env.resolve(text) else {
        return false;
    };
    let path = strip_trailing_globs(&path);
    path == Path::new("/") || path == env.home || SYSTEM_DIRS.iter().any(|d| path == Path::new(d))
}

fn strip_trailing_globs(path: &Path) -> PathBuf {
    let mut out = path.to_path_buf();
    while out
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.contains(['*', '?']) && n.chars().all(|c| "*?.".contains(c)))
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

fn find_root_delete(inv: &Invocation, env: &Env) -> bool {
    if inv.program != "find" {
        return false;
    }
    let roots: Vec<&str> = inv
        .arg_texts()
        .take_while(|a| !a.starts_with('-') && !a.starts_with('(') && *a != "!")
        .collect();
    let deletes = inv.arg_texts().any(|a| a == "-delete")
        || inv
            .arg_texts()
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w[0].starts_with("-exec") && matches!(w[1], "rm" | "/bin/rm" | "shred"));
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
            ])
            .passing(&[
                "rm -rf ./build", "rm -rf build", "echo rm -rf /", "git commit -m \"rm -rf /\"",
                "rm /tmp/x", "rm -rf /tmp/cache", "rm -rf ~/project/target", "ls -rf /",
                "rm -f /", "grep -r \"rm -rf /\" .",
            ]),
        Rule::invocation("find-root-delete", t, "deletes every file under the root, the home or a system folder", find_root_delete)
            .matching(&["find / -delete", "find ~ -type f -delete", "find / -exec rm -rf {} +"])
            .passing(&["find . -name '*.o' -delete", "find / -name x.txt"]),
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
