use super::*;
use crate::streams::spdy::headers::Headers;
use crate::streams::spdy::session::Event;
use crate::streams::spdy::test_client::Client;
use crate::streams::{Channels, StreamError, StreamFuture};
use tokio::sync::mpsc;

/// Port 7 echoes, like the echo service, until the client half-closes; any
/// other port is refused.
pub(crate) struct Echo;

impl ContainerStreams for Echo {
    fn open(&self, target: StreamTarget) -> StreamFuture<'_> {
        Box::pin(async move {
            if target.op != (StreamOp::PortForward { port: 7 }) {
                return Err(StreamError::Unreachable("connection refused".into()));
            }
            let (a_tx, mut b_rx) = mpsc::channel::<Frame>(4);
            let (b_tx, a_rx) = mpsc::channel::<Frame>(4);
            tokio::spawn(async move {
                while let Some(frame) = b_rx.recv().await {
                    if frame.channel == channel::CLOSE {
                        let _ = b_tx.send(Frame::new(channel::CLOSE, vec![DATA])).await;
                        break;
                    }
                    if b_tx.send(frame).await.is_err() {
                        break;
                    }
                }
            });
            Ok(Channels { tx: a_tx, rx: a_rx })
        })
    }
}

fn forwarder() -> Forwarder {
    let mut pod = Pod::default();
    pod.metadata.name = Some("web".into());
    pod.metadata.uid = Some("u1".into());
    Forwarder {
        pod,
        container: "c".into(),
        streams: Arc::new(Echo),
    }
}

async fn open_pair(client: &mut Client, first: u32, port: &str, request: &str) {
    // client-go: the error stream first (closed at once, it only reads), then data.
    for (id, kind, fin) in [(first, "error", true), (first + 2, "data", false)] {
        let h = Headers::new([("streamType", kind), ("port", port), ("requestID", request)]);
        client
            .send(|e, out| e.open(id, &h, fin, out).expect("open"))
            .await;
    }
}

/// Events until both streams of the pair at `first` ended: (data bytes, error bytes).
async fn until_both_end(client: &mut Client, first: u32) -> (Vec<u8>, Vec<u8>) {
    let (mut data, mut error, mut ended) = (Vec::new(), Vec::new(), 0);
    while ended < 2 {
        match client.event().await.expect("connection open") {
            Event::Data {
                stream,
                data: d,
                fin,
            } if stream == first || stream == first + 2 => {
                if stream == first {
                    &mut error
                } else {
                    &mut data
                }
                .extend_from_slice(&d);
                ended += usize::from(fin);
            }
            _ => {}
        }
    }
    (data, error)
}

#[tokio::test]
async fn two_connections_on_one_session_forward_and_end_cleanly() {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let conn = Connection::serve(server_io).expect("serves");
    let session = tokio::spawn(forwarder().run(conn));
    let mut client = Client::new(client_io);
    for (first, request) in [(1, "0"), (5, "1")] {
        open_pair(&mut client, first, "7", request).await;
        client
            .send(|e, out| {
                e.data(
                    first + 2,
                    &Bytes::from(format!("hello {request}")),
                    true,
                    out,
                )
            })
            .await;
        let (data, error) = until_both_end(&mut client, first).await;
        assert_eq!(String::from_utf8_lossy(&data), format!("hello {request}"));
        assert!(error.is_empty(), "{}", String::from_utf8_lossy(&error));
    }
    drop(client);
    session.await.expect("the session ends with the client");
}

#[tokio::test]
async fn a_refused_port_is_reported_on_the_error_stream_as_kubelet_words_it() {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let conn = Connection::serve(server_io).expect("serves");
    tokio::spawn(forwarder().run(conn));
    let mut client = Client::new(client_io);
    open_pair(&mut client, 1, "8080", "0").await;
    let (_, error) = until_both_end(&mut client, 1).await;
    assert_eq!(
        String::from_utf8_lossy(&error),
        "error forwarding port 8080 to pod web, uid u1: connection refused"
    );
}

#[tokio::test]
async fn streams_without_a_port_are_reset() {
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let conn = Connection::serve(server_io).expect("serves");
    tokio::spawn(forwarder().run(conn));
    let mut client = Client::new(client_io);
    let h = Headers::new([("streamType", "data")]);
    client
        .send(|e, out| e.open(1, &h, false, out).expect("open"))
        .await;
    loop {
        match client.event().await.expect("open") {
            Event::Reset { stream: 1, .. } => break,
            Event::Reply { .. } => {}
            other => panic!("unexpected {other:?}"),
        }
    }
}
