//! Outside executors: the coding harnesses troupe hands coding work to, and
//! installing them into the home.
//!
//! A harness (`pi`, `claude-code`, `codex`) is someone else's
//! agent CLI, shipped as an npm package. troupe drives it from outside, so it
//! depends on that CLI's flags and output: each harness is pinned to one
//! version ([`HARNESSES`]), installed per home rather than globally, and
//! found again by path, never through `PATH`. A harness the machine happens
//! to have, at whatever version, is not used.
//!
//! Each harness lives in `<home>/executors/<name>/`:
//!
//! ```text
//! node_modules/   the package and its dependencies (a symlink after `install_from`)
//! package.json    written by npm: the package at its exact pinned version
//! package-lock.json
//! troupe.json     {"name", "package", "version", "installed_at", "from"}
//! ```
//!
//! `troupe.json` is written last, so a folder without it is an install that
//! did not finish, and [`installed`] ignores it. Both kinds of install build
//! the folder beside the old one (`.<name>.partial`) and rename it into place,
//! so an install that fails leaves the previous one as it was.
//!
//! [`install`] runs `npm install` (it needs Node.js and npm, and the
//! registry; npm trusts `NODE_EXTRA_CA_CERTS` from the environment);
//! [`install_from`] links a `node_modules` folder that already holds the
//! package, made elsewhere by `npm ci`: the offline install the tests use.
//! Neither takes the home's lock: the folder is troupe's alone and no other
//! command writes it.

pub mod accounts;
pub mod login;
pub mod settings;

use std::path::{Path, PathBuf};
use std::process::Command;

use serde::{Deserialize, Serialize};

use crate::home::Home;

/// An outside coding harness troupe can install and drive.
#[derive(Debug, PartialEq, Eq)]
pub struct Harness {
    /// Its name in troupe: `troupe executors install NAME`.
    pub name: &'static str,
    /// Its npm package.
    pub package: &'static str,
    /// The exact version troupe is written against.
    pub version: &'static str,
    /// Its CLI's entry point, a path under `node_modules/`: a script run
    /// with `node`, or (`native`) a program of its own.
    pub entry: &'static str,
    /// Whether `entry` is a native program (the package ships one per
    /// platform in an optional dependency) rather than a script for `node`.
    pub native: bool,
    /// The oldest Node.js it runs on (or that installs it), `(major, minor)`.
    pub min_node: (u32, u32),
}

/// Every harness troupe knows.
pub const HARNESSES: &[Harness] = &[
    Harness {
        name: "pi",
        package: "@mariozechner/pi-coding-agent",
        version: "0.73.1",
        entry: "@mariozechner/pi-coding-agent/dist/cli.js",
        native: false,
        min_node: (20, 6),
    },
    Harness {
        name: "claude-code",
        package: "@anthropic-ai/claude-code",
        version: "2.1.332",
        entry: if cfg!(target_arch = "aarch64") {
            "@anthropic-ai/claude-code-linux-arm64/claude"
        } else {
            "@anthropic-ai/claude-code-linux-x64/claude"
        },
        native: true,
        min_node: (18, 0),
    },
    Harness {
        name: "codex",
        package: "@openai/codex",
        version: "0.171.0",
        entry: if cfg!(target_arch = "aarch64") {
            "@openai/codex-linux-arm64/vendor/aarch64-unknown-linux-musl/bin/codex"
        } else {
            "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"
        },
        native: true,
        min_node: (16, 0),
    },
];

/// The harness called `name`, if troupe knows one.
///
/// # Examples
///
/// `pi` is pinned to one version:
///
/// ```
/// let pi = troupe_runtime::executors::harness("pi").unwrap();
/// assert_eq!(pi.package, "@mariozechner/pi-coding-agent");
/// assert!(troupe_runtime::executors::harness("vi").is_none());
/// ```
pub fn harness(name: &str) -> Option<&'static Harness> {
    HARNESSES.iter().find(|h| h.name == name)
}

