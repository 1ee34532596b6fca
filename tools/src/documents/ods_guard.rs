//! What an OpenDocument spreadsheet would cost calamine, counted before it
//! reads one cell.
//!
//! calamine reads an `.ods` whole when it opens it: each row's cells are
//! stored with their `number-columns-repeated` copies (a cell's text cloned
//! per copy), then every sheet is laid out as a dense range from its first
//! used cell to its last, every row repeated `number-rows-repeated` times,
//! up to 100 million cells. A few hundred bytes of XML can name a long
//! string repeated across 16,384 columns and a million rows: the
//! allocations that follow fail, and a failed allocation aborts the process
//! past any panic guard. So `content.xml` is first walked here, event by
//! event, counting what calamine would build (with its own caps on rows and
//! columns), and a workbook over the bounds that the XLS and XLSX paths
//! keep — [`MAX_CELLS`] laid-out cells, [`MAX_TEXT_BYTES`] of cell text — is
//! refused as too large, saying so.

use quick_xml::events::{BytesStart, Event};
use quick_xml::Reader;

use super::package::Package;
use super::xls_guard::MAX_CELLS;
use super::Failure;

/// The most cell text (copies included) calamine may be asked to build.
pub(super) const MAX_TEXT_BYTES: u64 = 64 * 1024 * 1024;

/// calamine's caps on a sheet's rows and a row's columns.
const MAX_ROWS: u64 = 1_048_576;
const MAX_COLUMNS: u64 = 16_384;

/// Refuses an `.ods` whose sheets calamine would lay out past the bounds.
/// What is not a readable package is left to calamine, which says why.
pub(super) fn check(bytes: &[u8]) -> Result<(), Failure> {
    let Ok(mut package) = Package::open(bytes) else {
        return Ok(());
    };
    let Some(content) = package.bytes("content.xml")? else {
        return Ok(());
    };
    let cost = measure(&content).map_err(Failure::Corrupt)?;
    if cost.cells > MAX_CELLS {
        return Err(Failure::Oversized(format!(
            "its sheets lay out {} cells (repeated rows and columns included), more than the {MAX_CELLS} troupe reads",
            cost.cells
        )));
    }
    if cost.text > MAX_TEXT_BYTES {
        return Err(Failure::Oversized(format!(
            "its cells repeat {} bytes of text, more than the {MAX_TEXT_BYTES} troupe reads",
            cost.text
        )));
    }
    Ok(())
}

/// What calamine would build for a workbook.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct Cost {
    /// Cells: as stored while reading, or as laid out, whichever is more.
    pub(super) cells: u64,
    /// Bytes of cell text, each copy counted.
    pub(super) text: u64,
}

/// One row as calamine stores it.
#[derive(Default)]
struct Row {
    repeats: u64,
    stored: u64,
    /// Empty cells not stored unless a used cell follows them.
    pending_empty: u64,
    first_used: Option<u64>,
    last_used: u64,
    text: u64,
}

/// One sheet: its rows, as (repeats, first and last used column if any).
#[derive(Default)]
struct Sheet {
    rows: Vec<(u64, Option<(u64, u64)>)>,
    total_rows: u64,
}

impl Sheet {
    /// Cells of the dense range from the first used cell to the last.
    fn laid_out(&self) -> u64 {
        let used: Vec<usize> = (0..self.rows.len())
            .filter(|&i| self.rows[i].1.is_some())
            .collect();
        let (Some(&first), Some(&last)) = (used.first(), used.last()) else {
            return 0;
        };
        let (min, max) = used.iter().fold((u64::MAX, 0), |(lo, hi), &i| {
            let (a, b) = self.rows[i].1.unwrap_or_default();
            (lo.min(a), hi.max(b))
        });
        let rows: u64 = self.rows[first..=last].iter().map(|r| r.0).sum();
        rows.saturating_mul(max + 1 - min)
    }
}

/// A cell being read: its copies, and whether it holds anything.
struct Cell {
    repeats: u64,
    used: bool,
    text: u64,
}

