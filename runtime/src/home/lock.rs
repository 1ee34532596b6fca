//! One process at a time owns a home's writes.
//!
//! Starting a node resumes every turn the store shows as running. That is
//! right after a crash and wrong while another process is running those
//! turns: two processes on one home wrote into each other's turns (a call
//! answered twice, transcripts mixed). So a process that writes a home first
//! takes an OS advisory lock (`flock`) on `troupe.lock` at its top, and
//! refuses to start while another holds it. The kernel drops the lock when
//! its holder exits, however it exits (SIGKILL included), so a crash never
//! leaves a home locked.
//!
//! The lock file also says who holds it: the owner writes its pid, command
//! line and start time there, so a refused process names the owner. When the
//! owner stops cleanly ([`HomeLock::release`]) it adds when it ended and
//! the size and modification time of `troupe.db` (the [`Seal`]). The next
//! owner reads that [`Owner::previous`] record: no end means the last owner
//! died, and a seal that no longer matches means the database was changed by
//! something else since; either way the database is checked before it is
//! written again (see [`crate::store::health`]).
//!
//! Read-only commands never take the lock: they open the store read-only
//! and never resume anything, so they run beside the owner.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::Home;

/// The longest command line recorded in the lock file, in characters.
const COMMAND_CHARS: usize = 120;

/// Why a home could not be locked.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// Another process owns the home.
    #[error(
        "the home {home} is in use by {owner}; one process at a time writes a home: \
         stop it, or use --home DIR (or TROUPE_HOME) for another home. Read-only commands \
         (`troupe conversations`, `show`, `search`, `usage`, `bots`, `routines`, `proposals`) \
         work meanwhile"
    )]
    InUse {
        /// The home's folder.
        home: PathBuf,
        /// Who holds it, as its lock file says.
        owner: Holder,
    },
    /// The lock file could not be created, read or written.
    #[error(
        "cannot lock the home through {path}: {source}; check that the home's folder exists \
         and is writable"
    )]
    Io {
        /// The lock file.
        path: PathBuf,
        /// The failure.
        source: std::io::Error,
    },
}

/// The owner of a locked home, as far as its lock file tells.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder(pub Option<Box<Owner>>);

impl std::fmt::Display for Holder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.0 {
            Some(owner) => write!(
                f,
                "pid {} (`{}`) since {}",
                owner.pid, owner.command, owner.since
            ),
            None => write!(f, "another process (it has not recorded itself yet)"),
        }
    }
}

/// What the lock file records about its owner.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Owner {
    /// The owner's process id.
    pub pid: u32,
    /// Its command line, shortened.
    pub command: String,
    /// When it took the lock (RFC 3339, UTC).
    pub since: String,
    /// When it released the lock cleanly; `None` while it runs, or when it
    /// died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ended: Option<String>,
    /// `troupe.db` as the owner left it at its clean end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<Seal>,
}

/// A file's size and modification time: equal seals mean nothing wrote the
/// file in between (as far as the file system tells).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seal {
    /// Its size in bytes.
    pub bytes: u64,
    /// Its modification time, in nanoseconds since the Unix epoch.
    pub modified_ns: u64,
}

impl Seal {
    /// The seal of the file at `path`, or `None` if it cannot be read.
    pub fn of(path: &Path) -> Option<Seal> {
        let meta = std::fs::metadata(path).ok()?;
        let modified = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?;
        Some(Seal {
            bytes: meta.len(),
            modified_ns: u64::try_from(modified.as_nanos()).unwrap_or(u64::MAX),
        })
    }
}

/// The lock on a home, held until it is released or dropped (or the
/// process ends).
#[derive(Debug)]
pub struct HomeLock {
    file: File,
    path: PathBuf,
    home: Home,
    owner: Owner,
    previous: Option<Owner>,
    /// Whether the database was suspect when the lock was taken and has
    /// not been checked since (see [`HomeLock::database_suspect`]).
    pub(super) unchecked: bool,
}

