//! A SPDY client for tests, made of the same sans-IO halves, speaking as kubectl does.

use bytes::BytesMut;
use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

use super::session::{Decoder, Encoder, Event};

/// A SPDY client made of the same sans-IO halves, as kubectl would speak.
pub(crate) struct Client {
    pub(crate) io: DuplexStream,
    enc: Encoder,
    dec: Decoder,
}

impl Client {
    pub(crate) fn new(io: DuplexStream) -> Self {
        Self {
            io,
            enc: Encoder::new().expect("encoder"),
            dec: Decoder::default(),
        }
    }

    pub(crate) async fn send(&mut self, f: impl FnOnce(&mut Encoder, &mut BytesMut)) {
        let mut out = BytesMut::new();
        f(&mut self.enc, &mut out);
        self.io.write_all(&out).await.expect("client writes");
    }

    /// The next event that is not a WINDOW_UPDATE; `None` at EOF.
    pub(crate) async fn event(&mut self) -> Option<Event> {
        let mut buf = [0u8; 4096];
        loop {
            match self.dec.next_event().expect("server speaks SPDY") {
                Some(Event::Window { .. }) => continue,
                Some(e) => return Some(e),
                None => {}
            }
            let n = self.io.read(&mut buf).await.expect("client reads");
            if n == 0 {
                return None;
            }
            self.dec.feed(&buf[..n]);
        }
    }
}
