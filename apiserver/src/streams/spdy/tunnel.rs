//! SPDY inside WebSocket (`SPDY/3.1+portforward.k8s.io`, kubectl ≥ 1.31):
//! client-go's `TunnelingConnection` writes each SPDY write as one binary
//! message and reads messages back to back as one byte stream. [`tunnel`] turns
//! an upgraded WebSocket into such a byte stream (a [`tokio::io::DuplexStream`])
//! for [`super::Connection::serve`], with two pumps and a bounded pipe between,
//! so backpressure crosses it.
//!
//! Only what the tunnel needs of RFC 6455 is here: masked client frames, binary
//! and continuation data, ping/pong, close.

use bytes::{Buf, BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, DuplexStream};
use tokio::sync::mpsc;

use super::SpdyError;
use super::frame::MAX_PAYLOAD;

/// The subprotocol kubectl asks for.
pub(crate) const PORTFORWARD_TUNNEL: &str = "SPDY/3.1+portforward.k8s.io";
/// Bytes the pipe between the pumps holds.
const PIPE: usize = 64 << 10;
/// The biggest message accepted: one SPDY frame and its header, with room.
const MAX_MESSAGE: usize = MAX_PAYLOAD + 1024;

pub(crate) const OP_CONTINUATION: u8 = 0;
pub(crate) const OP_TEXT: u8 = 1;
pub(crate) const OP_BINARY: u8 = 2;
pub(crate) const OP_CLOSE: u8 = 8;
pub(crate) const OP_PING: u8 = 9;
pub(crate) const OP_PONG: u8 = 10;

/// `Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key` (RFC 6455 section 4.2.2).
pub(crate) fn accept_key(key: &str) -> String {
    use base64::Engine as _;
    let mut input = key.trim().as_bytes().to_vec();
    input.extend_from_slice(b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11");
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &input);
    base64::engine::general_purpose::STANDARD.encode(digest.as_ref())
}

/// One WebSocket frame from the client.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct WsFrame {
    /// The opcode (`OP_*`).
    pub(crate) opcode: u8,
    /// The unmasked payload.
    pub(crate) payload: Vec<u8>,
}

/// Takes one client frame off `buf`, `None` until it is whole.
pub(crate) fn decode(buf: &mut BytesMut) -> Result<Option<WsFrame>, SpdyError> {
    let bad = |why: &str| SpdyError::Protocol(format!("WebSocket: {why}"));
    if buf.len() < 2 {
        return Ok(None);
    }
    let (b0, b1) = (buf[0], buf[1]);
    if b0 & 0x70 != 0 {
        return Err(bad("reserved bits set"));
    }
    if b1 & 0x80 == 0 {
        return Err(bad("client frames must be masked"));
    }
    let (len, at) = match b1 & 0x7f {
        126 if buf.len() >= 4 => (usize::from(u16::from_be_bytes([buf[2], buf[3]])), 4),
        127 if buf.len() >= 10 => {
            let mut n = [0u8; 8];
            n.copy_from_slice(&buf[2..10]);
            (
                usize::try_from(u64::from_be_bytes(n)).unwrap_or(usize::MAX),
                10,
            )
        }
        126 | 127 => return Ok(None),
        n => (usize::from(n), 2),
    };
    if len > MAX_MESSAGE {
        return Err(bad("message too big"));
    }
    if buf.len() < at + 4 + len {
        return Ok(None);
    }
    let mask = [buf[at], buf[at + 1], buf[at + 2], buf[at + 3]];
    buf.advance(at + 4);
    let mut payload = buf.split_to(len).to_vec();
    for (i, b) in payload.iter_mut().enumerate() {
        *b ^= mask[i % 4];
    }
    Ok(Some(WsFrame {
        opcode: b0 & 0x0f,
        payload,
    }))
}

/// A server frame (unmasked) of `opcode` carrying `payload`.
pub(crate) fn encode(opcode: u8, payload: &[u8], out: &mut BytesMut) {
    out.put_u8(0x80 | opcode);
    match payload.len() {
        n if n < 126 => out.put_u8(n as u8),
        n if n <= usize::from(u16::MAX) => {
            out.put_u8(126);
            out.put_u16(n as u16);
        }
        n => {
            out.put_u8(127);
            out.put_u64(n as u64);
        }
    }
    out.put_slice(payload);
}

/// Runs the tunnel over `ws`, an upgraded WebSocket connection; the returned
/// end carries the bytes of its binary messages both ways.
pub(crate) fn tunnel<T>(ws: T) -> DuplexStream
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (ours, theirs) = tokio::io::duplex(PIPE);
    let (ws_read, ws_write) = tokio::io::split(ws);
    let (pipe_read, pipe_write) = tokio::io::split(ours);
    let (control_tx, control_rx) = mpsc::channel(4);
    tokio::spawn(inbound(ws_read, pipe_write, control_tx));
    tokio::spawn(outbound(pipe_read, ws_write, control_rx));
    theirs
}

