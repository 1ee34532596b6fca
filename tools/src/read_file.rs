//! `read_file`: a text file with numbered lines, a page at a time; an image
//! for a model that sees images.
//!
//! A page is at most [`MAX_LINES`] lines and about [`MAX_CHARS`] characters,
//! so one call never floods the context; the page ends with a note saying
//! where to go on. The tool pages its own output, so it is never spilled.
//! Every read is recorded in the conversation's [`ReadLedger`], which is
//! what lets `write_file` and `edit_file` change the file afterwards.

use std::io::Read;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use serde::Deserialize;
use troupe_macros::tool;
use troupe_runtime::protocol::ToolResult;
use troupe_runtime::tool::ToolContext;

use crate::ledger::{ContentHasher, FileStamp, ReadLedger};
use crate::paths::{self, Access};

/// The most lines one call returns.
pub const MAX_LINES: usize = 2000;
/// The most characters of numbered lines one call returns.
pub const MAX_CHARS: usize = 100_000;
/// The most characters of one line shown; the rest is cut with a marker.
pub const MAX_LINE_CHARS: usize = 2000;
/// The largest image shown.
pub const MAX_IMAGE_BYTES: u64 = 5 * 1024 * 1024;

/// How many leading bytes decide whether a file is binary.
const SNIFF_BYTES: usize = 8192;

/// Document formats the documents module reads as Markdown.
pub const DOCUMENT_EXTENSIONS: &[&str] = &[
    "pdf", "doc", "docx", "ppt", "pptx", "xls", "xlsx", "odt", "ods", "odp", "rtf", "epub",
];

pub use troupe_runtime::tool::services::ModelTraits;

/// The arguments of `read_file`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadFileParams {
    /// The file: an absolute path, `~/…` in the user's home, or relative to the working folder.
    pub path: String,
    /// The first line to read, counting from 1 (default 1).
    #[serde(default)]
    pub offset: Option<u64>,
    /// How many lines to read, at most 2000 (default 2000).
    #[serde(default)]
    pub limit: Option<u64>,
}

/// Read a text file, its lines numbered like `cat -n`: up to 2000 lines and about 100,000
/// characters per call, lines over 2000 characters cut. A longer file ends with a note giving
/// the offset to continue from. Reads documents as Markdown (PDF, DOCX, PPTX, XLSX, XLS, ODS,
/// ODT, ODP, RTF, EPUB), and PNG, JPEG, GIF and WebP images up to 5 MB. A file must be read
/// before write_file or edit_file may change it.
#[tool(read_only, pages_own_output)]
pub async fn read_file(params: ReadFileParams, ctx: &ToolContext) -> ToolResult {
    let real = match paths::confine(ctx, &params.path, Access::Read) {
        Ok(real) => real,
        Err(e) => return ToolResult::error(e.to_string()),
    };
    let sees_images = ctx.services.model_traits().sees_images;
    let window = Window {
        offset: params.offset.unwrap_or(1).max(1) as usize,
        limit: params
            .limit
            .unwrap_or(MAX_LINES as u64)
            .clamp(1, MAX_LINES as u64) as usize,
    };
    let shown = params.path.clone();
    if crate::documents::is_document(&real) {
        return read_document(ctx, real, shown, window).await;
    }
    let read = {
        let real = real.clone();
        let home = ctx.home.clone();
        tokio::task::spawn_blocking(move || read(&home, &real, &shown, window, sees_images)).await
    };
    match read {
        Ok(Ok((result, stamp))) => {
            ReadLedger::of(&ctx.services).record(ctx.conversation, &real, stamp);
            result
        }
        Ok(Err(result)) => result,
        Err(e) => ToolResult::error(format!("reading `{}` failed: {e}", params.path)),
    }
}

/// Reads a document (PDF, Word, …) as Markdown: converted once into the
/// home's `documents/` cache, then paged like any text file.
async fn read_document(
    ctx: &ToolContext,
    real: PathBuf,
    shown: String,
    window: Window,
) -> ToolResult {
    let home = ctx.home.clone();
    let done = tokio::task::spawn_blocking(move || {
        let cached =
            crate::documents::cached(&home, &real).map_err(|e| ToolResult::error(e.to_string()))?;
        let label = format!("{shown} (as Markdown)");
        read(&home, &cached.markdown_path, &label, window, false).map(|(result, _)| result)
    })
    .await;
    match done {
        Ok(Ok(result)) | Ok(Err(result)) => result,
        Err(e) => ToolResult::error(format!("converting the document failed: {e}")),
    }
}

