//! Tests of the compound file reader and writer: what one writes the other
//! reads back, and a forged file is refused without reading past its end or
//! walking a chain for ever.

use std::path::Path;

use pretty_assertions::assert_eq;

use super::*;

const NAMES: &[&str] = &["Workbook", "Book"];

/// Bytes that differ from sector to sector, so a wrong chain shows.
fn pattern(len: usize) -> Vec<u8> {
    (0..len).map(|n| (n % 251) as u8).collect()
}

fn set_u32(file: &mut [u8], at: usize, value: u32) {
    file[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// Where sector `id`'s FAT entry is, in a file whose FAT is sector 0.
fn fat_entry(id: u32) -> usize {
    SECTOR_LEN + 4 * id as usize
}

fn reason(failure: Failure) -> String {
    match failure {
        Failure::Corrupt(reason) | Failure::Oversized(reason) => reason,
        Failure::Encrypted => "encrypted".to_string(),
    }
}

#[test]
fn a_written_stream_reads_back_whole() {
    let stream = pattern(10_000);
    let file = write_stream("Workbook", &stream).unwrap();
    assert_eq!(read_stream(&file, NAMES).unwrap(), stream);
}

#[test]
fn a_short_stream_is_padded_to_live_in_sectors() {
    let file = write_stream("Workbook", b"abc").unwrap();
    let read = read_stream(&file, NAMES).unwrap();
    let mut expected = b"abc".to_vec();
    expected.resize(4096, 0);
    assert_eq!(read, expected);
}

#[test]
fn a_stream_past_what_the_header_lists_of_the_fat_gets_difat_sectors() {
    // 109 FAT sectors of 128 entries cover 13,952 sectors, about 7 MB.
    let stream = pattern(8 * 1024 * 1024);
    let file = write_stream("Workbook", &stream).unwrap();
    assert_eq!(u32_at(&file, 72), 1, "one DIFAT sector");
    assert_eq!(read_stream(&file, NAMES).unwrap(), stream);
}

#[test]
fn a_stream_in_the_mini_stream_is_read() {
    // Written by scripts/fuzz-seeds.py: a stream under 4096 bytes lives in
    // 64-byte mini sectors inside the root entry's chain.
    let path =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("src/__fuzz__/xls/corpus/forged_refs.xls");
    let file = std::fs::read(path).unwrap();
    let stream = read_stream(&file, NAMES).unwrap();
    assert!(stream.len() < 4096);
    assert_eq!(&stream[..4], &[0x09, 0x08, 16, 0], "a BOF first");
    assert_eq!(&stream[stream.len() - 4..], &[0x0A, 0, 0, 0], "an EOF last");
}

#[test]
fn the_book_stream_of_excel_95_is_read_when_there_is_no_workbook_stream() {
    let file = write_stream("BOOK", &pattern(5000)).unwrap();
    assert_eq!(read_stream(&file, NAMES).unwrap(), pattern(5000));
}

#[test]
fn a_file_without_a_workbook_stream_says_so() {
    let file = write_stream("WordDocument", &pattern(5000)).unwrap();
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "its compound file holds no Workbook or Book stream, so it is no Excel 97-2003 \
         workbook (another Office file named .xls?)"
    );
}

#[test]
fn an_encrypted_xlsx_in_a_compound_file_is_encrypted() {
    let file = write_stream("EncryptedPackage", &pattern(5000)).unwrap();
    assert!(matches!(read_stream(&file, NAMES), Err(Failure::Encrypted)));
}

#[test]
fn a_zip_or_a_text_named_xls_is_told_apart() {
    let zip = reason(read_stream(b"PK\x03\x04 rest of a zip", NAMES).unwrap_err());
    assert!(zip.contains("rename it .xlsx"), "{zip}");
    let html = reason(read_stream(b"<table><tr><td>1</td></tr></table>", NAMES).unwrap_err());
    assert!(html.contains("text or HTML"), "{html}");
}

#[test]
fn a_directory_chain_that_loops_is_refused() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    // Sector 0 is the FAT, sector 1 the directory: make it follow itself.
    set_u32(&mut file, fat_entry(1), 1);
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its directory's sector chain loops"
    );
}

#[test]
fn a_stream_chain_that_loops_under_a_forged_size_is_refused() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    // The stream's entry is the directory's second (sector 1); its size is
    // 120 bytes in. A size of 4 GB and a chain back to its first sector:
    // read as written, the buffer would grow until memory ran out.
    set_u32(&mut file, 2 * SECTOR_LEN + ENTRY_LEN + 120, u32::MAX);
    set_u32(&mut file, fat_entry(3), 2);
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its workbook stream's sector chain loops"
    );
}

#[test]
fn a_size_larger_than_the_file_reads_what_the_chain_holds() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    set_u32(&mut file, 2 * SECTOR_LEN + ENTRY_LEN + 120, u32::MAX);
    let mut expected = pattern(5000);
    expected.resize(10 * SECTOR_LEN, 0); // the chain's ten sectors
    assert_eq!(read_stream(&file, NAMES).unwrap(), expected);
}

#[test]
fn a_chain_into_a_sector_past_the_end_is_refused() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    set_u32(&mut file, fat_entry(2), 0x00FF_FFFF);
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its workbook stream names sector \
         16777215, past the end of the file (12 sectors)"
    );
}

#[test]
fn a_chain_into_a_free_sector_is_refused() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    set_u32(&mut file, fat_entry(2), FREE);
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its workbook stream's sector chain runs \
         into a free or reserved sector"
    );
}

#[test]
fn a_fat_sector_past_the_end_is_refused() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    set_u32(&mut file, 76, 999); // the header's first DIFAT entry
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its FAT names sector 999, past the end \
         of the file (12 sectors)"
    );
}

#[test]
fn a_difat_chain_that_loops_is_refused() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    // No FAT sector in the header; the DIFAT chain starts at sector 0,
    // which names no FAT sector and then itself.
    for n in 0..HEADER_DIFAT {
        set_u32(&mut file, 76 + 4 * n, FREE);
    }
    set_u32(&mut file, 68, 0);
    for n in 0..127 {
        set_u32(&mut file, fat_entry(n), FREE);
    }
    set_u32(&mut file, fat_entry(127), 0);
    assert_eq!(
        reason(read_stream(&file, NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its DIFAT chain loops"
    );
}

#[test]
fn a_fat_that_lists_one_sector_many_times_is_read_only_as_far_as_the_file_needs() {
    let mut file = write_stream("Workbook", &pattern(5000)).unwrap();
    // Every header DIFAT entry names the FAT sector: a reader that joined
    // them all would hold 109 copies. The file still reads.
    for n in 0..HEADER_DIFAT {
        set_u32(&mut file, 76 + 4 * n, 0);
    }
    assert_eq!(read_stream(&file, NAMES).unwrap(), pattern(5000));
}

#[test]
fn a_header_cut_short_is_refused() {
    let file = write_stream("Workbook", &pattern(5000)).unwrap();
    assert_eq!(
        reason(read_stream(&file[..300], NAMES).unwrap_err()),
        "the OLE compound file around it is damaged: its 300-byte header is cut short"
    );
}

#[test]
fn every_cut_of_a_file_is_read_or_refused_without_a_panic() {
    let file = write_stream("Workbook", &pattern(5000)).unwrap();
    for len in (0..file.len()).step_by(97) {
        let _ = read_stream(&file[..len], NAMES);
    }
}
