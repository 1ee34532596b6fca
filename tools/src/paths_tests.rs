use std::os::unix::fs::{symlink, PermissionsExt};

use pretty_assertions::assert_eq;

use super::*;

/// A temp folder holding a home (`.troupe`) and a working folder (`work`),
/// with its real path (the temp dir itself may sit behind a link).
struct Fixture {
    _dir: tempfile::TempDir,
    root: PathBuf,
    home: Home,
    user_home: PathBuf,
    cwd: PathBuf,
}

fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    let home = Home::new(root.join(".troupe"));
    std::fs::create_dir_all(home.root()).unwrap();
    let cwd = root.join("work");
    std::fs::create_dir_all(&cwd).unwrap();
    Fixture {
        _dir: dir,
        user_home: root.clone(),
        root,
        home,
        cwd,
    }
}

fn refusal_text(f: &Fixture, raw: &str, access: Access) -> String {
    confine_in(&f.home, &f.user_home, &f.cwd, raw, access)
        .unwrap_err()
        .to_string()
}

#[test]
fn parent_dirs_into_a_system_folder_are_refused_for_writing() {
    let f = fixture();
    let raw = "../../../../../../../../../../etc/passwd";
    assert_eq!(
        refusal_text(&f, raw, Access::Write),
        format!("refused: `{raw}` (which resolves to `/etc/passwd`) is inside the system folder `/etc`, which the file tools never write")
    );
    // Reading a system file is fine.
    assert_eq!(
        confine_in(&f.home, &f.user_home, &f.cwd, raw, Access::Read).unwrap(),
        PathBuf::from("/etc/passwd")
    );
}

#[test]
fn a_symlink_out_to_a_system_folder_is_judged_by_its_target() {
    let f = fixture();
    symlink("/etc", f.cwd.join("out")).unwrap();
    assert_eq!(
        refusal_text(&f, "out/hosts", Access::Write),
        "refused: `out/hosts` (which resolves to `/etc/hosts`) is inside the system folder `/etc`, which the file tools never write"
    );
}

#[test]
fn a_symlink_into_the_homes_settings_is_refused_for_writing() {
    let f = fixture();
    std::fs::write(f.home.config_file(), "x = 1\n").unwrap();
    symlink(f.home.config_file(), f.cwd.join("cfg")).unwrap();
    assert_eq!(
        refusal_text(&f, "cfg", Access::Write),
        format!(
            "refused: `cfg` (which resolves to `{}`) is in troupe's home, and is troupe's own `config.toml`; the file tools never write troupe's home. {USER_OWNS}",
            f.home.config_file().display()
        )
    );
}

#[test]
fn proc_self_root_does_not_hide_a_protected_path() {
    let f = fixture();
    let raw = format!("/proc/self/root{}", f.home.models_file().display());
    let models = f.home.models_file().display().to_string();
    assert_eq!(
        refusal_text(&f, &raw, Access::Write),
        format!("refused: `{raw}` (which resolves to `{models}`) is in troupe's home, and is troupe's own `models.toml`; the file tools never write troupe's home. {USER_OWNS}")
    );
    assert_eq!(
        refusal_text(&f, &raw, Access::Read),
        format!("refused: `{raw}` (which resolves to `{models}`) is troupe's `models.toml`, which can hold keys and tokens, so the file tools do not read it")
    );
    assert_eq!(
        refusal_text(&f, "/proc/self/root/etc/shadow", Access::Write),
        "refused: `/proc/self/root/etc/shadow` (which resolves to `/etc/shadow`) is inside the system folder `/etc`, which the file tools never write"
    );
}

/// Found by the `paths` fuzz target: after a folder that does not exist,
/// `..` came back to the working folder, but the links after it were no
/// longer followed, so `nope/../home/models.toml` passed as a file of the
/// working folder while it leads into the home.
#[test]
fn a_missing_folder_and_dotdot_do_not_hide_a_link_into_the_home() {
    let f = fixture();
    std::fs::write(f.home.models_file(), "[models]").unwrap();
    symlink(f.home.root(), f.cwd.join("home")).unwrap();
    symlink(f.home.models_file(), f.cwd.join("secret")).unwrap();
    let models = f.home.models_file().display().to_string();
    for raw in ["nope/../home/models.toml", "todo.txtlink/../secret"] {
        assert_eq!(
            refusal_text(&f, raw, Access::Read),
            format!("refused: `{raw}` (which resolves to `{models}`) is troupe's `models.toml`, which can hold keys and tokens, so the file tools do not read it")
        );
    }
    // Still missing after `..`: applied as written.
    assert_eq!(
        confine_in(&f.home, &f.user_home, &f.cwd, "a/b/../c.txt", Access::Write).unwrap(),
        f.cwd.join("a/c.txt")
    );
}

