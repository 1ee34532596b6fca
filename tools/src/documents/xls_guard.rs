//! An `.xls` workbook laid out again before calamine reads it, so a forged
//! one cannot make calamine ask for more memory than there is.
//!
//! calamine's `.xls` reader parses every sheet when it opens the file,
//! before troupe sees a cell, and makes each one a dense range: rows ×
//! columns from the first used cell to the last. It also reserves room for
//! as many cells as a sheet's DIMENSIONS record names. Two cells at forged
//! far-apart references (`A1`, and row 65536 of column 65536) ask for 4
//! billion cells, 128 GiB; a forged DIMENSIONS (4 billion rows) for 10 PB.
//! The failed allocation aborts the whole process, past `read_file`'s panic
//! guard: one spreadsheet would stop every agent. Unlike its XLSX and XLSB
//! readers, calamine's `.xls` reader has no way to read cells one by one.
//!
//! So calamine never sees the file as it was written. Its workbook stream
//! is read here (through [`compound_file`], bounded), its BIFF records are
//! walked as calamine walks them, and a new workbook is written for
//! calamine:
//!
//! - the globals (formats, shared strings, sheet entries…) record for
//!   record, each sheet entry (BoundSheet8) pointing at its sheet's new
//!   place;
//! - each sheet with only the records calamine makes cells from (NUMBER,
//!   RK, MULRK split into RKs, LABEL, RSTRING, LABELSST, BOOLERR, FORMULA
//!   with its value but not its tokens, and a formula's STRING as a LABEL),
//!   their rows and columns moved in as `spreadsheet` lays a sheet out:
//!   runs of more than three empty rows or columns shortened to three. The
//!   table troupe shows is the same; calamine's ranges are only as large
//!   as that layout. DIMENSIONS, BLANK and merged ranges are left out:
//!   calamine makes no cell from them.
//!
//! All the sheets together are laid out in at most [`MAX_CELLS`] cells;
//! rows past that are left out, and [`Rebuilt::note`] says so under the
//! sheet. calamine also copies a shared string into each LABELSST cell
//! naming it: those cells are charged their string's size
//! ([`xls_strings`]), all of them together at most [`MAX_TEXT`] bytes, and
//! the cells past that are left out, the note saying so too. A record calamine would refuse that cannot be carried over (a
//! cell record too short to name its cell, a MULRK whose length and columns
//! disagree) makes the file refused here, with what was wrong; so do sheets
//! that overlap in the stream, which calamine would read once per sheet
//! entry, keeping every copy.

use std::collections::hash_map::Entry;
use std::collections::HashMap;

use super::compound_file;
#[path = "xls_strings.rs"]
mod xls_strings;
use super::spreadsheet::{place_of, places};
use super::{Failure, MAX_MARKDOWN_BYTES};

/// The most cells all the sheets of one `.xls` workbook are laid out in.
/// Every cell of a table takes at least three bytes of Markdown (`  |`), so
/// a workbook laid out larger could not be shown whole anyway. calamine
/// holds a sheet's values as a dense range of 32-byte cells (its formulas as
/// another), so this also bounds what it allocates: under 200 MB of values.
pub(super) const MAX_CELLS: u64 = (MAX_MARKDOWN_BYTES / 3) as u64;

/// The most bytes of shared-string text calamine is let copy into the
/// cells of one workbook: twice what the output can show, as the XLSX
/// reader reads cells until their text passes that.
pub(super) const MAX_TEXT: u64 = 2 * MAX_MARKDOWN_BYTES as u64;

const BOF: u16 = 0x0809;
const EOF: u16 = 0x000A;
const CONTINUE: u16 = 0x003C;
const FILEPASS: u16 = 0x002F;
const BOUNDSHEET: u16 = 0x0085;
const NUMBER: u16 = 0x0203;
const LABEL: u16 = 0x0204;
const RSTRING: u16 = 0x00D6;
const BOOLERR: u16 = 0x0205;
const STRING: u16 = 0x0207;
const RK: u16 = 0x027E;
const LABELSST: u16 = 0x00FD;
const MULRK: u16 = 0x00BD;
const FORMULA: u16 = 0x0006;
const SST: u16 = 0x00FC;

