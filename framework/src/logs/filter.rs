//! From CRI log lines to what `kubectl logs` prints, as kubelet serves them:
//! the text of each line in file order (stdout and stderr interleaved as
//! written), `--timestamps` prefixing every piece with its nine-digit time,
//! `--since` dropping older lines, `--tail` counting lines from the end and
//! `--limit-bytes` cutting the output (mid-line if need be).

use std::time::SystemTime;

use executor::logs::cri;
use k8s_openapi::jiff::Timestamp;

/// A filter over one log file's bytes, fed in any chunks.
#[derive(Debug)]
pub(crate) struct Filter {
    timestamps: bool,
    since: Option<Timestamp>,
    /// Bytes still allowed out (`--limit-bytes`).
    left: Option<u64>,
    /// An unfinished CRI line from the last chunk.
    pending: Vec<u8>,
}

impl Filter {
    pub(crate) fn new(timestamps: bool, since: Option<SystemTime>, limit: Option<i64>) -> Self {
        Filter {
            timestamps,
            since: since.map(cri::timestamp),
            left: limit.map(|n| n.max(0).unsigned_abs()),
            pending: Vec::new(),
        }
    }

    /// Whether `--limit-bytes` is used up: nothing more comes out.
    pub(crate) fn exhausted(&self) -> bool {
        self.left == Some(0)
    }

    /// The output for `chunk`; an unfinished last line waits for the next.
    pub(crate) fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let Some(end) = self.pending.iter().rposition(|b| *b == b'\n') else {
            return Vec::new();
        };
        let whole: Vec<u8> = self.pending.drain(..=end).collect();
        let mut out = Vec::new();
        for raw in whole.split(|b| *b == b'\n') {
            if self.exhausted() {
                break;
            }
            // Lines that are not CRI lines (none should be) are skipped,
            // as kubelet skips what it cannot parse.
            let Some(line) = cri::parse_line(raw) else {
                continue;
            };
            if self.since.is_some_and(|s| line.time < s) {
                continue;
            }
            let mut piece = Vec::with_capacity(line.text.len() + 32);
            if self.timestamps {
                piece.extend_from_slice(
                    line.time
                        .strftime("%Y-%m-%dT%H:%M:%S.%9fZ ")
                        .to_string()
                        .as_bytes(),
                );
            }
            piece.extend_from_slice(line.text);
            if !line.partial {
                piece.push(b'\n');
            }
            if let Some(left) = &mut self.left {
                let take = piece
                    .len()
                    .min(usize::try_from(*left).unwrap_or(usize::MAX));
                piece.truncate(take);
                *left -= take as u64;
            }
            out.extend_from_slice(&piece);
        }
        out
    }
}

/// Where the last `n` lines of `bytes` start (the whole text for `None`).
pub(crate) fn tail_start(bytes: &[u8], lines: Option<i64>) -> usize {
    let Some(n) = lines.and_then(|n| usize::try_from(n).ok()) else {
        return 0;
    };
    if n == 0 {
        return bytes.len();
    }
    let body = bytes.strip_suffix(b"\n").unwrap_or(bytes);
    let mut seen = 0;
    for (i, b) in body.iter().enumerate().rev() {
        if *b == b'\n' {
            seen += 1;
            if seen == n {
                return i + 1;
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    fn at(secs: u64) -> SystemTime {
        SystemTime::UNIX_EPOCH + Duration::new(1_475_713_000 + secs, 5)
    }

    fn log() -> Vec<u8> {
        let mut out = Vec::new();
        for (i, (stream, partial, text)) in [
            (cri::Stream::Stdout, false, "one"),
            (cri::Stream::Stderr, false, "two"),
            (cri::Stream::Stdout, true, "thr"),
            (cri::Stream::Stdout, false, "ee"),
        ]
        .into_iter()
        .enumerate()
        {
            let t = cri::format_time(at(i as u64 * 10));
            cri::push_line(&mut out, &t, stream, partial, text.as_bytes());
        }
        out
    }

    #[test]
    fn streams_interleave_in_file_order_and_pieces_join() {
        let mut f = Filter::new(false, None, None);
        assert_eq!(f.push(&log()), b"one\ntwo\nthree\n");
    }

    #[test]
    fn chunks_cut_mid_line_give_the_same_output() {
        let bytes = log();
        let mut f = Filter::new(false, None, None);
        let mut out = Vec::new();
        for c in bytes.chunks(7) {
            out.extend(f.push(c));
        }
        assert_eq!(out, b"one\ntwo\nthree\n");
    }

    #[test]
    fn timestamps_prefix_each_line_with_nine_digits() {
        let mut f = Filter::new(true, None, None);
        let out = String::from_utf8(f.push(&log())).unwrap();
        let first = out.lines().next().unwrap();
        assert_eq!(first, "2016-10-06T00:16:40.000000005Z one");
    }

    #[test]
    fn since_drops_older_lines() {
        let mut f = Filter::new(false, Some(at(15)), None);
        assert_eq!(f.push(&log()), b"three\n");
        let mut f = Filter::new(false, Some(at(10)), None);
        assert_eq!(f.push(&log()), b"two\nthree\n");
    }

    #[test]
    fn limit_bytes_cuts_mid_line() {
        let mut f = Filter::new(false, None, Some(6));
        assert_eq!(f.push(&log()), b"one\ntw");
        assert!(f.exhausted());
        assert!(f.push(&log()).is_empty());
    }

    #[test]
    fn tail_counts_lines_from_the_end() {
        let bytes = log();
        let start = tail_start(&bytes, Some(2));
        let mut f = Filter::new(false, None, None);
        assert_eq!(f.push(&bytes[start..]), b"three\n");
        assert_eq!(tail_start(b"a\nb\n", Some(10)), 0);
        assert_eq!(tail_start(b"a\nb\n", Some(0)), 4);
        assert_eq!(tail_start(b"a\nb\n", None), 0);
        assert_eq!(tail_start(b"a\nb\nc\n", Some(1)), 4);
    }
}
