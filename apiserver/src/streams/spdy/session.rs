//! The sans-IO session: bytes in → [`Event`]s ([`Decoder`]), and what to say →
//! bytes out ([`Encoder`]). Each half owns its direction's zlib stream, so the
//! reading and the writing task of [`super::conn`] never share state.

use bytes::{Bytes, BytesMut};

use super::SpdyError;
use super::frame::{self, FLAG_FIN, FLAG_UNIDIRECTIONAL, MAX_PAYLOAD, RawFrame};
use super::headers::{Deflater, Headers, Inflater};

/// What the peer said, header blocks inflated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Event {
    /// The peer opens `stream`.
    Open {
        /// The stream's id.
        stream: u32,
        /// Its headers (`streamtype`, `port`, `requestid` for Kubernetes).
        headers: Headers,
        /// The peer sends nothing on it (FLAG_FIN).
        fin: bool,
        /// Only the peer sends on it (FLAG_UNIDIRECTIONAL).
        unidirectional: bool,
    },
    /// The peer answered a stream we opened.
    Reply {
        /// The stream.
        stream: u32,
        /// Its headers.
        headers: Headers,
        /// The peer is done sending on it.
        fin: bool,
    },
    /// More headers; only `fin` matters to us.
    Headers {
        /// The stream.
        stream: u32,
        /// The peer is done sending on it.
        fin: bool,
    },
    /// Bytes on `stream`.
    Data {
        /// The stream.
        stream: u32,
        /// The bytes (may be empty with `fin`).
        data: Bytes,
        /// The peer is done sending on it.
        fin: bool,
    },
    /// The peer reset `stream`.
    Reset {
        /// The stream.
        stream: u32,
        /// Why.
        status: u32,
    },
    /// A ping to echo (or the answer to ours).
    Ping(u32),
    /// The peer opens no more streams.
    GoAway {
        /// Why.
        status: u32,
    },
    /// The peer grants `delta` more bytes on `stream` (0: the connection).
    Window {
        /// The stream, 0 for the connection.
        stream: u32,
        /// Bytes.
        delta: u32,
    },
    /// SETTINGS: (flags, id, value).
    Settings(Vec<(u8, u32, u32)>),
}

/// Bytes from the peer in, events out.
#[derive(Debug, Default)]
pub(crate) struct Decoder {
    buf: BytesMut,
    inflater: Inflater,
}

impl Decoder {
    /// Adds bytes read from the connection.
    pub(crate) fn feed(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// How many bytes wait for the rest of their frame.
    #[cfg(test)]
    pub(crate) fn pending(&self) -> usize {
        self.buf.len()
    }

    /// The next event, `None` until a whole frame has arrived. After an error
    /// the connection must be closed (the zlib stream is lost).
    pub(crate) fn next_event(&mut self) -> Result<Option<Event>, SpdyError> {
        loop {
            let Some(raw) = frame::decode(&mut self.buf)? else {
                return Ok(None);
            };
            let event = match raw {
                RawFrame::Data {
                    stream,
                    flags,
                    data,
                } => Event::Data {
                    stream,
                    data,
                    fin: flags & FLAG_FIN != 0,
                },
                RawFrame::SynStream {
                    stream,
                    flags,
                    block,
                    ..
                } => Event::Open {
                    stream,
                    headers: self.inflater.headers(&block)?,
                    fin: flags & FLAG_FIN != 0,
                    unidirectional: flags & FLAG_UNIDIRECTIONAL != 0,
                },
                RawFrame::SynReply {
                    stream,
                    flags,
                    block,
                } => Event::Reply {
                    stream,
                    headers: self.inflater.headers(&block)?,
                    fin: flags & FLAG_FIN != 0,
                },
                RawFrame::Headers {
                    stream,
                    flags,
                    block,
                } => {
                    // Inflated even though unused: the zlib stream must see every block.
                    self.inflater.headers(&block)?;
                    Event::Headers {
                        stream,
                        fin: flags & FLAG_FIN != 0,
                    }
                }
                RawFrame::RstStream { stream, status } => Event::Reset { stream, status },
                RawFrame::Settings { entries, .. } => Event::Settings(entries),
                RawFrame::Ping { id } => Event::Ping(id),
                RawFrame::GoAway { status, .. } => Event::GoAway { status },
                RawFrame::WindowUpdate { stream, delta } => Event::Window { stream, delta },
                RawFrame::Unknown { .. } => continue,
            };
            return Ok(Some(event));
        }
    }
}

/// What we say, in bytes.
#[derive(Debug)]
pub(crate) struct Encoder {
    deflater: Deflater,
}

impl Encoder {
    /// An encoder for a new connection.
    pub(crate) fn new() -> Result<Self, SpdyError> {
        Ok(Self {
            deflater: Deflater::new()?,
        })
    }