/// Which lines a call asks for.
#[derive(Debug, Clone, Copy)]
struct Window {
    offset: usize,
    limit: usize,
}

/// Reads `real` (shown to the model as `shown`) and stamps what it held.
fn read(
    home: &troupe_runtime::home::Home,
    real: &Path,
    shown: &str,
    window: Window,
    sees_images: bool,
) -> Result<(ToolResult, FileStamp), ToolResult> {
    let error = |e: std::io::Error| ToolResult::error(format!("cannot read `{shown}`: {e}"));
    let mut file = paths::open_checked(real).map_err(|e| ToolResult::error(e.to_string()))?;
    paths::check_not_secret(home, &file, shown).map_err(|e| ToolResult::error(e.to_string()))?;
    let meta = file.metadata().map_err(error)?;
    if meta.is_dir() {
        return Err(ToolResult::error(format!(
            "`{shown}` is a folder, not a file; use find_files with target \"files\" to list it"
        )));
    }
    if !meta.is_file() {
        return Err(ToolResult::error(format!(
            "`{shown}` is not a regular file (a device, socket or pipe); read_file reads files only"
        )));
    }
    let modified = meta.modified().ok();
    let mut head = Vec::with_capacity(SNIFF_BYTES);
    (&mut file)
        .take(SNIFF_BYTES as u64)
        .read_to_end(&mut head)
        .map_err(error)?;

    if let Some(media_type) = image_type(&head) {
        return read_image(
            file,
            head,
            meta.len(),
            real,
            shown,
            media_type,
            sees_images,
            modified,
        );
    }
    if head.contains(&0) {
        let extension = real
            .extension()
            .map(|e| e.to_string_lossy().to_ascii_lowercase())
            .unwrap_or_default();
        let text = if DOCUMENT_EXTENSIONS.contains(&extension.as_str()) {
            format!("`{shown}` is a {extension} document in a format troupe does not convert (an old binary Office file?); save it as a newer format")
        } else {
            format!(
                "`{shown}` is a binary file ({} bytes), not text; read_file shows text files and images",
                meta.len()
            )
        };
        return Err(ToolResult::error(text));
    }

    let mut pager = Pager::new(window);
    let mut hasher = ContentHasher::default();
    hasher.update(&head);
    pager.feed(&head);
    let mut chunk = vec![0_u8; 64 * 1024];
    loop {
        let n = file.read(&mut chunk).map_err(error)?;
        if n == 0 {
            break;
        }
        hasher.update(&chunk[..n]);
        pager.feed(&chunk[..n]);
    }
    let stamp = hasher.finish(modified);
    let page = pager.finish();
    let data = serde_json::json!({
        "path": real,
        "total_lines": page.total,
        "first_line": window.offset,
        "lines": page.shown,
    });
    if page.total == 0 {
        return Ok((
            ToolResult::ok_with(format!("`{shown}` is empty."), data),
            stamp,
        ));
    }
    if window.offset > page.total {
        return Err(ToolResult::error(format!(
            "`{shown}` has {} lines; offset {} is past its end. Call again with an offset from 1 to {}.",
            page.total, window.offset, page.total
        )));
    }
    let mut text = page.body;
    let last = window.offset + page.shown - 1;
    if last < page.total {
        text.push_str(&format!(
            "… {} more lines (showing lines {}–{} of {}); call again with offset={}.",
            page.total - last,
            window.offset,
            last,
            page.total,
            last + 1
        ));
    }
    Ok((ToolResult::ok_with(text, data), stamp))
}

/// The image format of a file's first bytes, if it is one shown to models.
fn image_type(head: &[u8]) -> Option<&'static str> {
    if head.starts_with(b"\x89PNG\r\n\x1a\n") {
        Some("image/png")
    } else if head.starts_with(&[0xFF, 0xD8, 0xFF]) {
        Some("image/jpeg")
    } else if head.starts_with(b"GIF87a") || head.starts_with(b"GIF89a") {
        Some("image/gif")
    } else if head.len() >= 12 && &head[..4] == b"RIFF" && &head[8..12] == b"WEBP" {
        Some("image/webp")
    } else {
        None
    }
}

