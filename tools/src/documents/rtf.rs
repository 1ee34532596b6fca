//! RTF to Markdown, by a small control-word reader.
//!
//! No well-kept RTF crate fits, and text extraction needs only a little of
//! the format: groups, paragraph and line breaks, `\'hh` bytes in the
//! document's code page (`\ansicpg`), `\uN` characters with their `\ucN`
//! fallbacks, tables (`\cell`, `\row`), headings (`\outlinelevelN`) and list
//! markers (`\listtext`). Destinations that hold no body text (font and
//! color tables, style sheet, info, pictures, headers and footers, field
//! instructions and every `\*` destination) are skipped.

use encoding_rs::{Encoding, WINDOWS_1252};

use super::markdown::Markdown;
use super::Failure;

/// Destinations whose content is not body text.
const SKIPPED: &[&str] = &[
    "fonttbl",
    "colortbl",
    "stylesheet",
    "info",
    "pict",
    "object",
    "header",
    "headerl",
    "headerr",
    "headerf",
    "footer",
    "footerl",
    "footerr",
    "footerf",
    "fldinst",
    "footnote",
    "themedata",
    "colorschememapping",
    "datastore",
    "latentstyles",
    "listtable",
    "listoverridetable",
    "rsidtbl",
    "generator",
    "xmlnstbl",
    "mmathPr",
    "pgdsctbl",
    "filetbl",
    "revtbl",
    "nonshppict",
    "pn",
    "shpinst",
    "template",
];

/// Where a group's text goes.
#[derive(Clone, Copy, PartialEq)]
enum Dest {
    Body,
    ListMarker,
    Skip,
}

#[derive(Clone, Copy)]
struct Group {
    dest: Dest,
    /// How many fallback characters follow each `\uN`.
    uc: usize,
}

struct Reader<'m> {
    md: &'m mut Markdown,
    encoding: &'static Encoding,
    /// Raw code-page bytes waiting to be decoded together (multi-byte code
    /// pages split a character over several `\'hh`).
    bytes: Vec<u8>,
    paragraph: String,
    marker: String,
    outline: Option<usize>,
    list_level: usize,
    in_table: bool,
    cells: Vec<String>,
    rows: Vec<Vec<String>>,
    /// Fallback characters still to skip after a `\uN`.
    skip_chars: usize,
    high_surrogate: Option<u16>,
}

/// Converts an RTF file.
pub(crate) fn convert(bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let start = bytes
        .iter()
        .position(|b| !b.is_ascii_whitespace())
        .unwrap_or(0);
    if !bytes[start..].starts_with(b"{\\rtf") {
        return Err(Failure::corrupt("it does not start with {\\rtf"));
    }
    let mut reader = Reader {
        md,
        encoding: WINDOWS_1252,
        bytes: Vec::new(),
        paragraph: String::new(),
        marker: String::new(),
        outline: None,
        list_level: 0,
        in_table: false,
        cells: Vec::new(),
        rows: Vec::new(),
        skip_chars: 0,
        high_surrogate: None,
    };
    reader.run(&bytes[start..]);
    Ok(())
}

