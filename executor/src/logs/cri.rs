//! The CRI log line: `<RFC3339Nano> <stdout|stderr> <F|P> <text>\n`, as
//! containerd writes it and kubelet reads it. `P` marks a piece of a line
//! longer than [`MAX_LINE`], continued on the next line; `F` a full line or
//! the last piece of one.

use std::time::SystemTime;

use k8s_openapi::jiff::Timestamp;

/// The longest text one log line carries (containerd's default
/// `max_container_log_line_size`); a longer line is split into `P` pieces.
pub const MAX_LINE: usize = 16 * 1024;

/// Which of a container's outputs a line came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// The word the CRI format uses.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// `2016-10-06T00:17:09.669794202Z`: always nine digits, so lines sort and
/// compare as text.
pub fn format_time(at: SystemTime) -> String {
    timestamp(at).strftime("%Y-%m-%dT%H:%M:%S.%9fZ").to_string()
}

/// `at` as a timestamp (the epoch for times before it).
pub fn timestamp(at: SystemTime) -> Timestamp {
    match at.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => Timestamp::new(
            i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
            i32::try_from(d.subsec_nanos()).unwrap_or(0),
        )
        .unwrap_or(Timestamp::UNIX_EPOCH),
        Err(_) => Timestamp::UNIX_EPOCH,
    }
}

/// Appends one CRI line for `text` (which holds no newline) to `out`.
pub fn push_line(out: &mut Vec<u8>, at: &str, stream: Stream, partial: bool, text: &[u8]) {
    out.extend_from_slice(at.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_str().as_bytes());
    out.extend_from_slice(if partial { b" P " } else { b" F " });
    out.extend_from_slice(text);
    out.push(b'\n');
}

/// One parsed CRI line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line<'a> {
    /// When the executor read it.
    pub time: Timestamp,
    /// The timestamp as written.
    pub time_text: &'a [u8],
    /// stdout or stderr.
    pub stream: Stream,
    /// A piece continued on the next line.
    pub partial: bool,
    /// The text, without the newline.
    pub text: &'a [u8],
}

/// Parses one line (without its newline); `None` if it is not a CRI line.
pub fn parse_line(line: &[u8]) -> Option<Line<'_>> {
    let mut parts = line.splitn(4, |b| *b == b' ');
    let time_text = parts.next()?;
    let stream = match parts.next()? {
        b"stdout" => Stream::Stdout,
        b"stderr" => Stream::Stderr,
        _ => return None,
    };
    let partial = match parts.next()? {
        b"P" => true,
        b"F" => false,
        _ => return None,
    };
    let text = parts.next().unwrap_or(b"");
    let time = std::str::from_utf8(time_text).ok()?.parse().ok()?;
    Some(Line {
        time,
        time_text,
        stream,
        partial,
        text,
    })
}

