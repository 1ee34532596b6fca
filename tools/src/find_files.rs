//! `find_files`: searches file contents by regex, or file names by glob.
//!
//! Built on ripgrep's own crates (`ignore` for the walk, `grep-regex` and
//! `grep-searcher` for contents), so it skips what ripgrep skips: hidden and
//! `.gitignore`d files and folders, and `node_modules`, unless the searched
//! path is itself inside one. The walk is sorted so results come in path
//! order and paging with `offset` is stable between calls, and it stops at
//! [`SEARCH_DEADLINE`] with a note rather than hold the turn. A document
//! (PDF, Word, …) is a binary container ripgrep would skip, so its cached
//! Markdown ([`documents::cached`]) is searched instead, under the
//! document's own path.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::home::Home;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use crate::documents;
use crate::paths::{self, Access};

/// How long a search may run before it stops with what it found.
pub const SEARCH_DEADLINE: Duration = Duration::from_secs(60);
/// Results per page when `limit` is not given.
pub const DEFAULT_LIMIT: usize = 50;
/// The most results per page.
pub const MAX_LIMIT: usize = 500;
/// The most context lines around a match.
pub const MAX_CONTEXT: usize = 10;
/// The most characters of a line shown.
const MAX_LINE_CHARS: usize = 500;

/// What to search.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// File contents, matched by a regex.
    #[default]
    Content,
    /// File names, matched by a glob.
    Files,
}

/// How content matches are shown.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum OutputMode {
    /// Matching lines as `path:line:text`, context lines as `path-line-text`.
    #[default]
    Content,
    /// Only the paths of files that match.
    FilesOnly,
    /// Each matching file with its number of matching lines.
    Count,
}

/// The arguments of `find_files`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct FindFilesParams {
    /// A regex for `content`, or a glob for `files` (`*.rs`; a glob with `/` matches the path below `path`).
    pub pattern: String,
    /// `content` (default) searches inside files; `files` matches file names.
    #[serde(default)]
    pub target: Target,
    /// The folder or file to search (default: the working folder).
    #[serde(default)]
    pub path: Option<String>,
    /// Only search files whose name matches this glob, such as `*.py`.
    #[serde(default)]
    pub file_glob: Option<String>,
    /// For content: `content` (default), `files_only` or `count`.
    #[serde(default)]
    pub output_mode: OutputMode,
    /// Lines of context around each match, up to 10 (default 0).
    #[serde(default)]
    #[schemars(range(max = 10))]
    pub context: Option<usize>,
    /// Match regardless of letter case (default false).
    #[serde(default)]
    pub ignore_case: bool,
    /// Results per page (default 50, at most 500).
    #[serde(default)]
    #[schemars(range(min = 1, max = 500))]
    pub limit: Option<usize>,
    /// Results to skip, to read the next page (default 0).
    #[serde(default)]
    pub offset: Option<usize>,
}

