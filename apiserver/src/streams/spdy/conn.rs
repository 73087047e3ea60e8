//! The async driver of a server-side SPDY/3.1 connection: a reading task that
//! turns frames into [`Stream`]s and their data, and a writing task that sends
//! what the handlers say, in order.
//!
//! Backpressure is end to end and nothing grows without bound: each stream's
//! incoming data sits in a small bounded channel, and the reader waits for room
//! before it reads more from the socket (so TCP slows the peer down); handlers
//! send through one bounded channel to the writer, which waits for the socket.
//! We grant the peer SPDY/3.1 window credit (WINDOW_UPDATE) only for bytes that
//! reached a stream's channel. We do not wait for the peer's credit: Go's
//! spdystream, which kubectl and kubelet speak, never sends WINDOW_UPDATE, and
//! a sender that honoured the 64 KiB default window would stall forever.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use bytes::{Bytes, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::SpdyError;
use super::frame::{RawFrame, goaway, rst};
use super::headers::Headers;
use super::session::{Decoder, Encoder, Event};

/// Frames of incoming data a stream holds before the reader waits.
const STREAM_BUFFER: usize = 8;
/// Commands queued for the writer before handlers wait.
const WRITE_QUEUE: usize = 32;
/// Streams opened by the peer and not yet accepted.
const ACCEPT_QUEUE: usize = 16;
/// Bytes the writer gathers into one socket write.
const WRITE_BATCH: usize = 64 << 10;

#[derive(Debug)]
enum Command {
    Reply(u32),
    Data { stream: u32, data: Bytes, fin: bool },
    Control(RawFrame),
    Close,
}

/// A stream the peer opened (the driver already sent its SYN_REPLY, as
/// Kubernetes' servers do).
#[derive(Debug)]
pub(crate) struct Stream {
    /// The stream's id.
    pub(crate) id: u32,
    /// The headers the peer opened it with.
    pub(crate) headers: Headers,
    /// The peer's data; ends at its FIN, a reset or the connection's end.
    pub(crate) rx: mpsc::Receiver<Bytes>,
    /// Our side of the stream.
    pub(crate) tx: StreamWriter,
}

/// Writes on one stream. Cheap to clone.
#[derive(Debug, Clone)]
pub(crate) struct StreamWriter {
    id: u32,
    cmds: mpsc::Sender<Command>,
}

impl StreamWriter {
    /// Sends `data`, waiting while the connection is behind.
    pub(crate) async fn send(&self, data: Bytes) -> Result<(), SpdyError> {
        self.command(Command::Data {
            stream: self.id,
            data,
            fin: false,
        })
        .await
    }

    /// Half-closes the stream (FIN): we send nothing more on it.
    pub(crate) async fn finish(&self) -> Result<(), SpdyError> {
        self.command(Command::Data {
            stream: self.id,
            data: Bytes::new(),
            fin: true,
        })
        .await
    }

    /// Resets the stream (RST_STREAM CANCEL).
    pub(crate) async fn reset(&self) -> Result<(), SpdyError> {
        self.command(Command::Control(RawFrame::RstStream {
            stream: self.id,
            status: rst::CANCEL,
        }))
        .await
    }

    async fn command(&self, cmd: Command) -> Result<(), SpdyError> {
        self.cmds.send(cmd).await.map_err(|_| SpdyError::Closed)
    }
}

/// A server-side connection. Dropping it ends both tasks at once; [`Self::close`]
/// says GOAWAY and flushes first.
#[derive(Debug)]
pub(crate) struct Connection {
    incoming: mpsc::Receiver<Stream>,
    cmds: mpsc::Sender<Command>,
    reader: JoinHandle<()>,
    writer: Option<JoinHandle<()>>,
}

impl Connection {
    /// Serves SPDY/3.1 on `io`, an upgraded connection.
    pub(crate) fn serve<T>(io: T) -> Result<Self, SpdyError>
    where
        T: AsyncRead + AsyncWrite + Send + 'static,
    {
        let encoder = Encoder::new()?;
        let (read, write) = tokio::io::split(io);
        let (cmds, cmd_rx) = mpsc::channel(WRITE_QUEUE);
        let (accept_tx, incoming) = mpsc::channel(ACCEPT_QUEUE);
        let last = Arc::new(AtomicU32::new(0));
        let reader = tokio::spawn(read_loop(read, cmds.clone(), accept_tx, last.clone()));
        let writer = tokio::spawn(write_loop(write, cmd_rx, encoder, last));
        Ok(Self {
            incoming,
            cmds,
            reader,
            writer: Some(writer),
        })
    }

    /// The next stream the peer opens; `None` once the connection is gone.
    pub(crate) async fn accept(&mut self) -> Option<Stream> {
        self.incoming.recv().await
    }

