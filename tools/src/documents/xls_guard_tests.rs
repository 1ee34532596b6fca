//! Tests of the `.xls` layout: workbooks built here record by record, laid
//! out again, and read back (by this module's record walker, and by calamine
//! through `spreadsheet`).

use pretty_assertions::assert_eq;

use super::super::markdown::Markdown;
use super::super::spreadsheet;
use super::*;

fn record(typ: u16, data: &[u8]) -> Vec<u8> {
    let mut out = typ.to_le_bytes().to_vec();
    out.extend_from_slice(&(data.len() as u16).to_le_bytes());
    out.extend_from_slice(data);
    out
}

fn bof(kind: u16) -> Vec<u8> {
    let mut data = vec![0x00, 0x06];
    data.extend_from_slice(&kind.to_le_bytes());
    data.resize(16, 0);
    record(BOF, &data)
}

/// A cell record of `typ` at `row`, `col`, format 0, then `rest`.
fn cell(typ: u16, row: u16, col: u16, rest: &[u8]) -> Vec<u8> {
    let mut data = Vec::new();
    for field in [row, col, 0] {
        data.extend_from_slice(&field.to_le_bytes());
    }
    data.extend_from_slice(rest);
    record(typ, &data)
}

fn number(row: u16, col: u16, value: f64) -> Vec<u8> {
    cell(NUMBER, row, col, &value.to_le_bytes())
}

/// An `XLUnicodeString` of 8-bit characters.
fn xl_string(text: &str) -> Vec<u8> {
    let mut out = (text.len() as u16).to_le_bytes().to_vec();
    out.push(0);
    out.extend_from_slice(text.as_bytes());
    out
}

fn boundsheet(pos: u32, name: &str) -> Vec<u8> {
    let mut data = pos.to_le_bytes().to_vec();
    data.extend_from_slice(&[0, 0, name.len() as u8, 0]);
    data.extend_from_slice(name.as_bytes());
    record(BOUNDSHEET, &data)
}

/// A workbook stream: globals (BOF, `extra`, one sheet entry per sheet,
/// EOF), then each sheet's `body` between a BOF and an EOF.
fn stream_with(extra: &[u8], sheets: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let globals = |positions: &[u32]| {
        let mut out = bof(0x0005);
        out.extend_from_slice(extra);
        for ((name, _), pos) in sheets.iter().zip(positions) {
            out.extend(boundsheet(*pos, name));
        }
        out.extend(record(EOF, &[]));
        out
    };
    let bodies: Vec<Vec<u8>> = sheets
        .iter()
        .map(|(_, body)| [bof(0x0010), body.clone(), record(EOF, &[])].concat())
        .collect();
    let mut at = globals(&vec![0; sheets.len()]).len() as u32;
    let mut positions = Vec::new();
    for body in &bodies {
        positions.push(at);
        at += body.len() as u32;
    }
    [globals(&positions), bodies.concat()].concat()
}

/// Where sheet entry `index`'s start is written in a stream of
/// [`stream_with`] with no extra globals and one-letter sheet names.
fn entry_at(index: usize) -> usize {
    20 + 13 * index + 4
}

/// A sheet body of 300 numbers down column A: long enough that a workbook
/// holding it is over 4096 bytes, which [`compound_file::write_stream`]
/// would pad with zeros (read as records of type 0).
fn long_sheet() -> Vec<u8> {
    (0..300).flat_map(|row| number(row, 0, 1.0)).collect()
}

fn xls(stream: &[u8]) -> Vec<u8> {
    compound_file::write_stream("Workbook", stream).unwrap()
}

fn workbook(sheets: &[(&str, Vec<u8>)]) -> Vec<u8> {
    xls(&stream_with(&[], sheets))
}