/// The BOF each laid-out sheet starts with: BIFF8, a worksheet. calamine
/// reads a sheet's BOF only to tell it from an embedded chart's.
const SHEET_BOF: [u8; 16] = [0x00, 0x06, 0x10, 0x00, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// The tokens a laid-out FORMULA keeps: one PtgMissArg, which calamine
/// reads as an empty formula. troupe shows a formula's value, never its
/// text.
const FORMULA_TOKENS: [u8; 3] = [1, 0, 0x16];

/// An `.xls` workbook laid out again, and what was left out of it.
#[derive(Debug)]
pub(super) struct Rebuilt {
    /// A compound file holding the new `Workbook` stream, for calamine.
    pub(super) file: Vec<u8>,
    /// For each sheet entry, in the file's order (calamine's
    /// `sheet_names`), the first row left out, if any was.
    cuts: Vec<Option<u16>>,
    /// For each sheet entry, how many cells naming a shared string were
    /// left out for want of text room.
    texts_cut: Vec<u64>,
    max_cells: u64,
}

impl Rebuilt {
    /// What to write under sheet `index` (its place among the sheet
    /// names) if rows of it, or the text of cells, were left out.
    pub(super) fn note(&self, index: usize) -> Option<String> {
        let rows = self.cuts.get(index).copied().flatten().map(|row| {
            format!(
                "(Rows from {} on are left out: troupe lays an .xls workbook out in at most {} \
                 cells, and this one's sheets need more.)",
                u32::from(row) + 1,
                self.max_cells
            )
        });
        let texts = self
            .texts_cut
            .get(index)
            .copied()
            .filter(|&n| n > 0)
            .map(|n| {
                format!(
                    "({n} cells naming the workbook's shared strings are left out: troupe reads \
                     at most {} MiB of an .xls workbook's shared-string text, and this one's \
                     cells name more.)",
                    MAX_TEXT >> 20
                )
            });
        match (rows, texts) {
            (Some(r), Some(t)) => Some(format!("{r} {t}")),
            (r, t) => r.or(t),
        }
    }
}

/// The shared strings' lengths and the text room left for the cells that
/// name them.
struct TextRoom {
    strings: Vec<u16>,
    room: u64,
}

impl TextRoom {
    /// What calamine copies for a LABELSST cell whose data after its row and
    /// column is `rest`: nothing when it names no string.
    fn cost(&self, rest: &[u8]) -> u64 {
        let index = u32_at(rest, 2) as usize;
        self.strings
            .get(index)
            .map_or(0, |&cch| u64::from(cch) * xls_strings::BYTES_PER_CHAR)
    }
}

/// Reads the workbook stream of an `.xls` and lays it out again, in at
/// most [`MAX_CELLS`] cells.
pub(super) fn rebuild(file: &[u8]) -> Result<Rebuilt, Failure> {
    rebuild_within(file, MAX_CELLS, MAX_TEXT)
}

/// [`rebuild`] within `max_cells` cells and `max_text` bytes of shared
/// strings copied into cells.
pub(super) fn rebuild_within(
    file: &[u8],
    max_cells: u64,
    max_text: u64,
) -> Result<Rebuilt, Failure> {
    let stream = compound_file::read_stream(file, &["Workbook", "Book"])?;
    let Globals(mut out, entries, strings) = globals(&stream)?;
    let mut text = TextRoom {
        strings,
        room: max_text,
    };
    let mut shapes: HashMap<usize, Shape> = HashMap::new();
    // Each sheet written: where, and the text its cells copy. calamine
    // reads a sheet once per entry naming it, copying its text again.
    let mut written: HashMap<(usize, usize), (u32, u64)> = HashMap::new();
    let mut walked = 0;
    let mut room = max_cells;
    let mut cuts = Vec::with_capacity(entries.len());
    let mut texts_cut = Vec::with_capacity(entries.len());
    for (index, entry) in entries.iter().enumerate() {
        let pos = entry.pos as usize;
        if pos > stream.len() {
            return Err(Failure::Corrupt(format!(
                "sheet {} is said to start at byte {pos} of the workbook stream, past its end \
                 ({} bytes)",
                index + 1,
                stream.len()
            )));
        }
        let shape = match shapes.entry(pos) {
            Entry::Occupied(known) => known.into_mut(),
            Entry::Vacant(slot) => slot.insert(Shape::of(&stream, pos)?),
        };
        // A sheet is walked once for each entry that names it, by calamine
        // too: all together, no more than the stream.
        walked += shape.bytes;
        if walked > stream.len() {
            return Err(Failure::Corrupt(
                "its sheets overlap in the workbook stream (a sheet starts inside another, or \
                 two sheet entries name one sheet), so the file may be forged or damaged"
                    .into(),
            ));
        }
        let (kept, cost) = shape.fit(room);
        room -= cost;
        cuts.push(shape.rows.get(kept).map(|&(row, _)| row as u16));
        let at = match written.get(&(pos, kept)) {
            Some(&(at, copied)) if copied <= text.room => {
                text.room -= copied;
                texts_cut.push(0);
                at
            }
            _ => {
                let at = u32::try_from(out.len()).map_err(|_| {
                    Failure::Corrupt("its workbook stream, laid out again, is over 4 GB".into())
                })?;
                let before = text.room;
                let left_out = write_sheet(&stream, pos, shape, kept, &mut text, &mut out)?;
                texts_cut.push(left_out);
                // A sheet whose text was cut is not reused: the next entry
                // naming it may have room for other cells.
                if left_out == 0 {
                    written.insert((pos, kept), (at, before - text.room));
                }
                at
            }
        };
        out[entry.patch..entry.patch + 4].copy_from_slice(&at.to_le_bytes());
    }
    let file = compound_file::write_stream("Workbook", &out)?;
    Ok(Rebuilt {
        file,
        cuts,
        texts_cut,
        max_cells,
    })
}

/// A sheet entry (BoundSheet8) of the globals: where its sheet starts in
/// the stream read, and where that offset is written in the new one.
struct SheetEntry {
    pos: u32,
    patch: usize,
}

/// The globals, record for record up to their EOF (one is added if they
/// have none), their sheet entries, and the lengths of their shared
/// strings (of the last SST record, as calamine keeps the last).
fn globals(stream: &[u8]) -> Result<Globals, Failure> {
    let mut out = Vec::new();
    let mut entries = Vec::new();
    let mut strings = Vec::new();
    for record in Records::new(stream, 0) {
        let record = record?;
        match record.typ {
            // Not after a record (calamine joins those to it): no record
            // claims it.
            CONTINUE => continue,
            FILEPASS => match record.data.get(..2) {
                None => return Err(short(&record, 2)),
                Some([0, 0]) => {}
                Some(_) => return Err(Failure::Encrypted),
            },
            BOUNDSHEET if record.data.len() < 6 => return Err(short(&record, 6)),
            BOUNDSHEET => entries.push(SheetEntry {
                pos: u32_at(record.data, 0),
                patch: out.len() + 4,
            }),
            SST => strings = xls_strings::lengths(record.data, record.cont),
            _ => {}
        }
        push_record(&mut out, record.typ, &[record.data]);
        out.extend_from_slice(record.cont);
        if record.typ == EOF {
            return Ok(Globals(out, entries, strings));
        }
    }
    push_record(&mut out, EOF, &[]);
    Ok(Globals(out, entries, strings))
}

/// The globals written again, their sheet entries, and their shared
/// strings' lengths.
struct Globals(Vec<u8>, Vec<SheetEntry>, Vec<u16>);

/// Where a sheet's cells go: its used rows and columns, in order, each with
/// its place in the laid-out grid, how many cell records each used row
/// holds, and the bytes of stream the sheet takes.
struct Shape {
    rows: Vec<(u64, u64)>,
    cols: Vec<(u64, u64)>,
    records: Vec<u64>,
    bytes: usize,
}

impl Shape {
    /// Walks the sheet at `pos`.
    /// Its cost is the sheet's cells, not a table of every possible row: a
    /// workbook may hold millions of sheet entries.
    fn of(stream: &[u8], pos: usize) -> Result<Self, Failure> {
        let mut rows = Vec::new();
        let mut cols = Vec::new();
        let bytes = walk_sheet(stream, pos, |cell| {
            rows.push(cell.row);
            cols.push(u64::from(cell.col));
        })?;
        rows.sort_unstable();
        let mut used_rows: Vec<u64> = Vec::new();
        let mut records: Vec<u64> = Vec::new();
        for row in rows {
            let row = u64::from(row);
            match (used_rows.last(), records.last_mut()) {
                (Some(&last), Some(count)) if last == row => *count += 1,
                _ => {
                    used_rows.push(row);
                    records.push(1);
                }
            }
        }
        Ok(Shape {
            rows: places(used_rows),
            cols: places(cols),
            records,
            bytes,
        })
    }

    /// How many of the used rows fit in `room` cells, and the cells they
    /// take: the grid they span, or their cell records if there are more
    /// (a forged sheet may write one cell many times).
    fn fit(&self, room: u64) -> (usize, u64) {
        let width = self.cols.last().map_or(0, |&(_, place)| place + 1);
        let mut kept = 0;
        let mut cost = 0;
        let mut records = 0;
        for (index, &(_, place)) in self.rows.iter().enumerate() {
            records += self.records[index];
            let grid = (place + 1) * width;
            if grid.max(records) > room {
                break;
            }
            kept = index + 1;
            cost = grid.max(records);
        }
        (kept, cost)
    }
}

/// Writes the sheet at `pos` (its first `kept` used rows) as a BOF, its
/// cell records moved to their places, and an EOF; a LABELSST cell whose
/// string no longer fits in `text` is left out. Returns how many were.
fn write_sheet(
    stream: &[u8],
    pos: usize,
    shape: &Shape,
    kept: usize,
    text: &mut TextRoom,
    out: &mut Vec<u8>,
) -> Result<u64, Failure> {
    push_record(out, BOF, &[&SHEET_BOF]);
    let mut left_out = 0;
    let last_row = kept.checked_sub(1).and_then(|last| shape.rows.get(last));
    if let Some(&(last_row, _)) = last_row {
        walk_sheet(stream, pos, |cell| {
            if u64::from(cell.row) > last_row {
                return;
            }
            if let Body::Record {
                typ: LABELSST,
                rest,
            } = cell.body
            {
                let cost = text.cost(rest);
                if cost > text.room {
                    left_out += 1;
                    return;
                }
                text.room -= cost;
            }
            // A place is never past its row or column (runs only shrink),
            // so it is a 16-bit number as they are.
            let row = place_of(&shape.rows, cell.row.into()) as u16;
            let col = place_of(&shape.cols, cell.col.into()) as u16;
            let (row, col) = (row.to_le_bytes(), col.to_le_bytes());
            match cell.body {
                Body::Record { typ, rest } => push_record(out, typ, &[&row, &col, rest]),
                Body::Formula { fields } => {
                    push_record(out, FORMULA, &[&row, &col, fields, &FORMULA_TOKENS])
                }
                Body::Text { string } => push_record(out, LABEL, &[&row, &col, &[0, 0], string]),
            }
        })?;
    }
    push_record(out, EOF, &[]);
    Ok(left_out)
}

/// A cell as calamine makes it from a sheet's records.
struct Cell<'a> {
    row: u16,
    col: u16,
    body: Body<'a>,
}

