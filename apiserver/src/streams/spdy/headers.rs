//! SPDY/3 header blocks: name/value pairs with 32-bit lengths, compressed by one
//! zlib stream per direction that lives as long as the connection and starts from
//! the SPDY dictionary (SPDY/3 section 2.6.10).

use bytes::{BufMut, Bytes, BytesMut};
use flate2::{Compress, Compression, Decompress, FlushCompress, FlushDecompress, Status};

use super::SpdyError;
use super::dictionary::DICTIONARY;

/// The most a header block may inflate to: Kubernetes' streams carry three or
/// four short headers, so this only stops a zlib bomb.
const MAX_INFLATED: usize = 256 << 10;

/// A stream's headers, names lowercased as SPDY/3 requires.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Headers(Vec<(String, String)>);

impl Headers {
    /// Headers from `(name, value)` pairs; names are lowercased.
    #[cfg(test)]
    pub(crate) fn new<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        Self(
            pairs
                .into_iter()
                .map(|(n, v)| (n.to_ascii_lowercase(), v.to_owned()))
                .collect(),
        )
    }

    /// The first value of `name` (any case), as Go's `http.Header.Get`; SPDY joins
    /// repeated values with NUL.
    pub(crate) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.split('\0').next().unwrap_or(v.as_str()))
    }

    fn encode(&self) -> Vec<u8> {
        let mut out = BytesMut::new();
        out.put_u32(self.0.len() as u32);
        for (name, value) in &self.0 {
            out.put_u32(name.len() as u32);
            out.put_slice(name.as_bytes());
            out.put_u32(value.len() as u32);
            out.put_slice(value.as_bytes());
        }
        out.to_vec()
    }

    fn decode(block: &[u8]) -> Result<Self, SpdyError> {
        let bad = |why: &str| SpdyError::Protocol(format!("bad header block: {why}"));
        let mut rest = block;
        let mut take = |n: usize| -> Result<&[u8], SpdyError> {
            if rest.len() < n {
                return Err(bad("truncated"));
            }
            let (head, tail) = rest.split_at(n);
            rest = tail;
            Ok(head)
        };
        let be = |b: &[u8]| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) as usize;
        let count = be(take(4)?);
        // Each pair takes at least 8 bytes: a count beyond that is a lie.
        if count > block.len() / 8 {
            return Err(bad("more pairs than bytes"));
        }
        let mut pairs = Vec::with_capacity(count);
        for _ in 0..count {
            let n = be(take(4)?);
            let name = std::str::from_utf8(take(n)?).map_err(|_| bad("name is not UTF-8"))?;
            if name.is_empty() {
                return Err(bad("empty name"));
            }
            let name = name.to_ascii_lowercase();
            let n = be(take(4)?);
            let value = String::from_utf8_lossy(take(n)?).into_owned();
            pairs.push((name, value));
        }
        Ok(Self(pairs))
    }
}

/// The sending half: compresses header blocks for one connection.
pub(crate) struct Deflater(Compress);

impl std::fmt::Debug for Deflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Deflater")
    }
}

impl Deflater {
    /// A fresh compressor with the SPDY dictionary.
    pub(crate) fn new() -> Result<Self, SpdyError> {
        let mut c = Compress::new(Compression::default(), true);
        c.set_dictionary(&DICTIONARY)
            .map_err(|e| SpdyError::Zlib(e.to_string()))?;
        Ok(Self(c))
    }

    /// `headers` compressed, sync-flushed so the peer can read it at once.
    pub(crate) fn block(&mut self, headers: &Headers) -> Result<Bytes, SpdyError> {
        let input = headers.encode();
        let mut out = Vec::with_capacity(input.len() + 64);
        let mut pos = 0;
        loop {
            if out.len() == out.capacity() {
                out.reserve(256);
            }
            let before = self.0.total_in();
            self.0
                .compress_vec(&input[pos..], &mut out, FlushCompress::Sync)
                .map_err(|e| SpdyError::Zlib(e.to_string()))?;
            pos += (self.0.total_in() - before) as usize;
            // Done when all input is in and zlib had room left to finish the flush.
            if pos >= input.len() && out.len() < out.capacity() {
                return Ok(out.into());
            }
        }
    }
}

