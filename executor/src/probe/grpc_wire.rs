//! The gRPC probe's one unary call over HTTP/2, at the frame level.
//!
//! A probe is one request on a fresh connection, so a full HTTP/2 client
//! (streams, flow control, a connection task) is machinery for nothing.
//! The whole request goes out in one write: the connection preface,
//! SETTINGS, the call's HEADERS (HPACK literals, never indexed: there is
//! only one header block to send) and its DATA. The answer is read with
//! h2's frame codec, which decodes HPACK; the server's SETTINGS and PINGs
//! are acknowledged as RFC 9113 requires, until the call's stream ends.

use bytes::Bytes;
use futures::StreamExt;
use h2::frame::{Frame, Ping, Settings, StreamId};

use super::dial::Conn;
use super::{MAX_OUTPUT, USER_AGENT};

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const SETTINGS: u8 = 0x4;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
/// RFC 9113's smallest maximum frame size, which every peer accepts.
const MAX_FRAME: usize = 16_384;
/// The call's stream: the first a client opens.
const STREAM: u32 = 1;

fn frame_head(out: &mut Vec<u8>, len: usize, kind: u8, flags: u8, stream: u32) {
    out.extend_from_slice(&(len as u32).to_be_bytes()[1..]);
    out.push(kind);
    out.push(flags);
    out.extend_from_slice(&stream.to_be_bytes());
}

/// An HPACK integer with an `n`-bit prefix (RFC 7541 §5.1).
fn hpack_int(out: &mut Vec<u8>, first: u8, n: u8, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.push(first | v as u8);
        return;
    }
    out.push(first | max as u8);
    v -= max;
    while v >= 0x80 {
        out.push((v & 0x7f) as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn hpack_str(out: &mut Vec<u8>, s: &str) {
    hpack_int(out, 0, 7, s.len());
    out.extend_from_slice(s.as_bytes());
}

/// A literal without indexing whose name is static table entry `index`
/// (`index` 0: the name is a literal too).
fn literal(out: &mut Vec<u8>, index: usize, name: &str, value: &str) {
    hpack_int(out, 0, 4, index);
    if index == 0 {
        hpack_str(out, name);
    }
    hpack_str(out, value);
}

/// The request's bytes: preface, SETTINGS, HEADERS and DATA, or `None`
/// when `body` does not fit one frame (a service name of over 16 KiB).
pub(crate) fn request(authority: &str, path: &str, body: &[u8]) -> Option<Vec<u8>> {
    if body.len() > MAX_FRAME {
        return None;
    }
    let mut block = Vec::with_capacity(128);
    block.push(0x83); // :method POST, static entry 3
    block.push(0x86); // :scheme http, static entry 6
    literal(&mut block, 4, ":path", path);
    literal(&mut block, 1, ":authority", authority);
    literal(&mut block, 31, "content-type", "application/grpc");
    literal(&mut block, 58, "user-agent", USER_AGENT);
    literal(&mut block, 0, "te", "trailers");
    if block.len() > MAX_FRAME {
        return None;
    }
    let mut out = Vec::with_capacity(PREFACE.len() + 40 + block.len() + body.len());
    out.extend_from_slice(PREFACE);
    // SETTINGS_ENABLE_PUSH = 0: a probe takes no pushed streams.
    frame_head(&mut out, 6, SETTINGS, 0, 0);
    out.extend_from_slice(&[0, 2, 0, 0, 0, 0]);
    frame_head(&mut out, block.len(), HEADERS, END_HEADERS, STREAM);
    out.extend_from_slice(&block);
    frame_head(&mut out, body.len(), DATA, END_STREAM, STREAM);
    out.extend_from_slice(body);
    Some(out)
}

/// What the call answered.
#[derive(Debug, Default)]
pub(crate) struct Answer {
    /// `grpc-status`, from the trailers or a trailers-only response.
    pub(crate) grpc_status: Option<String>,
    /// The response messages, length-prefixed.
    pub(crate) body: Vec<u8>,
}

/// Reads the call's answer from `conn` (the request already sent), until
/// its stream ends. Errors are h2's words for what broke.
pub(crate) async fn answer(conn: Conn) -> Result<Answer, String> {
    let mut codec: h2::Codec<Conn, Bytes> = h2::Codec::new(conn);
    codec.set_max_recv_header_list_size(MAX_OUTPUT);
    let mut answer = Answer::default();
    let ours = StreamId::from(STREAM);
    loop {
        let frame = match codec.next().await {
            Some(frame) => frame.map_err(|e| e.to_string())?,
            None => return Err("connection closed before the response ended".into()),
        };
        match frame {
            Frame::Settings(s) if !s.is_ack() => reply(&mut codec, Settings::ack().into()).await?,
            Frame::Ping(p) if !p.is_ack() => {
                reply(&mut codec, Ping::pong(p.into_payload()).into()).await?;
            }
            Frame::Headers(h) if h.stream_id() == ours => {
                if let Some(s) = h.fields().get("grpc-status").and_then(|v| v.to_str().ok()) {
                    answer.grpc_status = Some(s.to_owned());
                }
                if h.is_end_stream() {
                    return Ok(answer);
                }
            }
            Frame::Data(d) if d.stream_id() == ours => {
                answer.body.extend_from_slice(d.payload());
                if answer.body.len() > MAX_OUTPUT {
                    return Err("response too large".into());
                }
                if d.is_end_stream() {
                    return Ok(answer);
                }
            }
            Frame::Reset(r) if r.stream_id() == ours => {
                return Err(format!("stream error received: {}", r.reason()));
            }
            // A GOAWAY that still covers stream 1 lets it finish.
            Frame::GoAway(g) if u32::from(g.last_stream_id()) < STREAM => {
                return Err(format!("connection error received: {}", g.reason()));
            }
            _ => {}
        }
    }
}

async fn reply(codec: &mut h2::Codec<Conn, Bytes>, frame: Frame<Bytes>) -> Result<(), String> {
    std::future::poll_fn(|cx| codec.poll_ready(cx))
        .await
        .map_err(|e| e.to_string())?;
    codec.buffer(frame).map_err(|e| format!("{e:?}"))?;
    std::future::poll_fn(|cx| codec.flush(cx))
        .await
        .map_err(|e| e.to_string())
}
