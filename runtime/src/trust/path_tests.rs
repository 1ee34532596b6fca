use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn the_user_home_and_relative_paths_expand_as_a_shell_would_expand_them() {
    let home = Path::new("/h/u");
    let cwd = Path::new("/w");
    for (text, expected) in [
        ("~", "/h/u"),
        ("~/", "/h/u/"),
        ("~/.bashrc", "/h/u/.bashrc"),
        ("$HOME/.bashrc", "/h/u/.bashrc"),
        ("${HOME}/.ssh/config", "/h/u/.ssh/config"),
        ("/etc/hosts", "/etc/hosts"),
        ("a/b.txt", "/w/a/b.txt"),
        ("./~/x", "/w/./~/x"),
        ("price$.txt", "/w/price$.txt"),
        ("a~b", "/w/a~b"),
    ] {
        assert_eq!(
            expand(text, home, cwd).unwrap(),
            PathBuf::from(expected),
            "{text}"
        );
    }
}

#[test]
fn a_path_only_a_shell_could_expand_is_refused_saying_what_it_depends_on() {
    let home = Path::new("/h/u");
    for (text, what) in [
        (
            "$XDG_CONFIG_HOME/git/config",
            "the variable `$XDG_CONFIG_HOME`",
        ),
        ("${X}/a", "the variable `$X`"),
        ("~/$1", "the variable `$1`"),
        ("~bob/.bashrc", "another user's home"),
        ("$(pwd)/x", "a command substitution"),
        ("`pwd`/x", "a command substitution"),
        ("$HOMEX/a", "the variable `$HOMEX`"),
    ] {
        let err = expand(text, home, Path::new("/w")).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "refused: the path `{text}` depends on {what}, which the file tools do not \
                 expand; write the path out in full (`~/` and `$HOME/` are understood)"
            ),
            "{text}"
        );
    }
    assert!(matches!(expand("", home, home), Err(ResolveError::Empty)));
    assert!(matches!(expand("a\0b", home, home), Err(ResolveError::Nul)));
}

#[test]
fn links_dots_and_parents_resolve_as_the_kernel_resolves_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = std::fs::canonicalize(dir.path()).unwrap();
    std::fs::create_dir_all(root.join("real/sub")).unwrap();
    symlink(root.join("real/sub"), root.join("link")).unwrap();
    symlink(root.join("real/file"), root.join("to-file")).unwrap();
    std::fs::write(root.join("real/file"), "").unwrap();
    for (text, expected) in [
        // `..` after a link is the parent of where the link leads.
        ("link/../x", root.join("real/x")),
        ("./link/./y/", root.join("real/sub/y")),
        ("link//z", root.join("real/sub/z")),
        ("to-file", root.join("real/file")),
        ("missing/../to-file", root.join("real/file")),
        ("~/link/n", root.join("real/sub/n")),
    ] {
        assert_eq!(resolve(text, &root, &root).unwrap(), expected, "{text}");
    }
    symlink(root.join("nowhere"), root.join("dangling")).unwrap();
    assert!(matches!(
        resolve("dangling", &root, &root),
        Err(ResolveError::Dangling { .. })
    ));
}