    /// Says GOAWAY, flushes everything queued before it and closes the socket.
    pub(crate) async fn close(mut self) {
        let _ = self.cmds.send(Command::Close).await;
        if let Some(writer) = self.writer.take() {
            let _ = writer.await;
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(writer) = &self.writer {
            writer.abort();
        }
    }
}

async fn read_loop<R: AsyncRead>(
    read: R,
    cmds: mpsc::Sender<Command>,
    accept: mpsc::Sender<Stream>,
    last: Arc<AtomicU32>,
) {
    let mut read = std::pin::pin!(read);
    let mut decoder = Decoder::default();
    let mut streams: HashMap<u32, mpsc::Sender<Bytes>> = HashMap::new();
    let mut buf = vec![0u8; 16 << 10];
    loop {
        let event = match decoder.next_event() {
            Ok(Some(event)) => event,
            Ok(None) => match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    decoder.feed(&buf[..n]);
                    continue;
                }
            },
            Err(e) => {
                tracing::debug!(error = %e, "SPDY connection broken by the peer");
                let _ = cmds
                    .send(Command::Control(RawFrame::GoAway {
                        last_good: last.load(Ordering::Relaxed),
                        status: goaway::PROTOCOL_ERROR,
                    }))
                    .await;
                let _ = cmds.send(Command::Close).await;
                break;
            }
        };
        let keep_going = on_event(event, &cmds, &accept, &mut streams, &last).await;
        if !keep_going {
            break;
        }
    }
    // Dropping the senders ends every stream's data and `accept`.
}

async fn on_event(
    event: Event,
    cmds: &mpsc::Sender<Command>,
    accept: &mpsc::Sender<Stream>,
    streams: &mut HashMap<u32, mpsc::Sender<Bytes>>,
    last: &AtomicU32,
) -> bool {
    let say = |raw| cmds.send(Command::Control(raw));
    match event {
        Event::Open {
            stream,
            headers,
            fin,
            ..
        } => {
            // Clients open odd, ever-growing ids (SPDY/3 section 2.3.2).
            if stream % 2 == 0 || stream <= last.load(Ordering::Relaxed) {
                let status = if streams.contains_key(&stream) {
                    rst::STREAM_IN_USE
                } else {
                    rst::PROTOCOL_ERROR
                };
                return say(RawFrame::RstStream { stream, status }).await.is_ok();
            }
            last.store(stream, Ordering::Relaxed);
            let (tx, rx) = mpsc::channel(STREAM_BUFFER);
            if !fin {
                streams.insert(stream, tx);
            }
            if cmds.send(Command::Reply(stream)).await.is_err() {
                return false;
            }
            let opened = Stream {
                id: stream,
                headers,
                rx,
                tx: StreamWriter {
                    id: stream,
                    cmds: cmds.clone(),
                },
            };
            if accept.send(opened).await.is_err() {
                streams.remove(&stream);
                let status = rst::REFUSED_STREAM;
                return say(RawFrame::RstStream { stream, status }).await.is_ok();
            }
            true
        }
        Event::Data { stream, data, fin } => {
            let len = data.len() as u32;
            let delivered = match streams.get(&stream) {
                Some(tx) if !data.is_empty() => tx.send(data).await.is_ok(),
                Some(_) => true,
                None => false,
            };
            if fin || !delivered {
                streams.remove(&stream);
            }
            if len == 0 {
                return true;
            }
            if delivered
                && !fin
                && say(RawFrame::WindowUpdate { stream, delta: len })
                    .await
                    .is_err()
            {
                return false;
            }
            // Connection-level credit (SPDY/3.1) for every byte taken off the socket.
            say(RawFrame::WindowUpdate {
                stream: 0,
                delta: len,
            })
            .await
            .is_ok()
        }
        Event::Headers { stream, fin } => {
            if fin {
                streams.remove(&stream);
            }
            true
        }
        Event::Reset { stream, .. } => {
            streams.remove(&stream);
            true
        }
        // Odd ids are the client's pings: echo them. Even ones would answer ours.
        Event::Ping(id) if id % 2 == 1 => say(RawFrame::Ping { id }).await.is_ok(),
        Event::GoAway { .. } => false,
        Event::Ping(_) | Event::Reply { .. } | Event::Window { .. } | Event::Settings(_) => true,
    }
}

async fn write_loop<W: AsyncWrite>(
    write: W,
    mut cmds: mpsc::Receiver<Command>,
    mut encoder: Encoder,
    last: Arc<AtomicU32>,
) {
    let mut write = std::pin::pin!(write);
    let mut out = BytesMut::new();
    while let Some(first) = cmds.recv().await {
        let mut closing = false;
        let mut next = Some(first);
        while let Some(cmd) = next.take() {
            match cmd {
                Command::Reply(stream) => {
                    if let Err(e) = encoder.reply(stream, &Headers::default(), false, &mut out) {
                        tracing::debug!(error = %e, "SPDY reply not encoded");
                        closing = true;
                    }
                }
                Command::Data { stream, data, fin } => encoder.data(stream, &data, fin, &mut out),
                Command::Control(raw) => encoder.control(&raw, &mut out),
                Command::Close => {
                    encoder.control(
                        &RawFrame::GoAway {
                            last_good: last.load(Ordering::Relaxed),
                            status: goaway::OK,
                        },
                        &mut out,
                    );
                    closing = true;
                }
            }
            if !closing && out.len() < WRITE_BATCH {
                next = cmds.try_recv().ok();
            }
        }
        if write.write_all(&out).await.is_err() || write.flush().await.is_err() {
            return;
        }
        out.clear();
        if closing {
            let _ = write.shutdown().await;
            return;
        }
    }
}

#[cfg(test)]
#[path = "conn_tests.rs"]
mod tests;