/// What follows a cell's row and column in the record written for it.
enum Body<'a> {
    /// The rest of a record of `typ` (for a MULRK's cells, an RK's).
    Record { typ: u16, rest: &'a [u8] },
    /// A FORMULA's format, cached value and flags; its tokens are dropped.
    Formula { fields: &'a [u8] },
    /// A formula's text value (a STRING record), written as a LABEL.
    Text { string: &'a [u8] },
}

/// Walks the sheet at `pos` as calamine does (from its BOF to its EOF,
/// embedded substreams such as charts skipped), handing each cell to
/// `each` in the file's order; returns the bytes walked.
fn walk_sheet<'a>(
    stream: &'a [u8],
    pos: usize,
    mut each: impl FnMut(Cell<'a>),
) -> Result<usize, Failure> {
    let mut walked = 0;
    let mut seen_bof = false;
    let mut depth = 0_usize;
    // calamine puts a STRING's text in the last FORMULA's cell.
    let mut formula = (0, 0);
    for record in Records::new(stream, pos) {
        let record = record?;
        walked += record.len();
        if depth > 0 {
            match record.typ {
                BOF => depth += 1,
                EOF => depth -= 1,
                _ => {}
            }
            continue;
        }
        match record.typ {
            BOF if seen_bof => depth += 1,
            BOF => seen_bof = true,
            EOF => break,
            NUMBER | LABEL | RSTRING | BOOLERR | RK | LABELSST => {
                let (row, col) = position(&record)?;
                let rest = &record.data[4..];
                let typ = record.typ;
                each(Cell {
                    row,
                    col,
                    body: Body::Record { typ, rest },
                });
            }
            MULRK => mul_rk(&record, &mut each)?,
            FORMULA => {
                let Some(fields) = record.data.get(4..20) else {
                    return Err(short(&record, 20));
                };
                let (row, col) = position(&record)?;
                formula = (row, col);
                each(Cell {
                    row,
                    col,
                    body: Body::Formula { fields },
                });
            }
            STRING => each(Cell {
                row: formula.0,
                col: formula.1,
                body: Body::Text {
                    string: record.data,
                },
            }),
            _ => {}
        }
    }
    Ok(walked)
}

/// The cells of a MULRK (one row, a run of columns, an RK value each),
/// refused as calamine refuses it when its length and columns disagree.
fn mul_rk<'a>(record: &Record<'a>, each: &mut impl FnMut(Cell<'a>)) -> Result<(), Failure> {
    let data = record.data;
    if data.len() < 6 {
        return Err(short(record, 6));
    }
    let row = u16_at(data, 0);
    let first = u16_at(data, 2);
    let last = u16_at(data, data.len() - 2);
    let columns = usize::from(last)
        .checked_sub(usize::from(first))
        .map(|n| n + 1);
    if columns.is_none_or(|n| data.len() != 6 + 6 * n) {
        return Err(Failure::Corrupt(format!(
            "a MULRK record at byte {} of the workbook stream names columns {first} to {last} in \
             {} bytes, which do not hold them",
            record.at,
            data.len()
        )));
    }
    for (col, rest) in (first..=last).zip(data[4..data.len() - 2].chunks_exact(6)) {
        each(Cell {
            row,
            col,
            body: Body::Record { typ: RK, rest },
        });
    }
    Ok(())
}

/// A cell record's row and column, its first four bytes.
fn position(record: &Record<'_>) -> Result<(u16, u16), Failure> {
    if record.data.len() < 4 {
        return Err(short(record, 4));
    }
    Ok((u16_at(record.data, 0), u16_at(record.data, 2)))
}

fn short(record: &Record<'_>, needed: usize) -> Failure {
    Failure::Corrupt(format!(
        "a record of type {:#06X} at byte {} of the workbook stream holds {} bytes, fewer than \
         the {needed} its fields take",
        record.typ,
        record.at,
        record.data.len()
    ))
}

/// Appends a record of `typ` whose data is `parts` joined, cut at the
/// 65535 bytes a record's length can say.
fn push_record(out: &mut Vec<u8>, typ: u16, parts: &[&[u8]]) {
    let mut room = usize::from(u16::MAX);
    let len = parts.iter().map(|p| p.len()).sum::<usize>().min(room);
    out.extend_from_slice(&typ.to_le_bytes());
    out.extend_from_slice(&(len as u16).to_le_bytes());
    for part in parts {
        let take = part.len().min(room);
        out.extend_from_slice(&part[..take]);
        room -= take;
    }
}

/// A BIFF record as calamine reads one: a type, a length, the data, and
/// the CONTINUE records right after it.
struct Record<'a> {
    /// Where its header starts in the stream.
    at: usize,
    typ: u16,
    data: &'a [u8],
    /// The CONTINUE records that follow it, headers included.
    cont: &'a [u8],
}

impl Record<'_> {
    /// Its bytes in the stream, CONTINUE records included.
    fn len(&self) -> usize {
        4 + self.data.len() + self.cont.len()
    }
}

