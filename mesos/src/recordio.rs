//! RecordIO, the framing of Mesos' event streams: `<decimal length>\n<bytes>`.
//!
//! HTTP chunk boundaries mean nothing: a record can span chunks and a chunk
//! can hold many records. [`Decoder`] is incremental and bounded; the
//! length prefix is checked against the maximum *before* anything is
//! buffered for the record, and the prefix itself may have at most
//! [`MAX_LENGTH_DIGITS`] digits, so a hostile peer cannot make it allocate
//! more than one record's worth plus the chunk at hand.
//!
//! # Errors
//!
//! Once framing is lost there is no way to find the next record, so the
//! first error poisons the decoder: every later call returns it again.
//!
//! # Example
//!
//! ```
//! use mesos::recordio::{self, Decoder, DEFAULT_MAX_RECORD_LEN};
//!
//! let wire = [recordio::encode(b"hello"), recordio::encode(b"world")].concat();
//! let mut decoder = Decoder::new(DEFAULT_MAX_RECORD_LEN);
//! decoder.push(&wire[..3]); // "5\nh": not a whole record yet
//! assert_eq!(decoder.next_record().unwrap(), None);
//! decoder.push(&wire[3..]);
//! assert_eq!(&decoder.next_record().unwrap().unwrap()[..], b"hello");
//! assert_eq!(&decoder.next_record().unwrap().unwrap()[..], b"world");
//! decoder.finish().unwrap();
//! ```

use std::pin::Pin;
use std::sync::Arc;

use bytes::{Buf as _, Bytes, BytesMut};
use futures::{Stream, StreamExt as _};

/// Default bound on one record. A Mesos OFFERS event for a thousand agents
/// is a few MiB; 64 MiB leaves room for that while capping what a broken or
/// hostile peer can make us buffer.
pub const DEFAULT_MAX_RECORD_LEN: usize = 64 * 1024 * 1024;

/// At most this many digits in a length prefix: enough for any `u64`, so a
/// stream of leading zeros cannot keep the decoder reading a header forever.
pub const MAX_LENGTH_DIGITS: usize = 20;

/// Malformed RecordIO, or the byte stream under it failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum RecordIoError {
    /// A byte other than an ASCII digit (or the terminating `\n`) in a length
    /// prefix; an empty prefix reports its `\n`.
    #[error("RecordIO: byte 0x{byte:02x} at offset {offset} is not a length digit")]
    NotADigit {
        /// The offending byte.
        byte: u8,
        /// Its offset from the start of the stream.
        offset: u64,
    },
    /// A length prefix of zero: Mesos never sends empty records.
    #[error("RecordIO: zero-length record")]
    ZeroLength,
    /// A length above the decoder's maximum (reported as soon as the prefix
    /// exceeds it, before the record is buffered).
    #[error("RecordIO: record length {length} or more exceeds the maximum of {max}")]
    TooLong {
        /// The length read so far (the real one may be longer still).
        length: u64,
        /// The configured maximum.
        max: usize,
    },
    /// A length prefix with more than [`MAX_LENGTH_DIGITS`] digits.
    #[error("RecordIO: length prefix longer than {MAX_LENGTH_DIGITS} digits")]
    TooManyDigits,
    /// The stream ended inside a record or its length prefix.
    #[error("RecordIO: stream ended inside a record")]
    Truncated,
    /// The underlying byte stream failed.
    #[error("RecordIO: reading the stream failed: {0}")]
    Io(Arc<dyn std::error::Error + Send + Sync>),
}

/// `b"<len>\n" + record`.
pub fn encode(record: &[u8]) -> Vec<u8> {
    let mut buf = Vec::with_capacity(record.len() + MAX_LENGTH_DIGITS + 1);
    encode_into(&mut buf, record);
    buf
}

/// Appends `b"<len>\n" + record` to `buf`. An empty record encodes as
/// `0\n`, which decoders reject; every Mesos message has a required field,
/// so none encodes empty.
pub fn encode_into(buf: &mut Vec<u8>, record: &[u8]) {
    buf.extend_from_slice(record.len().to_string().as_bytes());
    buf.push(b'\n');
    buf.extend_from_slice(record);
}

/// An incremental, bounded RecordIO decoder: [`push`](Decoder::push) bytes
/// as they come, take whole records with [`next_record`](Decoder::next_record).
#[derive(Debug)]
pub struct Decoder {
    buf: BytesMut,
    max_record_len: usize,
    /// Stream offset of `buf[0]`, for error messages.
    consumed: u64,
    /// Length of the record whose prefix has been consumed, if any.
    pending: Option<usize>,
    failed: Option<RecordIoError>,
}

impl Decoder {
    /// A decoder that rejects records longer than `max_record_len` bytes.
    pub fn new(max_record_len: usize) -> Self {
        Self {
            buf: BytesMut::new(),
            max_record_len,
            consumed: 0,
            pending: None,
            failed: None,
        }
    }

