//! The helper an environment's command passes through: a hidden `troupe
//! __sandbox` subcommand, run as a fresh single-threaded process before
//! troupe's async runtime exists.
//!
//! Two steps, each ending in `exec`:
//!
//! - **`enter`**, on the machine, before the sandbox: writes its own process
//!   id into the environment's control groups (so everything the command
//!   starts is counted and capped from its first instruction), then becomes
//!   `bwrap`. A control group joined after `bwrap` started would race its
//!   first fork.
//! - **`confine`**, inside the sandbox that `bwrap` built: lowers the
//!   resource limits (rlimits), drops to the environment's own user when
//!   troupe runs as root, restricts the file system with Landlock (the
//!   workdir, `/tmp` and `/dev` writable; the rest read-only), installs a
//!   seccomp filter that refuses the system calls a command has no business
//!   making (`ptrace`, `mount`, new namespaces, kernel modules, keyrings,
//!   `bpf`, …), then becomes the command.
//!
//! Whatever cannot be applied ends the helper with [`REFUSED`] and a line
//! on standard error saying what failed: a command never runs with less
//! confinement than it was given.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

/// The hidden subcommand's name (`troupe __sandbox …`).
pub const SUBCOMMAND: &str = "__sandbox";

/// The exit code of a helper that refused to run the command.
pub const REFUSED: i32 = 125;

/// How standard error's refusal line starts.
pub const REFUSAL_PREFIX: &str = "troupe sandbox: ";

/// Runs the helper with the arguments after [`SUBCOMMAND`]; returns only
/// when it could not become the command (its exit code).
pub fn main(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let step = args.next().and_then(|s| s.into_string().ok());
    let result = match step.as_deref() {
        Some("enter") => enter(args.collect()),
        Some("confine") => confine(args.collect()),
        _ => Err("the first argument must be `enter` or `confine`".to_string()),
    };
    let why = match result {
        Ok(never) => match never {},
        Err(why) => why,
    };
    eprintln!("{REFUSAL_PREFIX}{why}");
    REFUSED
}

/// What a step is given: its options, then `--` and the program.
#[derive(Debug, Default)]
struct Parsed {
    options: Vec<(String, String)>,
    program: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Parsed, String> {
    let mut parsed = Parsed::default();
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            parsed.program = args.collect();
            break;
        }
        let name = arg
            .into_string()
            .map_err(|_| "an option is not valid UTF-8".to_string())?;
        let Some(name) = name.strip_prefix("--") else {
            return Err(format!(
                "`{name}` is not an option; the program follows `--`"
            ));
        };
        let value = args
            .next()
            .and_then(|v| v.into_string().ok())
            .ok_or_else(|| format!("--{name} needs a value"))?;
        parsed.options.push((name.to_string(), value));
    }
    if parsed.program.is_empty() {
        return Err("no program to run after `--`".into());
    }
    Ok(parsed)
}

enum Never {}

fn become_program(program: &[OsString]) -> Result<Never, String> {
    let (first, rest) = program
        .split_first()
        .ok_or_else(|| "no program to run".to_string())?;
    let e = Command::new(first).args(rest).exec();
    Err(format!("could not run {}: {e}", first.to_string_lossy()))
}

fn enter(args: Vec<OsString>) -> Result<Never, String> {
    let parsed = parse(args)?;
    let pid = std::process::id().to_string();
    for (name, value) in &parsed.options {
        match name.as_str() {
            "cgroup" => std::fs::write(value, &pid)
                .map_err(|e| format!("could not join the control group {value}: {e}"))?,
            other => return Err(format!("`enter` has no option --{other}")),
        }
    }
    become_program(&parsed.program)
}