/// Search file contents with a regex (ripgrep syntax), or file names with a glob (target
/// "files"). Skips hidden and .gitignored files and node_modules unless `path` is inside one.
/// Results come in path order, 50 per page by default; page with `offset`. Content lines show
/// as `path:line:text`, context lines as `path-line-text`. Documents (PDF, Word, PowerPoint,
/// spreadsheets, OpenDocument, RTF, EPUB) are searched through their text, converted once and
/// cached; their line numbers are those `read_file` shows. A search stops after 60 seconds with
/// what it found.
#[tool(read_only, offered = crate::host::not_in_house)]
pub async fn find_files(params: FindFilesParams, ctx: &ToolContext) -> ToolResult {
    if crate::host::in_house(ctx) {
        return crate::host::refused("find_files");
    }
    let raw = params.path.clone().unwrap_or_else(|| ".".into());
    let root = match paths::confine(ctx, &raw, Access::Read) {
        Ok(root) => root,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    if !root.exists() {
        return ToolResult::error(format!(
            "`{raw}` does not exist; give an existing folder or file"
        ));
    }
    let search = Search {
        home: ctx.home.clone(),
        cwd: paths::resolve(&ctx.cwd).unwrap_or_else(|_| ctx.cwd.clone()),
        refused: paths::read_refused_areas(&ctx.home),
        deadline: Instant::now() + SEARCH_DEADLINE,
    };
    match tokio::task::spawn_blocking(move || search.run(&root, &raw, &params)).await {
        Ok(result) => result,
        Err(e) => ToolResult::error(format!("find_files failed: {e}")),
    }
}

/// One search's setting.
pub(crate) struct Search {
    /// The home, whose `documents/` cache holds documents' Markdown.
    pub home: Home,
    /// The working folder, to show paths relative to it.
    pub cwd: PathBuf,
    /// Areas never searched (files that can hold keys).
    pub refused: Vec<PathBuf>,
    /// When to stop.
    pub deadline: Instant,
}

/// A result: a file, or a match with its context lines.
struct Entry {
    path: PathBuf,
    /// `(line number, is a match, text)`; empty for a file.
    lines: Vec<(u64, bool, String)>,
    /// Matches counted, for `count`.
    count: u64,
}

impl Search {
    pub(crate) fn run(&self, root: &Path, raw: &str, params: &FindFilesParams) -> ToolResult {
        let limit = params.limit.unwrap_or(DEFAULT_LIMIT).clamp(1, MAX_LIMIT);
        let offset = params.offset.unwrap_or(0);
        let wanted = offset + limit + 1;
        let context = params.context.unwrap_or(0).min(MAX_CONTEXT);
        let glob = |pattern: &str| {
            globset::GlobBuilder::new(pattern)
                .case_insensitive(params.ignore_case)
                .literal_separator(true)
                .build()
                .map(|g| (pattern.contains('/'), g.compile_matcher()))
                .map_err(|e| ToolResult::error(format!("invalid glob `{pattern}`: {e}")))
        };
        let file_glob = match params.file_glob.as_deref().map(glob).transpose() {
            Ok(g) => g,
            Err(result) => return result,
        };
        let name_glob = match params.target {
            Target::Files => match glob(&params.pattern) {
                Ok(g) => Some(g),
                Err(result) => return result,
            },
            Target::Content => None,
        };
        let matcher = match params.target {
            Target::Content => match RegexMatcherBuilder::new()
                .case_insensitive(params.ignore_case)
                .line_terminator(Some(b'\n'))
                .build(&params.pattern)
            {
                Ok(m) => Some(m),
                Err(e) => {
                    return ToolResult::error(format!("invalid regex `{}`: {e}", params.pattern))
                }
            },
            Target::Files => None,
        };
        let matches_glob = |(with_dirs, g): &(bool, globset::GlobMatcher), path: &Path| {
            if *with_dirs {
                g.is_match(path.strip_prefix(root).unwrap_or(path))
            } else {
                path.file_name().is_some_and(|n| g.is_match(n))
            }
        };

        let walk = ignore::WalkBuilder::new(root)
            .hidden(true)
            .git_ignore(true)
            .require_git(false)
            .follow_links(false)
            .sort_by_file_path(|a, b| a.cmp(b))
            .filter_entry(|e| e.depth() == 0 || e.file_name() != "node_modules")
            .build();
        let mut entries: Vec<Entry> = Vec::new();
        let mut stopped = false;
        for item in walk {
            if Instant::now() >= self.deadline {
                stopped = true;
                break;
            }
            if entries.len() >= wanted {
                break;
            }
            let Ok(item) = item else { continue };
            if !item.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let path = item.path();
            if self.refused.iter().any(|area| path.starts_with(area)) {
                continue;
            }
            if file_glob.as_ref().is_some_and(|g| !matches_glob(g, path)) {
                continue;
            }
            if let Some(g) = &name_glob {
                if matches_glob(g, path) {
                    entries.push(Entry {
                        path: path.to_path_buf(),
                        lines: Vec::new(),
                        count: 0,
                    });
                }
                continue;
            }
            if let Some(matcher) = &matcher {
                // A document is searched through its cached Markdown, and
                // its matches reported under its own path; one that cannot
                // be converted is skipped like a binary file.
                let source = if documents::is_document(path) {
                    match documents::cached(&self.home, path) {
                        Ok(doc) => doc.markdown_path,
                        Err(e) => {
                            tracing::debug!(path = %path.display(), error = %e, "document not searched");
                            continue;
                        }
                    }
                } else {
                    path.to_path_buf()
                };
                let found = self.search_file(
                    matcher,
                    &source,
                    path,
                    params.output_mode,
                    context,
                    wanted - entries.len(),
                );
                match found {
                    Ok((found, timed_out)) => {
                        entries.extend(found);
                        if timed_out {
                            stopped = true;
                            break;
                        }
                    }
                    Err(_) => continue,
                }
            }
        }
        self.render(entries, raw, params, offset, limit, context, stopped)
    }

    /// Searches the file `source`, reporting its matches under `path`; the
    /// entries it yields (at most `room`), and whether the deadline passed.
    #[allow(clippy::too_many_arguments)]
    fn search_file(
        &self,
        matcher: &RegexMatcher,
        source: &Path,
        path: &Path,
        mode: OutputMode,
        context: usize,
        room: usize,
    ) -> std::io::Result<(Vec<Entry>, bool)> {
        let context = if mode == OutputMode::Content {
            context
        } else {
            0
        };
        let mut searcher = SearcherBuilder::new()
            .line_number(true)
            .before_context(context)
            .after_context(context)
            .binary_detection(BinaryDetection::quit(0))
            .build();
        let mut sink = Collect {
            path,
            mode,
            context,
            room,
            deadline: self.deadline,
            entries: Vec::new(),
            after: 0,
            pending: Vec::new(),
            binary: false,
            timed_out: false,
        };
        searcher.search_path(matcher, source, &mut sink)?;
        if sink.binary {
            return Ok((Vec::new(), sink.timed_out));
        }
        Ok((sink.entries, sink.timed_out))
    }

    #[allow(clippy::too_many_arguments)]
    fn render(
        &self,
        entries: Vec<Entry>,
        raw: &str,
        params: &FindFilesParams,
        offset: usize,
        limit: usize,
        context: usize,
        stopped: bool,
    ) -> ToolResult {
        let total_seen = entries.len();
        let page: Vec<Entry> = entries.into_iter().skip(offset).take(limit).collect();
        let more = total_seen > offset + limit;
        let mut text = String::new();
        let mut last: Option<(PathBuf, u64)> = None;
        for entry in &page {
            let shown = self.shown(&entry.path);
            match (params.target, params.output_mode) {
                (Target::Files, _) | (Target::Content, OutputMode::FilesOnly) => {
                    text.push_str(&format!("{shown}\n"));
                }
                (Target::Content, OutputMode::Count) => {
                    text.push_str(&format!("{shown}:{}\n", entry.count));
                }
                (Target::Content, OutputMode::Content) => {
                    if let (Some((prev, line)), Some((first, _, _))) = (&last, entry.lines.first())
                    {
                        if context > 0 && (prev != &entry.path || *first != line + 1) {
                            text.push_str("--\n");
                        }
                    }
                    for (number, is_match, line) in &entry.lines {
                        let sep = if *is_match { ':' } else { '-' };
                        text.push_str(&format!("{shown}{sep}{number}{sep}{line}\n"));
                    }
                    if let Some((number, _, _)) = entry.lines.last() {
                        last = Some((entry.path.clone(), *number));
                    }
                }
            }
        }
        let data = serde_json::json!({
            "results": page.len(),
            "offset": offset,
            "more": more,
            "stopped_early": stopped,
        });
        if page.is_empty() {
            let what = if offset > 0 {
                "No more results"
            } else {
                "No matches"
            };
            text.push_str(&format!("{what} for `{}` in `{raw}`.\n", params.pattern));
        }
        if more {
            text.push_str(&format!(
                "[more results: call again with offset={}]\n",
                offset + limit
            ));
        }
        if stopped {
            text.push_str(&format!(
                "[stopped early after {} s: the results are incomplete; search a narrower path]\n",
                SEARCH_DEADLINE.as_secs()
            ));
        }
        ToolResult::ok_with(text.trim_end().to_string(), data)
    }

    /// A path as shown: relative to the working folder when inside it.
    fn shown(&self, path: &Path) -> String {
        match path.strip_prefix(&self.cwd) {
            Ok(rel) if !rel.as_os_str().is_empty() => rel.display().to_string(),
            _ => path.display().to_string(),
        }
    }
}

/// Gathers one file's matches as entries.
struct Collect<'a> {
    path: &'a Path,
    mode: OutputMode,
    context: usize,
    room: usize,
    deadline: Instant,
    entries: Vec<Entry>,
    /// After-context lines given to the last match so far.
    after: usize,
    /// Context lines waiting for the next match.
    pending: Vec<(u64, bool, String)>,
    binary: bool,
    timed_out: bool,
}