/// Each sheet of a laid-out workbook as `(type, row, column)` per record
/// (row and column 0 for records that name no cell).
fn sheets_of(rebuilt: &Rebuilt) -> Vec<Vec<(u16, u16, u16)>> {
    let stream = compound_file::read_stream(&rebuilt.file, &["Workbook"]).unwrap();
    let Globals(_, entries, _) = globals(&stream).unwrap();
    entries
        .iter()
        .map(|entry| {
            let mut sheet = Vec::new();
            for record in Records::new(&stream, entry.pos as usize) {
                let record = record.unwrap();
                let (row, col) = match record.typ {
                    BOF | EOF => (0, 0),
                    _ => (u16_at(record.data, 0), u16_at(record.data, 2)),
                };
                sheet.push((record.typ, row, col));
                if record.typ == EOF {
                    break;
                }
            }
            sheet
        })
        .collect()
}

/// The Markdown `spreadsheet` writes from a laid-out workbook.
fn markdown(rebuilt: &Rebuilt) -> String {
    let mut md = Markdown::new(1 << 20);
    spreadsheet::write_xls(rebuilt, &mut md).unwrap();
    md.finish()
}

fn reason(failure: Failure) -> String {
    match failure {
        Failure::Corrupt(reason) | Failure::Oversized(reason) => reason,
        Failure::Encrypted => "encrypted".to_string(),
    }
}

#[test]
fn far_apart_cells_are_moved_next_to_each_other() {
    let file = workbook(&[("A", [number(0, 0, 1.0), number(65535, 65535, 2.0)].concat())]);
    let rebuilt = rebuild(&file).unwrap();
    assert_eq!(
        sheets_of(&rebuilt),
        vec![vec![
            (BOF, 0, 0),
            (NUMBER, 0, 0),
            (NUMBER, 4, 4),
            (EOF, 0, 0)
        ]]
    );
    assert_eq!(rebuilt.note(0), None);
}

#[test]
fn gaps_of_up_to_three_rows_or_columns_stay_as_they_are() {
    let file = workbook(&[(
        "A",
        [number(7, 2, 1.0), number(9, 5, 2.0), number(13, 3, 3.0)].concat(),
    )]);
    let rebuilt = rebuild(&file).unwrap();
    // Rows 7, 9, 13 go to 0, 2, 6; columns 2, 3, 5 to 0, 1, 3.
    assert_eq!(
        sheets_of(&rebuilt),
        vec![vec![
            (BOF, 0, 0),
            (NUMBER, 0, 0),
            (NUMBER, 2, 3),
            (NUMBER, 6, 1),
            (EOF, 0, 0)
        ]]
    );
}

#[test]
fn records_calamine_makes_no_cell_from_are_left_out() {
    let dimensions = record(
        0x0200,
        &[0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF, 0, 0],
    );
    let blank = cell(0x0201, 60000, 60000, &[]);
    let merged = record(0x00E5, &[1, 0, 0, 0, 0xFF, 0xFF, 0, 0, 0xFF, 0xFF]);
    let file = workbook(&[("A", [dimensions, blank, merged, number(3, 3, 1.0)].concat())]);
    assert_eq!(
        sheets_of(&rebuild(&file).unwrap()),
        vec![vec![(BOF, 0, 0), (NUMBER, 0, 0), (EOF, 0, 0)]]
    );
}

#[test]
fn a_mulrk_becomes_rks_and_a_formula_string_becomes_a_label_at_its_cell() {
    let rk = |value: u32| {
        let mut rec = vec![0, 0];
        rec.extend_from_slice(&((value << 2) | 2).to_le_bytes());
        rec
    };
    let mut mulrk = Vec::new();
    for field in [100_u16, 200] {
        mulrk.extend_from_slice(&field.to_le_bytes());
    }
    mulrk.extend(rk(7));
    mulrk.extend(rk(8));
    mulrk.extend_from_slice(&201_u16.to_le_bytes());
    let mut formula_value = vec![0, 0, 0, 0, 0, 0, 0xFF, 0xFF]; // a string, in the next STRING
    formula_value.extend_from_slice(&[0; 6]); // flags, chn
    formula_value.extend_from_slice(&[8, 0, 0x17, 5, 0]);
    formula_value.extend_from_slice(b"total");
    let sheet = [
        record(MULRK, &mulrk),
        cell(FORMULA, 300, 200, &formula_value),
        record(STRING, &xl_string("total")),
    ]
    .concat();
    let rebuilt = rebuild(&workbook(&[("A", sheet)])).unwrap();
    // Rows 100 and 300 go to 0 and 4; columns 200 and 201 to 0 and 1.
    assert_eq!(
        sheets_of(&rebuilt),
        vec![vec![
            (BOF, 0, 0),
            (RK, 0, 0),
            (RK, 0, 1),
            (FORMULA, 4, 0),
            (LABEL, 4, 0),
            (EOF, 0, 0)
        ]]
    );
    assert_eq!(
        markdown(&rebuilt),
        "## A\n\n| 7 | 8 |\n| --- | --- |\n|  |  |\n|  |  |\n|  |  |\n| total |  |\n"
    );
}

