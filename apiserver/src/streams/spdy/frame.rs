//! SPDY/3.1 frames on the wire: the 8-byte frame header, each control frame's
//! fixed fields, and data frames. Header blocks stay compressed here; the
//! session ([`super::session`]) runs them through the connection's zlib
//! streams, because their state spans every frame of a connection.

use bytes::{Buf, BufMut, Bytes, BytesMut};

use super::SpdyError;

/// The protocol version every control frame carries.
pub(crate) const VERSION: u16 = 3;
/// The biggest frame payload this end accepts. kubectl and kubelet write at
/// most 32 KiB per frame (Go's `io.Copy` buffer); a megabyte leaves room and
/// still bounds what one connection can make us hold.
pub(crate) const MAX_PAYLOAD: usize = 1 << 20;
/// FLAG_FIN, on data frames and on SYN_STREAM / SYN_REPLY / HEADERS.
pub(crate) const FLAG_FIN: u8 = 0x01;
/// FLAG_UNIDIRECTIONAL on SYN_STREAM.
pub(crate) const FLAG_UNIDIRECTIONAL: u8 = 0x02;

/// Control frame types (SPDY/3 section 2.6).
mod kind {
    pub(super) const SYN_STREAM: u16 = 1;
    pub(super) const SYN_REPLY: u16 = 2;
    pub(super) const RST_STREAM: u16 = 3;
    pub(super) const SETTINGS: u16 = 4;
    pub(super) const PING: u16 = 6;
    pub(super) const GOAWAY: u16 = 7;
    pub(super) const HEADERS: u16 = 8;
    pub(super) const WINDOW_UPDATE: u16 = 9;
}

/// RST_STREAM status codes (SPDY/3 section 2.6.3).
pub(crate) mod rst {
    /// PROTOCOL_ERROR.
    pub(crate) const PROTOCOL_ERROR: u32 = 1;
    /// REFUSED_STREAM.
    pub(crate) const REFUSED_STREAM: u32 = 3;
    /// CANCEL.
    pub(crate) const CANCEL: u32 = 5;
    /// STREAM_IN_USE.
    pub(crate) const STREAM_IN_USE: u32 = 8;
}

/// GOAWAY status codes.
pub(crate) mod goaway {
    /// OK: a normal end.
    pub(crate) const OK: u32 = 0;
    /// PROTOCOL_ERROR.
    pub(crate) const PROTOCOL_ERROR: u32 = 1;
}

/// One frame, header blocks still compressed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum RawFrame {
    /// A data frame.
    Data {
        /// The stream.
        stream: u32,
        /// Flags (FLAG_FIN).
        flags: u8,
        /// The payload.
        data: Bytes,
    },
    /// SYN_STREAM: the peer opens a stream.
    SynStream {
        /// The new stream's id.
        stream: u32,
        /// The stream it is associated to (0: none).
        associated: u32,
        /// 0 (highest) to 7.
        priority: u8,
        /// FLAG_FIN, FLAG_UNIDIRECTIONAL.
        flags: u8,
        /// The compressed header block.
        block: Bytes,
    },
    /// SYN_REPLY: the answer to a SYN_STREAM.
    SynReply {
        /// The stream.
        stream: u32,
        /// FLAG_FIN.
        flags: u8,
        /// The compressed header block.
        block: Bytes,
    },
    /// HEADERS: more headers on an open stream.
    Headers {
        /// The stream.
        stream: u32,
        /// FLAG_FIN.
        flags: u8,
        /// The compressed header block.
        block: Bytes,
    },
    /// RST_STREAM: the stream ends abnormally.
    RstStream {
        /// The stream.
        stream: u32,
        /// Why ([`rst`]).
        status: u32,
    },
    /// SETTINGS: `(flags, id, value)` entries.
    Settings {
        /// The frame's flags (0x1 CLEAR_SETTINGS).
        flags: u8,
        /// The entries.
        entries: Vec<(u8, u32, u32)>,
    },
    /// PING: answered by echoing it.
    Ping {
        /// The ping's id (odd from clients, even from servers).
        id: u32,
    },
    /// GOAWAY: no new streams after `last_good`.
    GoAway {
        /// The last stream the sender processed.
        last_good: u32,
        /// Why ([`goaway`]).
        status: u32,
    },
    /// WINDOW_UPDATE: `delta` more bytes may be sent on `stream` (0: the connection).
    WindowUpdate {
        /// The stream, or 0 for the whole connection (SPDY/3.1).
        stream: u32,
        /// Additional bytes.
        delta: u32,
    },
    /// A control frame type we do not know: ignored, as SPDY/3 asks.
    Unknown {
        /// Its type.
        kind: u16,
    },
}

