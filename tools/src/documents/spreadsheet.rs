//! Spreadsheets (XLSX, XLSM, XLSB, XLS, ODS) to Markdown through calamine:
//! one `## Sheet` section per sheet, holding its used range as a table
//! (long runs of empty rows or columns shortened to a few).
//!
//! The reader is chosen by extension so its own error reaches the user.
//! Cells show their value (not their formula); dates come out as ISO dates,
//! whole numbers without a trailing `.0`.
//!
//! calamine lays a sheet out as a dense range, rows × columns from the first
//! used cell to the last, so cells at forged far-apart references make it
//! ask for more memory than there is, and that failed allocation aborts the
//! process past any panic guard. XLSX and XLSB sheets are read through
//! calamine's cell reader instead; an `.xls`, which calamine parses whole
//! when it opens it, is first laid out again by `xls_guard`, and an `.ods`,
//! also parsed whole, is first measured by `ods_guard` and refused when it
//! would build too much.

use std::io::Cursor;
use std::path::Path;

use calamine::{
    open_workbook_from_rs, Cell, Data, DataRef, Ods, Reader, Xls, Xlsb, Xlsx, XlsxError,
};

use super::markdown::Markdown;
use super::{ods_guard, xls_guard, Failure};

/// Converts a spreadsheet file's bytes; `path` picks the reader.
pub(crate) fn convert(path: &Path, bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let cursor = Cursor::new(bytes);
    match ext.as_str() {
        "xls" => write_xls(&xls_guard::rebuild(bytes)?, md),
        "xlsb" => write_xlsb(open::<Xlsb<_>>(cursor)?, md),
        "ods" => {
            ods_guard::check(bytes)?;
            write_book(open::<Ods<_>>(cursor)?, md, |_| None)
        }
        _ => {
            if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
                // An OOXML workbook inside an OLE file is an encrypted one.
                return Err(Failure::Encrypted);
            }
            check_shared_strings(bytes)?;
            write_xlsx(open::<Xlsx<_>>(cursor)?, md)
        }
    }
}

fn open<'a, R>(cursor: Cursor<&'a [u8]>) -> Result<R, Failure>
where
    R: Reader<Cursor<&'a [u8]>>,
    R::Error: std::fmt::Display,
{
    open_workbook_from_rs::<R, _>(cursor).map_err(|e| classify(&e.to_string()))
}

/// calamine reserves room for the count of shared strings that
/// `sharedStrings.xml` declares (`<sst uniqueCount="…">`) before reading
/// one: a forged count makes the allocation fail, which aborts the whole
/// process, past any panic guard (found by the `xlsx` fuzz target). A count
/// larger than the part's length cannot be true, so such a file is refused.
fn check_shared_strings(bytes: &[u8]) -> Result<(), Failure> {
    let Ok(mut package) = super::package::Package::open(bytes) else {
        return Ok(()); // calamine says what is wrong with the zip
    };
    let parts = package.names();
    for name in parts
        .iter()
        .filter(|n| n.to_ascii_lowercase().ends_with("sharedstrings.xml"))
    {
        let Some(part) = package.bytes(name)? else {
            continue;
        };
        // Every `uniqueCount` value, however the XML around it is broken:
        // calamine's reader reads on where a strict one stops.
        if let Some(count) = declared_counts(&part).max() {
            if count > part.len() as u128 {
                return Err(Failure::Corrupt(format!(
                    "{name} declares {count} shared strings, more than its {} bytes can hold",
                    part.len()
                )));
            }
        }
    }
    Ok(())
}

/// The numbers written as `uniqueCount="N"` (spaces and either quote allowed).
fn declared_counts(part: &[u8]) -> impl Iterator<Item = u128> + '_ {
    const KEY: &[u8] = b"uniqueCount";
    part.windows(KEY.len())
        .enumerate()
        .filter(|(_, w)| *w == KEY)
        .filter_map(move |(at, _)| {
            let rest = &part[at + KEY.len()..];
            let rest = rest
                .trim_ascii_start()
                .strip_prefix(b"=")?
                .trim_ascii_start();
            let rest = rest
                .strip_prefix(b"\"")
                .or_else(|| rest.strip_prefix(b"'"))?;
            let rest = rest.trim_ascii_start();
            let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
            (digits > 0).then(|| {
                std::str::from_utf8(&rest[..digits])
                    .ok()
                    .and_then(|d| d.parse::<u128>().ok())
                    .unwrap_or(u128::MAX)
            })
        })
}

