//! Server-sent events, parsed from bytes that arrive split anywhere.
//!
//! Both providers stream SSE. A network read can end in the middle of a line
//! or even of a UTF-8 character, so the parser keeps raw bytes until a whole
//! line is in, and an event until its blank line. It knows nothing of either
//! provider's payloads.
//!
//! Lines that are not SSE at all (a bare JSON error object a proxy wrote
//! into the stream, an HTML page) are kept aside as *stray* lines, so the
//! caller can tell an error body or a protocol mismatch from a cut connection.

/// One server-sent event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SseEvent {
    /// The `event:` name, if the server gave one.
    pub event: Option<String>,
    /// The `data:` lines, joined by newlines.
    pub data: String,
}

/// An incremental SSE parser: feed it bytes, take whole events out.
#[derive(Debug, Default)]
pub struct SseParser {
    pending: Vec<u8>,
    /// How much of `pending` is known to hold no newline: each push scans
    /// only the bytes it added, so a long line that arrives in many small
    /// reads costs its length once, not its length times the reads.
    scanned: usize,
    event: Option<String>,
    data: Vec<String>,
    stray: Vec<String>,
    stray_seen: usize,
}

/// How many stray lines are kept, and how long each may be.
const STRAY_LINES: usize = 16;
const STRAY_LINE_BYTES: usize = 8192;

impl SseParser {
    /// A parser with nothing buffered.
    pub fn new() -> Self {
        Self::default()
    }

    /// Feeds bytes; returns the events they completed, in order.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.pending.extend_from_slice(bytes);
        let mut events = Vec::new();
        let mut start = 0;
        let mut from = self.scanned.min(self.pending.len());
        while let Some(offset) = self.pending[from..].iter().position(|b| *b == b'\n') {
            let end = from + offset;
            let mut line = &self.pending[start..end];
            if let [rest @ .., b'\r'] = line {
                line = rest;
            }
            let line = String::from_utf8_lossy(line).into_owned();
            start = end + 1;
            from = start;
            if let Some(event) = self.line(&line) {
                events.push(event);
            }
        }
        self.pending.drain(..start);
        self.scanned = self.pending.len();
        events
    }

    /// Ends the input: an event not closed by a blank line is returned if it
    /// has data (some servers close the connection right after the last line).
    pub fn finish(&mut self) -> Option<SseEvent> {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.scanned = 0;
            let line = String::from_utf8_lossy(&rest).into_owned();
            if let Some(event) = self.line(line.trim_end_matches('\r')) {
                return Some(event);
            }
        }
        self.dispatch()
    }

    fn line(&mut self, line: &str) -> Option<SseEvent> {
        if line.is_empty() {
            return self.dispatch();
        }
        if line.starts_with(':') {
            return None;
        }
        let (field, value) = match line.split_once(':') {
            Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
            None => (line, ""),
        };
        match field {
            "event" => self.event = Some(value.to_string()),
            "data" => self.data.push(value.to_string()),
            "id" | "retry" => {}
            _ => {
                self.stray_seen += 1;
                if self.stray.len() < STRAY_LINES {
                    let mut end = line.len().min(STRAY_LINE_BYTES);
                    while !line.is_char_boundary(end) {
                        end -= 1;
                    }
                    self.stray.push(line[..end].to_string());
                }
            }
        }
        None
    }

    /// Takes the lines seen since the last call that were not SSE fields.
    pub fn take_stray(&mut self) -> Vec<String> {
        std::mem::take(&mut self.stray)
    }

    /// How many non-SSE lines were seen in all.
    pub fn stray_count(&self) -> usize {
        self.stray_seen
    }

    fn dispatch(&mut self) -> Option<SseEvent> {
        let event = self.event.take();
        if self.data.is_empty() {
            return None;
        }
        let data = std::mem::take(&mut self.data).join("\n");
        Some(SseEvent { event, data })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn parse_in_pieces(input: &[u8], size: usize) -> Vec<SseEvent> {
        let mut parser = SseParser::new();
        let mut events = Vec::new();
        for piece in input.chunks(size) {
            events.extend(parser.push(piece));
        }
        events.extend(parser.finish());
        events
    }

    #[test]
    fn events_survive_any_split_including_inside_a_utf8_character() {
        let input = "event: message_start\ndata: {\"a\":1}\n\n: keep-alive comment\n\r\ndata: caf\u{e9} \u{1f600}\r\ndata: second line\r\n\r\ndata:no-space\n\ndata: [DONE]";
        let expected = vec![
            SseEvent {
                event: Some("message_start".into()),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                event: None,
                data: "caf\u{e9} \u{1f600}\nsecond line".into(),
            },
            SseEvent {
                event: None,
                data: "no-space".into(),
            },
            SseEvent {
                event: None,
                data: "[DONE]".into(),
            },
        ];
        for size in [1, 2, 3, 7, 13, input.len()] {
            assert_eq!(
                parse_in_pieces(input.as_bytes(), size),
                expected,
                "size {size}"
            );
        }
    }

    #[test]
    fn lines_that_are_not_sse_are_kept_aside() {
        let mut parser = SseParser::new();
        let events =
            parser.push(b"data: {\"a\":1}\n\n{\"error\":{\"message\":\"boom\"}}\nid: 7\n<html>\n");
        assert_eq!(events.len(), 1);
        assert_eq!(
            parser.take_stray(),
            vec![
                r#"{"error":{"message":"boom"}}"#.to_string(),
                "<html>".into()
            ]
        );
        assert_eq!(parser.stray_count(), 2);
        assert_eq!(parser.take_stray(), Vec::<String>::new());
    }

    #[test]
    fn an_event_without_data_is_not_dispatched() {
        assert_eq!(parse_in_pieces(b"event: ping\n\n", 4), vec![]);
    }
}
