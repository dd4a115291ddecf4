//! [`SseUsage`]: the real cost of a request from the server-sent events of its response (an
//! LLM API's streamed completion, whose last events carry the usage).

use bytes::Bytes;

use super::BodyUsage;

/// The longest event read (its `data` lines together): 1 MiB. A longer one is skipped, so a
/// stream without blank lines cannot grow the buffer without bound.
const MAX_EVENT: usize = 1 << 20;

/// A [`BodyUsage`] for a `text/event-stream` body: splits it into events (as the HTML
/// standard's event-stream parser does: lines ending in LF, CRLF or CR, an event ending at a
/// blank line, its `data:` lines joined by `\n`, comments and other fields ignored) and gives
/// each event's data to `read`. The last cost `read` found is the request's cost. An event
/// longer than 1 MiB, or not UTF-8, is skipped.
///
/// With an OpenAI-style stream (`"stream_options": {"include_usage": true}`: the last chunk
/// before `data: [DONE]` carries `usage.total_tokens`), `serde_json` does the reading:
///
/// ```
/// use bytes::Bytes;
/// use redlimit::layer::{BodyUsage, SseUsage};
///
/// let mut usage = SseUsage::new(|data: &str| {
///     let chunk: serde_json::Value = serde_json::from_str(data).ok()?;
///     chunk["usage"]["total_tokens"].as_u64()
/// });
/// usage.data(&Bytes::from_static(b"data: {\"choices\":[{\"delta\":{\"content\":\"Hi\"}}]}\n\n"));
/// usage.data(&Bytes::from_static(b"data: {\"choices\":[],\"usage\":{\"total_t"));
/// usage.data(&Bytes::from_static(b"okens\":321}}\n\ndata: [DONE]\n\n"));
/// assert_eq!(usage.cost(), Some(321));
/// ```
#[derive(Debug, Clone)]
pub struct SseUsage<F> {
    read: F,
    /// The line being read (its end not seen yet).
    line: Vec<u8>,
    /// The event being read: its data lines so far.
    event: Vec<u8>,
    /// Whether the event has a data line (an empty one too).
    has_data: bool,
    /// The event outgrew [`MAX_EVENT`]: skipped up to its end.
    skipping: bool,
    /// The last byte was a CR: an LF right after it ends no other line.
    after_cr: bool,
    cost: Option<u64>,
}

impl<F> SseUsage<F>
where
    F: FnMut(&str) -> Option<u64> + Send + 'static,
{
    /// Reads each event's data with `read` (`None`: this event says nothing of the cost).
    ///
    /// ```
    /// use bytes::Bytes;
    /// use redlimit::layer::{BodyUsage, SseUsage};
    /// let mut usage = SseUsage::new(|data: &str| data.strip_prefix("tokens=")?.parse().ok());
    /// usage.data(&Bytes::from_static(b"data: hello\r\n\r\ndata: tokens=12\r\n\r\n"));
    /// assert_eq!(usage.cost(), Some(12));
    /// ```
    pub fn new(read: F) -> Self {
        SseUsage {
            read,
            line: Vec::new(),
            event: Vec::new(),
            has_data: false,
            skipping: false,
            after_cr: false,
            cost: None,
        }
    }

    fn end_line(&mut self) {
        let line = std::mem::take(&mut self.line);
        if line.is_empty() {
            self.dispatch();
        } else if let Some(value) = line.strip_prefix(b"data") {
            // `data` alone, or `data:` then the value (one space after the colon dropped).
            let value = match value {
                [] => Some(&[][..]),
                [b':', b' ', rest @ ..] | [b':', rest @ ..] => Some(rest),
                _ => None,
            };
            if let Some(value) = value {
                self.data_line(value);
            }
        }
        self.line = line;
        self.line.clear();
    }

    fn data_line(&mut self, value: &[u8]) {
        if self.skipping {
            return;
        }
        if self.event.len() + value.len() + 1 > MAX_EVENT {
            self.skipping = true;
            return;
        }
        if self.has_data {
            self.event.push(b'\n');
        }
        self.event.extend_from_slice(value);
        self.has_data = true;
    }

    fn dispatch(&mut self) {
        if self.has_data
            && !self.skipping
            && let Ok(data) = std::str::from_utf8(&self.event)
            && let Some(cost) = (self.read)(data)
        {
            self.cost = Some(cost);
        }
        self.event.clear();
        self.has_data = false;
        self.skipping = false;
    }
}

impl<F> BodyUsage for SseUsage<F>
where
    F: FnMut(&str) -> Option<u64> + Send + 'static,
{
    fn data(&mut self, data: &Bytes) {
        for &byte in data.iter() {
            match byte {
                b'\n' if self.after_cr => self.after_cr = false,
                b'\n' | b'\r' => {
                    self.after_cr = byte == b'\r';
                    self.end_line();
                }
                _ => {
                    self.after_cr = false;
                    if self.line.len() < MAX_EVENT {
                        self.line.push(byte);
                    } else {
                        self.skipping = true;
                    }
                }
            }
        }
    }

    fn cost(&mut self) -> Option<u64> {
        // A stream that ends without a blank line still ends its last event.
        if !self.line.is_empty() {
            self.end_line();
        }
        self.dispatch();
        self.cost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(data: &str) -> Option<u64> {
        data.strip_prefix("n=")?.parse().ok()
    }

    fn read(chunks: &[&[u8]]) -> Option<u64> {
        let mut usage = SseUsage::new(tokens);
        for chunk in chunks {
            usage.data(&Bytes::copy_from_slice(chunk));
        }
        usage.cost()
    }

    #[test]
    fn the_last_cost_of_the_stream_wins_whatever_the_line_ends() {
        assert_eq!(read(&[b"data: n=1\n\ndata: n=2\n\n"]), Some(2));
        assert_eq!(read(&[b"data: n=1\r\n\r\n"]), Some(1));
        assert_eq!(read(&[b"data: n=1\r\r"]), Some(1));
        assert_eq!(read(&[b"data:n=7\r", b"\n\r", b"\n"]), Some(7));
        // Split anywhere, comments and other fields ignored, no final blank line.
        assert_eq!(
            read(&[b": keep-alive\nevent: usage\nid: 3\nda", b"ta: n=4", b"2"]),
            Some(42)
        );
        assert_eq!(read(&[b"data: hello\n\n"]), None);
        assert_eq!(read(&[]), None);
    }

    #[test]
    fn data_lines_join_and_fields_must_match_exactly() {
        let mut usage = SseUsage::new(|data: &str| (data == "a\nb").then_some(9));
        usage.data(&Bytes::from_static(b"data: a\ndata: b\n\n"));
        assert_eq!(usage.cost(), Some(9));
        // `database: n=5` is not a data field.
        assert_eq!(read(&[b"database: n=5\n\n"]), None);
    }

    #[test]
    fn an_event_too_long_is_skipped_and_the_next_one_read() {
        let mut usage = SseUsage::new(tokens);
        usage.data(&Bytes::from_static(b"data: n=1"));
        usage.data(&Bytes::from(vec![b'0'; MAX_EVENT + 10]));
        usage.data(&Bytes::from_static(b"\n\ndata: n=3\n\n"));
        assert_eq!(usage.cost(), Some(3));
        assert!(usage.line.capacity() <= MAX_EVENT * 2);
        // Not UTF-8: skipped.
        assert_eq!(read(&[b"data: n=\xff\n\n"]), None);
    }
}