impl Harness {
    /// Its folder, `<home>/executors/<name>/`, installed or not.
    pub fn dir(&self, home: &Home) -> PathBuf {
        executors_dir(home).join(self.name)
    }

    /// `pi needs Node.js ≥ 20.6 and npm`.
    fn needs(&self) -> String {
        let (major, minor) = self.min_node;
        format!("{} needs Node.js ≥ {major}.{minor} and npm", self.name)
    }
}

/// `<home>/executors/`, where every harness has its folder.
pub fn executors_dir(home: &Home) -> PathBuf {
    home.root().join("executors")
}

/// A harness installed in a home, its paths checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installed {
    /// Which harness.
    pub harness: &'static Harness,
    /// The version installed (the pinned one, unless troupe's pin moved on since).
    pub version: String,
    /// `<home>/executors/<name>/`.
    pub dir: PathBuf,
    /// Its `node_modules` folder, canonical (after `install_from` it is
    /// where the symlink points).
    pub modules: PathBuf,
    /// The CLI to run with `node`, absolute and canonical.
    pub entry: PathBuf,
    /// Where it came from: `npm`, or the folder `install_from` linked.
    pub from: String,
}

impl Installed {
    /// Whether it is the version troupe pins (else `install` brings it there).
    pub fn current(&self) -> bool {
        self.version == self.harness.version
    }
}

/// What went wrong installing or removing a harness; each says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ExecutorError {
    /// No harness has that name.
    #[error("there is no executor named `{name}`; the known ones are: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The known names, comma-separated.
        known: String,
    },
    /// Node.js or npm is missing or too old.
    #[error("{needs}: sudo apt-get install nodejs npm ({found})")]
    Node {
        /// `pi needs Node.js ≥ 20.6 and npm`.
        needs: String,
        /// What was found instead.
        found: String,
    },
    /// `npm install` failed.
    #[error(
        "`npm install {spec}` failed ({status}); check that the registry is reachable \
         (`npm config get registry`; behind a proxy with its own authority set \
         NODE_EXTRA_CA_CERTS), or install offline with --from. npm said:\n{tail}"
    )]
    Npm {
        /// `package@version`.
        spec: String,
        /// Its exit status.
        status: String,
        /// The last lines npm wrote.
        tail: String,
    },
    /// The folder given to `install_from` does not hold the package.
    #[error(
        "{path} does not hold {package}: give the node_modules folder of an \
         `npm install {package}@{pinned}` ({reason})"
    )]
    NotThePackage {
        /// The file looked for.
        path: PathBuf,
        /// The package.
        package: &'static str,
        /// The pinned version.
        pinned: &'static str,
        /// Why not.
        reason: String,
    },
    /// The folder given to `install_from` holds another version.
    #[error(
        "{path} holds {package} {found}, but troupe pins {pinned}: \
         `npm install {package}@{pinned}` there, or install with npm (no --from)"
    )]
    Version {
        /// Its package.json.
        path: PathBuf,
        /// The package.
        package: &'static str,
        /// The version there.
        found: String,
        /// The version troupe pins.
        pinned: &'static str,
    },
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or folder.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// `troupe.json`: what was installed, when and from where.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    name: String,
    package: String,
    version: String,
    installed_at: String,
    from: String,
}

const RECORD: &str = "troupe.json";

/// The harness `name` installed in `home`, if its `troupe.json` and its
/// entry point are both there.
pub fn installed(home: &Home, name: &str) -> Option<Installed> {
    let harness = harness(name)?;
    let dir = harness.dir(home);
    let text = std::fs::read_to_string(dir.join(RECORD)).ok()?;
    let record: Record = serde_json::from_str(&text).ok()?;
    if record.name != harness.name || record.package != harness.package {
        return None;
    }
    let modules = dir.join("node_modules").canonicalize().ok()?;
    let entry = modules.join(harness.entry).canonicalize().ok()?;
    entry.is_file().then_some(Installed {
        harness,
        version: record.version,
        dir,
        modules,
        entry,
        from: record.from,
    })
}