const STREAM_MASK: u32 = 0x7fff_ffff;

/// Takes one whole frame off the front of `buf`, or `None` until one has
/// arrived. Errors leave `buf` as it was; the connection is unusable after one.
pub(crate) fn decode(buf: &mut BytesMut) -> Result<Option<RawFrame>, SpdyError> {
    if buf.len() < 8 {
        return Ok(None);
    }
    let first = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]);
    let flags = buf[4];
    let len = u32::from_be_bytes([0, buf[5], buf[6], buf[7]]) as usize;
    if len > MAX_PAYLOAD {
        return Err(SpdyError::Protocol(format!(
            "frame of {len} bytes is over the limit of {MAX_PAYLOAD}"
        )));
    }
    if buf.len() < 8 + len {
        return Ok(None);
    }
    let control = first & 0x8000_0000 != 0;
    if !control {
        buf.advance(8);
        let data = buf.split_to(len).freeze();
        return Ok(Some(RawFrame::Data {
            stream: first & STREAM_MASK,
            flags,
            data,
        }));
    }
    let version = ((first >> 16) & 0x7fff) as u16;
    if version != VERSION {
        return Err(SpdyError::Protocol(format!(
            "SPDY version {version} is not 3"
        )));
    }
    let kind = (first & 0xffff) as u16;
    let payload = &buf[8..8 + len];
    let frame = control_frame(kind, flags, payload)?;
    buf.advance(8 + len);
    Ok(Some(frame))
}

fn short(what: &str) -> SpdyError {
    SpdyError::Protocol(format!("{what} frame is too short"))
}

