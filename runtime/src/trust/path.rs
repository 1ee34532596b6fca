//! One path resolution for the gate and the file tools.
//!
//! A rule on a path is only worth something if it judges the file the kernel
//! will open, and the gate and the tool that writes must agree on which file
//! that is: when the gate read `~/x` as the user's home and `write_file`
//! read it as a folder named `~` in the working folder, the gate judged one
//! file and the tool wrote another. So both go through [`resolve`]:
//!
//! 1. [`expand`]: `~`, `~/…`, `$HOME/…` and `${HOME}/…` are the user's home
//!    (as a shell would expand them; a model writes them expecting that), an
//!    absolute path is itself, anything else is relative to the working
//!    folder. A path that depends on another variable, another user's home
//!    (`~bob`) or a command substitution is refused: nothing would expand
//!    it, so the caller is told to write it out.
//! 2. [`real`]: every existing component is followed the way the kernel
//!    follows it — symbolic links in the parents and in the final component
//!    (so `/proc/self/root/etc` is `/etc`, and a link into a protected area
//!    is judged by where it leads), `..` applied to the resolved parent (not
//!    to the text), `.`, repeated and trailing separators dropped — and the
//!    part that does not exist yet is applied as written.
//!
//! A hard link is not a path trick: it is another name of the same file, and
//! no resolution can see where else a file is named. The file tools replace
//! a file by renaming a new one over the name they were given, so writing
//! through a hard link replaces that name only; the other name keeps the old
//! content.

use std::path::{Component, Path, PathBuf};

/// Why a path could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError {
    /// The path was empty.
    #[error("the path is empty: give a file's path, absolute or relative to the working folder")]
    Empty,
    /// The path held a NUL byte.
    #[error("refused: the path contains a NUL byte, which no file name can hold; give the path without it")]
    Nul,
    /// The path depends on something only a shell would expand.
    #[error("refused: the path `{path}` depends on {what}, which the file tools do not expand; write the path out in full (`~/` and `$HOME/` are understood)")]
    Unexpanded {
        /// The path as given.
        path: String,
        /// What it depends on (`the variable $X`, `another user's home`).
        what: String,
    },
    /// A symbolic link that leads nowhere.
    #[error("`{path}` is a symbolic link to `{target}`, which does not exist; give the path of a real file")]
    Dangling {
        /// The link.
        path: PathBuf,
        /// What it points to.
        target: PathBuf,
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

/// Expands `text` and resolves it as the kernel would ([`expand`], then
/// [`real`]).
///
/// # Examples
///
/// ```
/// use std::path::Path;
/// use troupe_runtime::trust::path::resolve;
///
/// let real = resolve("~/notes/../todo.txt", Path::new("/nonexistent-home"), Path::new("/"));
/// assert_eq!(real.unwrap(), Path::new("/nonexistent-home/todo.txt"));
/// ```
pub fn resolve(text: &str, user_home: &Path, cwd: &Path) -> Result<PathBuf, ResolveError> {
    real(&expand(text, user_home, cwd)?)
}

/// Expands `~` and `$HOME` against `user_home` and joins a relative path to
/// `cwd`, without touching the disk.
pub fn expand(text: &str, user_home: &Path, cwd: &Path) -> Result<PathBuf, ResolveError> {
    if text.is_empty() {
        return Err(ResolveError::Empty);
    }
    if text.contains('\0') {
        return Err(ResolveError::Nul);
    }
    let unexpanded = |what: String| ResolveError::Unexpanded {
        path: text.to_string(),
        what,
    };
    let (base, rest) = if let Some(rest) = home_prefix(text) {
        (user_home, rest)
    } else if text.starts_with('~') {
        return Err(unexpanded("another user's home".into()));
    } else {
        (cwd, text)
    };
    if rest.contains('`') || rest.contains("$(") {
        return Err(unexpanded("a command substitution".into()));
    }
    if let Some(var) = variable(rest) {
        return Err(unexpanded(format!("the variable `{var}`")));
    }
    let path = Path::new(rest);
    Ok(if path.is_absolute() {
        path.to_path_buf()
    } else {
        base.join(path)
    })
}

/// The rest of `text` after a prefix naming the user's home, if it has one.
fn home_prefix(text: &str) -> Option<&str> {
    ["~", "$HOME", "${HOME}"].iter().find_map(|prefix| {
        let rest = text.strip_prefix(prefix)?;
        (rest.is_empty() || rest.starts_with('/')).then(|| rest.trim_start_matches('/'))
    })
}

/// The first shell variable `text` names (`$X`, `${X}`, `$1`, `$?`), if
/// any. A `$` followed by nothing a shell would expand (`price$.txt`) is an
/// ordinary character.
fn variable(text: &str) -> Option<String> {
    text.match_indices('$').find_map(|(i, _)| {
        let after = &text[i + 1..];
        let first = after.chars().next()?;
        if !(first.is_ascii_alphanumeric() || "_{(?@*#!$-".contains(first)) {
            return None;
        }
        let name: String = after
            .trim_start_matches('{')
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        Some(if name.is_empty() {
            format!("${first}")
        } else {
            format!("${name}")
        })
    })
}

/// Resolves an absolute path as the kernel would: every existing component
/// is followed (links included), `..` goes to the resolved parent, and the
/// part that does not exist yet is applied as written.
pub fn real(path: &Path) -> Result<PathBuf, ResolveError> {
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
                            return Err(ResolveError::Dangling { path: real, target });
                        }
                        Err(source) => return Err(ResolveError::Io { path: real, source }),
                    },
                    Ok(_) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => missing = true,
                    Err(source) => return Err(ResolveError::Io { path: real, source }),
                }
            }
        }
    }
    Ok(real)
}

/// [`real`], or the path as given when it cannot be resolved (for naming
/// areas: an area that cannot be resolved is compared as written).
pub fn real_or_given(path: &Path) -> PathBuf {
    real(path).unwrap_or_else(|_| path.to_path_buf())
}

#[cfg(test)]
#[path = "path_tests.rs"]
mod tests;