fn line_text(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let text = text.trim_end_matches(['\n', '\r']);
    if text.chars().count() > MAX_LINE_CHARS {
        let kept: String = text.chars().take(MAX_LINE_CHARS).collect();
        format!("{kept} …[line cut]")
    } else {
        text.to_string()
    }
}

impl Sink for Collect<'_> {
    type Error = std::io::Error;

    fn matched(&mut self, _: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, std::io::Error> {
        if Instant::now() >= self.deadline {
            self.timed_out = true;
            return Ok(false);
        }
        let number = mat.line_number().unwrap_or(0);
        match self.mode {
            OutputMode::FilesOnly => {
                self.entries.push(Entry {
                    path: self.path.to_path_buf(),
                    lines: Vec::new(),
                    count: 1,
                });
                Ok(false)
            }
            OutputMode::Count => {
                match self.entries.first_mut() {
                    Some(entry) => entry.count += 1,
                    None => self.entries.push(Entry {
                        path: self.path.to_path_buf(),
                        lines: Vec::new(),
                        count: 1,
                    }),
                }
                Ok(true)
            }
            OutputMode::Content => {
                if self.entries.len() >= self.room {
                    return Ok(false);
                }
                let mut lines = std::mem::take(&mut self.pending);
                lines.push((number, true, line_text(mat.bytes())));
                self.entries.push(Entry {
                    path: self.path.to_path_buf(),
                    lines,
                    count: 1,
                });
                self.after = 0;
                Ok(true)
            }
        }
    }

    fn context(&mut self, _: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, std::io::Error> {
        let line = (
            ctx.line_number().unwrap_or(0),
            false,
            line_text(ctx.bytes()),
        );
        match self.entries.last_mut() {
            Some(entry) if self.after < self.context && self.pending.is_empty() => {
                entry.lines.push(line);
                self.after += 1;
            }
            _ => self.pending.push(line),
        }
        Ok(true)
    }

    fn context_break(&mut self, _: &Searcher) -> Result<bool, std::io::Error> {
        self.pending.clear();
        self.after = self.context;
        Ok(true)
    }

    fn binary_data(&mut self, _: &Searcher, _: u64) -> Result<bool, std::io::Error> {
        self.binary = true;
        Ok(false)
    }
}

#[cfg(test)]
#[path = "find_files_tests.rs"]
mod tests;