fn u32_at(p: &[u8], at: usize) -> Option<u32> {
    let b = p.get(at..at + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn control_frame(kind: u16, flags: u8, p: &[u8]) -> Result<RawFrame, SpdyError> {
    Ok(match kind {
        kind::SYN_STREAM => {
            let stream = u32_at(p, 0).ok_or_else(|| short("SYN_STREAM"))? & STREAM_MASK;
            let associated = u32_at(p, 4).ok_or_else(|| short("SYN_STREAM"))? & STREAM_MASK;
            let priority = p.get(8).ok_or_else(|| short("SYN_STREAM"))? >> 5;
            let block = Bytes::copy_from_slice(p.get(10..).ok_or_else(|| short("SYN_STREAM"))?);
            RawFrame::SynStream {
                stream,
                associated,
                priority,
                flags,
                block,
            }
        }
        kind::SYN_REPLY | kind::HEADERS => {
            let name = if kind == kind::SYN_REPLY {
                "SYN_REPLY"
            } else {
                "HEADERS"
            };
            let stream = u32_at(p, 0).ok_or_else(|| short(name))? & STREAM_MASK;
            let block = Bytes::copy_from_slice(&p[4..]);
            if kind == kind::SYN_REPLY {
                RawFrame::SynReply {
                    stream,
                    flags,
                    block,
                }
            } else {
                RawFrame::Headers {
                    stream,
                    flags,
                    block,
                }
            }
        }
        kind::RST_STREAM => RawFrame::RstStream {
            stream: u32_at(p, 0).ok_or_else(|| short("RST_STREAM"))? & STREAM_MASK,
            status: u32_at(p, 4).ok_or_else(|| short("RST_STREAM"))?,
        },
        kind::SETTINGS => {
            let n = u32_at(p, 0).ok_or_else(|| short("SETTINGS"))? as usize;
            if p.len() != 4 + n.saturating_mul(8) {
                return Err(SpdyError::Protocol(format!(
                    "SETTINGS frame of {} bytes does not hold {n} entries",
                    p.len()
                )));
            }
            let entries = (0..n)
                .filter_map(|i| {
                    let head = u32_at(p, 4 + i * 8)?;
                    let value = u32_at(p, 8 + i * 8)?;
                    Some(((head >> 24) as u8, head & 0x00ff_ffff, value))
                })
                .collect();
            RawFrame::Settings { flags, entries }
        }
        kind::PING => RawFrame::Ping {
            id: u32_at(p, 0).ok_or_else(|| short("PING"))?,
        },
        kind::GOAWAY => RawFrame::GoAway {
            last_good: u32_at(p, 0).ok_or_else(|| short("GOAWAY"))? & STREAM_MASK,
            // SPDY/3 added the status; a SPDY/2-sized frame means OK.
            status: u32_at(p, 4).unwrap_or(goaway::OK),
        },
        kind::WINDOW_UPDATE => RawFrame::WindowUpdate {
            stream: u32_at(p, 0).ok_or_else(|| short("WINDOW_UPDATE"))? & STREAM_MASK,
            delta: u32_at(p, 4).ok_or_else(|| short("WINDOW_UPDATE"))? & STREAM_MASK,
        },
        other => RawFrame::Unknown { kind: other },
    })
}

fn control_header(out: &mut BytesMut, kind: u16, flags: u8, len: usize) {
    out.put_u16(0x8000 | VERSION);
    out.put_u16(kind);
    out.put_u8(flags);
    // Callers keep payloads far below 2^24 (MAX_PAYLOAD).
    out.put_uint(len as u64, 3);
}

/// SYN_REPLY and HEADERS: a stream id, then the header block.
fn stream_block(out: &mut BytesMut, kind: u16, stream: u32, flags: u8, block: &[u8]) {
    control_header(out, kind, flags, 4 + block.len());
    out.put_u32(stream & STREAM_MASK);
    out.put_slice(block);
}

/// Appends `frame` to `out`. Payloads over [`MAX_PAYLOAD`] are the caller's bug:
/// [`super::session::Encoder`] splits data before it gets here.
pub(crate) fn encode(frame: &RawFrame, out: &mut BytesMut) {
    match frame {
        RawFrame::Data {
            stream,
            flags,
            data,
        } => {
            out.put_u32(stream & STREAM_MASK);
            out.put_u8(*flags);
            out.put_uint(data.len() as u64, 3);
            out.put_slice(data);
        }
        RawFrame::SynStream {
            stream,
            associated,
            priority,
            flags,
            block,
        } => {
            control_header(out, kind::SYN_STREAM, *flags, 10 + block.len());
            out.put_u32(stream & STREAM_MASK);
            out.put_u32(associated & STREAM_MASK);
            out.put_u8((priority & 0x7) << 5);
            out.put_u8(0);
            out.put_slice(block);
        }
        RawFrame::SynReply {
            stream,
            flags,
            block,
        } => stream_block(out, kind::SYN_REPLY, *stream, *flags, block),
        RawFrame::Headers {
            stream,
            flags,
            block,
        } => stream_block(out, kind::HEADERS, *stream, *flags, block),
        RawFrame::RstStream { stream, status } => {
            control_header(out, kind::RST_STREAM, 0, 8);
            out.put_u32(stream & STREAM_MASK);
            out.put_u32(*status);
        }
        RawFrame::Settings { flags, entries } => {
            control_header(out, kind::SETTINGS, *flags, 4 + entries.len() * 8);
            out.put_u32(entries.len() as u32);
            for (f, id, value) in entries {
                out.put_u32((u32::from(*f) << 24) | (id & 0x00ff_ffff));
                out.put_u32(*value);
            }
        }
        RawFrame::Ping { id } => {
            control_header(out, kind::PING, 0, 4);
            out.put_u32(*id);
        }
        RawFrame::GoAway { last_good, status } => {
            control_header(out, kind::GOAWAY, 0, 8);
            out.put_u32(last_good & STREAM_MASK);
            out.put_u32(*status);
        }
        RawFrame::WindowUpdate { stream, delta } => {
            control_header(out, kind::WINDOW_UPDATE, 0, 8);
            out.put_u32(stream & STREAM_MASK);
            out.put_u32(delta & STREAM_MASK);
        }
        RawFrame::Unknown { kind } => control_header(out, *kind, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn roundtrip(frame: RawFrame) {
        let mut out = BytesMut::new();
        encode(&frame, &mut out);
        let whole = out.clone();
        // A frame cut anywhere is "not yet", never an error.
        for cut in 0..whole.len() {
            let mut part = BytesMut::from(&whole[..cut]);
            assert_eq!(decode(&mut part).expect("a prefix decodes"), None);
        }
        assert_eq!(decode(&mut out).expect("decodes"), Some(frame));
        assert!(out.is_empty());
    }

    #[test]
    fn every_frame_type_round_trips() {
        for frame in [
            RawFrame::Data {
                stream: 3,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hello"),
            },
            RawFrame::SynStream {
                stream: 1,
                associated: 0,
                priority: 7,
                flags: FLAG_UNIDIRECTIONAL,
                block: Bytes::from_static(b"\x78\x01"),
            },
            RawFrame::SynReply {
                stream: 1,
                flags: 0,
                block: Bytes::from_static(b"zz"),
            },
            RawFrame::Headers {
                stream: 5,
                flags: FLAG_FIN,
                block: Bytes::new(),
            },
            RawFrame::RstStream {
                stream: 7,
                status: rst::CANCEL,
            },
            RawFrame::Settings {
                flags: 1,
                entries: vec![(0, 7, 65536), (1, 4, 100)],
            },
            RawFrame::Ping { id: 1 },
            RawFrame::GoAway {
                last_good: 9,
                status: goaway::OK,
            },
            RawFrame::WindowUpdate {
                stream: 0,
                delta: 1 << 20,
            },
        ] {
            roundtrip(frame);
        }
    }

    #[test]
    fn a_data_frame_as_go_writes_it_decodes() {
        // stream 1, FIN, "hi": what spdystream's framer writes for Close after Write("hi").
        let mut buf = BytesMut::from(&b"\x00\x00\x00\x01\x01\x00\x00\x02hi"[..]);
        assert_eq!(
            decode(&mut buf).expect("decodes"),
            Some(RawFrame::Data {
                stream: 1,
                flags: FLAG_FIN,
                data: Bytes::from_static(b"hi")
            })
        );
    }

    #[test]
    fn oversized_and_foreign_frames_are_errors() {
        let mut big = BytesMut::from(&b"\x00\x00\x00\x01\x00\xff\xff\xff"[..]);
        assert!(decode(&mut big).is_err());
        let mut v2 = BytesMut::from(&b"\x80\x02\x00\x06\x00\x00\x00\x04\x00\x00\x00\x01"[..]);
        assert!(decode(&mut v2).is_err());
        let mut short_rst = BytesMut::from(&b"\x80\x03\x00\x03\x00\x00\x00\x02\x00\x01"[..]);
        assert!(decode(&mut short_rst).is_err());
    }

    proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = decode(&mut buf) {}
        }

        #[test]
        fn control_frames_of_any_payload_never_panic(
            kind in 0u16..12, flags in any::<u8>(), payload in proptest::collection::vec(any::<u8>(), 0..64)
        ) {
            let mut buf = BytesMut::new();
            control_header(&mut buf, kind, flags, payload.len());
            buf.put_slice(&payload);
            let _ = decode(&mut buf);
        }
    }
}