    /// Appends bytes from the stream. Call [`next_record`](Self::next_record)
    /// until it answers `Ok(None)` before pushing more, so that at most one
    /// partial record is ever buffered.
    pub fn push(&mut self, chunk: &[u8]) {
        if self.failed.is_none() {
            self.buf.extend_from_slice(chunk);
        }
    }

    /// The next whole record, `Ok(None)` if more bytes are needed.
    ///
    /// # Errors
    /// Any [`RecordIoError`] but `Truncated` and `Io`; after one, every call
    /// returns it again.
    pub fn next_record(&mut self) -> Result<Option<Bytes>, RecordIoError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let len = match self.pending {
            Some(len) => len,
            None => match self.read_prefix() {
                Ok(Some(len)) => len,
                Ok(None) => return Ok(None),
                Err(err) => {
                    self.failed = Some(err.clone());
                    self.buf = BytesMut::new();
                    return Err(err);
                }
            },
        };
        if self.buf.len() < len {
            self.pending = Some(len);
            return Ok(None);
        }
        self.pending = None;
        self.consumed += len as u64;
        Ok(Some(self.buf.split_to(len).freeze()))
    }

    /// Bytes buffered but not yet returned as records. Pulling every record
    /// after each push keeps this below one record plus one chunk.
    pub fn buffered(&self) -> usize {
        self.buf.len()
    }

    /// Checks that the stream ended on a record boundary.
    ///
    /// # Errors
    /// [`RecordIoError::Truncated`] if part of a record (or of its prefix)
    /// is buffered; the poisoning error if decoding failed earlier.
    pub fn finish(&self) -> Result<(), RecordIoError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        if self.pending.is_some() || !self.buf.is_empty() {
            return Err(RecordIoError::Truncated);
        }
        Ok(())
    }

    /// Consumes a complete `<digits>\n` prefix and returns the length;
    /// `Ok(None)` (consuming nothing) if the prefix is not complete yet.
    fn read_prefix(&mut self) -> Result<Option<usize>, RecordIoError> {
        let mut length: u64 = 0;
        for (i, &byte) in self.buf.iter().enumerate() {
            match byte {
                b'\n' if i == 0 => {
                    return Err(RecordIoError::NotADigit {
                        byte,
                        offset: self.consumed,
                    });
                }
                b'\n' => {
                    if length == 0 {
                        return Err(RecordIoError::ZeroLength);
                    }
                    self.buf.advance(i + 1);
                    self.consumed += (i + 1) as u64;
                    // length <= max_record_len (checked per digit), a usize.
                    return Ok(Some(usize::try_from(length).unwrap_or(usize::MAX)));
                }
                b'0'..=b'9' => {
                    if i >= MAX_LENGTH_DIGITS {
                        return Err(RecordIoError::TooManyDigits);
                    }
                    let max = self.max_record_len;
                    length = length
                        .checked_mul(10)
                        .and_then(|l| l.checked_add(u64::from(byte - b'0')))
                        .filter(|l| *l <= max as u64)
                        .ok_or(RecordIoError::TooLong { length, max })?;
                }
                _ => {
                    return Err(RecordIoError::NotADigit {
                        byte,
                        offset: self.consumed + i as u64,
                    });
                }
            }
        }
        Ok(None)
    }
}

/// Records from a byte stream (an HTTP body): yields each record, then ends;
/// yields one error and ends if the bytes are malformed, the stream fails,
/// or it ends inside a record.
pub fn decode_stream<S, E>(
    stream: S,
    max_record_len: usize,
) -> impl Stream<Item = Result<Bytes, RecordIoError>>
where
    S: Stream<Item = Result<Bytes, E>>,
    E: std::error::Error + Send + Sync + 'static,
{
    struct State<S> {
        inner: Pin<Box<S>>,
        decoder: Decoder,
        done: bool,
    }
    let state = State {
        inner: Box::pin(stream),
        decoder: Decoder::new(max_record_len),
        done: false,
    };
    futures::stream::unfold(state, |mut st| async move {
        if st.done {
            return None;
        }
        loop {
            match st.decoder.next_record() {
                Ok(Some(record)) => return Some((Ok(record), st)),
                Ok(None) => {}
                Err(err) => {
                    st.done = true;
                    return Some((Err(err), st));
                }
            }
            match st.inner.next().await {
                Some(Ok(chunk)) => st.decoder.push(&chunk),
                Some(Err(err)) => {
                    st.done = true;
                    return Some((Err(RecordIoError::Io(Arc::new(err))), st));
                }
                None => {
                    st.done = true;
                    return st.decoder.finish().err().map(|err| (Err(err), st));
                }
            }
        }
    })
}

#[cfg(test)]
mod tests;