/// WebSocket → pipe; pings and close go to the outbound pump to answer.
async fn inbound<R, W>(ws: R, pipe: W, control: mpsc::Sender<(u8, Vec<u8>)>)
where
    R: AsyncRead,
    W: AsyncWrite,
{
    let mut ws = std::pin::pin!(ws);
    let mut pipe = std::pin::pin!(pipe);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        let frame = match decode(&mut buf) {
            Ok(Some(frame)) => frame,
            Ok(None) => match ws.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    buf.extend_from_slice(&chunk[..n]);
                    continue;
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "port-forward tunnel broken by the client");
                let _ = control
                    .send((OP_CLOSE, 1002u16.to_be_bytes().to_vec()))
                    .await;
                break;
            }
        };
        match frame.opcode {
            OP_BINARY | OP_CONTINUATION | OP_TEXT
                if pipe.write_all(&frame.payload).await.is_err() =>
            {
                break;
            }
            OP_BINARY | OP_CONTINUATION | OP_TEXT => {}
            OP_PING => {
                let _ = control.send((OP_PONG, frame.payload)).await;
            }
            OP_CLOSE => {
                let _ = control.send((OP_CLOSE, frame.payload)).await;
                break;
            }
            _ => {}
        }
    }
    let _ = pipe.shutdown().await;
}

/// Pipe → WebSocket binary messages, plus the answers `inbound` asks for.
async fn outbound<R, W>(pipe: R, ws: W, mut control: mpsc::Receiver<(u8, Vec<u8>)>)
where
    R: AsyncRead,
    W: AsyncWrite,
{
    let mut pipe = std::pin::pin!(pipe);
    let mut ws = std::pin::pin!(ws);
    let mut chunk = vec![0u8; 32 << 10];
    let mut out = BytesMut::new();
    let mut control_open = true;
    loop {
        let closing = tokio::select! {
            read = pipe.read(&mut chunk) => match read {
                Ok(0) | Err(_) => {
                    encode(OP_CLOSE, &1000u16.to_be_bytes(), &mut out);
                    true
                }
                Ok(n) => {
                    encode(OP_BINARY, &chunk[..n], &mut out);
                    false
                }
            },
            msg = control.recv(), if control_open => match msg {
                Some((opcode, payload)) => {
                    encode(opcode, &payload, &mut out);
                    opcode == OP_CLOSE
                }
                None => {
                    control_open = false;
                    false
                }
            },
        };
        if ws.write_all(&out).await.is_err() || ws.flush().await.is_err() {
            return;
        }
        out.clear();
        if closing {
            let _ = ws.shutdown().await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_frame(opcode: u8, payload: &[u8]) -> Vec<u8> {
        let mask = [1u8, 2, 3, 4];
        let mut out = vec![0x80 | opcode];
        match payload.len() {
            n if n < 126 => out.push(0x80 | n as u8),
            n => {
                out.push(0x80 | 126);
                out.extend_from_slice(&(n as u16).to_be_bytes());
            }
        }
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    #[test]
    fn the_accept_key_is_rfc_6455s_example() {
        assert_eq!(
            accept_key("dGhlIHNhbXBsZSBub25jZQ=="),
            "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="
        );
    }

    #[test]
    fn masked_frames_decode_whole_or_not_at_all() {
        let payload = vec![9u8; 300];
        let wire = client_frame(OP_BINARY, &payload);
        for cut in 0..wire.len() {
            let mut part = BytesMut::from(&wire[..cut]);
            assert_eq!(decode(&mut part).expect("prefix"), None);
        }
        let mut whole = BytesMut::from(&wire[..]);
        let frame = decode(&mut whole).expect("decodes").expect("whole");
        assert_eq!((frame.opcode, frame.payload), (OP_BINARY, payload));
        let mut unmasked = BytesMut::from(&[0x82u8, 0x01, 0x00][..]);
        assert!(decode(&mut unmasked).is_err());
    }

    #[tokio::test]
    async fn messages_become_a_byte_stream_and_back() {
        let (client, server) = tokio::io::duplex(1 << 16);
        let mut bytes = tunnel(server);
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let mut wire = client_frame(OP_BINARY, b"hel");
        wire.extend(client_frame(OP_PING, b"p"));
        wire.extend(client_frame(OP_BINARY, b"lo"));
        client_write.write_all(&wire).await.expect("client writes");
        let mut got = [0u8; 5];
        bytes.read_exact(&mut got).await.expect("tunnel reads");
        assert_eq!(&got, b"hello");
        bytes.write_all(b"back").await.expect("tunnel writes");
        // The pong and the binary message, in some order.
        let mut seen = Vec::new();
        let mut buf = [0u8; 64];
        while !(seen.windows(4).any(|w| w == b"back") && seen.contains(&(0x80 | OP_PONG))) {
            let n = client_read.read(&mut buf).await.expect("client reads");
            assert!(n > 0, "tunnel closed early");
            seen.extend_from_slice(&buf[..n]);
        }
    }

    proptest::proptest! {
        #[test]
        fn decode_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..64)) {
            let mut buf = BytesMut::from(&bytes[..]);
            while let Ok(Some(_)) = decode(&mut buf) {}
        }
    }
}
