//! Output kept within a fixed size however much a command prints.
//!
//! A command can print gigabytes (`yes`, a runaway log). Buffering it all
//! would exhaust memory before the cap is applied, so the first bytes are
//! kept as they come and the last ones in a ring buffer; what falls between
//! is only counted, and the result says how much was cut.

/// The first and last bytes of an output stream, and its total length.
#[derive(Debug)]
pub struct BoundedOutput {
    head: Vec<u8>,
    head_cap: usize,
    tail: Ring,
    total: u64,
}

impl BoundedOutput {
    /// Keeps up to `head_cap` first bytes and `tail_cap` last bytes.
    pub fn new(head_cap: usize, tail_cap: usize) -> Self {
        Self {
            head: Vec::new(),
            head_cap,
            tail: Ring::new(tail_cap),
            total: 0,
        }
    }

    /// Adds the next bytes.
    pub fn push(&mut self, mut data: &[u8]) {
        self.total += data.len() as u64;
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

    /// The kept output as text, with a marker where bytes were cut.
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
            "{}\n[… {cut} bytes of output cut here; the first {} and last {} bytes are shown. \
             Redirect the output to a file and search it to see the rest …]\n{}",
            String::from_utf8_lossy(head),
            self.head.len(),
            tail.len(),
            String::from_utf8_lossy(tail)
        )
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
