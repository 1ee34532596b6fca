//! Without a sandbox: troupe's settings put back after every command.
//!
//! A command run on the machine itself can write any file its user can,
//! by a path no reading of it shows (`$(printenv HOME)`, a script, a
//! compiled program). The gate asks before what it can see
//! ([`super::unsandboxed`], [`super::read_only`]); what it cannot see must
//! still not turn ask mode into auto mode or plant an approval. So before
//! each unsandboxed command `run_command` takes a [`Seal`] of the files
//! troupe reads its settings and approvals from ([`sealed_files`]), and
//! after it ends (a background command: when it ends) the seal puts back
//! every one that changed, appeared, vanished or became a link, and the
//! result says so. The files are small; the seal keeps their bytes, so
//! nothing is trusted from the disk after the command has run.
//!
//! What it does not cover: the database (troupe writes it all the time;
//! the unsandboxed rule asks before a command that names the home), memory
//! and skills (written by their tools while commands run), a process the
//! command leaves running after it ends, and an approval troupe itself
//! records while the command runs (it is put back to before; the
//! approval stays in force in memory and is written again with the next
//! one). The sandbox covers all of these: it is the default.

use std::path::{Path, PathBuf};

use crate::home::Home;

/// The files a command may never change: the settings (`config.toml`,
/// `models.toml`, `mcp.json`), the "always" approvals (`approvals.json`)
/// and the server's record (`serve.json`).
pub fn sealed_files(home: &Home) -> Vec<PathBuf> {
    vec![
        home.config_file(),
        home.models_file(),
        home.mcp_file(),
        super::FileApprovals::path_in(home),
        home.root().join("serve.json"),
    ]
}

/// What one sealed file was: its bytes, or absent.
#[derive(Debug, Clone, PartialEq, Eq)]
enum State {
    Absent,
    File(Vec<u8>),
    /// Something troupe does not write there (a folder, a link, unreadable):
    /// left alone, and not restored.
    Other,
}

impl State {
    fn of(path: &Path) -> Self {
        match std::fs::symlink_metadata(path) {
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::Absent,
            Ok(meta) if meta.file_type().is_file() => match std::fs::read(path) {
                Ok(bytes) => Self::File(bytes),
                Err(_) => Self::Other,
            },
            _ => Self::Other,
        }
    }
}

/// troupe's settings files as they were before a command ran.
#[derive(Debug, Clone)]
pub struct Seal {
    files: Vec<(PathBuf, State)>,
}

impl Seal {
    /// Records the sealed files of `home`.
    pub fn of(home: &Home) -> Self {
        Self {
            files: sealed_files(home)
                .into_iter()
                .map(|path| {
                    let state = State::of(&path);
                    (path, state)
                })
                .collect(),
        }
    }

    /// Puts back every sealed file that changed since the seal was taken;
    /// the files put back, and those that could not be (with why).
    pub fn restore(&self) -> Restored {
        let mut out = Restored::default();
        for (path, before) in &self.files {
            if *before == State::Other {
                continue;
            }
            let now = State::of(path);
            if now == *before {
                continue;
            }
            match put_back(path, before) {
                Ok(()) => out.restored.push(path.clone()),
                Err(e) => out.failed.push((path.clone(), e.to_string())),
            }
        }
        out
    }
}

/// What [`Seal::restore`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Restored {
    /// Files a command changed, put back as they were.
    pub restored: Vec<PathBuf>,
    /// Files a command changed that could not be put back, with why.
    pub failed: Vec<(PathBuf, String)>,
}

impl Restored {
    /// Whether the command changed nothing sealed.
    pub fn is_empty(&self) -> bool {
        self.restored.is_empty() && self.failed.is_empty()
    }