fn classify(message: &str) -> Failure {
    let lower = message.to_ascii_lowercase();
    if lower.contains("password") || lower.contains("encrypt") {
        Failure::Encrypted
    } else {
        Failure::Corrupt(message.to_string())
    }
}

/// Writes every sheet of an `.xls` workbook laid out again by `xls_guard`,
/// with a note under each sheet whose rows were cut.
pub(super) fn write_xls(rebuilt: &xls_guard::Rebuilt, md: &mut Markdown) -> Result<(), Failure> {
    let book = open::<Xls<_>>(Cursor::new(rebuilt.file.as_slice()))?;
    write_book(book, md, |sheet| rebuilt.note(sheet))
}

/// Writes every sheet of a workbook calamine reads whole (XLS, ODS), and
/// under each the `note` for its index, if any.
fn write_book<RS, R>(
    mut book: R,
    md: &mut Markdown,
    note: impl Fn(usize) -> Option<String>,
) -> Result<(), Failure>
where
    RS: std::io::Read + std::io::Seek,
    R: Reader<RS>,
    R::Error: std::fmt::Display,
{
    for (index, name) in book.sheet_names().into_iter().enumerate() {
        if md.is_full() {
            break;
        }
        md.heading(2, &name);
        let range = book
            .worksheet_range(&name)
            .map_err(|e| classify(&format!("sheet {name}: {e}")))?;
        let cells = range
            .used_cells()
            .map(|(row, col, value)| (row as u64, col as u64, cell_text(value)))
            .collect();
        write_sheet(cells, md);
        if let Some(note) = note(index).filter(|_| !md.is_full()) {
            md.paragraph(&note);
        }
    }
    Ok(())
}

/// Writes every sheet of an XLSX workbook from its cells as read, never
/// through calamine's `Range`: a `Range` is dense, rows × columns from the
/// first used cell to the last, so two cells with forged far-apart
/// references (`A1`, `XFD1048576`) make it ask for hundreds of GB at once,
/// and that failed allocation aborts the process past any panic guard
/// (found by the `xlsx` fuzz target).
fn write_xlsx<RS>(mut book: Xlsx<RS>, md: &mut Markdown) -> Result<(), Failure>
where
    RS: std::io::Read + std::io::Seek,
{
    for name in book.sheet_names() {
        if md.is_full() {
            break;
        }
        md.heading(2, &name);
        let budget = cell_budget(md);
        let (cells, cut) = match book.worksheet_cells_reader(&name) {
            Ok(mut reader) => read_cells(&name, budget, || reader.next_cell())?,
            // A chart sheet: calamine's own range is empty too.
            Err(XlsxError::NotAWorksheet(_)) => (Vec::new(), false),
            Err(e) => return Err(classify(&format!("sheet {name}: {e}"))),
        };
        write_sheet(cells, md);
        note_cut(cut, md);
    }
    Ok(())
}

/// Writes every sheet of an XLSB workbook from its cells as read (see
/// [`write_xlsx`] for why not through a `Range`).
fn write_xlsb<RS>(mut book: Xlsb<RS>, md: &mut Markdown) -> Result<(), Failure>
where
    RS: std::io::Read + std::io::Seek,
{
    for name in book.sheet_names() {
        if md.is_full() {
            break;
        }
        md.heading(2, &name);
        let budget = cell_budget(md);
        let (cells, cut) = match book.worksheet_cells_reader(&name) {
            Ok(mut reader) => read_cells(&name, budget, || reader.next_cell())?,
            Err(e) => return Err(classify(&format!("sheet {name}: {e}"))),
        };
        write_sheet(cells, md);
        note_cut(cut, md);
    }
    Ok(())
}

/// A sheet's used cells as `(row, column, text)`, in any order: as many as
/// the sheet really holds, whatever positions it claims.
type Cells = Vec<(u64, u64, String)>;

