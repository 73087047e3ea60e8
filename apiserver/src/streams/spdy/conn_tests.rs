use super::*;
use crate::streams::spdy::session::Event;
use crate::streams::spdy::test_client::Client;

#[tokio::test]
async fn streams_open_echo_and_close() {
    let (client, server) = tokio::io::duplex(1 << 16);
    let mut conn = Connection::serve(server).expect("serves");
    let mut client = Client::new(client);
    let h = Headers::new([("streamType", "stdin")]);
    client
        .send(|e, out| e.open(1, &h, false, out).expect("open"))
        .await;
    let mut stream = conn.accept().await.expect("a stream");
    assert_eq!(stream.headers.get("streamtype"), Some("stdin"));
    assert!(matches!(
        client.event().await,
        Some(Event::Reply { stream: 1, .. })
    ));

    client
        .send(|e, out| {
            e.data(1, &Bytes::from_static(b"ping"), true, out);
            e.control(&RawFrame::Ping { id: 1 }, out);
        })
        .await;
    assert_eq!(stream.rx.recv().await.as_deref(), Some(&b"ping"[..]));
    assert_eq!(stream.rx.recv().await, None, "FIN ends the stream's data");
    assert_eq!(client.event().await, Some(Event::Ping(1)));

    stream
        .tx
        .send(Bytes::from_static(b"pong"))
        .await
        .expect("send");
    stream.tx.finish().await.expect("fin");
    assert!(
        matches!(client.event().await, Some(Event::Data { stream: 1, ref data, fin: false }) if data == &b"pong"[..])
    );
    assert!(matches!(
        client.event().await,
        Some(Event::Data {
            stream: 1,
            fin: true,
            ..
        })
    ));
    conn.close().await;
    assert!(matches!(
        client.event().await,
        Some(Event::GoAway { status: 0 })
    ));
    assert_eq!(client.event().await, None);
}

#[tokio::test]
async fn bad_stream_ids_are_reset_and_garbage_ends_the_connection() {
    let (client, server) = tokio::io::duplex(1 << 16);
    let mut conn = Connection::serve(server).expect("serves");
    let mut client = Client::new(client);
    client
        .send(|e, out| e.open(2, &Headers::default(), false, out).expect("open"))
        .await;
    assert!(matches!(
        client.event().await,
        Some(Event::Reset {
            stream: 2,
            status: rst::PROTOCOL_ERROR
        })
    ));
    client
        .io
        .write_all(b"\x80\x03\x00\x01\x00\x00\x00\x04junk")
        .await
        .expect("writes");
    assert!(matches!(
        client.event().await,
        Some(Event::GoAway {
            status: goaway::PROTOCOL_ERROR
        })
    ));
    assert!(conn.accept().await.is_none());
}

#[tokio::test]
async fn a_slow_handler_stops_the_reader_instead_of_buffering() {
    let (client, server) = tokio::io::duplex(1 << 16);
    let mut conn = Connection::serve(server).expect("serves");
    let mut client = Client::new(client);
    client
        .send(|e, out| e.open(1, &Headers::default(), false, out).expect("open"))
        .await;
    let mut stream = conn.accept().await.expect("a stream");
    // Write far more than the buffers hold while nobody reads the stream.
    let chunk = Bytes::from(vec![1u8; 32 << 10]);
    let writer = tokio::spawn(async move {
        for _ in 0..64 {
            client.send(|e, out| e.data(1, &chunk, false, out)).await;
        }
        client
    });
    // The writer cannot finish: the server stopped reading the socket.
    tokio::task::yield_now().await;
    let stalled = tokio::time::timeout(std::time::Duration::from_millis(200), async {
        while !writer.is_finished() {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert!(stalled.is_err(), "2 MiB went into unread buffers");
    // Reading unblocks it, and every byte arrives.
    let mut total = 0;
    while total < 64 * (32 << 10) {
        total += stream.rx.recv().await.expect("data").len();
    }
    writer.await.expect("writer finishes");
}