#[test]
fn proc_is_refused_for_reading() {
    let f = fixture();
    let text = refusal_text(&f, "/proc/self/environ", Access::Read);
    assert!(
        text.starts_with("refused: `/proc/self/environ` (which resolves to `/proc/")
            && text.ends_with("/environ`) is inside `/proc`, which exposes processes' environment and memory; use run_command to inspect processes"),
        "{text}"
    );
}

#[test]
fn a_prefix_sibling_of_the_home_is_not_inside_it() {
    let f = fixture();
    let sibling = f.root.join(".troupe-evil").join("config.toml");
    let raw = sibling.display().to_string();
    assert_eq!(
        confine_in(&f.home, &f.user_home, &f.cwd, &raw, Access::Write).unwrap(),
        sibling
    );
    assert!(confine_in(
        &f.home,
        &f.user_home,
        &f.cwd,
        &f.home.config_file().display().to_string(),
        Access::Write
    )
    .is_err());
}

#[test]
fn nul_bytes_and_empty_paths_are_refused() {
    let f = fixture();
    assert_eq!(
        refusal_text(&f, "a\0/etc/passwd", Access::Write),
        "refused: the path contains a NUL byte, which no file name can hold; give the path without it"
    );
    assert_eq!(
        refusal_text(&f, "", Access::Read),
        "the path is empty: give a file's path, absolute or relative to the working folder"
    );
}

const USER_OWNS: &str =
    "Only the user changes it, with an editor or troupe's own commands; ask them to.";

#[test]
fn every_file_of_the_home_is_refused_for_writing_naming_its_owner() {
    let f = fixture();
    for (rel, what, owner) in [
        ("config.toml", "troupe's own `config.toml`", USER_OWNS),
        ("models.toml", "troupe's own `models.toml`", USER_OWNS),
        ("mcp.json", "troupe's own `mcp.json`", USER_OWNS),
        (
            "plugins/x/plugin.toml",
            "troupe's plugins (`plugins/`)",
            USER_OWNS,
        ),
        (
            "plugin-data/x/token",
            "troupe's plugins (`plugin-data/`)",
            USER_OWNS,
        ),
        (
            "troupe.db",
            "troupe's database (`troupe.db`)",
            "troupe's store writes it; read conversations with `conversation_search`.",
        ),
        (
            "troupe.db-wal",
            "troupe's database (`troupe.db-wal`)",
            "troupe's store writes it; read conversations with `conversation_search`.",
        ),
        (
            "approvals.json",
            "the list of commands the user approved for always (`approvals.json`)",
            "Only the user's own answer to an approval question adds to it.",
        ),
        (
            "serve.json",
            "`troupe serve`'s address (`serve.json`)",
            "Only `troupe serve` writes it.",
        ),
        (
            "spill/result.txt",
            "where long tool results are kept (`spill/`)",
            "Read them with `read_file`; write your own files in the working folder.",
        ),
        (
            "commands/c1.log",
            "the background commands' output (`commands/`)",
            "`run_command` writes it; read it with `read_file`.",
        ),
        (
            "whatever-comes-next.json",
            "troupe's own data (`whatever-comes-next.json`)",
            "troupe writes it itself; write your own files in the working folder.",
        ),
    ] {
        let path = f.home.root().join(rel);
        let raw = path.display().to_string();
        assert_eq!(
            refusal_text(&f, &raw, Access::Write),
            format!(
                "refused: `{raw}` is in troupe's home, and is {what}; the file tools never write \
                 troupe's home. {owner}"
            )
        );
    }
    // config.toml stays readable; the files holding keys, the server's
    // credential or every conversation do not.
    let config = f.home.config_file();
    assert_eq!(
        confine_in(
            &f.home,
            &f.user_home,
            &f.cwd,
            &config.display().to_string(),
            Access::Read
        )
        .unwrap(),
        config
    );
    for (rel, holds) in [
        ("mcp.json", "can hold keys and tokens"),
        ("models.toml", "can hold keys and tokens"),
        ("serve.sock", "is the owner's door to troupe's server"),
        ("troupe.db", "holds every conversation of every house"),
        ("troupe.db-wal", "holds every conversation of every house"),
        ("troupe.db-shm", "holds every conversation of every house"),
    ] {
        let secret = f.home.root().join(rel).display().to_string();
        assert_eq!(
            refusal_text(&f, &secret, Access::Read),
            format!("refused: `{secret}` is troupe's `{rel}`, which {holds}, so the file tools do not read it")
        );
    }
    // The spilled results and command logs stay readable.
    let spilled = f.home.spill_dir().join("result.txt");
    assert!(confine_in(
        &f.home,
        &f.user_home,
        &f.cwd,
        &spilled.display().to_string(),
        Access::Read
    )
    .is_ok());
}