impl HomeLock {
    /// Takes `home`'s lock for this process, recording its command line;
    /// creates the home's folder if needed.
    ///
    /// # Errors
    ///
    /// [`LockError::InUse`] naming the owner when another process holds it,
    /// [`LockError::Io`] when the lock file cannot be opened or written.
    ///
    /// # Examples
    ///
    /// A second lock on a home fails while the first is held:
    ///
    /// ```
    /// use troupe_runtime::home::{Home, HomeLock, LockError};
    ///
    /// let dir = tempfile::tempdir()?;
    /// let home = Home::new(dir.path());
    /// let first = HomeLock::acquire(&home)?;
    /// assert!(matches!(HomeLock::acquire(&home), Err(LockError::InUse { .. })));
    /// first.release()?;
    /// let again = HomeLock::acquire(&home)?;
    /// assert!(again.previous().is_some_and(|p| p.ended.is_some()), "a clean end");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn acquire(home: &Home) -> Result<HomeLock, LockError> {
        Self::acquire_as(home, command_line())
    }

    /// [`HomeLock::acquire`] recording `command` as the owner's command line.
    pub fn acquire_as(home: &Home, command: impl Into<String>) -> Result<HomeLock, LockError> {
        let path = home.lock_file();
        let io = |source| LockError::Io {
            path: path.clone(),
            source,
        };
        std::fs::create_dir_all(home.root()).map_err(io)?;
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(LockError::InUse {
                    home: home.root().to_path_buf(),
                    owner: Holder(read_record(&mut file).map(Box::new)),
                })
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        let previous = read_record(&mut file);
        let owner = Owner {
            pid: std::process::id(),
            command: command.into(),
            since: now(),
            ended: None,
            database: previous.as_ref().and_then(|p| p.database),
        };
        write_record(&mut file, &owner).map_err(io)?;
        let mut lock = HomeLock {
            file,
            path,
            home: home.clone(),
            owner,
            previous,
            unchecked: false,
        };
        lock.unchecked = lock.database_suspect();
        Ok(lock)
    }

    /// Who holds `home`'s lock now, as its lock file says; `None` when the
    /// file is missing or unreadable. Taking no lock, it cannot tell a live
    /// owner from the record a dead one left: use it only to name one.
    pub fn recorded_owner(home: &Home) -> Option<Owner> {
        let mut file = File::open(home.lock_file()).ok()?;
        read_record(&mut file)
    }

    /// The home this lock is on.
    pub fn home(&self) -> &Home {
        &self.home
    }

    /// This owner's record.
    pub fn owner(&self) -> &Owner {
        &self.owner
    }

    /// The record the previous owner left: `None` for a new home (or one
    /// from before the lock existed).
    pub fn previous(&self) -> Option<&Owner> {
        self.previous.as_ref()
    }

    /// Records a clean end (its time and the database's [`Seal`]) and
    /// releases the lock. Dropping a lock releases it without that record,
    /// which the next owner takes for a crash. A database that was suspect
    /// and never checked ([`HomeLock::check_database`]) stays suspect: no
    /// end is recorded for it.
    ///
    /// # Errors
    ///
    /// [`LockError::Io`] if the record cannot be written; the lock is
    /// released all the same.
    pub fn release(mut self) -> Result<(), LockError> {
        if self.unchecked {
            return Ok(());
        }
        self.owner.ended = Some(now());
        if let Some(seal) = Seal::of(&self.home.database()) {
            self.owner.database = Some(seal);
        }
        write_record(&mut self.file, &self.owner).map_err(|source| LockError::Io {
            path: self.path.clone(),
            source,
        })
        // Dropping the file releases the lock.
    }
}

/// The record in a lock file, if it holds one.
fn read_record(file: &mut File) -> Option<Owner> {
    let mut text = String::new();
    file.seek(SeekFrom::Start(0)).ok()?;
    file.read_to_string(&mut text).ok()?;
    serde_json::from_str(text.trim()).ok()
}

/// Replaces the record in the lock file (not synced: a record lost to a
/// power cut reads as a crash, which only makes the next start check more).
fn write_record(file: &mut File, owner: &Owner) -> std::io::Result<()> {
    let mut text = serde_json::to_string(owner).map_err(std::io::Error::other)?;
    text.push('\n');
    file.set_len(0)?;
    file.seek(SeekFrom::Start(0))?;
    file.write_all(text.as_bytes())
}

/// This process's command line: the program's file name and its
/// arguments, cut to [`COMMAND_CHARS`].
fn command_line() -> String {
    let mut args = std::env::args_os();
    let program = args
        .next()
        .map(|p| {
            Path::new(&p)
                .file_name()
                .unwrap_or(p.as_os_str())
                .to_string_lossy()
                .into_owned()
        })
        .unwrap_or_default();
    let mut line = program;
    for arg in args {
        line.push(' ');
        line.push_str(&arg.to_string_lossy());
    }
    match line.char_indices().nth(COMMAND_CHARS) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn a_second_writer_is_refused_with_the_owner_named() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path().join("home"));
        let first = HomeLock::acquire_as(&home, "troupe serve").unwrap();
        let Err(LockError::InUse { owner, .. }) = HomeLock::acquire_as(&home, "troupe run hi")
        else {
            panic!("the second lock was granted");
        };
        assert_eq!(owner.0.as_deref(), Some(first.owner()));
        let text = LockError::InUse {
            home: home.root().to_path_buf(),
            owner,
        }
        .to_string();
        let expected = format!(
            "pid {} (`troupe serve`) since {}; one process",
            std::process::id(),
            first.owner().since
        );
        assert!(text.contains(&expected), "{text}");
        assert!(text.contains("use --home DIR"), "{text}");
    }

    #[test]
    fn a_dropped_lock_reads_as_a_crash_and_a_released_one_as_a_clean_end() {
        let dir = tempfile::tempdir().unwrap();
        let home = Home::new(dir.path());
        assert_eq!(HomeLock::acquire(&home).unwrap().previous(), None);
        let crashed = HomeLock::acquire(&home).unwrap();
        let previous = crashed.previous().unwrap();
        assert_eq!(previous.ended, None, "dropped without a clean end");
        std::fs::write(home.database(), b"12345").unwrap();
        crashed.release().unwrap();
        let next = HomeLock::acquire(&home).unwrap();
        let previous = next.previous().unwrap();
        assert!(previous.ended.is_some());
        assert_eq!(previous.database, Seal::of(&home.database()));
        assert_eq!(previous.database.map(|s| s.bytes), Some(5));
        assert_eq!(next.owner().database, previous.database, "carried on");
    }
}
