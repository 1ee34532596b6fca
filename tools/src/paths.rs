//! Path confinement for the file tools: which paths they may read and write.
//!
//! A rule on a path is only worth something if it judges the file the kernel
//! will actually open, so a path is resolved by the one resolution the gate
//! uses too ([`troupe_runtime::trust::path`]): `~` and `$HOME` are the
//! user's home, a relative path joins the working folder, every existing
//! component is followed (symbolic links included, so `/proc/self/root/etc`
//! is `/etc` and a link pointing into a protected area is judged by where
//! it leads), `..` is applied to the resolved parent, and areas are
//! compared component by component (`/home/u/.troupe-evil` is not inside
//! `/home/u/.troupe`).
//!
//! What is refused:
//! - for writing: troupe's whole home ([`protected::home_area`]: its
//!   settings, approvals, database, and the agents' memory and skills,
//!   which only their own tools write — [`agent_files`] names those), and
//!   system folders ([`SYSTEM_AREAS`]). The user's own settings (dotfiles,
//!   `~/.ssh`, git configuration, crontabs) are not refused here: the gate
//!   asks about them in ask mode, as it does for a command writing them;
//! - for reading: the home files that hold keys, tokens or every
//!   conversation, and the server's owner socket (`models.toml`,
//!   `mcp.json`, `plugin-data/`, `serve.sock`, `troupe.db` and its `-wal`
//!   and `-shm`)
//!   and `/proc`, which exposes the process's environment and memory.
//!   `config.toml` stays readable: it holds settings, and an agent often
//!   needs to see them to explain them. A hard link to one of these files
//!   made elsewhere is another name of the same file, and is refused too:
//!   the opened file is compared with them by device and inode.
//!
//! A path could still be swapped for a symbolic link between the check and
//! the use, so the files are opened with `O_NOFOLLOW` and the opened file's
//! real path (`/proc/self/fd/N`) is checked again before anything is read or
//! written ([`open_checked`], [`write_atomic`]). A file is replaced by
//! renaming a new one over its name, so writing through a hard link
//! replaces that name only and never the file's other names.

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

use troupe_runtime::home::Home;
use troupe_runtime::tool::ToolContext;
use troupe_runtime::trust::path::{self as resolution, ResolveError};
use troupe_runtime::trust::protected::{self, HomeArea};

pub mod agent_files;

/// System folders the file tools never write.
pub const SYSTEM_AREAS: &[&str] = &[
    "/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/sbin",
    "/sys", "/usr", "/var/lib", "/var/log",
];

/// What a tool means to do with a path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// Read it (or search it).
    Read,
    /// Create, replace or edit it.
    Write,
}

/// Why a path was refused or could not be reached.
#[derive(Debug, thiserror::Error)]
pub enum PathError {
    /// The path was empty.
    #[error("the path is empty: give a file's path, absolute or relative to the working folder")]
    Empty,
    /// The path held a NUL byte.
    #[error("refused: the path contains a NUL byte, which no file name can hold; give the path without it")]
    Nul,
    /// A system folder, for writing.
    #[error(
        "refused: {shown} is inside the system folder `{area}`, which the file tools never write"
    )]
    System {
        /// The path as asked and as resolved.
        shown: String,
        /// The system folder.
        area: String,
    },
    /// Troupe's home, for writing: only the parts of troupe that own each
    /// piece of it write there.
    #[error("{}", area.refusal(shown))]
    Home {
        /// The path as asked and as resolved.
        shown: String,
        /// The part of the home and who writes it.
        area: HomeArea,
    },
    /// A path that depends on something only a shell would expand.
    #[error(transparent)]
    Unexpanded(ResolveError),
    /// An agent's memory or skills, for writing: only their tools write them.
    #[error("refused: {shown} is {what}, which the file tools never write; use {tools} instead (what those tools write is checked for injected instructions and invisible characters)")]
    AgentFile {
        /// The path as asked and as resolved.
        shown: String,
        /// What the area is.
        what: String,
        /// The tools to use instead.
        tools: &'static str,
    },
    /// A home file that holds secrets, for reading.
    #[error(
        "refused: {shown} is troupe's `{name}`, which {holds}, so the file tools do not read it"
    )]
    Secret {
        /// The path as asked and as resolved.
        shown: String,
        /// The file or folder's name.
        name: String,
        /// What it holds.
        holds: &'static str,
    },
    /// `/proc`, for reading.
    #[error("refused: {shown} is inside `/proc`, which exposes processes' environment and memory; use run_command to inspect processes")]
    ProcessInfo {
        /// The path as asked and as resolved.
        shown: String,
    },
    /// A symbolic link that leads nowhere.
    #[error("`{path}` is a symbolic link to `{target}`, which does not exist; give the path of a real file")]
    Dangling {
        /// The link.
        path: PathBuf,
        /// What it points to.
        target: PathBuf,
    },
    /// The file changed into a link (or moved) between the check and the open.
    #[error("refused: `{path}` was replaced by a symbolic link or moved while it was being opened (it now leads to `{now}`); check the path and try again")]
    Swapped {
        /// The path that was checked.
        path: PathBuf,
        /// Where the opened file really is.
        now: PathBuf,
    },
    /// Any other failure of the file system.
    #[error("cannot use `{path}`: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// What the system said.
        source: std::io::Error,
    },
}