/// Walks `content.xml` and counts what calamine would build.
///
/// XML that breaks, or ends inside a sheet, is refused: calamine reads a
/// sheet until its end tag, and at the end of the file it would wait for
/// that tag forever.
pub(super) fn measure(content: &[u8]) -> Result<Cost, String> {
    let mut reader = Reader::from_reader(content);
    let mut buf = Vec::new();
    let mut walk = Walk::default();
    let mut open_tables = 0u64;
    loop {
        match reader.read_event_into(&mut buf) {
            Ok(Event::Eof) => break,
            Err(e) => {
                return Err(format!(
                    "content.xml is not well-formed at byte {} ({e})",
                    reader.buffer_position()
                ))
            }
            Ok(Event::Start(e)) => {
                if e.local_name().into_inner() == "table" {
                    open_tables += 1;
                }
                walk.open(&e);
            }
            Ok(Event::Empty(e)) => {
                walk.open(&e);
                walk.close(e.local_name().into_inner());
            }
            Ok(Event::End(e)) => {
                if e.local_name().into_inner() == "table" {
                    open_tables = open_tables.saturating_sub(1);
                }
                walk.close(e.local_name().into_inner());
            }
            Ok(Event::Text(t)) => walk.text(t.len(), !t.trim().is_empty()),
            Ok(Event::CData(t)) => walk.text(t.len(), true),
            Ok(_) => {}
        }
        buf.clear();
    }
    if open_tables > 0 || walk.row.is_some() {
        return Err("content.xml ends inside a sheet".into());
    }
    walk.finish_sheet();
    let mut cost = walk.cost;
    cost.cells = cost.cells.max(walk.stored);
    Ok(cost)
}

/// Where the walk is: the sheet, row and cell open, and the counts so far.
#[derive(Default)]
struct Walk {
    cost: Cost,
    stored: u64,
    sheet: Option<Sheet>,
    row: Option<Row>,
    cell: Option<Cell>,
}

impl Walk {
    fn open(&mut self, e: &BytesStart<'_>) {
        match e.local_name().into_inner() {
            "table" if self.row.is_none() => {
                self.finish_sheet();
                self.sheet = Some(Sheet::default());
            }
            "table-row" => {
                if let Some(s) = self.sheet.as_mut() {
                    let asked = number(e, "number-rows-repeated");
                    let repeats = asked.min(MAX_ROWS.saturating_sub(s.total_rows));
                    s.total_rows += repeats;
                    self.row = Some(Row {
                        repeats,
                        ..Row::default()
                    });
                }
            }
            "table-cell" | "covered-table-cell" if self.row.is_some() => {
                let attrs: Vec<_> = e.attributes().flatten().collect();
                self.cell = Some(Cell {
                    repeats: number(e, "number-columns-repeated"),
                    used: attrs.iter().any(|a| {
                        matches!(a.key.local_name().into_inner(), "value-type" | "formula")
                    }),
                    text: attrs
                        .iter()
                        .filter(|a| a.key.local_name().into_inner().ends_with("value"))
                        .map(|a| a.value.len() as u64)
                        .sum(),
                });
            }
            _ => {}
        }
    }

    fn close(&mut self, name: &str) {
        match name {
            "table-cell" | "covered-table-cell" => {
                if let (Some(c), Some(r)) = (self.cell.take(), self.row.as_mut()) {
                    close_cell(c, r);
                }
            }
            "table-row" => {
                if let (Some(r), Some(s)) = (self.row.take(), self.sheet.as_mut()) {
                    self.stored = self.stored.saturating_add(r.stored);
                    self.cost.text = self
                        .cost
                        .text
                        .saturating_add(r.text.saturating_mul(r.repeats));
                    s.rows
                        .push((r.repeats, r.first_used.map(|f| (f, r.last_used))));
                }
            }
            "table" if self.row.is_none() => self.finish_sheet(),
            _ => {}
        }
    }

    fn text(&mut self, len: usize, used: bool) {
        if let Some(c) = self.cell.as_mut() {
            c.text += len as u64;
            c.used |= used;
        }
    }

    fn finish_sheet(&mut self) {
        if let Some(s) = self.sheet.take() {
            self.cost.cells = self.cost.cells.saturating_add(s.laid_out());
        }
    }
}

/// A repeat count (1 when absent; unreadable ones are calamine's to refuse).
fn number(e: &BytesStart<'_>, name: &str) -> u64 {
    e.attributes()
        .flatten()
        .find(|a| a.key.local_name().into_inner() == name)
        .and_then(|a| a.value.trim().parse().ok())
        .unwrap_or(1)
}

/// Adds a finished cell to its row as calamine stores it.
fn close_cell(c: Cell, r: &mut Row) {
    let room = |r: &Row| MAX_COLUMNS.saturating_sub(r.stored);
    if c.used {
        let empties = r.pending_empty.min(room(r));
        r.stored += empties;
        r.pending_empty = 0;
        let repeats = c.repeats.min(room(r));
        if repeats > 0 {
            r.first_used.get_or_insert(r.stored);
            r.stored += repeats;
            r.last_used = r.stored - 1;
            r.text = r.text.saturating_add(c.text.saturating_mul(repeats));
        }
    } else {
        r.pending_empty = r.pending_empty.saturating_add(c.repeats);
    }
}

#[cfg(test)]
#[path = "ods_guard_tests.rs"]
mod tests;