#[test]
fn a_dangling_symlink_says_where_it_points() {
    let f = fixture();
    symlink(f.root.join("nowhere"), f.cwd.join("dead")).unwrap();
    assert_eq!(
        refusal_text(&f, "dead", Access::Write),
        format!(
            "`{}` is a symbolic link to `{}`, which does not exist; give the path of a real file",
            f.cwd.join("dead").display(),
            f.root.join("nowhere").display()
        )
    );
}

#[test]
fn parent_dirs_after_a_symlink_follow_the_kernel_not_the_string() {
    let f = fixture();
    // work/link -> root/a/b, so work/link/../c is root/a/c (not work/c).
    std::fs::create_dir_all(f.root.join("a/b")).unwrap();
    symlink(f.root.join("a/b"), f.cwd.join("link")).unwrap();
    assert_eq!(
        confine_in(
            &f.home,
            &f.user_home,
            &f.cwd,
            "link/../c/new.txt",
            Access::Write
        )
        .unwrap(),
        f.root.join("a/c/new.txt")
    );
}

#[test]
fn a_file_swapped_for_a_symlink_after_the_check_is_refused() {
    let f = fixture();
    std::fs::write(f.cwd.join("a.txt"), "mine").unwrap();
    std::fs::create_dir_all(f.root.join("elsewhere")).unwrap();
    std::fs::write(f.root.join("elsewhere/secret.txt"), "theirs").unwrap();
    let real = confine_in(&f.home, &f.user_home, &f.cwd, "a.txt", Access::Write).unwrap();
    std::fs::remove_file(&real).unwrap();
    symlink(f.root.join("elsewhere/secret.txt"), &real).unwrap();
    assert_eq!(
        open_checked(&real).unwrap_err().to_string(),
        format!(
            "refused: `{}` was replaced by a symbolic link or moved while it was being opened (it now leads to `{}`); check the path and try again",
            real.display(),
            f.root.join("elsewhere/secret.txt").display()
        )
    );
}

#[test]
fn a_folder_swapped_for_a_symlink_after_the_check_is_refused() {
    let f = fixture();
    std::fs::create_dir_all(f.cwd.join("dir")).unwrap();
    std::fs::write(f.cwd.join("dir/f.txt"), "mine").unwrap();
    let real = confine_in(&f.home, &f.user_home, &f.cwd, "dir/f.txt", Access::Write).unwrap();
    std::fs::rename(f.cwd.join("dir"), f.cwd.join("dir2")).unwrap();
    symlink(f.cwd.join("dir2"), f.cwd.join("dir")).unwrap();
    assert_eq!(
        open_checked(&real).unwrap_err().to_string(),
        format!(
            "refused: `{}` was replaced by a symbolic link or moved while it was being opened (it now leads to `{}`); check the path and try again",
            real.display(),
            f.cwd.join("dir2/f.txt").display()
        )
    );
    // A write through the swapped folder is refused too, and leaves nothing behind.
    let err = write_atomic(&real, b"new", None).unwrap_err();
    assert!(matches!(err, PathError::Swapped { .. }), "{err}");
    let left: Vec<_> = std::fs::read_dir(f.cwd.join("dir2"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, vec![std::ffi::OsString::from("f.txt")]);
    assert_eq!(
        std::fs::read_to_string(f.cwd.join("dir2/f.txt")).unwrap(),
        "mine"
    );
}

#[test]
fn atomic_writes_create_folders_keep_permissions_and_leave_no_temp_file() {
    let f = fixture();
    let target = f.cwd.join("deep/er/file.sh");
    write_atomic(&target, b"#!/bin/sh\n", None).unwrap();
    std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o750)).unwrap();
    let perms = std::fs::metadata(&target).unwrap().permissions();
    write_atomic(&target, b"#!/bin/sh\necho hi\n", Some(perms)).unwrap();
    assert_eq!(
        std::fs::read_to_string(&target).unwrap(),
        "#!/bin/sh\necho hi\n"
    );
    assert_eq!(
        std::fs::metadata(&target).unwrap().permissions().mode() & 0o777,
        0o750
    );
    let names: Vec<_> = std::fs::read_dir(f.cwd.join("deep/er"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, vec![std::ffi::OsString::from("file.sh")]);
}

// ---- the agents' own files ----------------------------------------------------

