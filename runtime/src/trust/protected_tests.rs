use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

#[test]
fn the_users_settings_are_recognised_and_ordinary_files_are_not() {
    let home = Path::new("/home/u");
    for (path, expected) in [
        ("/home/u/.bashrc", Some(UserSetting::ShellStartUp)),
        ("/home/u/.zshenv", Some(UserSetting::ShellStartUp)),
        ("/home/u/.profile", Some(UserSetting::ShellStartUp)),
        ("/home/u/.ssh", Some(UserSetting::Ssh)),
        ("/home/u/.ssh/authorized_keys", Some(UserSetting::Ssh)),
        ("/home/u/.gitconfig", Some(UserSetting::Git)),
        ("/home/u/.config/git/config", Some(UserSetting::Git)),
        (
            "/home/u/.config/fish/config.fish",
            Some(UserSetting::Dotfile),
        ),
        ("/home/u/.local/bin/ls", Some(UserSetting::Dotfile)),
        ("/home/u/project/.git/config", Some(UserSetting::Git)),
        ("/srv/repo/.git/hooks/pre-commit", Some(UserSetting::Git)),
        ("/var/spool/cron/crontabs/u", Some(UserSetting::Crontab)),
        ("/etc/cron.d/job", Some(UserSetting::Crontab)),
        ("/home/u/notes.txt", None),
        ("/home/u/project/.env", None),
        ("/home/u/project/.git/HEAD", None),
        ("/home/u", None),
        ("/home/uv/.bashrc", None),
        ("/tmp/.bashrc", None),
    ] {
        assert_eq!(user_setting(home, Path::new(path)), expected, "{path}");
    }
}

#[test]
fn everything_in_troupes_home_has_an_owner_named() {
    let home = Home::new("/nonexistent/h/.troupe");
    for (path, what, owner) in [
        (
            "/nonexistent/h/.troupe/approvals.json",
            "the list of commands the user approved for always (`approvals.json`)",
            "Only the user's own answer to an approval question adds to it.",
        ),
        (
            "/nonexistent/h/.troupe/serve.json",
            "`troupe serve`'s address (`serve.json`)",
            "Only `troupe serve` writes it.",
        ),
        (
            "/nonexistent/h/.troupe/troupe.db-journal",
            "troupe's database (`troupe.db-journal`)",
            "troupe's store writes it; read conversations with `conversation_search`.",
        ),
        (
            "/nonexistent/h/.troupe/anything/new.txt",
            "troupe's own data (`anything`)",
            "troupe writes it itself; write your own files in the working folder.",
        ),
        (
            "/nonexistent/h/.troupe",
            "troupe's home folder itself",
            "Only the user changes it, with an editor or troupe's own commands; ask them to.",
        ),
    ] {
        assert_eq!(
            home_area(&home, Path::new(path)),
            Some(HomeArea {
                what: what.into(),
                owner
            }),
            "{path}"
        );
    }
    assert_eq!(
        home_area(&home, Path::new("/nonexistent/h/.troupe-evil/x")),
        None
    );
}
