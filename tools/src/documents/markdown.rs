//! The Markdown every converter writes into.
//!
//! One writer keeps the output uniform across formats (a blank line between
//! blocks, list items packed together, tables with a header row) and holds
//! the size cap, so a converter only says what each block is and can stop
//! early once the writer is full.

/// A Markdown document being built, capped at a byte limit.
pub(crate) struct Markdown {
    out: String,
    limit: usize,
    full: bool,
    last_was_list: bool,
}

impl Markdown {
    /// An empty document that keeps at most `limit` bytes.
    pub(crate) fn new(limit: usize) -> Self {
        Self {
            out: String::new(),
            limit,
            full: false,
            last_was_list: false,
        }
    }

    /// Whether the cap was reached: converters may stop walking.
    pub(crate) fn is_full(&self) -> bool {
        self.full
    }

    /// A heading of `level` (1 to 6); an empty one is dropped.
    pub(crate) fn heading(&mut self, level: usize, text: &str) {
        let text = one_line(text);
        if text.is_empty() {
            return;
        }
        let hashes = "#".repeat(level.clamp(1, 6));
        self.block(&format!("{hashes} {text}"), false);
    }

    /// A paragraph; lines inside it are kept, blank ones dropped.
    pub(crate) fn paragraph(&mut self, text: &str) {
        let text = tidy_lines(text);
        if !text.is_empty() {
            self.block(&text, false);
        }
    }

    /// A list item at nesting `depth` (0 for the outer list).
    pub(crate) fn list_item(&mut self, depth: usize, ordered: bool, text: &str) {
        let text = tidy_lines(text);
        if text.is_empty() {
            return;
        }
        let indent = "   ".repeat(depth.min(8));
        let marker = if ordered { "1." } else { "-" };
        let pad = " ".repeat(marker.len() + 1);
        let mut item = String::new();
        for (i, line) in text.lines().enumerate() {
            if i == 0 {
                item.push_str(&format!("{indent}{marker} {line}"));
            } else {
                item.push_str(&format!("\n{indent}{pad}{line}"));
            }
        }
        self.block(&item, true);
    }

    /// How many more bytes the document can hold.
    pub(crate) fn room(&self) -> usize {
        self.limit.saturating_sub(self.out.len())
    }

    /// A table whose first row is the header. Short rows are padded; a table
    /// with no text at all is dropped.
    pub(crate) fn table(&mut self, rows: &[Vec<String>]) {
        let width = rows.iter().map(Vec::len).max().unwrap_or(0);
        self.table_of_width(rows, width);
    }

    /// A table `width` columns wide (cells past it are dropped), whose rows
    /// may be shorter: a sparse sheet need not hold its empty cells. Rows
    /// past what the document can hold are not written out.
    pub(crate) fn table_of_width(&mut self, rows: &[Vec<String>], width: usize) {
        if width == 0
            || rows
                .iter()
                .all(|row| row.iter().all(|cell| cell.trim().is_empty()))
        {
            return;
        }
        let mut text = String::new();
        let room = self.room();
        for (i, row) in rows.iter().enumerate() {
            if text.len() > room {
                break; // cut by `block`, which says so
            }
            if i > 0 {
                text.push('\n');
            }
            text.push('|');
            for col in 0..width {
                let cell = row.get(col).map(|c| table_cell(c)).unwrap_or_default();
                if cell.is_empty() {
                    text.push_str("  |");
                } else {
                    text.push_str(&format!(" {cell} |"));
                }
            }
            if i == 0 {
                text.push_str("\n|");
                text.push_str(&" --- |".repeat(width));
            }
        }
        self.block(&text, false);
    }

    /// A fenced code block, its text kept as is.
    pub(crate) fn code_block(&mut self, text: &str) {
        let text = text.trim_matches('\n');
        if text.trim().is_empty() {
            return;
        }
        let fence = if text.contains("```") { "````" } else { "```" };
        self.block(&format!("{fence}\n{text}\n{fence}"), false);
    }

    /// A block already in Markdown (a quote built by another writer).
    pub(crate) fn raw_block(&mut self, text: &str) {
        let text = text.trim_matches('\n');
        if !text.trim().is_empty() {
            self.block(text, false);
        }
    }

    /// The Markdown, ending with one newline (empty if nothing was written).
    pub(crate) fn finish(mut self) -> String {
        if !self.out.is_empty() && !self.out.ends_with('\n') {
            self.out.push('\n');
        }
        self.out
    }

    fn block(&mut self, text: &str, is_list: bool) {
        if self.full {
            return;
        }
        let sep = match (self.out.is_empty(), self.last_was_list && is_list) {
            (true, _) => "",
            (false, true) => "\n",
            (false, false) => "\n\n",
        };
        self.last_was_list = is_list;
        if self.out.len() + sep.len() + text.len() <= self.limit {
            self.out.push_str(sep);
            self.out.push_str(text);
            return;
        }
        let room = self.limit.saturating_sub(self.out.len() + sep.len());
        let mut cut = room.min(text.len());
        while !text.is_char_boundary(cut) {
            cut -= 1;
        }
        self.out.push_str(sep);
        self.out.push_str(&text[..cut]);
        self.out.push_str(&format!(
            "\n\n[truncated: the document's text goes past {} bytes; the rest was not converted]",
            self.limit
        ));
        self.full = true;
    }
}

/// Collapses runs of whitespace (including newlines) to one space and trims.
pub(crate) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Trims each line's ends and drops blank lines.
fn tidy_lines(text: &str) -> String {
    text.lines()
        .map(|line| line.trim())
        .filter(|line| !line.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A cell's text on one line with its pipes escaped.
fn table_cell(text: &str) -> String {
    one_line(text).replace('|', "\\|")
}