#[test]
fn the_globals_keep_their_records_and_continues() {
    let sst = [
        record(0x00FC, &[2, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, b'o', b'n', b'e']),
        record(CONTINUE, &[3, 0, 0, b't', b'w', b'o']),
    ]
    .concat();
    let sheet = [
        cell(LABELSST, 0, 0, &[1, 0, 0, 0]),
        cell(LABELSST, 0, 1, &[0, 0, 0, 0]),
    ]
    .concat();
    let stream = stream_with(&sst, &[("Words", sheet)]);
    let rebuilt = rebuild(&xls(&stream)).unwrap();
    let laid_out = compound_file::read_stream(&rebuilt.file, &["Workbook"]).unwrap();
    let globals_len = stream.len() - (16 + 4 + 2 * 14 + 4);
    // Only the sheet entry's offset may differ, and here it does not.
    assert_eq!(&laid_out[..globals_len], &stream[..globals_len]);
    assert_eq!(
        markdown(&rebuilt),
        "## Words\n\n| two | one |\n| --- | --- |\n"
    );
}

#[test]
fn a_workbook_of_many_sheets_reads_through_calamine() {
    let file = workbook(&[
        ("Costs", [number(0, 0, 1.0), number(0, 1, 2.5)].concat()),
        ("Empty", Vec::new()),
        ("Far", [number(2, 1, 3.0), number(60000, 250, 4.0)].concat()),
    ]);
    assert_eq!(
        markdown(&rebuild(&file).unwrap()),
        "## Costs\n\n| 1 | 2.5 |\n| --- | --- |\n\n## Empty\n\n(empty sheet)\n\n## Far\n\n\
         | 3 |  |  |  |  |\n| --- | --- | --- | --- | --- |\n|  |  |  |  |  |\n\
         |  |  |  |  |  |\n|  |  |  |  |  |\n|  |  |  |  | 4 |\n"
    );
}

#[test]
fn rows_past_the_cell_budget_are_left_out_and_the_sheet_says_so() {
    let sheet: Vec<u8> = (0..3)
        .flat_map(|row| [number(row, 0, 1.0), number(row, 1, 2.0)].concat())
        .collect();
    let file = workbook(&[("A", sheet)]);
    // Two columns: 5 cells hold two rows of the three.
    let rebuilt = rebuild_within(&file, 5, MAX_TEXT).unwrap();
    assert_eq!(
        sheets_of(&rebuilt),
        vec![vec![
            (BOF, 0, 0),
            (NUMBER, 0, 0),
            (NUMBER, 0, 1),
            (NUMBER, 1, 0),
            (NUMBER, 1, 1),
            (EOF, 0, 0)
        ]]
    );
    assert_eq!(
        markdown(&rebuilt),
        "## A\n\n| 1 | 2 |\n| --- | --- |\n| 1 | 2 |\n\n(Rows from 3 on are left out: troupe \
         lays an .xls workbook out in at most 5 cells, and this one's sheets need more.)\n"
    );
}