/// Every known harness, with its install in `home` if there is one.
pub fn list(home: &Home) -> Vec<(&'static Harness, Option<Installed>)> {
    HARNESSES
        .iter()
        .map(|h| (h, installed(home, h.name)))
        .collect()
}

/// Installs the harness `name` at its pinned version with `npm install`,
/// replacing an earlier install.
///
/// Blocks until npm is done (a minute, perhaps more); npm's output is
/// captured, and its last lines are in the error if it fails. The folder
/// keeps npm's `package.json` (the exact version, `--save-exact`) and
/// `package-lock.json`, so the pin and what it resolved to are on record.
pub fn install(home: &Home, name: &str) -> Result<Installed, ExecutorError> {
    let harness = known(name)?;
    check_node(harness)?;
    let partial = partial_dir(home, harness)?;
    let spec = format!("{}@{}", harness.package, harness.version);
    let output = Command::new("npm")
        .arg("install")
        .arg("--prefix")
        .arg(&partial)
        .args(["--no-audit", "--no-fund", "--save-exact", "--loglevel=warn"])
        .arg(&spec)
        .output()
        .map_err(|e| ExecutorError::Node {
            needs: harness.needs(),
            found: format!("npm did not run: {e}"),
        })?;
    if !output.status.success() {
        let _ = std::fs::remove_dir_all(&partial);
        let mut said = String::from_utf8_lossy(&output.stdout).into_owned();
        said.push_str(&String::from_utf8_lossy(&output.stderr));
        return Err(ExecutorError::Npm {
            spec,
            status: output.status.to_string(),
            tail: last_lines(&said, 20),
        });
    }
    finish(home, harness, &partial, harness.version, "npm")
}

/// Installs the harness `name` offline from `node_modules`, a folder that
/// already holds its package at the pinned version (one made by `npm ci`
/// elsewhere): `<dir>/node_modules` becomes a symlink to it.
///
/// Another version there is refused rather than recorded: troupe drives the
/// harness's CLI as it is at the pinned version. The folder must outlive the
/// install (it is linked, not copied); `remove` unlinks it and never touches
/// what it points to.
pub fn install_from(
    home: &Home,
    name: &str,
    node_modules: &Path,
) -> Result<Installed, ExecutorError> {
    let harness = known(name)?;
    let manifest = node_modules.join(harness.package).join("package.json");
    let not_it = |reason: String| ExecutorError::NotThePackage {
        path: manifest.clone(),
        package: harness.package,
        pinned: harness.version,
        reason,
    };
    let text = std::fs::read_to_string(&manifest).map_err(|e| not_it(e.to_string()))?;
    let package: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| not_it(format!("not JSON: {e}")))?;
    if package["name"] != harness.package {
        return Err(not_it(format!("its name is {}", package["name"])));
    }
    let found = package["version"].as_str().unwrap_or_default();
    if found != harness.version {
        return Err(ExecutorError::Version {
            path: manifest.clone(),
            package: harness.package,
            found: found.to_string(),
            pinned: harness.version,
        });
    }
    let entry = node_modules.join(harness.entry);
    if !entry.is_file() {
        return Err(not_it(format!(
            "its entry point {} is missing",
            entry.display()
        )));
    }
    let target = node_modules.canonicalize().map_err(io(node_modules))?;
    let partial = partial_dir(home, harness)?;
    let link = partial.join("node_modules");
    std::os::unix::fs::symlink(&target, &link).map_err(io(&link))?;
    finish(
        home,
        harness,
        &partial,
        harness.version,
        &target.display().to_string(),
    )
}

/// Removes the harness `name` from `home`; false if it was not there. A
/// symlinked `node_modules` is unlinked, never followed.
pub fn remove(home: &Home, name: &str) -> Result<bool, ExecutorError> {
    let harness = known(name)?;
    let dir = harness.dir(home);
    if std::fs::symlink_metadata(&dir).is_err() {
        return Ok(false);
    }
    remove_dir(&dir)?;
    Ok(true)
}

