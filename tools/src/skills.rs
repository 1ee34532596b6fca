//! The skill library on disk: discovery, `SKILL.md` frontmatter, the files
//! of a skill, kept versions and the archive.
//!
//! A skill is a folder `skills/<name>/` of an agent (the home's for the main
//! agent, `bots/<name>/skills/` for a bot) holding `SKILL.md` — a frontmatter
//! with `name` and `description`, then the instructions — and optional files
//! under `references/`, `templates/`, `scripts/` and `assets/`.
//!
//! Folders whose name starts with `.` are not skills: `.versions/<name>/<n>/`
//! keeps the previous state of a skill before each change ([`KEPT_VERSIONS`]
//! of them, numbered from 1 upward), `.archive/<name>-<timestamp>/` keeps a
//! deleted skill, and `.staging/` holds a change being prepared.

use std::path::{Component, Path, PathBuf};

use troupe_runtime::home::Home;

use crate::stamp::{Kept, Stamp};

/// How many previous versions of a skill are kept.
pub const KEPT_VERSIONS: usize = 10;

/// The folders a skill's extra files may live under.
pub const FILE_FOLDERS: [&str; 4] = ["references", "templates", "scripts", "assets"];

/// The instructions file of a skill.
pub const SKILL_FILE: &str = "SKILL.md";

/// Why a skill could not be read or a name or path was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SkillError {
    /// The name is not lowercase letters, digits, `-` and `_`.
    #[error("invalid name {0:?}: use 1 to 64 lowercase letters, digits, '-' or '_'")]
    Name(String),
    /// `SKILL.md` does not start with a frontmatter holding `name` and `description`.
    #[error(
        "SKILL.md: {0}. It must start with:\n---\nname: <skill-name>\ndescription: <one line>\n---"
    )]
    Frontmatter(String),
    /// No such skill.
    #[error("no skill named {0:?}")]
    Missing(String),
    /// The file path is outside what a skill may hold.
    #[error("file_path {path:?}: {reason}")]
    Path {
        /// The path given.
        path: String,
        /// Why it is refused.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{0}")]
    Io(String),
}

/// Checks a skill or agent name: 1 to 64 of `a-z`, `0-9`, `-`, `_`.
pub fn validate_name(name: &str) -> Result<(), SkillError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_');
    if ok {
        Ok(())
    } else {
        Err(SkillError::Name(name.to_string()))
    }
}

/// A parsed `SKILL.md`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillDoc {
    /// The frontmatter's `name`.
    pub name: String,
    /// The frontmatter's `description`.
    pub description: String,
    /// The instructions after the frontmatter.
    pub body: String,
}

/// Parses a `SKILL.md`: `---`, `key: value` lines (quoted values and `>`/`|`
/// folded blocks accepted; keys other than `name` and `description` are
/// ignored), `---`, then the body.
pub fn parse_skill_md(text: &str) -> Result<SkillDoc, SkillError> {
    let text = text.strip_prefix('\u{FEFF}').unwrap_or(text);
    let mut lines = text.lines();
    if lines.next().map(str::trim_end) != Some("---") {
        return Err(SkillError::Frontmatter(
            "the first line is not `---`".into(),
        ));
    }
    let mut header = Vec::new();
    let mut closed = false;
    for line in lines.by_ref() {
        if line.trim_end() == "---" {
            closed = true;
            break;
        }
        header.push(line);
    }
    if !closed {
        return Err(SkillError::Frontmatter(
            "the frontmatter is not closed by a `---` line".into(),
        ));
    }
    let body = lines.collect::<Vec<_>>().join("\n").trim().to_string();
    let (mut name, mut description) = (None, None);
    let mut i = 0;
    while i < header.len() {
        let line = header[i];
        i += 1;
        if line.starts_with([' ', '\t']) || line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let mut value = value.trim().to_string();
        if matches!(value.as_str(), ">" | "|" | ">-" | "|-") {
            let mut parts = Vec::new();
            while i < header.len() && (header[i].starts_with([' ', '\t']) || header[i].is_empty()) {
                parts.push(header[i].trim());
                i += 1;
            }
            value = parts.join(" ").trim().to_string();
        }
        let value = unquote(&value);
        match key.trim() {
            "name" => name = Some(value),
            "description" => description = Some(value),
            _ => {}
        }
    }
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| SkillError::Frontmatter("no `name`".into()))?;
    let description = description
        .filter(|d| !d.is_empty())
        .ok_or_else(|| SkillError::Frontmatter("no `description`".into()))?;
    Ok(SkillDoc {
        name,
        description,
        body,
    })
}