/// The text a CRI log carries, pieces joined, one stream only or both
/// (`None`): what `kubectl logs` prints without options.
pub fn texts(log: &[u8], only: Option<Stream>) -> String {
    let mut out = Vec::new();
    for line in log.split(|b| *b == b'\n').filter_map(parse_line) {
        if only.is_none_or(|s| s == line.stream) {
            out.extend_from_slice(line.text);
            if !line.partial {
                out.push(b'\n');
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Cuts one stream's bytes into CRI lines, holding at most [`MAX_LINE`]
/// bytes of an unfinished line between reads.
#[derive(Debug)]
pub struct Splitter {
    stream: Stream,
    pending: Vec<u8>,
}

impl Splitter {
    /// A splitter for `stream`.
    pub fn new(stream: Stream) -> Self {
        Splitter {
            stream,
            pending: Vec::new(),
        }
    }

    /// Appends to `out` the CRI lines that `chunk` completes, stamped `at`.
    pub fn feed(&mut self, chunk: &[u8], at: &str, out: &mut Vec<u8>) {
        let mut rest = chunk;
        while !rest.is_empty() {
            let room = MAX_LINE - self.pending.len();
            let window = &rest[..rest.len().min(room)];
            match window.iter().position(|b| *b == b'\n') {
                Some(i) => {
                    self.pending.extend_from_slice(&window[..i]);
                    push_line(out, at, self.stream, false, &self.pending);
                    self.pending.clear();
                    rest = &rest[i + 1..];
                }
                None => {
                    self.pending.extend_from_slice(window);
                    rest = &rest[window.len()..];
                    if self.pending.len() == MAX_LINE {
                        push_line(out, at, self.stream, true, &self.pending);
                        self.pending.clear();
                    }
                }
            }
        }
    }

    /// At the end of the stream: the unfinished line, if any, as a full one.
    pub fn finish(&mut self, at: &str, out: &mut Vec<u8>) {
        if !self.pending.is_empty() {
            push_line(out, at, self.stream, false, &self.pending);
            self.pending.clear();
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    const AT: &str = "2016-10-06T00:17:09.669794202Z";

    #[test]
    fn times_have_nine_digits() {
        let at = SystemTime::UNIX_EPOCH + Duration::new(1_475_713_029, 669_794_202);
        assert_eq!(format_time(at), AT);
        let whole = SystemTime::UNIX_EPOCH + Duration::from_secs(1_475_713_029);
        assert_eq!(format_time(whole), "2016-10-06T00:17:09.000000000Z");
    }

    #[test]
    fn lines_are_cut_at_newlines_across_reads() {
        let mut s = Splitter::new(Stream::Stderr);
        let mut out = Vec::new();
        s.feed(b"hel", AT, &mut out);
        assert!(out.is_empty());
        s.feed(b"lo\nwor", AT, &mut out);
        s.feed(b"ld\n\n", AT, &mut out);
        s.finish(AT, &mut out);
        let text = String::from_utf8(out).unwrap();
        assert_eq!(
            text,
            format!("{AT} stderr F hello\n{AT} stderr F world\n{AT} stderr F \n")
        );
    }

    #[test]
    fn a_long_line_becomes_partial_pieces() {
        let mut s = Splitter::new(Stream::Stdout);
        let mut out = Vec::new();
        let long = vec![b'x'; MAX_LINE + 10];
        s.feed(&long, AT, &mut out);
        s.feed(b"\n", AT, &mut out);
        let lines: Vec<Line<'_>> = out
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| parse_line(l).unwrap())
            .collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].partial);
        assert_eq!(lines[0].text.len(), MAX_LINE);
        assert!(!lines[1].partial);
        assert_eq!(lines[1].text, b"xxxxxxxxxx");
    }

    #[test]
    fn an_unfinished_last_line_is_full_at_the_end() {
        let mut s = Splitter::new(Stream::Stdout);
        let mut out = Vec::new();
        s.feed(b"no newline", AT, &mut out);
        s.finish(AT, &mut out);
        assert_eq!(out, format!("{AT} stdout F no newline\n").into_bytes());
    }

    #[test]
    fn parse_reads_back_what_was_written() {
        let mut out = Vec::new();
        push_line(&mut out, AT, Stream::Stdout, true, b"a b  c");
        let line = parse_line(out.strip_suffix(b"\n").unwrap()).unwrap();
        assert_eq!(line.stream, Stream::Stdout);
        assert!(line.partial);
        assert_eq!(line.text, b"a b  c");
        assert_eq!(line.time_text, AT.as_bytes());
        assert_eq!(line.time.to_string(), "2016-10-06T00:17:09.669794202Z");
        assert!(parse_line(b"not a log line").is_none());
        push_line(&mut out, AT, Stream::Stdout, false, b"!");
        push_line(&mut out, AT, Stream::Stderr, false, b"err");
        assert_eq!(texts(&out, None), "a b  c!\nerr\n");
        assert_eq!(texts(&out, Some(Stream::Stderr)), "err\n");
        assert!(parse_line(b"2016-10-06T00:17:09Z stdin F x").is_none());
    }
}
