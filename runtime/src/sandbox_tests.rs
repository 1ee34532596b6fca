use std::path::{Path, PathBuf};
use std::process::Stdio;

use pretty_assertions::assert_eq;

use super::*;

struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    Fixture { _dir: dir, root }
}

fn args_of(command: &Command) -> Vec<String> {
    command
        .get_args()
        .map(|a| a.to_string_lossy().into_owned())
        .collect()
}

/// Runs `script` under `bash -c` in the sandbox; its exit code and output.
fn run(
    sandbox: &Sandbox,
    script: &str,
    workdir: &Path,
    confinement: &Confinement,
) -> (i32, String) {
    let output = sandbox
        .command("bash", ["-c", script], workdir, confinement)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    (output.status.code().unwrap_or(-1), text)
}

#[test]
fn the_home_is_bound_read_only_after_a_working_folder_that_holds_it() {
    let f = fixture();
    let work = f.root.join("work");
    let home = work.join(".troupe");
    std::fs::create_dir_all(&home).unwrap();
    let sandbox = Sandbox {
        program: PathBuf::from("/usr/bin/bwrap"),
    };
    let command = sandbox.command(
        "bash",
        ["-c", "true"],
        &work,
        &Confinement {
            writable: vec![work.clone()],
            read_only: vec![home.clone(), f.root.join("missing")],
            network: Network::None,
            hidden: vec![],
        },
    );
    let (w, h) = (work.display().to_string(), home.display().to_string());
    assert_eq!(
        args_of(&command),
        [
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--bind",
            &w,
            &w,
            "--ro-bind",
            &h,
            &h,
            "--chdir",
            &w,
            "--",
            "bash",
            "-c",
            "true",
        ]
    );
}

#[test]
fn a_hidden_home_inside_the_working_folder_is_hidden_again_after_it() {
    let f = fixture();
    let work = f.root.join("work");
    let home = work.join(".troupe");
    let elsewhere = f.root.join(".troupe-elsewhere");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let sandbox = Sandbox {
        program: PathBuf::from("/usr/bin/bwrap"),
    };
    let command = sandbox.command(
        "true",
        std::iter::empty::<&str>(),
        &work,
        &Confinement {
            writable: vec![work.clone()],
            hidden: vec![home.clone(), elsewhere.clone()],
            ..Confinement::default()
        },
    );
    let (w, h, e) = (
        work.display().to_string(),
        home.display().to_string(),
        elsewhere.display().to_string(),
    );
    assert_eq!(
        args_of(&command)[12..],
        [
            "--tmpfs",
            &h,
            "--tmpfs",
            &e,
            "--bind",
            &w,
            &w,
            "--tmpfs",
            &h,
            "--remount-ro",
            &h,
            "--remount-ro",
            &e,
            "--chdir",
            &w,
            "--",
            "true",
        ]
    );
}

#[test]
fn a_folder_outside_the_writable_ones_is_kept_visible_read_only() {
    let f = fixture();
    let work = f.root.join("work");
    let elsewhere = f.root.join("elsewhere");
    std::fs::create_dir_all(&work).unwrap();
    std::fs::create_dir_all(&elsewhere).unwrap();
    let sandbox = Sandbox {
        program: PathBuf::from("/usr/bin/bwrap"),
    };
    let command = sandbox.command(
        "true",
        std::iter::empty::<&str>(),
        &elsewhere,
        &Confinement {
            writable: vec![work.clone()],
            read_only: vec![],
            network: Network::Machine,
            hidden: vec![],
        },
    );
    let args = args_of(&command);
    assert_eq!(args[..2], ["--unshare-all", "--share-net"]);
    let (e, w) = (elsewhere.display().to_string(), work.display().to_string());
    assert_eq!(
        args[13..],
        [
            "--ro-bind",
            &e,
            &e,
            "--bind",
            &w,
            &w,
            "--chdir",
            &e,
            "--",
            "true"
        ]
    );
}

#[test]
fn required_without_a_sandbox_says_how_to_install_one() {
    let error = SandboxError::Required {
        why: "bwrap is not installed".into(),
    };
    let text = error.to_string();
    assert!(text.contains("bwrap is not installed"), "{text}");
    assert!(text.contains("apt-get install bubblewrap"), "{text}");
    assert!(text.contains("mode = \"auto\""), "{text}");
    assert_eq!(
        SandboxSettings::off().place().unwrap().label(),
        "unsandboxed"
    );
}

#[test]
fn a_missing_program_is_no_sandbox_and_says_why() {
    let f = fixture();
    let why = Sandbox::probe(&f.root.join("no-bwrap")).unwrap_err();
    assert!(why.contains("could not be run"), "{why}");
}

#[test]
fn inside_the_sandbox_the_home_in_the_working_folder_stays_read_only_and_tmp_is_private() {
    let Some(sandbox) = Sandbox::detect_or_skip("the home in the working folder") else {
        return;
    };
    let f = fixture();
    let work = f.root.join("work");
    let home = work.join(".troupe");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), "original\n").unwrap();
    let confinement = Confinement {
        writable: vec![work.clone()],
        read_only: vec![home.clone()],
        network: Network::None,
        hidden: vec![],
    };
    let (code, out) = run(
        sandbox,
        "echo made > made.txt && echo hidden > /tmp/troupe-sandbox-private && \
         { echo evil > .troupe/config.toml; echo \"config=$?\"; } 2>/dev/null; \
         touch ../outside 2>/dev/null; true",
        &work,
        &confinement,
    );
    assert_eq!((code, out.as_str()), (0, "config=1\n"));
    assert_eq!(
        std::fs::read_to_string(work.join("made.txt")).unwrap(),
        "made\n"
    );
    assert_eq!(
        std::fs::read_to_string(home.join("config.toml")).unwrap(),
        "original\n"
    );
    assert!(!f.root.join("outside").exists());
    let leaked = std::fs::read_dir("/tmp")
        .unwrap()
        .filter_map(|e| e.ok())
        .any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with("troupe-sandbox-private-")
        });
    assert!(
        !leaked,
        "a file written to /tmp inside the sandbox is visible outside"
    );
}
