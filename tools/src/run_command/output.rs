//! Output kept within a fixed size however much a command prints.
//!
//! A command can print gigabytes (`yes`, a runaway log). Buffering it all
//! would exhaust memory before the cap is applied, so the first bytes are
//! kept as they come and the last ones in a ring buffer. Once the output
//! outgrows the two, everything — the part already seen and what follows —
//! goes to an output file, up to a cap (`[tools] command_output_cap`), so
//! the middle the result leaves out can still be read. The result's note
//! says what was cut, where the whole output is, and, past the cap, how much
//! of it the file lacks.

use std::io::Write as _;
use std::path::PathBuf;

/// The first and last bytes of an output stream, its total length, and the
/// file holding all of it once it outgrows them.
#[derive(Debug)]
pub struct BoundedOutput {
    head: Vec<u8>,
    head_cap: usize,
    tail: Ring,
    total: u64,
    lines: u64,
    file: Option<OutputFile>,
}

/// Where the whole output goes once it is cut.
#[derive(Debug)]
struct OutputFile {
    path: PathBuf,
    cap: u64,
    writer: Option<std::io::BufWriter<std::fs::File>>,
    written: u64,
    error: Option<String>,
    opened: bool,
}

impl OutputFile {
    fn write(&mut self, data: &[u8]) {
        if self.error.is_some() {
            return;
        }
        if !self.opened {
            self.opened = true;
            let opened = self
                .path
                .parent()
                .map_or(Ok(()), std::fs::create_dir_all)
                .and_then(|()| std::fs::File::create(&self.path));
            match opened {
                Ok(file) => self.writer = Some(std::io::BufWriter::new(file)),
                Err(e) => {
                    self.error = Some(e.to_string());
                    return;
                }
            }
        }
        let room = self.cap.saturating_sub(self.written);
        let take = data.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        if take == 0 {
            return;
        }
        if let Some(writer) = &mut self.writer {
            match writer.write_all(&data[..take]) {
                Ok(()) => self.written += take as u64,
                Err(e) => self.error = Some(e.to_string()),
            }
        }
    }

    fn finish(&mut self) {
        if let Some(mut writer) = self.writer.take() {
            if let Err(e) = writer.flush() {
                self.error.get_or_insert(e.to_string());
            }
        }
    }
}

impl BoundedOutput {
    /// Keeps up to `head_cap` first bytes and `tail_cap` last bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head: Vec::new(),
            head_cap,
            tail: Ring::new(tail_cap),
            total: 0,
            lines: 0,
            file: None,
        }
    }

    /// Also writes the whole output, up to `cap` bytes, to `path` once it
    /// outgrows the head and the tail (`cap` 0: no file).
    pub fn spilling_to(mut self, path: PathBuf, cap: u64) -> Self {
        if cap > 0 {
            self.file = Some(OutputFile {
                path,
                cap,
                writer: None,
                written: 0,
                error: None,
                opened: false,
            });
        }
        self
    }

    /// Adds the next bytes.
    pub fn push(&mut self, mut data: &[u8]) {
        let outgrown = self.total + data.len() as u64 > (self.head_cap + self.tail.cap) as u64;
        if let Some(file) = &mut self.file {
            if outgrown && !file.opened {
                // Nothing was cut yet: the head and the tail hold all so far.
                file.write(&self.head);
                file.write(&self.tail.contents());
            }
            if file.opened {
                file.write(data);
            }
        }
        self.total += data.len() as u64;
        self.lines += data.iter().filter(|b| **b == b'\n').count() as u64;
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(data.len());
            self.head.extend_from_slice(&data[..take]);
            data = &data[take..];
        }
        if !data.is_empty() {
            self.tail.push(data);
        }
    }

    /// Every byte seen.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Bytes seen but not kept.
    pub fn cut(&self) -> u64 {
        self.total - self.head.len() as u64 - self.tail.len as u64
    }

    /// The output file, once the output was cut and the file written.
    pub fn file(&self) -> Option<&std::path::Path> {
        self.file
            .as_ref()
            .filter(|f| f.opened && f.error.is_none())
            .map(|f| f.path.as_path())
    }

    /// Ends the output: flushes the output file.
    pub fn finish(&mut self) {
        if let Some(file) = &mut self.file {
            file.finish();
        }
    }

    /// The kept output as text, with a note where bytes were cut that says
    /// where the whole output is.
    pub fn text(&self) -> String {
        let tail = self.tail.contents();
        let cut = self.cut();
        if cut == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = trim_incomplete_end(&self.head);
        let tail = trim_incomplete_start(&tail);
        format!(
            "{}\n[… {cut} bytes of output cut here; the first {} and last {} bytes are shown. {} …]\n{}",
            String::from_utf8_lossy(head),
            self.head.len(),
            tail.len(),
            self.where_the_rest_is(),
            String::from_utf8_lossy(tail)
        )
    }

    fn where_the_rest_is(&self) -> String {
        let total = self.total;
        let lines = self.lines;
        match &self.file {
            None => "No output file is kept ([tools] command_output_cap is 0): redirect the \
                     output to a file and search it to see the rest"
                .to_string(),
            Some(OutputFile {
                error: Some(e),
                path,
                ..
            }) => format!(
                "The output could not be saved to {} ({e}): redirect it to a file and search \
                 it to see the rest",
                path.display()
            ),
            Some(file) if file.written >= total => format!(
                "The whole output ({total} bytes, {lines} lines) is in {}: read it with \
                 read_file (offset/limit) or search it with find_files",
                file.path.display()
            ),
            Some(file) => format!(
                "The first {} of its {total} bytes are in {} (the cap set by [tools] \
                 command_output_cap); the last {} bytes are not kept: redirect the output to \
                 a file to keep it all",
                file.written,
                file.path.display(),
                total - file.written
            ),
        }
    }
}