/// The records of a stream from an offset, as calamine's `RecordIter`
/// splits them; a record cut short by the stream's end is an error, and
/// the last item.
struct Records<'a> {
    stream: &'a [u8],
    at: usize,
}

impl<'a> Records<'a> {
    fn new(stream: &'a [u8], at: usize) -> Self {
        Records { stream, at }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Record<'a>, Failure>;

    fn next(&mut self) -> Option<Self::Item> {
        let at = self.at;
        let rest = self.stream.get(at..).filter(|rest| !rest.is_empty())?;
        let cut = || {
            Failure::Corrupt(format!(
                "its workbook stream ends inside the record at byte {at}"
            ))
        };
        self.at = self.stream.len(); // until this record is whole
        if rest.len() < 4 {
            return Some(Err(cut()));
        }
        let typ = u16_at(rest, 0);
        let end = 4 + usize::from(u16_at(rest, 2));
        let Some(data) = rest.get(4..end) else {
            return Some(Err(cut()));
        };
        // calamine joins the CONTINUE records that follow, if more than a
        // header is left after the first one's start.
        let mut next = end;
        while rest.len() - next > 4 && u16_at(rest, next) == CONTINUE {
            next += 4 + usize::from(u16_at(rest, next + 2));
            if next > rest.len() {
                return Some(Err(cut()));
            }
        }
        self.at = at + next;
        Some(Ok(Record {
            at,
            typ,
            data,
            cont: &rest[end..next],
        }))
    }
}

fn u16_at(bytes: &[u8], at: usize) -> u16 {
    match bytes.get(at..at + 2) {
        Some(b) => u16::from_le_bytes([b[0], b[1]]),
        None => 0,
    }
}

fn u32_at(bytes: &[u8], at: usize) -> u32 {
    match bytes.get(at..at + 4) {
        Some(b) => u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
        None => 0,
    }
}

#[cfg(test)]
#[path = "xls_guard_tests.rs"]
mod tests;
