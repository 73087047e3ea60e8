//! port-forward over plain WebSocket, as kubelet serves it to clients other than
//! kubectl (subprotocol `v4.channel.k8s.io`, `portforward.k8s.io` or none): the
//! `ports` of the query are fixed for the connection; port `i` has data channel
//! `2i` and error channel `2i+1`, and the server's first message on each is the
//! port, a little-endian u16. One connection to each port, for the socket's life.

use std::sync::Arc;

use bytes::{BufMut, BytesMut};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use super::spdy::tunnel::{self, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG};
use super::{Channels, ContainerStreams, Frame, StreamOp, StreamTarget, channel};

/// The subprotocols served here, in our order of preference.
pub(crate) const PROTOCOLS: [&str; 2] = ["v4.channel.k8s.io", "portforward.k8s.io"];
/// Messages queued toward the client before the pumps wait.
const OUT_QUEUE: usize = 16;

/// The ports of a `ports` (or kubelet's `port`) query: repeated or comma-separated.
pub(crate) fn ports(query: &[(String, String)]) -> Result<Vec<u16>, String> {
    let mut out = Vec::new();
    for (key, value) in query {
        if key != "ports" && key != "port" {
            continue;
        }
        for p in value.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match p.parse::<u16>() {
                Ok(n) if n > 0 => out.push(n),
                _ => return Err(format!("invalid port {p:?}: must be between 1 and 65535")),
            }
        }
    }
    if out.is_empty() {
        return Err("query parameter \"port\" is required".into());
    }
    Ok(out)
}

fn message(channel: u8, data: &[u8]) -> Vec<u8> {
    let mut m = Vec::with_capacity(data.len() + 1);
    m.push(channel);
    m.extend_from_slice(data);
    m
}

/// Serves the ports on `ws`, an upgraded WebSocket, until every port's
/// connection ended or the client left.
pub(crate) async fn run<T>(
    ws: T,
    target: StreamTarget,
    ports: Vec<u16>,
    streams: Arc<dyn ContainerStreams>,
) where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (read, write) = tokio::io::split(ws);
    let (out_tx, out_rx) = mpsc::channel::<(u8, Vec<u8>)>(OUT_QUEUE);
    let writer = tokio::spawn(write_loop(write, out_rx));
    let name = target.pod.metadata.name.clone().unwrap_or_default();
    let uid = target.pod.metadata.uid.clone().unwrap_or_default();
    let mut to_pods: Vec<Option<mpsc::Sender<Frame>>> = Vec::new();
    let mut from_pods = Vec::new();
    for (i, port) in ports.iter().enumerate() {
        let (data_ch, error_ch) = ((2 * i) as u8, (2 * i + 1) as u8);
        for ch in [data_ch, error_ch] {
            let _ = out_tx
                .send((OP_BINARY, message(ch, &port.to_le_bytes())))
                .await;
        }
        let mut t = target.clone();
        t.op = StreamOp::PortForward { port: *port };
        match streams.open(t).await {
            Ok(Channels { tx, rx }) => {
                to_pods.push(Some(tx));
                from_pods.push(tokio::spawn(pod_to_client(
                    rx,
                    out_tx.clone(),
                    data_ch,
                    error_ch,
                    format!("error forwarding port {port} to pod {name}, uid {uid}: "),
                )));
            }
            Err(e) => {
                to_pods.push(None);
                let msg = format!("error forwarding port {port} to pod {name}, uid {uid}: {e}");
                let _ = out_tx
                    .send((OP_BINARY, message(error_ch, msg.as_bytes())))
                    .await;
            }
        }
    }
    let reader = tokio::spawn(client_to_pods(read, to_pods, out_tx.clone()));
    for pump in from_pods {
        let _ = pump.await;
    }
    reader.abort();
    let _ = out_tx
        .send((OP_CLOSE, 1000u16.to_be_bytes().to_vec()))
        .await;
    drop(out_tx);
    let _ = writer.await;
}

async fn pod_to_client(
    mut rx: mpsc::Receiver<Frame>,
    out: mpsc::Sender<(u8, Vec<u8>)>,
    data_ch: u8,
    error_ch: u8,
    prefix: String,
) {
    while let Some(frame) = rx.recv().await {
        let msg = match frame.channel {
            0 => message(data_ch, &frame.data),
            1 => message(
                error_ch,
                format!("{prefix}{}", String::from_utf8_lossy(&frame.data)).as_bytes(),
            ),
            // v4 has no half-close: the pod's end of data waits for the socket's.
            channel::CLOSE => continue,
            _ => continue,
        };
        if out.send((OP_BINARY, msg)).await.is_err() {
            return;
        }
    }
}