fn confine(args: Vec<OsString>) -> Result<Never, String> {
    let parsed = parse(args)?;
    let mut uid = None;
    let mut writable = Vec::new();
    let mut landlock_required = true;
    for (name, value) in &parsed.options {
        match name.as_str() {
            "rlimit" => set_rlimit(value)?,
            "uid" => {
                uid = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| format!("--uid {value} is not a user id"))?,
                )
            }
            "write" => writable.push(value.clone()),
            "landlock" => {
                landlock_required = match value.as_str() {
                    "required" => true,
                    "best_effort" => false,
                    other => {
                        return Err(format!("--landlock {other}: give required or best_effort"))
                    }
                }
            }
            other => return Err(format!("`confine` has no option --{other}")),
        }
    }
    if let Some(uid) = uid {
        drop_to(uid)?;
    }
    restrict_files(&writable, landlock_required)?;
    filter_system_calls()?;
    become_program(&parsed.program)
}

/// `--rlimit NAME=VALUE`: sets both the soft and the hard limit.
fn set_rlimit(spec: &str) -> Result<(), String> {
    use rustix::process::{setrlimit, Resource, Rlimit};
    let (name, value) = spec
        .split_once('=')
        .ok_or_else(|| format!("--rlimit {spec}: give NAME=VALUE"))?;
    let value: u64 = value
        .parse()
        .map_err(|_| format!("--rlimit {spec}: the value is not a number"))?;
    let resource = match name {
        "as" => Resource::As,
        "nproc" => Resource::Nproc,
        "cpu" => Resource::Cpu,
        "fsize" => Resource::Fsize,
        "nofile" => Resource::Nofile,
        "core" => Resource::Core,
        other => return Err(format!("--rlimit: no limit named {other}")),
    };
    setrlimit(
        resource,
        Rlimit {
            current: Some(value),
            maximum: Some(value),
        },
    )
    .map_err(|e| format!("could not set the {name} limit to {value}: {e}"))
}

/// Becomes `uid` (and the group of the same number), with no other groups:
/// troupe runs as root, and the command must not.
fn drop_to(uid: u32) -> Result<(), String> {
    use rustix::process::{Gid, Uid};
    use rustix::thread::{set_thread_groups, set_thread_res_gid, set_thread_res_uid};
    // One thread: the thread's ids are the process's.
    let gid = Gid::from_raw(uid);
    set_thread_groups(&[]).map_err(|e| format!("could not drop supplementary groups: {e}"))?;
    set_thread_res_gid(gid, gid, gid).map_err(|e| format!("could not become group {uid}: {e}"))?;
    let user = Uid::from_raw(uid);
    set_thread_res_uid(user, user, user)
        .map_err(|e| format!("could not become user {uid}: {e}"))?;
    if rustix::process::geteuid().is_root() {
        return Err("still root after dropping privileges".into());
    }
    Ok(())
}

/// Landlock: everything visible may be read and run; only `writable` (the
/// workdir, `/tmp`, `/dev`) may be written. The first ABI's rights are a
/// hard requirement unless `required` is off; later ones apply where the
/// kernel has them.
fn restrict_files(writable: &[String], required: bool) -> Result<(), String> {
    use landlock::{
        path_beneath_rules, Access, AccessFs, CompatLevel, Compatible, Ruleset, RulesetAttr,
        RulesetCreatedAttr, RulesetStatus, ABI,
    };
    let newest = ABI::V5;
    let first = if required {
        CompatLevel::HardRequirement
    } else {
        CompatLevel::BestEffort
    };
    let status = Ruleset::default()
        .set_compatibility(first)
        .handle_access(AccessFs::from_all(ABI::V1))
        .and_then(|r| {
            r.set_compatibility(CompatLevel::BestEffort)
                .handle_access(AccessFs::from_all(newest))
        })
        .and_then(|r| r.create())
        .and_then(|r| r.add_rules(path_beneath_rules(["/"], AccessFs::from_read(newest))))
        .and_then(|r| r.add_rules(path_beneath_rules(writable, AccessFs::from_all(newest))))
        .and_then(|r| r.restrict_self())
        .map_err(|e| {
            format!(
                "Landlock could not be applied ({e}); it needs Linux 5.13 or later with Landlock \
                 enabled (CONFIG_SECURITY_LANDLOCK, `landlock` in the `lsm=` boot parameter), or \
                 [environments] landlock = \"best_effort\" in config.toml"
            )
        })?;
    if required && status.ruleset == RulesetStatus::NotEnforced {
        return Err(
            "Landlock is not enforced by this kernel; it needs Linux 5.13 or later with \
                    Landlock enabled, or [environments] landlock = \"best_effort\""
                .into(),
        );
    }
    Ok(())
}

