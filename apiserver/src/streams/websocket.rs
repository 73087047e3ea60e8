//! kubectl's WebSocket stream protocols, `v5.channel.k8s.io` and `v4.channel.k8s.io`:
//! each binary message is one [`Frame`], its first byte the channel. v5 adds the close
//! frame (`[255, channel]`: stdin's EOF); v4 has none, so its stdin ends only with the
//! connection. Frames go through the bounded [`Channels`] in both directions: a slow
//! client holds the container's output back rather than letting it pile up here.

use axum::extract::ws::{CloseFrame, Message, WebSocket, close_code};
use futures::{SinkExt as _, StreamExt as _};

use super::{Channels, Frame, channel};

/// The subprotocol a stream speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// `v5.channel.k8s.io`.
    V5,
    /// `v4.channel.k8s.io`.
    V4,
}

impl Protocol {
    /// The one `name` names, if supported.
    pub(crate) fn parse(name: &str) -> Option<Protocol> {
        match name.trim() {
            "v5.channel.k8s.io" => Some(Protocol::V5),
            "v4.channel.k8s.io" => Some(Protocol::V4),
            _ => None,
        }
    }

    /// Its name on the wire.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Protocol::V5 => "v5.channel.k8s.io",
            Protocol::V4 => "v4.channel.k8s.io",
        }
    }
}

/// Relays `socket` and `channels` until the container's side ends (then the socket is
/// closed) or the client goes away (then the container's side is dropped, which ends
/// the stream there).
pub(crate) async fn serve(socket: WebSocket, protocol: Protocol, channels: Channels) {
    let (mut sink, mut stream) = socket.split();
    let Channels { tx, mut rx } = channels;
    let inbound = tokio::spawn(async move {
        while let Some(Ok(msg)) = stream.next().await {
            let Message::Binary(b) = msg else {
                if matches!(msg, Message::Close(_)) {
                    return;
                }
                continue;
            };
            let Some((&ch, data)) = b.split_first() else {
                continue;
            };
            if ch == channel::CLOSE && protocol == Protocol::V4 {
                continue;
            }
            let frame = Frame::new(ch, b.slice(b.len() - data.len()..));
            if tx.send(frame).await.is_err() {
                return;
            }
        }
    });
    while let Some(frame) = rx.recv().await {
        if frame.channel == channel::CLOSE && protocol == Protocol::V4 {
            continue;
        }
        let mut msg = Vec::with_capacity(frame.data.len() + 1);
        msg.push(frame.channel);
        msg.extend_from_slice(&frame.data);
        if sink.send(Message::Binary(msg.into())).await.is_err() {
            break;
        }
    }
    // A normal closure (1000): client-go reads it as the end of every channel, where a
    // close without a code would fail the error channel it has not finished reading.
    let _ = sink
        .send(Message::Close(Some(CloseFrame {
            code: close_code::NORMAL,
            reason: "".into(),
        })))
        .await;
    inbound.abort();
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_channel_protocols_are_spoken() {
        use super::Protocol;
        assert_eq!(Protocol::parse("v5.channel.k8s.io"), Some(Protocol::V5));
        assert_eq!(Protocol::parse(" v4.channel.k8s.io"), Some(Protocol::V4));
        assert_eq!(Protocol::parse("v4.base64.channel.k8s.io"), None);
        assert_eq!(Protocol::parse("SPDY/3.1+portforward.k8s.io"), None);
    }
}