#[allow(clippy::too_many_arguments)]
fn read_image(
    mut file: std::fs::File,
    mut bytes: Vec<u8>,
    len: u64,
    real: &Path,
    shown: &str,
    media_type: &str,
    sees_images: bool,
    modified: Option<std::time::SystemTime>,
) -> Result<(ToolResult, FileStamp), ToolResult> {
    let kind = media_type.trim_start_matches("image/").to_ascii_uppercase();
    if len > MAX_IMAGE_BYTES {
        return Err(ToolResult::error(format!(
            "`{shown}` is a {kind} image of {len} bytes, over the 5 MB that can be shown"
        )));
    }
    file.read_to_end(&mut bytes)
        .map_err(|e| ToolResult::error(format!("cannot read `{shown}`: {e}")))?;
    let stamp = FileStamp::of(&bytes, modified);
    let size = bytes.len();
    let result = if sees_images {
        let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
        ToolResult::ok_with(
            format!("`{shown}` is a {kind} image ({size} bytes), attached for you to see."),
            serde_json::json!({"image": {"media_type": media_type, "path": real, "bytes": encoded}}),
        )
    } else {
        ToolResult::ok_with(
            format!(
                "`{shown}` is a {kind} image ({size} bytes). This model cannot see images, so its \
                 content is not shown; ask the user what it shows if that matters."
            ),
            serde_json::json!({"image": {"media_type": media_type, "path": real}}),
        )
    };
    Ok((result, stamp))
}

/// Collects the requested lines from chunks of a file, numbering them and
/// counting every line, with memory bounded by the page size.
struct Pager {
    window: Window,
    /// Lines seen so far (the one being read is `seen + 1`).
    seen: usize,
    /// The current line's first bytes, when it is in the page.
    line: Vec<u8>,
    /// The current line's full length in bytes.
    line_len: usize,
    /// Whether a line has started and not ended.
    open: bool,
    body: String,
    body_chars: usize,
    shown: usize,
    /// The character budget ran out: later lines are only counted.
    full: bool,
}

/// A finished page.
struct Page {
    body: String,
    shown: usize,
    total: usize,
}

impl Pager {
    fn new(window: Window) -> Self {
        Self {
            window,
            seen: 0,
            line: Vec::new(),
            line_len: 0,
            open: false,
            body: String::new(),
            body_chars: 0,
            shown: 0,
            full: false,
        }
    }

    fn wanted(&self) -> bool {
        let n = self.seen + 1;
        !self.full && n >= self.window.offset && n < self.window.offset + self.window.limit
    }

    fn feed(&mut self, mut chunk: &[u8]) {
        while !chunk.is_empty() {
            let end = chunk.iter().position(|&b| b == b'\n');
            let part = &chunk[..end.unwrap_or(chunk.len())];
            self.open = true;
            if self.wanted() {
                let room = (MAX_LINE_CHARS * 4 + 4).saturating_sub(self.line.len());
                self.line.extend_from_slice(&part[..part.len().min(room)]);
            }
            self.line_len += part.len();
            match end {
                Some(i) => {
                    self.end_line();
                    chunk = &chunk[i + 1..];
                }
                None => chunk = &[],
            }
        }
    }

    fn end_line(&mut self) {
        if self.wanted() {
            let mut bytes = std::mem::take(&mut self.line);
            let mut len = self.line_len;
            if bytes.last() == Some(&b'\r') && len == bytes.len() {
                bytes.pop();
                len -= 1;
            }
            let text = String::from_utf8_lossy(&bytes);
            let chars = text.chars().count();
            let line = if chars > MAX_LINE_CHARS || len > bytes.len() {
                let kept: String = text.chars().take(MAX_LINE_CHARS).collect();
                format!("{kept} … [line cut at {MAX_LINE_CHARS} characters; it has {len} bytes]")
            } else {
                text.into_owned()
            };
            let numbered = format!("{:>6}\t{line}\n", self.seen + 1);
            let numbered_chars = numbered.chars().count();
            if self.body_chars + numbered_chars > MAX_CHARS && self.shown > 0 {
                self.full = true;
            } else {
                self.body.push_str(&numbered);
                self.body_chars += numbered_chars;
                self.shown += 1;
            }
        }
        self.line.clear();
        self.line_len = 0;
        self.open = false;
        self.seen += 1;
    }

    fn finish(mut self) -> Page {
        if self.open {
            self.end_line();
        }
        Page {
            body: self.body,
            shown: self.shown,
            total: self.seen,
        }
    }
}

#[cfg(test)]
#[path = "read_file_tests.rs"]
mod tests;
