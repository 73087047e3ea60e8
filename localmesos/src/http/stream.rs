//! Event streams: RecordIO-framed events in a chunked response, with
//! heartbeats, and a hook that runs when the stream ends for any reason
//! (client gone, channel closed, master restart).

use std::time::Duration;

use axum::body::Body;
use bytes::Bytes;
use mesos::codec::Codec;
use serde::Serialize;
use tokio::sync::mpsc;

/// Runs its closure when dropped: the body is dropped when the connection
/// closes, which is how a broken subscription is noticed.
pub(crate) struct OnDrop(Option<Box<dyn FnOnce() + Send>>);

impl OnDrop {
    pub(crate) fn new(f: impl FnOnce() + Send + 'static) -> Self {
        Self(Some(Box::new(f)))
    }
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        if let Some(f) = self.0.take() {
            f();
        }
    }
}

struct StreamState<M> {
    rx: mpsc::UnboundedReceiver<M>,
    heartbeat: Option<(tokio::time::Interval, M)>,
    codec: Codec,
    _guard: OnDrop,
}

/// A response body carrying `rx`'s events, one RecordIO record each, plus
/// `heartbeat` every `interval` when given. It ends when the sender side is
/// dropped; `on_close` runs when the body is dropped.
pub(crate) fn event_body<M>(
    rx: mpsc::UnboundedReceiver<M>,
    codec: Codec,
    heartbeat: Option<(Duration, M)>,
    on_close: OnDrop,
) -> Body
where
    M: prost::Message + Serialize + Clone + Send + 'static,
{
    let heartbeat = heartbeat.map(|(every, msg)| {
        let start = tokio::time::Instant::now() + every;
        let mut iv = tokio::time::interval_at(start, every);
        iv.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        (iv, msg)
    });
    let state = StreamState {
        rx,
        heartbeat,
        codec,
        _guard: on_close,
    };
    let stream = futures::stream::unfold(state, |mut s| async move {
        let msg = match &mut s.heartbeat {
            Some((iv, hb)) => {
                tokio::select! {
                    m = s.rx.recv() => m,
                    _ = iv.tick() => Some(hb.clone()),
                }
            }
            None => s.rx.recv().await,
        }?;
        let record = mesos::recordio::encode(&s.codec.encode(&msg));
        Some((
            Ok::<Bytes, std::convert::Infallible>(Bytes::from(record)),
            s,
        ))
    });
    Body::from_stream(stream)
}
