use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

/// A `node_modules` folder holding a fake pi at `version`: its package.json
/// and its entry point, nothing else.
fn fake_modules(root: &Path, version: &str) -> PathBuf {
    let modules = root.join("node_modules");
    let package = modules.join("@mariozechner/pi-coding-agent");
    std::fs::create_dir_all(package.join("dist")).unwrap();
    std::fs::write(
        package.join("package.json"),
        json!({"name": "@mariozechner/pi-coding-agent", "version": version}).to_string(),
    )
    .unwrap();
    std::fs::write(package.join("dist/cli.js"), "console.log('pi')\n").unwrap();
    modules
}

fn pi() -> &'static Harness {
    harness("pi").unwrap()
}

#[test]
fn nothing_is_installed_in_a_new_home() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    assert_eq!(installed(&home, "pi"), None);
    let listed: Vec<_> = list(&home).into_iter().map(|(h, i)| (h.name, i)).collect();
    assert_eq!(
        listed,
        vec![("pi", None), ("claude-code", None), ("codex", None)]
    );
}

#[test]
fn install_from_links_node_modules_and_records_the_pin() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let modules = fake_modules(dir.path(), "0.73.1");

    let got = install_from(&home, "pi", &modules).unwrap();

    let canonical = modules.canonicalize().unwrap();
    let expected = Installed {
        harness: pi(),
        version: "0.73.1".into(),
        dir: dir.path().join("home/executors/pi"),
        modules: canonical.clone(),
        entry: canonical.join("@mariozechner/pi-coding-agent/dist/cli.js"),
        from: canonical.display().to_string(),
    };
    assert_eq!(got, expected);
    assert!(got.current());
    assert_eq!(installed(&home, "pi"), Some(expected.clone()));
    assert_eq!(list(&home)[0], (pi(), Some(expected)));
    assert!(list(&home)[1..].iter().all(|(_, i)| i.is_none()));

    let link = got.dir.join("node_modules");
    assert_eq!(std::fs::read_link(&link).unwrap(), canonical);
    let mut record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(got.dir.join("troupe.json")).unwrap())
            .unwrap();
    let at = record["installed_at"].take();
    assert!(chrono::DateTime::parse_from_rfc3339(at.as_str().unwrap()).is_ok());
    assert_eq!(
        record,
        json!({
            "name": "pi",
            "package": "@mariozechner/pi-coding-agent",
            "version": "0.73.1",
            "installed_at": null,
            "from": canonical.display().to_string(),
        })
    );
    assert!(
        !dir.path().join("home/executors/.pi.partial").exists(),
        "the partial folder was renamed into place"
    );
}

#[test]
fn install_from_again_replaces_the_first_install() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let first = fake_modules(&dir.path().join("first"), "0.73.1");
    let second = fake_modules(&dir.path().join("second"), "0.73.1");
    install_from(&home, "pi", &first).unwrap();

    let got = install_from(&home, "pi", &second).unwrap();

    assert_eq!(got.modules, second.canonicalize().unwrap());
    assert!(
        first
            .join("@mariozechner/pi-coding-agent/dist/cli.js")
            .exists(),
        "replacing the link leaves the folder it pointed to alone"
    );
}

#[test]
fn install_from_refuses_another_version_and_keeps_the_installed_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let pinned = fake_modules(&dir.path().join("pinned"), "0.73.1");
    let older = fake_modules(&dir.path().join("older"), "0.72.0");
    let before = install_from(&home, "pi", &pinned).unwrap();

    let err = install_from(&home, "pi", &older).unwrap_err();

    assert!(
        matches!(&err, ExecutorError::Version { found, pinned: "0.73.1", .. } if found == "0.72.0"),
        "{err:?}"
    );
    assert!(err.to_string().contains("but troupe pins 0.73.1"), "{err}");
    assert_eq!(installed(&home, "pi"), Some(before));
}

#[test]
fn install_from_refuses_a_folder_without_the_package() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let empty = dir.path().join("node_modules");
    std::fs::create_dir_all(&empty).unwrap();

    let err = install_from(&home, "pi", &empty).unwrap_err();

    assert!(
        matches!(err, ExecutorError::NotThePackage { .. }),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("npm install @mariozechner/pi-coding-agent@0.73.1"),
        "{err}"
    );
    assert_eq!(installed(&home, "pi"), None);
}

#[test]
fn install_from_refuses_a_package_without_its_entry_point() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let modules = fake_modules(dir.path(), "0.73.1");
    std::fs::remove_file(modules.join("@mariozechner/pi-coding-agent/dist/cli.js")).unwrap();

    let err = install_from(&home, "pi", &modules).unwrap_err();

    assert!(err.to_string().contains("dist/cli.js is missing"), "{err}");
}

#[test]
fn installed_is_none_once_the_linked_folder_is_gone() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let modules = fake_modules(&dir.path().join("elsewhere"), "0.73.1");
    install_from(&home, "pi", &modules).unwrap();

    std::fs::remove_dir_all(dir.path().join("elsewhere")).unwrap();

    assert_eq!(installed(&home, "pi"), None);
    assert!(
        remove(&home, "pi").unwrap(),
        "a dangling link is removed too"
    );
}

#[test]
fn installed_is_none_without_troupe_json() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let got = install_from(&home, "pi", &fake_modules(dir.path(), "0.73.1")).unwrap();

    std::fs::remove_file(got.dir.join("troupe.json")).unwrap();

    assert_eq!(installed(&home, "pi"), None);
}

#[test]
fn remove_unlinks_node_modules_and_never_follows_it() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path().join("home"));
    let modules = fake_modules(dir.path(), "0.73.1");
    let got = install_from(&home, "pi", &modules).unwrap();

    assert!(remove(&home, "pi").unwrap());

    assert!(!got.dir.exists());
    assert!(
        modules
            .join("@mariozechner/pi-coding-agent/package.json")
            .exists(),
        "the linked folder is untouched"
    );
    assert_eq!(installed(&home, "pi"), None);
    assert!(
        !remove(&home, "pi").unwrap(),
        "a second remove finds nothing"
    );
}

#[test]
fn an_unknown_name_is_refused_with_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let home = Home::new(dir.path());

    let err = remove(&home, "vi").unwrap_err();

    assert_eq!(
        err.to_string(),
        "there is no executor named `vi`; the known ones are: pi, claude-code, codex"
    );
    assert!(install_from(&home, "vi", dir.path()).is_err());
    assert_eq!(installed(&home, "vi"), None);
}

#[test]
fn node_versions_parse_and_compare_to_the_minimum() {
    assert_eq!(node_version("v20.20.2\n"), Some((20, 20)));
    assert_eq!(node_version("v20.5.1"), Some((20, 5)));
    assert_eq!(node_version("nonsense"), None);
    assert!(node_version("v20.5.1").unwrap() < pi().min_node);
    assert!(node_version("v20.6.0").unwrap() >= pi().min_node);
    assert!(node_version("v22.1.0").unwrap() >= pi().min_node);
}

#[test]
fn the_node_error_says_what_to_install() {
    let err = ExecutorError::Node {
        needs: pi().needs(),
        found: "found node v18.19.0".into(),
    };
    assert_eq!(
        err.to_string(),
        "pi needs Node.js ≥ 20.6 and npm: sudo apt-get install nodejs npm (found node v18.19.0)"
    );
}

#[test]
fn last_lines_keeps_the_tail_without_blank_lines() {
    assert_eq!(last_lines("a\n\nb\nc\n  \nd\n", 2), "c\nd");
    assert_eq!(last_lines("a\n", 5), "a");
}
