//! Spreadsheets (XLSX, XLSM, XLSB, XLS, ODS) to Markdown through calamine:
//! one `## Sheet` section per sheet, holding its used range as a table.
//!
//! The reader is chosen by extension so its own error reaches the user.
//! Cells show their value (not their formula); dates come out as ISO dates,
//! whole numbers without a trailing `.0`.

use std::io::Cursor;
use std::path::Path;

use calamine::{open_workbook_from_rs, Data, Ods, Reader, Xls, Xlsb, Xlsx};

use super::markdown::Markdown;
use super::Failure;

/// Converts a spreadsheet file's bytes; `path` picks the reader.
pub(crate) fn convert(path: &Path, bytes: &[u8], md: &mut Markdown) -> Result<(), Failure> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or_default()
        .to_ascii_lowercase();
    let cursor = Cursor::new(bytes);
    match ext.as_str() {
        "xls" => write_book(open::<Xls<_>>(cursor)?, md),
        "xlsb" => write_book(open::<Xlsb<_>>(cursor)?, md),
        "ods" => write_book(open::<Ods<_>>(cursor)?, md),
        _ => {
            if bytes.starts_with(&[0xD0, 0xCF, 0x11, 0xE0]) {
                // An OOXML workbook inside an OLE file is an encrypted one.
                return Err(Failure::Encrypted);
            }
            check_shared_strings(bytes)?;
            write_book(open::<Xlsx<_>>(cursor)?, md)
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

fn write_book<RS, R>(mut book: R, md: &mut Markdown) -> Result<(), Failure>
where
    RS: std::io::Read + std::io::Seek,
    R: Reader<RS>,
    R::Error: std::fmt::Display,
{
    for name in book.sheet_names() {
        if md.is_full() {
            break;
        }
        md.heading(2, &name);
        let range = book
            .worksheet_range(&name)
            .map_err(|e| classify(&format!("sheet {name}: {e}")))?;
        let mut rows: Vec<Vec<String>> = range
            .rows()
            .map(|row| row.iter().map(cell_text).collect())
            .collect();
        while rows
            .last()
            .is_some_and(|row| row.iter().all(|c| c.trim().is_empty()))
        {
            rows.pop();
        }
        if rows.is_empty() {
            md.paragraph("(empty sheet)");
        } else {
            md.table(&rows);
        }
    }
    Ok(())
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
