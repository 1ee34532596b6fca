//! The lengths of an `.xls` workbook's shared strings, read from its SST
//! record as calamine reads them, so that the cells naming them can be
//! bounded before calamine sees the file.
//!
//! calamine copies a shared string into every LABELSST cell that names it
//! when it opens the workbook, before troupe reads a cell. A BIFF8 string
//! holds at most 65,535 characters and the layout allows 5.6 million
//! cells, so a forged workbook whose cells all name one long string asked
//! for hundreds of GB. [`super::rebuild`] charges each LABELSST cell its
//! string's size and leaves out the cells past a budget.
//!
//! The record is walked step for step as calamine's `parse_sst` walks it
//! (character data split across CONTINUE records, each continuation with
//! its own high-byte flag; rich-text runs and phonetic blocks skipped).
//! Where calamine would fail on the record, the workbook fails to open
//! whole, so no cell is copied and the lengths read so far do not matter.

use std::collections::VecDeque;

/// The most bytes one character of a shared string can become in
/// calamine's text: a two-byte character decoded through a single-byte
/// code page is two characters of up to three bytes of UTF-8 each.
pub(super) const BYTES_PER_CHAR: u64 = 6;

/// Each shared string's length in characters, in order, as far as calamine
/// reads them; `data` is the SST record's data and `cont` the CONTINUE
/// records after it, headers included.
pub(super) fn lengths(data: &[u8], cont: &[u8]) -> Vec<u16> {
    let mut r = Reader {
        data,
        cont: segments(cont),
    };
    let mut found = Vec::new();
    let Some(strings) = r.data.get(8..) else {
        return found;
    };
    r.data = strings;
    while !r.data.is_empty() || r.next_segment() {
        match r.string() {
            Some(cch) => found.push(cch),
            None => break,
        }
    }
    found
}

/// The data of each CONTINUE record in `cont`.
fn segments(mut cont: &[u8]) -> VecDeque<&[u8]> {
    let mut found = VecDeque::new();
    while cont.len() >= 4 {
        let len = usize::from(u16::from_le_bytes([cont[2], cont[3]]));
        let end = (4 + len).min(cont.len());
        found.push_back(&cont[4..end]);
        cont = &cont[end..];
    }
    found
}

/// calamine's `Record` as `parse_sst` moves through it.
struct Reader<'a> {
    data: &'a [u8],
    cont: VecDeque<&'a [u8]>,
}

impl Reader<'_> {
    fn next_segment(&mut self) -> bool {
        match self.cont.pop_front() {
            Some(next) => {
                self.data = next;
                true
            }
            None => false,
        }
    }

    /// Moves past `len` bytes, across segments; `false` where calamine fails.
    fn skip(&mut self, mut len: usize) -> bool {
        while len > 0 {
            if self.data.is_empty() && !self.next_segment() {
                return false;
            }
            let step = len.min(self.data.len());
            self.data = &self.data[step..];
            len -= step;
        }
        true
    }

    /// Moves past `n` bytes of the current segment; `false` if it is shorter
    /// (calamine's `read_u16` or `read_i32` would panic there).
    fn take(&mut self, n: usize) -> Option<&[u8]> {
        let (head, rest) = (self.data.get(..n)?, self.data.get(n..)?);
        self.data = rest;
        Some(head)
    }

    /// One XLUnicodeRichExtendedString: its length in characters, or `None`
    /// where calamine would fail.
    fn string(&mut self) -> Option<u16> {
        if self.data.is_empty() {
            return Some(0);
        }
        let head = self.take(3)?;
        let (cch, flags) = (u16::from_le_bytes([head[0], head[1]]), head[2]);
        let runs = if flags & 0x8 != 0 {
            let b = self.take(2)?;
            usize::from(u16::from_le_bytes([b[0], b[1]]))
        } else {
            0
        };
        let phonetic = if flags & 0x4 != 0 {
            let b = self.take(4)?;
            i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize
        } else {
            0
        };
        let mut high = flags & 0x1 != 0;
        let mut left = usize::from(cch);
        while left > 0 {
            let width = if high { 2 } else { 1 };
            let step = (self.data.len() / width).min(left);
            self.data = &self.data[step * width..];
            left -= step;
            if left > 0 {
                if !self.next_segment() {
                    return None;
                }
                high = self.take(1)?[0] & 0x1 != 0;
            }
        }
        (self.skip(runs * 4) && self.skip(phonetic)).then_some(cch)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn continued(data: &[u8]) -> Vec<u8> {
        let mut out = vec![0x3C, 0x00];
        out.extend_from_slice(&(data.len() as u16).to_le_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn strings_split_across_continue_records_are_measured_as_calamine_reads_them() {
        // Two strings: "abc" compressed; then a 4-character string, rich
        // (one run), whose characters go on, two bytes each, in a CONTINUE.
        let mut sst = vec![0; 8];
        sst.extend_from_slice(&[3, 0, 0, b'a', b'b', b'c']);
        sst.extend_from_slice(&[4, 0, 0x8, 1, 0, b'w', b'x']);
        let mut rest = vec![0x1, b'y', 0, b'z', 0];
        rest.extend_from_slice(&[0, 0, 0, 0]); // the run
        rest.extend_from_slice(&[1, 0, 0, b'q']);
        assert_eq!(lengths(&sst, &continued(&rest)), vec![3, 4, 1]);
    }

    #[test]
    fn a_record_cut_inside_a_string_stops_the_count() {
        let mut sst = vec![0; 8];
        sst.extend_from_slice(&[2, 0, 0, b'o', b'k', 0xFF, 0xFF, 0, b'x']);
        assert_eq!(lengths(&sst, &[]), vec![2]);
        assert!(lengths(&[0; 4], &[]).is_empty());
    }
}
