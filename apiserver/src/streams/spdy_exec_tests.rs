use super::*;
use crate::streams::spdy::headers::Headers;
use crate::streams::spdy::session::Event;
use crate::streams::spdy::test_client::Client;

/// The container side: a fake that echoes stdin to stdout, reports resizes on
/// stdout too, and ends with exit code 3.
async fn fake_container(mut theirs: Channels) {
    // stdin and resize are pumped apart, so wait for both to show up.
    let (mut closed, mut resized) = (false, false);
    while !(closed && resized) {
        let Some(frame) = theirs.rx.recv().await else {
            break;
        };
        match frame.channel {
            channel::STDIN => {
                let _ = theirs
                    .tx
                    .send(Frame::new(channel::STDOUT, frame.data))
                    .await;
            }
            channel::RESIZE => {
                resized = true;
                let _ = theirs
                    .tx
                    .send(Frame::new(channel::STDOUT, frame.data))
                    .await;
            }
            channel::CLOSE => closed = true,
            _ => {}
        }
    }
    let status = serde_json::json!({
        "metadata": {}, "status": "Failure", "reason": "NonZeroExitCode",
        "message": "command terminated with non-zero exit code: error executing command [sh], exit code 3",
        "details": {"causes": [{"reason": "ExitCode", "message": "3"}]},
    });
    let _ = theirs
        .tx
        .send(Frame::new(channel::ERROR, status.to_string()))
        .await;
}

fn pair() -> (Channels, Channels) {
    let (a_tx, b_rx) = mpsc::channel(4);
    let (b_tx, a_rx) = mpsc::channel(4);
    (
        Channels { tx: a_tx, rx: a_rx },
        Channels { tx: b_tx, rx: b_rx },
    )
}

async fn open(client: &mut Client, id: u32, kind: &str) {
    let h = Headers::new([("streamType", kind)]);
    client
        .send(|e, out| e.open(id, &h, false, out).expect("open"))
        .await;
}

/// Reads events until the server closes, collecting each stream's bytes and FINs.
async fn drain(client: &mut Client) -> (HashMap<u32, Vec<u8>>, Vec<u32>) {
    let (mut data, mut fins) = (HashMap::<u32, Vec<u8>>::new(), Vec::new());
    while let Some(event) = client.event().await {
        if let Event::Data {
            stream,
            data: d,
            fin,
        } = event
        {
            data.entry(stream).or_default().extend_from_slice(&d);
            if fin {
                fins.push(stream);
            }
        }
    }
    (data, fins)
}

#[tokio::test]
async fn stdin_resize_stdout_and_the_exit_status_cross_as_kubectl_expects() {
    let (ours, theirs) = pair();
    tokio::spawn(fake_container(theirs));
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let conn = Connection::serve(server_io).expect("serves");
    let wanted = Wanted {
        stdin: true,
        stdout: true,
        stderr: false,
        resize: true,
    };
    let server = tokio::spawn(session(conn, V4.to_owned(), wanted, ours));
    let mut client = Client::new(client_io);
    // kubectl's order: error, stdin, stdout, resize.
    for (id, kind) in [(1, "error"), (3, "stdin"), (5, "stdout"), (7, "resize")] {
        open(&mut client, id, kind).await;
    }
    client
        .send(|e, out| {
            e.data(7, &Bytes::from_static(b"{\"Width\":80,\"He"), false, out);
            e.data(7, &Bytes::from_static(b"ight\":24}\n"), false, out);
        })
        .await;
    client
        .send(|e, out| e.data(3, &Bytes::from_static(b"hi\n"), true, out))
        .await;
    let (data, fins) = drain(&mut client).await;
    server.await.expect("session ends");
    let stdout = String::from_utf8_lossy(&data[&5]).into_owned();
    assert!(
        stdout.contains("{\"Height\":24,\"Width\":80}")
            || stdout.contains("{\"Width\":80,\"Height\":24}"),
        "{stdout}"
    );
    assert!(stdout.contains("hi\n"), "{stdout}");
    let status: serde_json::Value = serde_json::from_slice(&data[&1]).expect("a Status");
    assert_eq!(status["details"]["causes"][0]["message"], "3");
    assert!(
        fins.contains(&1) && fins.contains(&5),
        "error and stdout end with FIN: {fins:?}"
    );
}

#[tokio::test]
async fn v3_sends_only_a_failures_message_and_a_lost_status_is_a_failure() {
    let (ours, theirs) = pair();
    drop(theirs); // the container side vanishes without a status
    let (client_io, server_io) = tokio::io::duplex(1 << 16);
    let conn = Connection::serve(server_io).expect("serves");
    let wanted = Wanted {
        stdin: false,
        stdout: true,
        stderr: true,
        resize: false,
    };
    let server = tokio::spawn(session(conn, "v3.channel.k8s.io".to_owned(), wanted, ours));
    let mut client = Client::new(client_io);
    for (id, kind) in [(1, "error"), (3, "stdout"), (5, "stderr")] {
        open(&mut client, id, kind).await;
    }
    let (data, _) = drain(&mut client).await;
    server.await.expect("session ends");
    assert_eq!(
        String::from_utf8_lossy(&data[&1]),
        "the stream to the container ended without its exit status"
    );
}

#[test]
fn a_tty_drops_stderr_and_v2_has_no_resize() {
    let op = StreamOp::Exec {
        command: vec!["sh".into()],
        stdin: true,
        stdout: true,
        stderr: true,
        tty: true,
    };
    assert_eq!(Wanted::of(&op, V4).map(Wanted::count), Some(4));
    assert_eq!(Wanted::of(&op, V2).map(Wanted::count), Some(3));
    assert!(Wanted::of(&StreamOp::PortForward { port: 80 }, V4).is_none());
}