async fn client_to_pods<R: AsyncRead>(
    read: R,
    to_pods: Vec<Option<mpsc::Sender<Frame>>>,
    out: mpsc::Sender<(u8, Vec<u8>)>,
) {
    let mut read = std::pin::pin!(read);
    let mut buf = BytesMut::new();
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        let frame = match tunnel::decode(&mut buf) {
            Ok(Some(f)) => f,
            Ok(None) => match read.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => {
                    buf.put_slice(&chunk[..n]);
                    continue;
                }
            },
            Err(_) => return,
        };
        match frame.opcode {
            OP_PING => {
                let _ = out.send((OP_PONG, frame.payload)).await;
            }
            OP_CLOSE => return,
            _ => {
                let Some((&ch, data)) = frame.payload.split_first() else {
                    continue;
                };
                // Only data channels carry bytes to the pod.
                let to = (ch % 2 == 0)
                    .then(|| to_pods.get(usize::from(ch / 2)))
                    .flatten()
                    .and_then(Option::as_ref);
                if let Some(tx) = to
                    && tx.send(Frame::new(0, data.to_vec())).await.is_err()
                {
                    continue;
                }
            }
        }
    }
}

async fn write_loop<W: AsyncWrite>(write: W, mut rx: mpsc::Receiver<(u8, Vec<u8>)>) {
    let mut write = std::pin::pin!(write);
    let mut out = BytesMut::new();
    while let Some((opcode, payload)) = rx.recv().await {
        tunnel::encode(opcode, &payload, &mut out);
        if write.write_all(&out).await.is_err() || write.flush().await.is_err() {
            return;
        }
        out.clear();
        if opcode == OP_CLOSE {
            let _ = write.shutdown().await;
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// A masked client frame, as RFC 6455 requires of clients.
    fn client_frame(payload: &[u8]) -> Vec<u8> {
        let mask = [7u8, 1, 3, 5];
        let mut out = vec![0x80 | OP_BINARY, 0x80 | payload.len() as u8];
        out.extend_from_slice(&mask);
        out.extend(payload.iter().enumerate().map(|(i, b)| b ^ mask[i % 4]));
        out
    }

    /// The server's next binary message (unmasked, short).
    async fn server_message(io: &mut tokio::io::DuplexStream) -> Vec<u8> {
        let mut head = [0u8; 2];
        io.read_exact(&mut head).await.expect("a frame");
        assert_eq!(head[0], 0x80 | OP_BINARY);
        let mut body = vec![0u8; usize::from(head[1])];
        io.read_exact(&mut body).await.expect("its payload");
        body
    }

    #[tokio::test]
    async fn each_port_announces_itself_then_carries_data_on_its_channel() {
        let (mut client, server) = tokio::io::duplex(1 << 16);
        let mut target_pod = k8s_openapi::api::core::v1::Pod::default();
        target_pod.metadata.name = Some("web".into());
        let target = StreamTarget {
            pod: target_pod,
            container: "c".into(),
            op: StreamOp::PortForward { port: 7 },
        };
        let echo = Arc::new(crate::streams::portforward::tests::Echo);
        tokio::spawn(run(server, target, vec![7, 8], echo));
        let mut seen = Vec::new();
        for _ in 0..4 {
            seen.push(server_message(&mut client).await);
        }
        // Port 7 (channels 0, 1) and port 8 (2, 3) announce themselves, little-endian;
        // port 8 is refused on its error channel.
        assert!(
            seen.contains(&vec![0, 7, 0]) && seen.contains(&vec![1, 7, 0]),
            "{seen:?}"
        );
        assert!(
            seen.contains(&vec![2, 8, 0]) && seen.contains(&vec![3, 8, 0]),
            "{seen:?}"
        );
        let refused = server_message(&mut client).await;
        assert_eq!(refused[0], 3);
        assert!(String::from_utf8_lossy(&refused[1..]).contains("error forwarding port 8"));
        client
            .write_all(&client_frame(b"\x00abc"))
            .await
            .expect("writes");
        assert_eq!(server_message(&mut client).await, b"\x00abc");
    }

    #[test]
    fn ports_come_repeated_or_comma_separated_and_are_checked() {
        assert_eq!(
            ports(&q(&[("ports", "80,8080"), ("ports", "9000")])),
            Ok(vec![80, 8080, 9000])
        );
        assert_eq!(ports(&q(&[("port", "443")])), Ok(vec![443]));
        assert!(ports(&q(&[])).is_err());
        assert!(ports(&q(&[("ports", "0")])).is_err());
        assert!(ports(&q(&[("ports", "http")])).is_err());
    }
}
