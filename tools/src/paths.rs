//! Path confinement for the file tools: which paths they may read and write.
//!
//! A rule on a path is only worth something if it judges the file the kernel
//! will actually open, so paths are resolved the way the kernel resolves
//! them, not by string prefixes: every existing component is followed
//! (symbolic links included, so `/proc/self/root/etc` is `/etc` and a link
//! pointing into a protected area is judged by where it leads), `..` is
//! applied to the resolved parent, and areas are compared component by
//! component (`/home/u/.troupe-evil` is not inside `/home/u/.troupe`).
//!
//! What is refused:
//! - for writing: system folders ([`SYSTEM_AREAS`]), the home's own
//!   settings, plugins and database ([`Home::protected_paths`]), and the
//!   agents' memory and skills, which only their own tools write
//!   ([`agent_files`]);
//! - for reading: the home files that can hold keys and tokens
//!   (`models.toml`, `mcp.json`, `plugin-data/`) and `/proc`, which exposes
//!   the process's environment and memory. `config.toml` stays readable: it
//!   holds settings, and an agent often needs to see them to explain them.
//!
//! A path could still be swapped for a symbolic link between the check and
//! the use, so the files are opened with `O_NOFOLLOW` and the opened file's
//! real path (`/proc/self/fd/N`) is checked again before anything is read or
//! written ([`open_checked`], [`write_atomic`]).

use std::fs::{File, OpenOptions, Permissions};
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Component, Path, PathBuf};

use troupe_runtime::home::Home;
use troupe_runtime::tool::ToolContext;

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
    /// One of the home's own settings, for writing.
    #[error("refused: {shown} is troupe's own `{name}`, which the file tools never write; ask the user to change it")]
    Protected {
        /// The path as asked and as resolved.
        shown: String,
        /// The protected file or folder's name.
        name: String,
    },
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
    /// A home file that can hold keys, for reading.
    #[error("refused: {shown} is troupe's `{name}`, which can hold keys and tokens, so the file tools do not read it")]
    Secret {
        /// The path as asked and as resolved.
        shown: String,
        /// The file or folder's name.
        name: String,
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

impl PathError {
    fn io(path: &Path, source: std::io::Error) -> Self {
        Self::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Resolves `raw` (absolute, or relative to the call's working folder) and
/// checks it against the rules for `access`; returns the real path.
pub fn confine(ctx: &ToolContext, raw: &str, access: Access) -> Result<PathBuf, PathError> {
    confine_in(&ctx.home, &ctx.cwd, raw, access)
}

/// [`confine`] with the home and working folder given directly.
pub fn confine_in(
    home: &Home,
    cwd: &Path,
    raw: &str,
    access: Access,
) -> Result<PathBuf, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty);
    }
    if raw.contains('\0') {
        return Err(PathError::Nul);
    }
    let real = resolve(&cwd.join(raw))?;
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
    let home_root = resolve(home.root()).unwrap_or_else(|_| home.root().to_path_buf());
    let name_in_home = |p: &Path| {
        p.strip_prefix(home.root())
            .map(|rel| rel.display().to_string())
            .unwrap_or_else(|_| p.display().to_string())
    };
    match access {
        Access::Write => {
            for protected in home.protected_paths() {
                let area = resolve(&protected).unwrap_or(protected.clone());
                if real.starts_with(&area) {
                    return Err(PathError::Protected {
                        shown,
                        name: name_in_home(&protected),
                    });
                }
            }
            if let Some(owner) = agent_files::owner(home, real) {
                return Err(PathError::AgentFile {
                    shown,
                    what: owner.what,
                    tools: owner.tools,
                });
            }
            // The home's other folders stay writable wherever the home lives.
            if real.starts_with(&home_root) {
                return Ok(());
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
            for secret in secret_paths(home) {
                let area = resolve(&secret).unwrap_or(secret.clone());
                if real.starts_with(&area) {
                    return Err(PathError::Secret {
                        shown,
                        name: name_in_home(&secret),
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
/// can hold keys, and `/proc`.
pub fn read_refused_areas(home: &Home) -> Vec<PathBuf> {
    let mut areas: Vec<PathBuf> = secret_paths(home)
        .into_iter()
        .map(|p| resolve(&p).unwrap_or(p))
        .collect();
    areas.push(PathBuf::from("/proc"));
    areas
}

fn secret_paths(home: &Home) -> [PathBuf; 3] {
    [
        home.models_file(),
        home.mcp_file(),
        home.root().join("plugin-data"),
    ]
}

/// Resolves an absolute path as the kernel would: every existing component
/// is followed (links included), `..` goes to the resolved parent, and the
/// part that does not exist yet is applied as written.
pub fn resolve(path: &Path) -> Result<PathBuf, PathError> {
    let mut real = PathBuf::from("/");
    let mut missing = false;
    for component in path.components() {
        match component {
            Component::Prefix(_) | Component::RootDir | Component::CurDir => {}
            Component::ParentDir => {
                real.pop();
                // Back out of the part that does not exist: what follows
                // is resolved again (`missing/../link` is `link`, followed).
                if missing {
                    missing = std::fs::symlink_metadata(&real).is_err();
                }
            }
            Component::Normal(name) => {
                real.push(name);
                if missing {
                    continue;
                }
                match std::fs::symlink_metadata(&real) {
                    Ok(meta) if meta.file_type().is_symlink() => match std::fs::canonicalize(&real)
                    {
                        Ok(target) => real = target,
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                            let target = std::fs::read_link(&real).unwrap_or_default();
                            return Err(PathError::Dangling { path: real, target });
                        }
                        Err(e) => return Err(PathError::io(&real, e)),
                    },
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing = true,
                    Err(e) => return Err(PathError::io(&real, e)),
                }
            }
        }
    }
    Ok(real)
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