/// Drains a cell reader, keeping the cells that hold a value, until their
/// text passes `budget` bytes: then the rest of the sheet is left out
/// (`true`). Each cell's text is a copy; without the bound, a sheet of a
/// million cells that all name one long shared string would ask for a
/// copy of it per cell, terabytes, and the failed allocation would abort
/// the process.
fn read_cells<'a, E: std::fmt::Display>(
    sheet: &str,
    budget: usize,
    mut next: impl FnMut() -> Result<Option<Cell<DataRef<'a>>>, E>,
) -> Result<(Cells, bool), Failure> {
    let mut cells = Vec::new();
    let mut held = 0usize;
    while let Some(cell) = next().map_err(|e| classify(&format!("sheet {sheet}: {e}")))? {
        if matches!(cell.get_value(), DataRef::Empty) {
            continue;
        }
        let (row, col) = cell.get_position();
        let text = match cell.get_value() {
            DataRef::SharedString(text) if held + text.len() > budget => return Ok((cells, true)),
            value => cell_text(&Data::from(value.clone())),
        };
        held += text.len();
        cells.push((u64::from(row), u64::from(col), text));
        if held > budget {
            return Ok((cells, true));
        }
    }
    Ok((cells, false))
}

/// How much cell text a sheet may hold while it is read: what the output
/// has room for, twice over (cells come in the file's order, not the
/// table's), and at least 1 MiB.
fn cell_budget(md: &Markdown) -> usize {
    md.room().saturating_mul(2).max(1 << 20)
}

/// Says under a sheet that its cells past [`cell_budget`] were left out.
fn note_cut(cut: bool, md: &mut Markdown) {
    if cut {
        md.paragraph(
            "(the rest of this sheet is left out: its cells hold more text than the output can show)",
        );
    }
}

/// Writes a sheet as one table, from its first used row and column to its
/// last, trailing blank rows dropped; a sheet with no text says so.
fn write_sheet(cells: Cells, md: &mut Markdown) {
    let (rows, width) = layout(cells, md.room());
    if rows.is_empty() {
        md.paragraph("(empty sheet)");
    } else {
        md.table_of_width(&rows, width);
    }
}

/// The most empty rows (or columns) kept in a row between used ones: a
/// blank line between blocks of a sheet shows, a sheet whose cells sit far
/// apart (`A1` and `XFD1048576`) does not fill the output with empty cells.
const MAX_GAP: u64 = 3;

/// Where each used row (or column) goes in the table: in order, with the
/// empty ones between two used ones kept up to [`MAX_GAP`].
pub(super) fn places(mut used: Vec<u64>) -> Vec<(u64, u64)> {
    used.sort_unstable();
    used.dedup();
    let mut out = Vec::with_capacity(used.len());
    let mut last: Option<(u64, u64)> = None;
    for index in used {
        let place = match last {
            None => 0,
            Some((prev, at)) => at + 1 + (index - prev - 1).min(MAX_GAP),
        };
        out.push((index, place));
        last = Some((index, place));
    }
    out
}

/// The table place of `index`, which is one of `places`' used ones.
pub(super) fn place_of(places: &[(u64, u64)], index: u64) -> u64 {
    match places.binary_search_by_key(&index, |p| p.0) {
        Ok(at) => places[at].1,
        Err(_) => 0, // never: every cell's row and column is in `places`
    }
}

/// Lays cells out as table rows and the table's width: from the first used
/// row and column to the last, long runs of empty ones shortened to
/// [`MAX_GAP`], and no more of the grid built than `room` bytes of Markdown
/// can show (every cell takes at least three bytes, `  |`, and every row
/// two more). Rows end at their last used cell (the table pads them); when
/// the grid is cut, enough is kept that the Markdown overflows and says so.
fn layout(cells: Cells, room: usize) -> (Vec<Vec<String>>, usize) {
    let cols = places(cells.iter().map(|c| c.1).collect());
    let rows_at = places(cells.iter().map(|c| c.0).collect());
    let most = (room / 3 + 1) as u64;
    let mut cells: Vec<(u64, u64, String)> = cells
        .into_iter()
        .map(|(row, col, text)| (place_of(&rows_at, row), place_of(&cols, col), text))
        .filter(|c| c.1 < most)
        .collect();
    // Stable: of two cells at one place, the later one in the file wins.
    cells.sort_by_key(|c| (c.0, c.1));
    let width = cells.iter().map(|c| c.1 + 1).max().unwrap_or(0) as usize;
    let row_cost = 2 + 3 * width;
    let mut rows: Vec<Vec<String>> = Vec::new();
    let mut spent = 0;
    let mut cut = false;
    'cells: for (row, col, text) in cells {
        while rows.len() as u64 <= row {
            if spent > room {
                cut = true;
                break 'cells;
            }
            rows.push(Vec::new());
            spent += row_cost;
        }
        let (Ok(index), Ok(col)) = (usize::try_from(row), usize::try_from(col)) else {
            continue;
        };
        let Some(row) = rows.get_mut(index) else {
            continue;
        };
        if row.len() <= col {
            row.resize(col + 1, String::new());
        }
        row[col] = text;
    }
    if !cut {
        while rows
            .last()
            .is_some_and(|row| row.iter().all(|c| c.trim().is_empty()))
        {
            rows.pop();
        }
    }
    (rows, width)
}