fn unquote(value: &str) -> String {
    for q in ['"', '\''] {
        if value.len() >= 2 && value.starts_with(q) && value.ends_with(q) {
            return value[1..value.len() - 1].to_string();
        }
    }
    value.to_string()
}

/// A skill as listed: its name, description and folder.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSummary {
    /// Its name (its folder's).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its folder.
    pub dir: PathBuf,
}

/// A loaded skill: its summary, instructions and files.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Skill {
    /// Name, description and folder.
    pub summary: SkillSummary,
    /// The instructions (the body of `SKILL.md`).
    pub instructions: String,
    /// Its files, relative to its folder, sorted.
    pub files: Vec<String>,
}

/// The skills of `agent`, sorted by name. Folders without a valid `SKILL.md`
/// (or whose frontmatter names another skill) are skipped with a warning.
///
/// A listing is kept while the skills' folder and every `SKILL.md` in it
/// are as they were ([`crate::stamp`]): a new conversation lists them with
/// a `stat` of each instead of reading them all again.
pub fn list(home: &Home, agent: &str) -> Vec<SkillSummary> {
    static LISTED: std::sync::LazyLock<Kept<Vec<SkillSummary>>> =
        std::sync::LazyLock::new(Kept::default);
    list_kept(&LISTED, home, agent)
}

/// [`list`], kept in `kept`.
pub(crate) fn list_kept(
    kept: &Kept<Vec<SkillSummary>>,
    home: &Home,
    agent: &str,
) -> Vec<SkillSummary> {
    let dir = home.skills_dir(agent);
    if let Some(skills) = kept.get(&dir) {
        return skills;
    }
    let Some(stamp) = Stamp::of(&dir) else {
        return Vec::new();
    };
    let Ok(read) = std::fs::read_dir(&dir) else {
        return Vec::new();
    };
    let mut stamps = vec![(dir.clone(), Some(stamp))];
    let mut skills: Vec<SkillSummary> = read
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') || validate_name(&name).is_err() {
                return None;
            }
            let doc = e.path().join(SKILL_FILE);
            stamps.push((doc.clone(), Stamp::of(&doc)));
            match read_doc(&e.path(), &name) {
                Ok(doc) => Some(SkillSummary {
                    name,
                    description: doc.description,
                    dir: e.path(),
                }),
                Err(err) => {
                    tracing::warn!(skill = %name, error = %err, "skill skipped");
                    None
                }
            }
        })
        .collect();
    skills.sort_by(|a, b| a.name.cmp(&b.name));
    kept.keep(&dir, stamps, skills.clone());
    skills
}

/// The skills `agent` may load: its own, and the library's (the main
/// agent's, in the home's `skills/`) named in `library` that exist and that
/// no skill of its own shadows; sorted by name.
pub fn list_usable(home: &Home, agent: &str, library: &[String]) -> Vec<SkillSummary> {
    let mut skills = list(home, agent);
    if agent != troupe_runtime::home::MAIN_AGENT && !library.is_empty() {
        let own: Vec<String> = skills.iter().map(|s| s.name.clone()).collect();
        skills.extend(
            list(home, troupe_runtime::home::MAIN_AGENT)
                .into_iter()
                .filter(|s| library.contains(&s.name) && !own.contains(&s.name)),
        );
        skills.sort_by(|a, b| a.name.cmp(&b.name));
    }
    skills
}

/// Loads the skill `name` for `agent`: its own, else the library's when
/// `library` names it.
pub fn load_usable(
    home: &Home,
    agent: &str,
    library: &[String],
    name: &str,
) -> Result<Skill, SkillError> {
    match load(home, agent, name) {
        Err(SkillError::Missing(_))
            if agent != troupe_runtime::home::MAIN_AGENT && library.iter().any(|l| l == name) =>
        {
            load(home, troupe_runtime::home::MAIN_AGENT, name)
        }
        other => other,
    }
}

