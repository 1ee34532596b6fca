//! The helper an environment's commands pass through: a hidden `troupe
//! __sandbox` subcommand, run as a fresh single-threaded process before
//! troupe's async runtime exists.
//!
//! Two steps:
//!
//! - **`enter`**, on the machine, before the sandbox: writes its own process
//!   id into the environment's control groups (so everything the sandbox
//!   starts is counted and capped from its first instruction), opens the
//!   commands' own group (where the memory cap is) at descriptor
//!   [`COMMANDS_CGROUP_FD`] for `init` to hand each command, then becomes
//!   `bwrap`. A control group joined after `bwrap` started would race its
//!   first fork.
//! - **`init`**, inside the sandbox that `bwrap` built, as its process 1:
//!   the environment's long-lived process ([`init`]). It restricts itself
//!   with Landlock (the workdir, `/tmp` and `/dev` writable; the rest
//!   read-only) and a seccomp filter that refuses the system calls a
//!   command has no business making (`ptrace`, `mount`, new namespaces,
//!   kernel modules, keyrings, `bpf`, …), and only then takes commands from
//!   its Sandbox actor: each is forked with the rlimits lowered and, when
//!   troupe runs as root, as the environment's own user — so every command
//!   inherits every restriction, and none pays for building the sandbox.
//!
//! Whatever cannot be applied ends the helper with [`REFUSED`] and a line
//! on standard error saying what failed: a command never runs with less
//! confinement than it was given.

mod init;
mod restrict;

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::process::Command;

use rustix::process::{Resource, Rlimit};

/// The hidden subcommand's name (`troupe __sandbox …`).
pub const SUBCOMMAND: &str = "__sandbox";

/// The exit code of a helper that refused to run.
pub const REFUSED: i32 = 125;

/// The descriptor at which `enter` hands `init` the commands' control
/// group (`cgroup.procs`, opened for writing on the machine, where the
/// kernel judges the permission to move a process by who opened it).
pub const COMMANDS_CGROUP_FD: i32 = 3;

/// How standard error's refusal line starts.
pub const REFUSAL_PREFIX: &str = "troupe sandbox: ";

/// Runs the helper with the arguments after [`SUBCOMMAND`]; returns only
/// when it could not go on (its exit code).
pub fn main(args: Vec<OsString>) -> i32 {
    let mut args = args.into_iter();
    let step = args.next().and_then(|s| s.into_string().ok());
    let result = match step.as_deref() {
        Some("enter") => enter(args.collect()),
        Some("init") => init::run(args.collect()),
        _ => Err("the first argument must be `enter` or `init`".to_string()),
    };
    let why = match result {
        Ok(never) => match never {},
        Err(why) => why,
    };
    eprintln!("{REFUSAL_PREFIX}{why}");
    REFUSED
}

/// What a step is given: its options, then `--` and the program (if any).
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
    Ok(parsed)
}

enum Never {}

fn become_program(program: &[OsString]) -> Result<Never, String> {
    let (first, rest) = program
        .split_first()
        .ok_or_else(|| "no program to run after `--`".to_string())?;
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
            "commands-cgroup" => hand_down(value)?,
            other => return Err(format!("`enter` has no option --{other}")),
        }
    }
    become_program(&parsed.program)
}

/// Opens the commands' `cgroup.procs` at [`COMMANDS_CGROUP_FD`], without
/// close-on-exec: it passes through `bwrap` to `init`.
#[allow(unsafe_code)]
fn hand_down(procs: &str) -> Result<(), String> {
    use std::os::fd::{AsRawFd, IntoRawFd};
    let fd = rustix::fs::open(procs, rustix::fs::OFlags::WRONLY, rustix::fs::Mode::empty())
        .map_err(|e| format!("could not open the commands' control group {procs}: {e}"))?;
    if fd.as_raw_fd() == COMMANDS_CGROUP_FD {
        // Already there: keep it open past this function.
        let _ = fd.into_raw_fd();
        return Ok(());
    }
    // SAFETY: `dup2` only makes `COMMANDS_CGROUP_FD` a copy of `fd`; in this
    // fresh single-threaded process nothing else owns that number (std
    // opens every descriptor close-on-exec, so none of them is handed on).
    let done = unsafe { libc::dup2(fd.as_raw_fd(), COMMANDS_CGROUP_FD) };
    if done != COMMANDS_CGROUP_FD {
        return Err(format!(
            "could not hand down the commands' control group: {}",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// `--rlimit NAME=VALUE`: a limit whose soft and hard values are both
/// `VALUE`.
fn parse_rlimit(spec: &str) -> Result<(Resource, Rlimit), String> {
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
    Ok((
        resource,
        Rlimit {
            current: Some(value),
            maximum: Some(value),
        },
    ))
}