/// A cell's value as text.
fn cell_text(cell: &Data) -> String {
    match cell {
        Data::Empty => String::new(),
        Data::Bool(b) => if *b { "TRUE" } else { "FALSE" }.to_string(),
        Data::DateTime(dt) if dt.is_duration() => match dt.as_duration() {
            Some(duration) => {
                let secs = duration.num_seconds();
                format!("{}:{:02}:{:02}", secs / 3600, (secs / 60) % 60, secs % 60)
            }
            None => dt.to_string(),
        },
        Data::DateTime(dt) => match dt.as_datetime() {
            Some(value) => {
                let text = value.format("%Y-%m-%d %H:%M:%S").to_string();
                text.strip_suffix(" 00:00:00")
                    .map(str::to_string)
                    .unwrap_or(text)
            }
            None => dt.to_string(),
        },
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn cell(row: u64, col: u64, text: &str) -> (u64, u64, String) {
        (row, col, text.to_string())
    }

    fn strings(rows: &[&[&str]]) -> Vec<Vec<String>> {
        rows.iter()
            .map(|row| row.iter().map(|c| c.to_string()).collect())
            .collect()
    }

    #[test]
    fn a_sparse_sheet_keeps_its_blank_rows_and_columns_from_the_first_used_cell() {
        let cells = vec![
            cell(5, 3, "c"),
            cell(3, 1, "a"),
            cell(3, 2, "b"),
            cell(6, 1, " "),
            cell(5, 1, "d"),
        ];
        let (rows, width) = layout(cells, 1000);
        assert_eq!(width, 3);
        assert_eq!(rows, strings(&[&["a", "b"], &[], &["d", "", "c"]]));
    }

    #[test]
    fn of_two_cells_at_one_place_the_later_one_wins() {
        let (rows, width) = layout(vec![cell(0, 0, "old"), cell(0, 0, "new")], 1000);
        assert_eq!((rows, width), (strings(&[&["new"]]), 1));
    }

    #[test]
    fn long_runs_of_empty_rows_and_columns_are_shortened() {
        let far = u64::from(u32::MAX);
        let cells = vec![
            cell(0, 0, "a"),
            cell(0, far, "right"),
            cell(far, 10, "down"),
        ];
        let (rows, width) = layout(cells, 1000);
        // Columns 0, 10 and `far` sit at 0, 4 and 8; rows 0 and `far` at 0 and 4.
        assert_eq!(width, 9);
        assert_eq!(
            rows,
            strings(&[
                &["a", "", "", "", "", "", "", "", "right"],
                &[],
                &[],
                &[],
                &["", "", "", "", "down"],
            ])
        );
    }

    #[test]
    fn a_grid_larger_than_the_room_is_built_only_as_far_as_it_shows() {
        let room = 100;
        let cells = (0..1000).map(|row| cell(row, 0, "x")).collect();
        let (rows, width) = layout(cells, room);
        // Rows stop once they fill more than the room, and the table says it
        // was cut.
        assert_eq!(width, 1);
        assert_eq!(rows.len(), room / (2 + 3) + 1);
        let mut md = Markdown::new(room);
        md.table_of_width(&rows, width);
        assert!(md.is_full(), "the cut table says it was cut");
    }

    #[test]
    fn columns_past_the_room_are_not_built() {
        let cells = (0..1000).map(|col| cell(0, col, "x")).collect();
        let (rows, width) = layout(cells, 30);
        assert_eq!((rows.len(), width), (1, 30 / 3 + 1));
    }
}