impl Reader<'_> {
    fn run(&mut self, input: &[u8]) {
        let mut stack: Vec<Group> = Vec::new();
        let mut group = Group {
            dest: Dest::Body,
            uc: 1,
        };
        let mut i = 0;
        while i < input.len() {
            if self.md.is_full() {
                return;
            }
            let byte = input[i];
            match byte {
                b'{' => {
                    self.flush_bytes(group.dest);
                    stack.push(group);
                    self.skip_chars = 0;
                    i += 1;
                }
                b'}' => {
                    self.flush_bytes(group.dest);
                    group = stack.pop().unwrap_or(group);
                    self.skip_chars = 0;
                    i += 1;
                }
                b'\\' => {
                    i = self.control(input, i + 1, &mut group);
                }
                b'\r' | b'\n' => i += 1,
                _ => {
                    if self.skip_chars > 0 {
                        self.skip_chars -= 1;
                    } else if group.dest != Dest::Skip {
                        if byte.is_ascii() {
                            self.flush_bytes(group.dest);
                            self.push_char(group.dest, byte as char);
                        } else {
                            self.bytes.push(byte);
                        }
                    }
                    i += 1;
                }
            }
        }
        self.flush_bytes(Dest::Body);
        self.end_paragraph();
        self.flush_table();
    }

    /// Reads the control word or symbol starting at `i` (after the
    /// backslash) and returns the index after it.
    fn control(&mut self, input: &[u8], mut i: usize, group: &mut Group) -> usize {
        let Some(&first) = input.get(i) else {
            return i;
        };
        if !first.is_ascii_alphabetic() {
            // A control symbol.
            i += 1;
            match first {
                b'\'' => {
                    let hex = input.get(i..i + 2).unwrap_or_default();
                    let value = std::str::from_utf8(hex)
                        .ok()
                        .and_then(|h| u8::from_str_radix(h, 16).ok());
                    if let Some(value) = value {
                        i += 2;
                        if self.skip_chars > 0 {
                            self.skip_chars -= 1;
                        } else if group.dest != Dest::Skip {
                            self.bytes.push(value);
                        }
                    }
                }
                b'*' => group.dest = Dest::Skip,
                b'~' => self.text(group.dest, "\u{a0}"),
                b'_' => self.text(group.dest, "-"),
                b'\\' | b'{' | b'}' => {
                    if self.skip_chars > 0 {
                        self.skip_chars -= 1;
                    } else {
                        self.text(group.dest, &(first as char).to_string());
                    }
                }
                b'\r' | b'\n' if group.dest == Dest::Body => self.end_paragraph(),
                _ => {}
            }
            return i;
        }
        let word_start = i;
        while input.get(i).is_some_and(u8::is_ascii_alphabetic) {
            i += 1;
        }
        let word = std::str::from_utf8(&input[word_start..i]).unwrap_or_default();
        let num_start = i;
        if input.get(i) == Some(&b'-') {
            i += 1;
        }
        while input.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        let param: Option<i64> = std::str::from_utf8(&input[num_start..i])
            .ok()
            .and_then(|n| n.parse().ok());
        if input.get(i) == Some(&b' ') {
            i += 1;
        }
        if word == "bin" {
            let skip = usize::try_from(param.unwrap_or(0)).unwrap_or(0);
            return i.saturating_add(skip).min(input.len());
        }
        if word != "u" {
            self.flush_bytes(group.dest);
        }
        if SKIPPED.contains(&word) {
            group.dest = Dest::Skip;
            return i;
        }
        if group.dest == Dest::Skip {
            return i;
        }
        match word {
            "listtext" | "pntext" => group.dest = Dest::ListMarker,
            "par" | "sect" | "page" if group.dest == Dest::Body => {
                if self.in_table {
                    self.paragraph.push(' ');
                } else {
                    self.end_paragraph();
                }
            }
            "line" => self.text(group.dest, "\n"),
            "tab" => self.text(group.dest, "\t"),
            "cell" => {
                let cell = std::mem::take(&mut self.paragraph);
                self.cells
                    .push(cell.split_whitespace().collect::<Vec<_>>().join(" "));
            }
            "row" => {
                let row = std::mem::take(&mut self.cells);
                self.rows.push(row);
            }
            "pard" => {
                self.outline = None;
                self.list_level = 0;
                self.in_table = false;
            }
            "intbl" => self.in_table = true,
            "outlinelevel" => self.outline = param.and_then(|p| usize::try_from(p).ok()),
            "ilvl" => self.list_level = param.and_then(|p| usize::try_from(p).ok()).unwrap_or(0),
            "ansicpg" => {
                let page = param.and_then(|p| u16::try_from(p).ok());
                if let Some(encoding) = page.and_then(codepage::to_encoding) {
                    self.encoding = encoding;
                }
            }
            "uc" => group.uc = param.and_then(|p| usize::try_from(p).ok()).unwrap_or(1),
            "u" => {
                self.flush_bytes(group.dest);
                if let Some(value) = param {
                    self.unicode(group.dest, value);
                }
                self.skip_chars = group.uc;
            }
            "emdash" => self.text(group.dest, "\u{2014}"),
            "endash" => self.text(group.dest, "\u{2013}"),
            "bullet" => self.text(group.dest, "\u{2022}"),
            "lquote" => self.text(group.dest, "\u{2018}"),
            "rquote" => self.text(group.dest, "\u{2019}"),
            "ldblquote" => self.text(group.dest, "\u{201c}"),
            "rdblquote" => self.text(group.dest, "\u{201d}"),
            "emspace" | "enspace" | "qmspace" => self.text(group.dest, " "),
            _ => {}
        }
        i
    }

    fn unicode(&mut self, dest: Dest, value: i64) {
        let unit = if value < 0 { value + 65536 } else { value };
        let Ok(unit) = u16::try_from(unit) else {
            return;
        };
        if (0xD800..0xDC00).contains(&unit) {
            self.high_surrogate = Some(unit);
            return;
        }
        let text = match self.high_surrogate.take() {
            Some(high) if (0xDC00..0xE000).contains(&unit) => {
                String::from_utf16_lossy(&[high, unit])
            }
            _ => String::from_utf16_lossy(&[unit]),
        };
        self.text(dest, &text);
    }

    fn push_char(&mut self, dest: Dest, ch: char) {
        match dest {
            Dest::Body => self.paragraph.push(ch),
            Dest::ListMarker => self.marker.push(ch),
            Dest::Skip => {}
        }
    }

    fn text(&mut self, dest: Dest, text: &str) {
        self.flush_bytes(dest);
        for ch in text.chars() {
            self.push_char(dest, ch);
        }
    }

    /// Decodes the pending code-page bytes into `dest`.
    fn flush_bytes(&mut self, dest: Dest) {
        if self.bytes.is_empty() {
            return;
        }
        let bytes = std::mem::take(&mut self.bytes);
        let (decoded, _, _) = self.encoding.decode(&bytes);
        for ch in decoded.chars() {
            self.push_char(dest, ch);
        }
    }

    fn end_paragraph(&mut self) {
        let text = std::mem::take(&mut self.paragraph);
        let marker = std::mem::take(&mut self.marker);
        if text.trim().is_empty() {
            return;
        }
        self.flush_table();
        if let Some(level) = self.outline {
            self.md.heading(level + 1, &text);
        } else if !marker.trim().is_empty() {
            let ordered = marker.chars().any(|c| c.is_ascii_digit());
            self.md.list_item(self.list_level, ordered, &text);
        } else {
            self.md.paragraph(&text);
        }
    }

    fn flush_table(&mut self) {
        if !self.cells.is_empty() {
            let row = std::mem::take(&mut self.cells);
            self.rows.push(row);
        }
        if !self.rows.is_empty() {
            let rows = std::mem::take(&mut self.rows);
            self.md.table(&rows);
        }
    }
}