fn agent_file_refusal(f: &Fixture, raw: &str, shown: &str, what: &str, tools: &str) {
    assert_eq!(
        refusal_text(f, raw, Access::Write),
        format!(
            "refused: {shown} is {what}, which the file tools never write; use {tools} instead \
             (what those tools write is checked for injected instructions and invisible characters)"
        ),
        "{raw}"
    );
}

#[test]
fn write_file_cannot_get_around_the_memory_filter_by_any_path() {
    let f = fixture();
    let memory = f.home.memory_dir(troupe_runtime::home::MAIN_AGENT);
    std::fs::create_dir_all(&memory).unwrap();
    std::fs::write(memory.join("MEMORY.md"), "notes\n").unwrap();
    symlink(&memory, f.cwd.join("mem")).unwrap();
    let what = "the agent's memory (`memory/`: USER.md, MEMORY.md)";
    let user = f.home.user_profile();
    for raw in [
        user.display().to_string(),
        f.home.agent_notes("assistant").display().to_string(),
        "../.troupe/memory/USER.md".to_string(),
        "../.troupe/./memory/../memory/MEMORY.md".to_string(),
        "mem/MEMORY.md".to_string(),
        "mem/new.md".to_string(),
    ] {
        let real = confine_in(&f.home, &f.user_home, &f.cwd, &raw, Access::Read).unwrap();
        let shown = if std::path::Path::new(&raw) == real {
            format!("`{}`", real.display())
        } else {
            format!("`{raw}` (which resolves to `{}`)", real.display())
        };
        agent_file_refusal(&f, &raw, &shown, what, "`memory`");
    }
    // From another working folder, a relative path reaches the same file.
    let elsewhere = f.root.join("elsewhere/deeper");
    std::fs::create_dir_all(&elsewhere).unwrap();
    assert!(matches!(
        confine_in(
            &f.home,
            &f.user_home,
            &elsewhere,
            "../../.troupe/memory/USER.md",
            Access::Write
        ),
        Err(PathError::AgentFile {
            tools: "`memory`",
            ..
        })
    ));
    // Reading stays allowed.
    assert!(confine_in(&f.home, &f.user_home, &f.cwd, "mem/MEMORY.md", Access::Read).is_ok());
}

#[test]
fn write_file_cannot_create_a_skill_or_touch_a_bots_own_files() {
    let f = fixture();
    let skills = f.home.root().join("skills/evil/SKILL.md");
    agent_file_refusal(
        &f,
        &skills.display().to_string(),
        &format!("`{}`", skills.display()),
        "the skill library (`skills/`)",
        "`skill_manage`",
    );
    let scout = f.home.agent_dir("scout");
    std::fs::create_dir_all(scout.join("memory")).unwrap();
    let cases = [
        (
            "memory/MEMORY.md",
            "bot `scout`'s memory (`bots/scout/memory/`)",
            "`memory`",
        ),
        (
            "skills/x/SKILL.md",
            "bot `scout`'s skills (`bots/scout/skills/`)",
            "`skill_manage`",
        ),
        (
            "notes.md",
            "bot `scout`'s own folder (`bots/scout/`)",
            "`memory` (its notes) and `skill_manage` (its skills)",
        ),
    ];
    for (rel, what, tools) in cases {
        let path = scout.join(rel);
        agent_file_refusal(
            &f,
            &path.display().to_string(),
            &format!("`{}`", path.display()),
            what,
            tools,
        );
    }
    // A bot folder that does not exist yet is still the bots' area.
    let later = f.home.root().join("bots/later/memory/MEMORY.md");
    agent_file_refusal(
        &f,
        &later.display().to_string(),
        &format!("`{}`", later.display()),
        "the bots' own folders (`bots/`)",
        "`memory` (its notes) and `skill_manage` (its skills)",
    );
    // A bot folder that is a link elsewhere is judged by its target.
    let outside = f.root.join("outside-bot");
    std::fs::create_dir_all(outside.join("skills")).unwrap();
    symlink(&outside, f.home.root().join("bots/linked")).unwrap();
    assert!(matches!(
        confine_in(
            &f.home,
            &f.user_home,
            &f.cwd,
            &outside.join("skills/s/SKILL.md").display().to_string(),
            Access::Write
        ),
        Err(PathError::AgentFile {
            tools: "`skill_manage`",
            ..
        })
    ));
    // The home's other folders are refused too, by the home's own rule.
    assert!(matches!(
        confine_in(
            &f.home,
            &f.user_home,
            &f.cwd,
            "../.troupe/spill/x.txt",
            Access::Write
        ),
        Err(PathError::Home { .. })
    ));
}