/// The system calls refused with `EPERM`: debugging other processes,
/// mounting, new namespaces, the kernel's modules, keyrings, BPF,
/// performance counters, clocks, swap and reboot.
const REFUSED_CALLS: &[i64] = &[
    libc::SYS_ptrace,
    libc::SYS_process_vm_readv,
    libc::SYS_process_vm_writev,
    libc::SYS_mount,
    libc::SYS_umount2,
    libc::SYS_pivot_root,
    libc::SYS_chroot,
    libc::SYS_unshare,
    libc::SYS_setns,
    libc::SYS_open_tree,
    libc::SYS_move_mount,
    libc::SYS_fsopen,
    libc::SYS_fsconfig,
    libc::SYS_fsmount,
    libc::SYS_fspick,
    libc::SYS_mount_setattr,
    libc::SYS_swapon,
    libc::SYS_swapoff,
    libc::SYS_reboot,
    libc::SYS_kexec_load,
    libc::SYS_kexec_file_load,
    libc::SYS_init_module,
    libc::SYS_finit_module,
    libc::SYS_delete_module,
    libc::SYS_bpf,
    libc::SYS_perf_event_open,
    libc::SYS_keyctl,
    libc::SYS_add_key,
    libc::SYS_request_key,
    libc::SYS_userfaultfd,
    libc::SYS_open_by_handle_at,
    libc::SYS_name_to_handle_at,
    libc::SYS_acct,
    libc::SYS_quotactl,
    libc::SYS_syslog,
    libc::SYS_settimeofday,
    libc::SYS_clock_settime,
    libc::SYS_clock_adjtime,
    libc::SYS_adjtimex,
    libc::SYS_fanotify_init,
];

/// The namespace flags `clone` is refused with.
const NAMESPACE_FLAGS: &[u64] = &[
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWCGROUP as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
];

/// Installs the seccomp filters: [`REFUSED_CALLS`] and `clone` with a
/// namespace flag answer `EPERM`; `clone3` answers `ENOSYS`, so the C
/// library falls back to `clone`, whose flags the filter can read.
fn filter_system_calls() -> Result<(), String> {
    use seccompiler::{
        apply_filter, BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition,
        SeccompFilter, SeccompRule, TargetArch,
    };
    let arch = TargetArch::try_from(std::env::consts::ARCH)
        .map_err(|e| format!("seccomp filters are not built for this machine: {e}"))?;
    let fail = |e: seccompiler::BackendError| format!("the seccomp filter could not be built: {e}");
    let mut rules: std::collections::BTreeMap<i64, Vec<SeccompRule>> = REFUSED_CALLS
        .iter()
        .map(|call| (*call, Vec::new()))
        .collect();
    let mut clone_rules = Vec::new();
    for flag in NAMESPACE_FLAGS {
        let condition = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Qword,
            SeccompCmpOp::MaskedEq(*flag),
            *flag,
        )
        .map_err(fail)?;
        clone_rules.push(SeccompRule::new(vec![condition]).map_err(fail)?);
    }
    rules.insert(libc::SYS_clone, clone_rules);
    let refuse = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        arch,
    )
    .map_err(fail)?;
    let clone3 = SeccompFilter::new(
        [(libc::SYS_clone3, Vec::new())].into_iter().collect(),
        SeccompAction::Allow,
        SeccompAction::Errno(libc::ENOSYS as u32),
        arch,
    )
    .map_err(fail)?;
    for filter in [refuse, clone3] {
        let program: BpfProgram = filter
            .try_into()
            .map_err(|e: seccompiler::BackendError| fail(e))?;
        apply_filter(&program)
            .map_err(|e| format!("the seccomp filter could not be installed: {e}"))?;
    }
    Ok(())
}