fn known(name: &str) -> Result<&'static Harness, ExecutorError> {
    harness(name).ok_or_else(|| ExecutorError::Unknown {
        name: name.to_string(),
        known: HARNESSES
            .iter()
            .map(|h| h.name)
            .collect::<Vec<_>>()
            .join(", "),
    })
}

/// Checks `node --version` against the harness's minimum, and that npm runs.
fn check_node(harness: &Harness) -> Result<(), ExecutorError> {
    let node = Command::new("node").arg("--version").output();
    let found = match &node {
        Ok(out) if out.status.success() => String::from_utf8_lossy(&out.stdout).trim().to_string(),
        Ok(out) => {
            return Err(ExecutorError::Node {
                needs: harness.needs(),
                found: format!("`node --version` failed: {}", out.status),
            })
        }
        Err(e) => {
            return Err(ExecutorError::Node {
                needs: harness.needs(),
                found: format!("no node: {e}"),
            })
        }
    };
    if node_version(&found).is_none_or(|v| v < harness.min_node) {
        return Err(ExecutorError::Node {
            needs: harness.needs(),
            found: format!("found node {found}"),
        });
    }
    match Command::new("npm").arg("--version").output() {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => Err(ExecutorError::Node {
            needs: harness.needs(),
            found: format!(
                "found node {found}, but `npm --version` failed: {}",
                out.status
            ),
        }),
        Err(e) => Err(ExecutorError::Node {
            needs: harness.needs(),
            found: format!("found node {found}, but no npm: {e}"),
        }),
    }
}

/// `(major, minor)` of `node --version`'s `v20.20.2`.
fn node_version(text: &str) -> Option<(u32, u32)> {
    let mut parts = text.trim().trim_start_matches('v').split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

/// A fresh, empty `<home>/executors/.<name>.partial/`.
fn partial_dir(home: &Home, harness: &Harness) -> Result<PathBuf, ExecutorError> {
    let partial = executors_dir(home).join(format!(".{}.partial", harness.name));
    if std::fs::symlink_metadata(&partial).is_ok() {
        remove_dir(&partial)?;
    }
    std::fs::create_dir_all(&partial).map_err(io(&partial))?;
    Ok(partial)
}

/// Writes `troupe.json` into `partial`, then puts it in the old one's place.
fn finish(
    home: &Home,
    harness: &'static Harness,
    partial: &Path,
    version: &str,
    from: &str,
) -> Result<Installed, ExecutorError> {
    let record = Record {
        name: harness.name.into(),
        package: harness.package.into(),
        version: version.into(),
        installed_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
        from: from.into(),
    };
    let path = partial.join(RECORD);
    let text = serde_json::to_string_pretty(&record).map_err(|e| io(&path)(e.into()))?;
    std::fs::write(&path, text + "\n").map_err(io(&path))?;
    let dir = harness.dir(home);
    if std::fs::symlink_metadata(&dir).is_ok() {
        remove_dir(&dir)?;
    }
    std::fs::rename(partial, &dir).map_err(io(&dir))?;
    installed(home, harness.name).ok_or_else(|| ExecutorError::Io {
        path: dir.join("node_modules").join(harness.entry),
        source: std::io::Error::new(
            std::io::ErrorKind::NotFound,
            "the entry point is missing after the install",
        ),
    })
}

/// Removes a harness folder; its `node_modules` symlink, if it is one, is
/// unlinked first, so nothing it points to is touched.
fn remove_dir(dir: &Path) -> Result<(), ExecutorError> {
    let modules = dir.join("node_modules");
    if std::fs::symlink_metadata(&modules).is_ok_and(|m| m.file_type().is_symlink()) {
        std::fs::remove_file(&modules).map_err(io(&modules))?;
    }
    std::fs::remove_dir_all(dir).map_err(io(dir))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ExecutorError + '_ {
    move |source| ExecutorError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// The last `n` non-empty lines of `text`.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
#[path = "executors_tests.rs"]
mod tests;