    /// SYN_STREAM: opens `stream` (odd ids from clients, even from servers); the
    /// server never does, tests speak as the client.
    #[cfg(test)]
    pub(crate) fn open(
        &mut self,
        stream: u32,
        headers: &Headers,
        fin: bool,
        out: &mut BytesMut,
    ) -> Result<(), SpdyError> {
        let block = self.deflater.block(headers)?;
        frame::encode(
            &RawFrame::SynStream {
                stream,
                associated: 0,
                priority: 0,
                flags: if fin { FLAG_FIN } else { 0 },
                block,
            },
            out,
        );
        Ok(())
    }

    /// SYN_REPLY: accepts `stream`.
    pub(crate) fn reply(
        &mut self,
        stream: u32,
        headers: &Headers,
        fin: bool,
        out: &mut BytesMut,
    ) -> Result<(), SpdyError> {
        let block = self.deflater.block(headers)?;
        frame::encode(
            &RawFrame::SynReply {
                stream,
                flags: if fin { FLAG_FIN } else { 0 },
                block,
            },
            out,
        );
        Ok(())
    }

    /// Data on `stream`, split into frames the peer accepts; `fin` on the last.
    pub(crate) fn data(&mut self, stream: u32, data: &Bytes, fin: bool, out: &mut BytesMut) {
        let mut rest = data.clone();
        loop {
            let piece = rest.split_to(rest.len().min(MAX_PAYLOAD));
            let last = rest.is_empty();
            frame::encode(
                &RawFrame::Data {
                    stream,
                    flags: if fin && last { FLAG_FIN } else { 0 },
                    data: piece,
                },
                out,
            );
            if last {
                return;
            }
        }
    }

    /// Any frame without a header block.
    pub(crate) fn control(&mut self, raw: &RawFrame, out: &mut BytesMut) {
        frame::encode(raw, out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_and_a_server_understand_each_other() {
        let (mut client, mut server) = (
            Encoder::new().expect("encoder"),
            Encoder::new().expect("encoder"),
        );
        let (mut at_server, mut at_client) = (Decoder::default(), Decoder::default());
        let mut wire = BytesMut::new();
        let h = Headers::new([("streamType", "stdin")]);
        client.open(1, &h, false, &mut wire).expect("open");
        client.data(1, &Bytes::from_static(b"abc"), true, &mut wire);
        client.control(&RawFrame::Ping { id: 1 }, &mut wire);
        // Fed one byte at a time: frames come out whole, in order.
        let mut events = Vec::new();
        for b in wire.iter() {
            at_server.feed(&[*b]);
            while let Some(e) = at_server.next_event().expect("decodes") {
                events.push(e);
            }
        }
        assert_eq!(
            events,
            vec![
                Event::Open {
                    stream: 1,
                    headers: h,
                    fin: false,
                    unidirectional: false
                },
                Event::Data {
                    stream: 1,
                    data: Bytes::from_static(b"abc"),
                    fin: true
                },
                Event::Ping(1),
            ]
        );
        let mut back = BytesMut::new();
        server
            .reply(1, &Headers::default(), false, &mut back)
            .expect("reply");
        at_client.feed(&back);
        assert_eq!(
            at_client.next_event().expect("decodes"),
            Some(Event::Reply {
                stream: 1,
                headers: Headers::default(),
                fin: false
            })
        );
        assert_eq!(at_client.pending(), 0);
    }

    #[test]
    fn big_data_is_split_into_frames_the_peer_accepts() {
        let mut enc = Encoder::new().expect("encoder");
        let mut dec = Decoder::default();
        let mut wire = BytesMut::new();
        let big = Bytes::from(vec![7u8; MAX_PAYLOAD * 2 + 5]);
        enc.data(3, &big, true, &mut wire);
        dec.feed(&wire);
        let mut total = 0;
        let mut fins = 0;
        while let Some(Event::Data { data, fin, .. }) = dec.next_event().expect("decodes") {
            total += data.len();
            fins += usize::from(fin);
        }
        assert_eq!((total, fins), (big.len(), 1));
    }
}