/// Drops a UTF-8 sequence cut off at the end.
fn trim_incomplete_end(bytes: &[u8]) -> &[u8] {
    match std::str::from_utf8(bytes) {
        Err(e) if e.error_len().is_none() => &bytes[..e.valid_up_to()],
        _ => bytes,
    }
}

/// Drops the continuation bytes of a UTF-8 sequence cut off at the start.
fn trim_incomplete_start(bytes: &[u8]) -> &[u8] {
    let skip = bytes
        .iter()
        .take(3)
        .take_while(|&&b| (0x80..0xC0).contains(&b))
        .count();
    &bytes[skip..]
}

/// A fixed-size ring of the latest bytes.
#[derive(Debug)]
struct Ring {
    buf: Vec<u8>,
    cap: usize,
    start: usize,
    len: usize,
}

impl Ring {
    fn new(cap: usize) -> Self {
        Self {
            buf: Vec::new(),
            cap,
            start: 0,
            len: 0,
        }
    }

    fn push(&mut self, data: &[u8]) {
        let cap = self.cap;
        if cap == 0 {
            return;
        }
        if self.buf.len() < cap {
            self.buf.resize(cap, 0);
        }
        if data.len() >= cap {
            self.buf.copy_from_slice(&data[data.len() - cap..]);
            self.start = 0;
            self.len = cap;
            return;
        }
        let write = (self.start + self.len) % cap;
        let first = data.len().min(cap - write);
        self.buf[write..write + first].copy_from_slice(&data[..first]);
        let rest = &data[first..];
        self.buf[..rest.len()].copy_from_slice(rest);
        let len = self.len + data.len();
        if len > cap {
            self.start = (self.start + len - cap) % cap;
            self.len = cap;
        } else {
            self.len = len;
        }
    }

    fn contents(&self) -> Vec<u8> {
        let end = self.start + self.len;
        if end <= self.cap {
            self.buf.get(self.start..end).unwrap_or_default().to_vec()
        } else {
            let mut out = self.buf[self.start..].to_vec();
            out.extend_from_slice(&self.buf[..end - self.cap]);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_output_is_kept_whole_across_head_and_tail() {
        let mut out = BoundedOutput::new(4, 4);
        out.push(b"abc");
        out.push(b"defgh");
        assert_eq!(out.text(), "abcdefgh");
        assert_eq!(out.cut(), 0);
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_cut() {
        let mut out = BoundedOutput::new(3, 5);
        for chunk in [&b"0123"[..], b"456789", b"ab", b"cdefghijklmnop", b"q"] {
            out.push(chunk);
        }
        assert_eq!(out.total(), 27);
        assert_eq!(out.cut(), 19);
        let text = out.text();
        assert!(
            text.starts_with("012\n[… 19 bytes of output cut here"),
            "{text}"
        );
        assert!(text.ends_with("…]\nmnopq"), "{text}");
    }

    #[test]
    fn a_cut_output_is_kept_whole_in_its_file_from_the_first_byte() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("spill/c/call.txt");
        let mut out = BoundedOutput::new(3, 5).spilling_to(path.clone(), 1_000);
        let chunks: [&[u8]; 5] = [b"0123", b"456789", b"a\nb", b"cdefghijklmnop", b"q"];
        for chunk in chunks {
            out.push(chunk);
        }
        out.finish();
        assert_eq!(std::fs::read(&path).unwrap(), chunks.concat());
        assert_eq!(out.file(), Some(path.as_path()));
        let text = out.text();
        assert!(
            text.contains(&format!(
                "The whole output (28 bytes, 1 lines) is in {}",
                path.display()
            )),
            "{text}"
        );
    }

    #[test]
    fn an_output_over_the_cap_says_how_much_the_file_lacks() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut out = BoundedOutput::new(2, 2).spilling_to(path.clone(), 6);
        out.push(b"0123456789");
        out.finish();
        assert_eq!(std::fs::read(&path).unwrap(), b"012345");
        let text = out.text();
        assert!(
            text.contains("The first 6 of its 10 bytes are in")
                && text.contains("command_output_cap); the last 4 bytes are not kept"),
            "{text}"
        );
    }

    #[test]
    fn a_short_output_keeps_no_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.txt");
        let mut out = BoundedOutput::new(4, 4).spilling_to(path.clone(), 100);
        out.push(b"short");
        out.finish();
        assert_eq!(out.text(), "short");
        assert!(!path.exists());
        assert_eq!(out.file(), None);
    }

    #[test]
    fn ring_wraps_correctly_with_small_pushes() {
        let mut ring = Ring::new(4);
        for b in b"abcdefg" {
            ring.push(&[*b]);
        }
        assert_eq!(ring.contents(), b"defg");
        ring.push(b"xy");
        assert_eq!(ring.contents(), b"fgxy");
    }
}