#[test]
fn the_sheets_share_the_budget_and_entries_sharing_a_sheet_each_pay_for_it() {
    let two_rows = [number(0, 0, 1.0), number(1, 0, 2.0)].concat();
    let mut stream = stream_with(&[], &[("A", two_rows.clone()), ("B", two_rows)]);
    // Point B's entry at A's sheet too.
    let pos_a = stream[entry_at(0)..entry_at(0) + 4].to_vec();
    stream[entry_at(1)..entry_at(1) + 4].copy_from_slice(&pos_a);
    let rebuilt = rebuild_within(&xls(&stream), 3, MAX_TEXT).unwrap();
    assert_eq!(
        sheets_of(&rebuilt),
        vec![
            vec![(BOF, 0, 0), (NUMBER, 0, 0), (NUMBER, 1, 0), (EOF, 0, 0)],
            vec![(BOF, 0, 0), (NUMBER, 0, 0), (EOF, 0, 0)],
        ]
    );
    assert_eq!(rebuilt.note(0), None);
    assert!(rebuilt.note(1).unwrap().starts_with("(Rows from 2 on"));
}

#[test]
fn one_cell_written_many_times_pays_for_each_write() {
    let sheet: Vec<u8> = (0..10).flat_map(|_| number(0, 0, 1.0)).collect();
    let rebuilt = rebuild_within(&workbook(&[("A", sheet)]), 5, MAX_TEXT).unwrap();
    assert_eq!(sheets_of(&rebuilt), vec![vec![(BOF, 0, 0), (EOF, 0, 0)]]);
    assert!(rebuilt.note(0).unwrap().starts_with("(Rows from 1 on"));
}

#[test]
fn cells_naming_a_long_shared_string_are_left_out_past_the_text_budget() {
    // One shared string of 1,000 characters, named by five cells: calamine
    // would copy it into each.
    let mut sst = vec![0; 8];
    sst.extend_from_slice(&[0xE8, 0x03, 0]);
    sst.extend_from_slice(&[b'x'; 1000]);
    let named: Vec<u8> = (0..5)
        .flat_map(|row| cell(LABELSST, row, 0, &0_u32.to_le_bytes()))
        .collect();
    let file = xls(&stream_with(&record(SST, &sst), &[("A", named)]));
    let two = 2 * 1000 * xls_strings::BYTES_PER_CHAR;
    let rebuilt = rebuild_within(&file, MAX_CELLS, two).unwrap();
    assert_eq!(
        sheets_of(&rebuilt),
        vec![vec![
            (BOF, 0, 0),
            (LABELSST, 0, 0),
            (LABELSST, 1, 0),
            (EOF, 0, 0)
        ]]
    );
    let shown = markdown(&rebuilt);
    assert_eq!(shown.matches(&"x".repeat(1000)).count(), 2, "{shown}");
    assert!(
        shown.contains("(3 cells naming the workbook's shared strings are left out"),
        "{shown}"
    );
    // Within the default budget every cell is kept.
    assert_eq!(rebuild(&file).unwrap().note(0), None);
}

#[test]
fn an_embedded_chart_is_skipped_as_calamine_skips_it() {
    let chart = [bof(0x0020), number(65535, 65535, 9.0), record(EOF, &[])].concat();
    let file = workbook(&[("A", [chart, number(0, 0, 1.0)].concat())]);
    assert_eq!(
        sheets_of(&rebuild(&file).unwrap()),
        vec![vec![(BOF, 0, 0), (NUMBER, 0, 0), (EOF, 0, 0)]]
    );
}

#[test]
fn overlapping_sheets_are_refused() {
    let mut stream = stream_with(&[], &[("A", long_sheet()), ("B", Vec::new())]);
    // B starts one record into A, so both would walk A's cells.
    let pos_b = u32_at(&stream, entry_at(0)) + 20;
    stream[entry_at(1)..entry_at(1) + 4].copy_from_slice(&pos_b.to_le_bytes());
    assert_eq!(
        reason(rebuild(&xls(&stream)).unwrap_err()),
        "its sheets overlap in the workbook stream (a sheet starts inside another, or two \
         sheet entries name one sheet), so the file may be forged or damaged"
    );
}