impl From<ResolveError> for PathError {
    fn from(e: ResolveError) -> Self {
        match e {
            ResolveError::Empty => Self::Empty,
            ResolveError::Nul => Self::Nul,
            ResolveError::Dangling { path, target } => Self::Dangling { path, target },
            ResolveError::Io { path, source } => Self::Io { path, source },
            e @ ResolveError::Unexpanded { .. } => Self::Unexpanded(e),
        }
    }
}

impl PathError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Resolves `raw` (absolute, `~/…`, or relative to the call's working
/// folder) and checks it against the rules for `access`; returns the real
/// path.
pub fn confine(ctx: &ToolContext, raw: &str, access: Access) -> Result<PathBuf, PathError> {
    confine_in(&ctx.home, &ctx.user_home, &ctx.cwd, raw, access)
}

/// [`confine`] with the home, the user's home and the working folder given
/// directly.
pub fn confine_in(
    home: &Home,
    user_home: &Path,
    cwd: &Path,
    raw: &str,
    access: Access,
) -> Result<PathBuf, PathError> {
    let real = resolution::resolve(raw, user_home, cwd)?;
    let shown = if Path::new(raw) == real {
        format!("`{}`", real.display())
    } else {
        format!("`{raw}` (which resolves to `{}`)", real.display())
    };
    check(home, &real, access, shown)?;
    Ok(real)
}

/// Why the file tools would refuse `real` (an already resolved path) for
/// `access`, if they would. `find_files` uses it to skip files in a walk.
pub fn refusal(home: &Home, real: &Path, access: Access) -> Option<PathError> {
    check(home, real, access, format!("`{}`", real.display())).err()
}

fn check(home: &Home, real: &Path, access: Access, shown: String) -> Result<(), PathError> {
    match access {
        Access::Write => {
            // The agents' own files first: the most precise message, and
            // a bot folder linked out of the home is still theirs.
            if let Some(owner) = agent_files::owner(home, real) {
                return Err(PathError::AgentFile {
                    shown,
                    what: owner.what,
                    tools: owner.tools,
                });
            }
            if let Some(area) = protected::home_area(home, real) {
                return Err(PathError::Home { shown, area });
            }
            for area in SYSTEM_AREAS {
                if real.starts_with(area) {
                    return Err(PathError::System {
                        shown,
                        area: (*area).to_string(),
                    });
                }
            }
        }
        Access::Read => {
            for (secret, holds) in secret_paths(home) {
                let area = resolve(&secret).unwrap_or(secret.clone());
                if real.starts_with(&area) {
                    return Err(PathError::Secret {
                        shown,
                        name: name_in_home(home, &secret),
                        holds,
                    });
                }
            }
            if real.starts_with("/proc") {
                return Err(PathError::ProcessInfo { shown });
            }
        }
    }
    Ok(())
}

/// The resolved areas never read (so never searched): the home files that
/// hold secrets, and `/proc`.
pub fn read_refused_areas(home: &Home) -> Vec<PathBuf> {
    let mut areas: Vec<PathBuf> = secret_paths(home)
        .into_iter()
        .map(|(p, _)| resolve(&p).unwrap_or(p))
        .collect();
    areas.push(PathBuf::from("/proc"));
    areas
}

/// Refuses an opened file that is one of the home's secret files under
/// another name (a hard link), compared by device and inode.
pub fn check_not_secret(home: &Home, file: &File, shown: &str) -> Result<(), PathError> {
    let Ok(opened) = file.metadata() else {
        return Ok(());
    };
    if opened.nlink() < 2 {
        return Ok(());
    }
    for (secret, holds) in secret_paths(home) {
        if let Ok(meta) = std::fs::metadata(&secret) {
            if meta.is_file() && meta.dev() == opened.dev() && meta.ino() == opened.ino() {
                return Err(PathError::Secret {
                    shown: format!("`{shown}` (another name of `{}`)", secret.display()),
                    name: name_in_home(home, &secret),
                    holds,
                });
            }
        }
    }
    Ok(())
}

fn name_in_home(home: &Home, p: &Path) -> String {
    p.strip_prefix(home.root())
        .map(|rel| rel.display().to_string())
        .unwrap_or_else(|_| p.display().to_string())
}

const KEYS: &str = "can hold keys and tokens";

fn secret_paths(home: &Home) -> [(PathBuf, &'static str); 7] {
    let db = home.database();
    let beside = |suffix: &str| {
        let mut name = db.as_os_str().to_os_string();
        name.push(suffix);
        PathBuf::from(name)
    };
    const CONVERSATIONS: &str = "holds every conversation of every house";
    [
        (home.models_file(), KEYS),
        (home.mcp_file(), KEYS),
        (home.root().join("plugin-data"), KEYS),
        (
            home.root().join("serve.sock"),
            "is the owner's door to troupe's server",
        ),
        (beside("-wal"), CONVERSATIONS),
        (beside("-shm"), CONVERSATIONS),
        (db, CONVERSATIONS),
    ]
}

/// Resolves an absolute path as the kernel would: every existing component
/// is followed (links included), `..` goes to the resolved parent, and the
/// part that does not exist yet is applied as written
/// ([`resolution::real`]).
pub fn resolve(path: &Path) -> Result<PathBuf, PathError> {
    resolution::real(path).map_err(PathError::from)
}

/// Opens an existing file for reading without following a final symbolic
/// link, and checks that the opened file is the one at `real`.
pub fn open_checked(real: &Path) -> Result<File, PathError> {
    let file = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(real)
        .map_err(|e| {
            if e.raw_os_error() == Some(libc::ELOOP) {
                PathError::Swapped {
                    path: real.to_path_buf(),
                    now: std::fs::canonicalize(real).unwrap_or_default(),
                }
            } else {
                PathError::io(real, e)
            }
        })?;
    verify_opened(&file, real)?;
    Ok(file)
}

/// Checks that an open file is the one at `expected`: its real path, as the
/// kernel reports it, must be `expected`.
pub fn verify_opened(file: &File, expected: &Path) -> Result<(), PathError> {
    let fd_link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    match std::fs::read_link(&fd_link) {
        Ok(now) if now == expected => Ok(()),
        Ok(now) => Err(PathError::Swapped {
            path: expected.to_path_buf(),
            now,
        }),
        // Without /proc, compare the device and inode instead.
        Err(_) => {
            let opened = file.metadata().map_err(|e| PathError::io(expected, e))?;
            match std::fs::metadata(expected) {
                Ok(there) if there.dev() == opened.dev() && there.ino() == opened.ino() => Ok(()),
                _ => Err(PathError::Swapped {
                    path: expected.to_path_buf(),
                    now: PathBuf::new(),
                }),
            }
        }
    }
}

/// Writes `bytes` to `real` atomically: a temporary file in the same folder
/// (created without following links and checked once opened), written,
/// synced and renamed over the target, then the folder is synced. Folders
/// are created as needed; `permissions` (the replaced file's) are kept.
pub fn write_atomic(
    real: &Path,
    bytes: &[u8],
    permissions: Option<Permissions>,
) -> Result<(), PathError> {
    let (Some(dir), Some(name)) = (real.parent(), real.file_name()) else {
        return Err(PathError::io(
            real,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
        ));
    };
    std::fs::create_dir_all(dir).map_err(|e| PathError::io(dir, e))?;
    let suffix = uuid::Uuid::now_v7().simple().to_string();
    let temp = dir.join(format!(
        ".{}.{}.troupe-tmp",
        name.to_string_lossy(),
        &suffix[suffix.len() - 12..]
    ));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o666)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(&temp)
        .map_err(|e| PathError::io(&temp, e))?;
    if let Err(e) = verify_opened(&file, &temp) {
        if let PathError::Swapped { now, .. } = &e {
            // The file just created is ours, wherever the swap put it.
            let _ = std::fs::remove_file(now);
        }
        return Err(e);
    }
    let written = (|| {
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.write_all(bytes)?;
        file.sync_all()?;
        drop(file);
        std::fs::rename(&temp, real)
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&temp);
        return Err(PathError::io(real, e));
    }
    // Makes the rename durable; a failure here leaves a correct file.
    if let Ok(dir) = File::open(dir) {
        let _ = dir.sync_all();
    }
    Ok(())
}

#[cfg(test)]
#[path = "paths_tests.rs"]
mod tests;
