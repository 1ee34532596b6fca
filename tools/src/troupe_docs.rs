//! `troupe_docs`: troupe's own documentation, read by the agents.
//!
//! The pages of `docs/` are compiled into the binary, so an agent can look up
//! how a setting, a tool or the runtime works in the version it runs on,
//! with no network and no checkout. With no path the tool answers with an
//! index of the pages (title and first sentence of each); an unknown path
//! answers with the index too, saying so. A page is read a window of lines
//! at a time, like `read_file`, and a `#heading` in the path starts at that
//! heading.

use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;

/// The pages, by file name, as they were when the binary was built.
pub const PAGES: &[(&str, &str)] = &[
    (
        "getting-started.md",
        include_str!("../../docs/getting-started.md"),
    ),
    (
        "configuration.md",
        include_str!("../../docs/configuration.md"),
    ),
    ("house.md", include_str!("../../docs/house.md")),
    ("executors.md", include_str!("../../docs/executors.md")),
    ("api.md", include_str!("../../docs/api.md")),
    ("testing.md", include_str!("../../docs/testing.md")),
    ("benchmarks.md", include_str!("../../docs/benchmarks.md")),
    ("providers.md", include_str!("../../docs/providers.md")),
    ("tools.md", include_str!("../../docs/tools.md")),
    ("browser.md", include_str!("../../docs/browser.md")),
    ("security.md", include_str!("../../docs/security.md")),
    ("operating.md", include_str!("../../docs/operating.md")),
    ("cluster.md", include_str!("../../docs/cluster.md")),
    ("scenarios.md", include_str!("../../docs/scenarios.md")),
    (
        "runtime-semantics.md",
        include_str!("../../docs/runtime-semantics.md"),
    ),
];

/// The most lines one call returns.
pub const PAGE_LINES: usize = 300;
/// The most characters one call returns (about).
pub const PAGE_CHARS: usize = 30_000;

/// The arguments of `troupe_docs`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TroupeDocsParams {
    /// The page, such as `configuration.md` or `tools.md#web_fetch`; omit it
    /// for the index of pages.
    #[serde(default)]
    pub path: Option<String>,
    /// The first line to read, counting from 1 (default 1, or the heading
    /// the path names).
    #[serde(default)]
    pub offset: Option<u64>,
}

/// Read troupe's own documentation (the version you run on) as Markdown: how to configure
/// it, every tool, security, the runtime's guarantees. Without a path you get the index of
/// pages; then give a page (`configuration.md`, or `tools.md#web_fetch` to start at a heading)
/// and an offset to read on.
#[tool(read_only, pages_own_output)]
pub async fn troupe_docs(params: TroupeDocsParams) -> ToolResult {
    let asked = params.path.as_deref().map(str::trim).unwrap_or_default();
    if asked.is_empty() || matches!(asked, "index" | "index.md" | "/" | "docs" | "docs/") {
        return ToolResult::ok_with(index(), serde_json::json!({"path": "index"}));
    }
    let (name, anchor) = match asked.split_once('#') {
        Some((name, anchor)) => (name, Some(anchor)),
        None => (asked, None),
    };
    let Some((name, text)) = find(name) else {
        return ToolResult::ok_with(
            format!("There is no page `{asked}`. {}", index()),
            serde_json::json!({"path": "index", "unknown": asked}),
        );
    };
    let start = match (params.offset, anchor) {
        (Some(n), _) => n.max(1) as usize,
        (None, Some(anchor)) => heading_line(text, anchor).unwrap_or(1),
        (None, None) => 1,
    };
    let (page, next) = window(text, start);
    let total = text.lines().count();
    let mut out = format!(
        "docs/{name} (lines {start}–{} of {total})\n\n{page}",
        start + page.lines().count().saturating_sub(1)
    );
    if let Some(next) = next {
        out.push_str(&format!(
            "\n\n[more below: call troupe_docs with path \"{name}\" and offset {next}]"
        ));
    }
    ToolResult::ok_with(
        out,
        serde_json::json!({"path": name, "offset": start, "next_offset": next, "total_lines": total}),
    )
}

/// The page a path names: `configuration`, `configuration.md`,
/// `docs/configuration.md`, any case.
fn find(path: &str) -> Option<(&'static str, &'static str)> {
    let bare = path
        .trim_start_matches("./")
        .trim_start_matches('/')
        .trim_start_matches("docs/")
        .to_ascii_lowercase();
    let bare = bare.strip_suffix(".md").unwrap_or(&bare).to_owned();
    PAGES
        .iter()
        .find(|(name, _)| name.strip_suffix(".md") == Some(bare.as_str()))
        .copied()
}

/// The index: every page with its title and first sentence.
pub fn index() -> String {
    let mut out =
        String::from("# troupe documentation\n\nRead a page with troupe_docs and its path:\n\n");
    for (name, text) in PAGES {
        let title = text
            .lines()
            .find_map(|l| l.strip_prefix("# "))
            .unwrap_or(name);
        out.push_str(&format!("- `{name}` — {title}: {}\n", summary(text)));
    }
    out
}

/// The first sentence of a page's first paragraph after its title.
fn summary(text: &str) -> String {
    let paragraph: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("# "))
        .skip(1)
        .skip_while(|l| {
            l.trim().is_empty()
                || l.trim_start().starts_with("<!--")
                || l.trim_start().starts_with("Do not edit")
                || l.trim_start().ends_with("-->")
        })
        .take_while(|l| !l.trim().is_empty())
        .collect();
    let joined = paragraph.join(" ");
    let end = joined.find(". ").map_or(joined.len(), |i| i + 1);
    joined[..end].trim().to_owned()
}

/// The line of the heading whose slug (GitHub-style) or text is `anchor`.
fn heading_line(text: &str, anchor: &str) -> Option<usize> {
    let want = slug(anchor);
    text.lines().enumerate().find_map(|(i, line)| {
        let heading = line.trim_start_matches('#');
        (line.starts_with('#') && slug(heading) == want).then_some(i + 1)
    })
}

fn slug(text: &str) -> String {
    text.trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' | '-' => Some('-'),
            c if c.is_alphanumeric() || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Lines from `start`, at most [`PAGE_LINES`] and about [`PAGE_CHARS`];
/// the line to go on from, if any.
fn window(text: &str, start: usize) -> (String, Option<usize>) {
    let mut out = String::new();
    let mut shown = 0;
    let mut lines = text.lines().skip(start - 1).peekable();
    while let Some(line) = lines.next() {
        out.push_str(line);
        out.push('\n');
        shown += 1;
        if (shown >= PAGE_LINES || out.len() >= PAGE_CHARS) && lines.peek().is_some() {
            return (out, Some(start + shown));
        }
    }
    (out, None)
}

#[cfg(test)]
#[path = "troupe_docs_tests.rs"]
mod tests;