/// Reads and checks the `SKILL.md` of the skill folder `dir` named `name`.
pub fn read_doc(dir: &Path, name: &str) -> Result<SkillDoc, SkillError> {
    let path = dir.join(SKILL_FILE);
    let text = std::fs::read_to_string(&path).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => SkillError::Missing(name.to_string()),
        _ => SkillError::Io(format!("{}: {e}", path.display())),
    })?;
    let doc = parse_skill_md(&text)?;
    if doc.name != name {
        return Err(SkillError::Frontmatter(format!(
            "its `name` is {:?} but the skill's folder is {name:?}; they must match",
            doc.name
        )));
    }
    Ok(doc)
}

/// Loads the skill `name` of `agent`.
pub fn load(home: &Home, agent: &str, name: &str) -> Result<Skill, SkillError> {
    validate_name(name)?;
    let dir = home.skills_dir(agent).join(name);
    let doc = read_doc(&dir, name)?;
    Ok(Skill {
        summary: SkillSummary {
            name: doc.name,
            description: doc.description,
            dir: dir.clone(),
        },
        instructions: doc.body,
        files: files(&dir),
    })
}

/// The files under `dir`, relative and sorted, hidden ones left out.
pub fn files(dir: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        let Ok(read) = std::fs::read_dir(dir) else {
            return;
        };
        for entry in read.filter_map(Result::ok) {
            if entry.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let path = entry.path();
            match entry.file_type() {
                Ok(t) if t.is_dir() => walk(root, &path, out),
                Ok(t) if t.is_file() => {
                    if let Ok(rel) = path.strip_prefix(root) {
                        out.push(rel.to_string_lossy().replace('\\', "/"));
                    }
                }
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    walk(dir, dir, &mut out);
    out.sort();
    out
}

/// Checks a path inside a skill: relative, no `..`, under one of
/// [`FILE_FOLDERS`] (or `SKILL.md` itself when `allow_skill_md`). Answers the
/// cleaned relative path.
pub fn check_file_path(path: &str, allow_skill_md: bool) -> Result<PathBuf, SkillError> {
    let refuse = |reason: &str| SkillError::Path {
        path: path.to_string(),
        reason: reason.to_string(),
    };
    if allow_skill_md && path == SKILL_FILE {
        return Ok(PathBuf::from(SKILL_FILE));
    }
    let mut clean = PathBuf::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(part) => {
                if part.to_string_lossy().starts_with('.') {
                    return Err(refuse("hidden names are not allowed"));
                }
                clean.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => return Err(refuse("`..` is not allowed")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refuse("it must be relative to the skill's folder"))
            }
        }
    }
    let mut parts = clean.components();
    let first = parts
        .next()
        .map(|c| c.as_os_str().to_string_lossy().into_owned());
    let in_folder = first.is_some_and(|f| FILE_FOLDERS.contains(&f.as_str()));
    if !in_folder || parts.next().is_none() {
        return Err(refuse(&format!(
            "files go under {}/ (a file name after the folder){}",
            FILE_FOLDERS.join("/, "),
            if allow_skill_md {
                ", or name SKILL.md"
            } else {
                ""
            }
        )));
    }
    Ok(clean)
}

/// `skills/.versions/<name>/` of `agent`.
pub fn versions_dir(home: &Home, agent: &str, name: &str) -> PathBuf {
    home.skills_dir(agent).join(".versions").join(name)
}

/// `skills/.archive/` of `agent`.
pub fn archive_dir(home: &Home, agent: &str) -> PathBuf {
    home.skills_dir(agent).join(".archive")
}

/// The kept version numbers of skill `name`, oldest first.
pub fn versions(home: &Home, agent: &str, name: &str) -> Vec<u32> {
    let Ok(read) = std::fs::read_dir(versions_dir(home, agent, name)) else {
        return Vec::new();
    };
    let mut out: Vec<u32> = read
        .filter_map(Result::ok)
        .filter_map(|e| e.file_name().to_string_lossy().parse().ok())
        .collect();
    out.sort_unstable();
    out
}

/// Copies the folder `from` to `to` (which must not exist), recursively.
pub fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        let kind = entry.file_type()?;
        if kind.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if kind.is_file() {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "skills_tests.rs"]
mod tests;