#[test]
fn two_entries_naming_one_long_sheet_are_refused() {
    // calamine would read the sheet once for each entry, and keep each
    // copy: many entries would multiply a sheet's cells and their text.
    let mut stream = stream_with(&[], &[("A", long_sheet()), ("B", Vec::new())]);
    let pos_a = stream[entry_at(0)..entry_at(0) + 4].to_vec();
    stream[entry_at(1)..entry_at(1) + 4].copy_from_slice(&pos_a);
    let reason = reason(rebuild(&xls(&stream)).unwrap_err());
    assert!(reason.starts_with("its sheets overlap"), "{reason}");
}

#[test]
fn a_sheet_entry_past_the_stream_is_refused() {
    let mut stream = stream_with(&[], &[("A", long_sheet())]);
    stream[entry_at(0)..entry_at(0) + 4].copy_from_slice(&1_000_000_u32.to_le_bytes());
    let len = stream.len();
    assert_eq!(
        reason(rebuild(&xls(&stream)).unwrap_err()),
        format!(
            "sheet 1 is said to start at byte 1000000 of the workbook stream, past its end \
             ({len} bytes)"
        )
    );
}

#[test]
fn a_password_is_encrypted() {
    let filepass = record(FILEPASS, &[1, 0, 1, 0, 1, 0]);
    let file = xls(&stream_with(&filepass, &[("A", number(0, 0, 1.0))]));
    assert!(matches!(rebuild(&file), Err(Failure::Encrypted)));
}

#[test]
fn a_cell_record_too_short_to_name_its_cell_is_refused() {
    let file = workbook(&[("A", record(NUMBER, &[1, 0, 2]))]);
    let reason = reason(rebuild(&file).unwrap_err());
    assert!(
        reason.starts_with("a record of type 0x0203 at byte ")
            && reason.ends_with(
                " of the workbook stream holds 3 bytes, fewer than the 4 its fields take"
            ),
        "{reason}"
    );
}

#[test]
fn a_mulrk_whose_columns_do_not_fit_its_length_is_refused() {
    let mut mulrk = vec![0, 0, 5, 0];
    mulrk.extend_from_slice(&[0; 6]);
    mulrk.extend_from_slice(&9_u16.to_le_bytes()); // columns 5 to 9, one value
    let reason = reason(rebuild(&workbook(&[("A", record(MULRK, &mulrk))])).unwrap_err());
    assert!(
        reason.ends_with("names columns 5 to 9 in 12 bytes, which do not hold them"),
        "{reason}"
    );
}

#[test]
fn a_record_cut_by_the_end_of_the_stream_is_refused() {
    let mut stream = stream_with(&[], &[("A", long_sheet())]);
    let len = stream.len();
    stream.truncate(len - 4 - 5); // the EOF and part of the last NUMBER
    let at = len - 4 - 18;
    assert_eq!(
        reason(rebuild(&xls(&stream)).unwrap_err()),
        format!("its workbook stream ends inside the record at byte {at}")
    );
}

#[test]
fn globals_without_an_eof_get_one() {
    // A record calamine ignores makes the stream long enough not to be
    // padded; the sheet entry points at the start of the globals.
    let stream = [bof(0x0005), record(0x00E1, &[0; 4096]), boundsheet(0, "A")].concat();
    let rebuilt = rebuild(&xls(&stream)).unwrap();
    let laid_out = compound_file::read_stream(&rebuilt.file, &["Workbook"]).unwrap();
    assert_eq!(&laid_out[stream.len()..stream.len() + 4], &[0x0A, 0, 0, 0]);
    assert_eq!(sheets_of(&rebuilt), vec![vec![(BOF, 0, 0), (EOF, 0, 0)]]);
}

#[test]
fn every_cut_and_flipped_byte_of_a_workbook_is_laid_out_or_refused_without_a_panic() {
    let stream = stream_with(
        &[],
        &[
            ("A", [number(0, 0, 1.0), number(3, 9, 2.0)].concat()),
            ("B", record(MULRK, &[0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 1, 0])),
        ],
    );
    for at in 0..stream.len() {
        let _ = rebuild(&xls(&stream[..at]));
        let mut flipped = stream.clone();
        flipped[at] ^= 0xFF;
        let _ = rebuild(&xls(&flipped));
    }
}