    /// What to tell the model and the user; `None` when nothing changed.
    pub fn report(&self) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let list = |paths: &mut dyn Iterator<Item = &PathBuf>| {
            paths
                .map(|p| p.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut text = String::from(
            "The command changed troupe's own settings, which commands may never change",
        );
        if !self.restored.is_empty() {
            text.push_str(&format!(
                "; troupe put back {} as it was",
                list(&mut self.restored.iter())
            ));
        }
        if !self.failed.is_empty() {
            let why: Vec<String> = self
                .failed
                .iter()
                .map(|(p, e)| format!("{} ({e})", p.display()))
                .collect();
            text.push_str(&format!(
                "; troupe could NOT put back {}: the user must check them before the next start",
                why.join(", ")
            ));
        }
        text.push_str(
            ". Do not change troupe's settings from a command: the user edits them. (Commands \
             run unsandboxed here; with bubblewrap installed troupe's home is out of their reach.)",
        );
        Some(text)
    }
}

fn put_back(path: &Path, before: &State) -> std::io::Result<()> {
    // Whatever is there now goes: a file, a link, a folder.
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => std::fs::remove_dir_all(path)?,
        Ok(_) => std::fs::remove_file(path)?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    match before {
        State::File(bytes) => {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            let tmp = path.with_file_name(format!(".{name}.restoring"));
            let _ = std::fs::remove_file(&tmp);
            let mut file = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(&tmp)?;
            std::io::Write::write_all(&mut file, bytes)?;
            file.sync_all()?;
            std::fs::rename(&tmp, path)
        }
        State::Absent | State::Other => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn every_change_to_a_sealed_file_is_put_back_and_reported() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join(".troupe"));
        std::fs::create_dir_all(home.root()).unwrap();
        std::fs::write(home.config_file(), "[trust]\nmode = \"ask\"\n").unwrap();
        std::fs::write(home.models_file(), "# models\n").unwrap();
        let elsewhere = dir.path().join("evil.toml");
        std::fs::write(&elsewhere, "[trust]\nmode = \"auto\"\n").unwrap();
        let original = std::fs::read(home.config_file()).unwrap();
        // Each way a command could change them, one at a time.
        type Change = Box<dyn Fn()>;
        let changes: Vec<(&str, Change)> = vec![
            ("rewritten", {
                let p = home.config_file();
                Box::new(move || std::fs::write(&p, "[trust]\nmode = \"auto\"\n").unwrap())
            }),
            ("same size", {
                let p = home.config_file();
                Box::new(move || std::fs::write(&p, "[trust]\nmode = \"aut\"\n\n").unwrap())
            }),
            ("removed", {
                let p = home.config_file();
                Box::new(move || std::fs::remove_file(&p).unwrap())
            }),
            ("a link", {
                let (p, e) = (home.config_file(), elsewhere.clone());
                Box::new(move || {
                    std::fs::remove_file(&p).unwrap();
                    std::os::unix::fs::symlink(&e, &p).unwrap();
                })
            }),
            ("a folder", {
                let p = home.config_file();
                Box::new(move || {
                    std::fs::remove_file(&p).unwrap();
                    std::fs::create_dir(&p).unwrap();
                })
            }),
        ];
        for (how, change) in changes {
            let seal = Seal::of(&home);
            change();
            let restored = seal.restore();
            assert_eq!(restored.restored, vec![home.config_file()], "{how}");
            assert!(restored.report().unwrap().contains("put back"), "{how}");
            assert_eq!(
                std::fs::read(home.config_file()).unwrap(),
                original,
                "{how}"
            );
        }
        // Planted where there was nothing: removed.
        let seal = Seal::of(&home);
        let approvals = super::super::FileApprovals::path_in(&home);
        std::fs::write(&approvals, "{\"always\":[\"command:rm -rf ~\"]}").unwrap();
        assert_eq!(seal.restore().restored, vec![approvals.clone()]);
        assert!(!approvals.exists());
        // Nothing changed: nothing to say.
        let seal = Seal::of(&home);
        assert_eq!(seal.restore().report(), None);
    }
}