/// The receiving half: inflates the peer's header blocks.
pub(crate) struct Inflater(Decompress);

impl std::fmt::Debug for Inflater {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Inflater")
    }
}

impl Default for Inflater {
    fn default() -> Self {
        Self(Decompress::new(true))
    }
}

impl Inflater {
    /// The headers in `block`, the next piece of the peer's zlib stream.
    pub(crate) fn headers(&mut self, block: &[u8]) -> Result<Headers, SpdyError> {
        let zlib = |e: flate2::DecompressError| SpdyError::Zlib(e.to_string());
        let mut out = Vec::with_capacity(block.len() * 4 + 64);
        let mut pos = 0;
        loop {
            if out.len() == out.capacity() {
                if out.len() >= MAX_INFLATED {
                    return Err(SpdyError::Protocol(format!(
                        "header block inflates past {MAX_INFLATED} bytes"
                    )));
                }
                out.reserve(out.len().max(256));
            }
            let (before_in, before_out) = (self.0.total_in(), out.len());
            let status = match self
                .0
                .decompress_vec(&block[pos..], &mut out, FlushDecompress::Sync)
            {
                Ok(status) => status,
                Err(e) if e.needs_dictionary().is_some() => {
                    self.0.set_dictionary(&DICTIONARY).map_err(zlib)?;
                    Status::Ok
                }
                Err(e) => return Err(zlib(e)),
            };
            let used = (self.0.total_in() - before_in) as usize;
            pos += used;
            if status == Status::StreamEnd {
                return Err(SpdyError::Protocol("header zlib stream ended".into()));
            }
            let stuck = used == 0 && out.len() == before_out && status == Status::BufError;
            if (pos >= block.len() && out.len() < out.capacity()) || stuck {
                break;
            }
        }
        Headers::decode(&out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Generated with Python's zlib (`compressobj(zdict=SPDY dictionary)`,
    /// `Z_SYNC_FLUSH` per block), an implementation independent of ours, for the
    /// first two SYN_STREAM header blocks kubectl's port-forward sends.
    const RECORDED: [&str; 2] = [
        include_str!("testdata/pf_error_block.hex"),
        include_str!("testdata/pf_data_block.hex"),
    ];

    fn unhex(s: &str) -> Vec<u8> {
        let s = s.trim();
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).expect("hex fixture"))
            .collect()
    }

    #[test]
    fn blocks_recorded_from_another_zlib_inflate() {
        let mut inflater = Inflater::default();
        let first = inflater.headers(&unhex(RECORDED[0])).expect("first block");
        assert_eq!(first.get("streamType"), Some("error"));
        assert_eq!(first.get("port"), Some("8080"));
        assert_eq!(first.get("requestid"), Some("0"));
        let second = inflater.headers(&unhex(RECORDED[1])).expect("second block");
        assert_eq!(second.get("streamtype"), Some("data"));
        assert_eq!(second.get("port"), Some("8080"));
    }

    #[test]
    fn our_blocks_inflate_across_a_connection() {
        let mut deflater = Deflater::new().expect("deflater");
        let mut inflater = Inflater::default();
        for i in 0..50 {
            let id = i.to_string();
            let h = Headers::new([("StreamType", "stdout"), ("requestID", id.as_str())]);
            let block = deflater.block(&h).expect("deflates");
            assert_eq!(inflater.headers(&block).expect("inflates"), h);
        }
        let empty = deflater.block(&Headers::default()).expect("deflates");
        assert_eq!(
            inflater.headers(&empty).expect("inflates"),
            Headers::default()
        );
    }

    #[test]
    fn garbage_and_lies_are_errors() {
        assert!(Inflater::default().headers(b"not zlib at all").is_err());
        assert!(Headers::decode(&[0xff, 0xff, 0xff, 0xff]).is_err());
        assert!(Headers::decode(&[0, 0, 0, 1, 0, 0, 0, 9, b'a']).is_err());
    }

    proptest::proptest! {
        #[test]
        fn inflate_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..128)) {
            let _ = Inflater::default().headers(&bytes);
            let _ = Headers::decode(&bytes);
        }
    }
}
