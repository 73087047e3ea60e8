//! port-forward on the executor: one TCP connection to `localhost:PORT` in the
//! pod's network, relayed to the shim's frames (0 data, 1 error, 255 `[0]` for
//! "no more data this way").
//!
//! The pod's network is its own namespace on a CNI agent, the agent's
//! otherwise. A socket keeps the namespace it was made in, so a dedicated
//! thread enters the namespace (`setns` changes only the calling thread),
//! connects, and hands the socket back; the thread then ends, and with it the
//! changed namespace, so no runtime thread ever runs elsewhere.
//!
//! As containerd's port forwarder does, once one direction ends the other has
//! a moment ([`LINGER`]) to finish; both directions are bounded: we read from
//! the socket only when the shim has room for the frame, and write to it
//! before taking the next frame.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::{Channels, Frame, OpRequest, StreamContext, StreamError, channel};

/// Port-forward channels.
const DATA: u8 = 0;
const ERROR: u8 = 1;
/// How long to wait for the pod's port to answer.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one direction may go on after the other ended.
pub const LINGER: Duration = Duration::from_secs(1);
/// Bytes read from the pod per frame (Go's `io.Copy` buffer, as kubelet's).
const CHUNK: usize = 32 << 10;

/// Serves [`OpRequest::PortForward`].
pub async fn serve(
    ctx: &StreamContext,
    req: OpRequest,
    channels: Channels,
) -> Result<(), StreamError> {
    let OpRequest::PortForward {
        namespace,
        pod,
        port,
    } = req
    else {
        return Err(StreamError::BadRequest("not a port-forward request".into()));
    };
    let netns = ctx.pods.network(&namespace, &pod)?;
    match connect(netns, port).await {
        Ok(socket) => relay(socket, channels).await,
        Err(message) => {
            let _ = channels.tx.send(Frame::new(ERROR, message)).await;
        }
    }
    Ok(())
}

/// A connection to `localhost:port` in the network namespace at `netns` (the
/// executor's own when `None`), IPv4 first, then IPv6, as containerd tries.
/// The error is the message the user sees after kubelet's prefix.
pub async fn connect(netns: Option<PathBuf>, port: u16) -> Result<TcpStream, String> {
    let where_ = match &netns {
        Some(path) => format!("inside namespace {:?}", path.display().to_string()),
        None => "in the agent's network".to_owned(),
    };
    let attempt = tokio::task::spawn_blocking(move || connect_blocking(netns.as_deref(), port));
    let socket = match attempt.await {
        Ok(r) => r,
        Err(e) => Err(e.to_string()),
    }
    .map_err(|e| format!("failed to connect to localhost:{port} {where_}: {e}"))?;
    socket
        .set_nonblocking(true)
        .and_then(|()| TcpStream::from_std(socket))
        .map_err(|e| format!("failed to connect to localhost:{port} {where_}: {e}"))
}

fn connect_blocking(netns: Option<&Path>, port: u16) -> Result<std::net::TcpStream, String> {
    let dial = move || -> Result<std::net::TcpStream, String> {
        let v4 = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
        let v6 = SocketAddr::from((Ipv6Addr::LOCALHOST, port));
        std::net::TcpStream::connect_timeout(&v4, CONNECT_TIMEOUT).or_else(|e4| {
            std::net::TcpStream::connect_timeout(&v6, CONNECT_TIMEOUT)
                .map_err(|e6| format!("IPv4: {e4}; IPv6: {e6}"))
        })
    };
    let Some(path) = netns else {
        return dial();
    };
    let ns = std::fs::File::open(path).map_err(|e| format!("opening the namespace: {e}"))?;
    // A thread of its own: it leaves the runtime's threads in their namespace.
    std::thread::Builder::new()
        .name("portforward-netns".into())
        .spawn(move || {
            use std::os::fd::AsFd;
            rustix::thread::move_into_link_name_space(
                ns.as_fd(),
                Some(rustix::thread::LinkNameSpaceType::Network),
            )
            .map_err(|e| format!("entering the namespace: {e}"))?;
            dial()
        })
        .map_err(|e| e.to_string())?
        .join()
        .map_err(|_| "the connecting thread panicked".to_owned())?
}

/// The network namespace of pod `namespace/pod` among the sandboxes next to a
/// runtime's state root (`<root>-sandboxes/<task>/net`, the task id being
/// `<namespace>.<pod>.<suffix>`, see `oci::sandbox`), the newest when a dead
/// executor left an older one; `None` when its sandbox has no network of its
/// own (it runs in the agent's).
pub fn pod_netns(state_root: &Path, namespace: &str, pod: &str) -> Option<PathBuf> {
    let sandboxes = PathBuf::from(format!("{}-sandboxes", state_root.display()));
    let prefix = crate::oci::sandbox::dir_name(&format!("{namespace}.{pod}."));
    std::fs::read_dir(sandboxes)
        .ok()?
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path().join("net"))
        .filter(|net| net.exists())
        .filter_map(|net| Some((std::fs::metadata(&net).ok()?.modified().ok()?, net)))
        .max()
        .map(|(_, net)| net)
}

/// Relays `socket` ↔ `channels` until both directions end (or the shim hangs up).
pub async fn relay(socket: TcpStream, channels: Channels) {
    let Channels { tx, mut rx } = channels;
    let (mut read, mut write) = socket.into_split();
    let mut from_pod = tokio::spawn(async move {
        let mut buf = vec![0u8; CHUNK];
        loop {
            match read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if tx.send(Frame::new(DATA, buf[..n].to_vec())).await.is_err() {
                        return;
                    }
                }
            }
        }
        let _ = tx.send(Frame::new(channel::CLOSE, vec![DATA])).await;
    });
    let mut pod_done = false;
    let mut deadline: Option<tokio::time::Instant> = None;
    loop {
        let grace = async {
            match deadline {
                Some(at) => tokio::time::sleep_until(at).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            frame = rx.recv() => match frame {
                None => break,
                Some(f) if f.channel == DATA => {
                    if write.write_all(&f.data).await.is_err() {
                        break;
                    }
                }
                Some(f) if f.channel == channel::CLOSE => {
                    let _ = write.shutdown().await;
                    deadline.get_or_insert_with(|| tokio::time::Instant::now() + LINGER);
                }
                Some(_) => {}
            },
            _ = &mut from_pod, if !pod_done => {
                pod_done = true;
                deadline.get_or_insert_with(|| tokio::time::Instant::now() + LINGER);
            }
            () = grace => break,
        }
    }
    from_pod.abort();
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::net::TcpListener;

    fn pair() -> (Channels, Channels) {
        let (a_tx, b_rx) = tokio::sync::mpsc::channel(4);
        let (b_tx, a_rx) = tokio::sync::mpsc::channel(4);
        (
            Channels { tx: a_tx, rx: a_rx },
            Channels { tx: b_tx, rx: b_rx },
        )
    }

    #[test]
    fn the_pods_own_namespace_is_found_by_its_task_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        let root = dir.path().join("runtime");
        let sandboxes = dir.path().join("runtime-sandboxes");
        for (task, with_net) in [
            ("ns.web.1", true),
            ("ns.webby.2", true),
            ("ns.plain.3", false),
        ] {
            std::fs::create_dir_all(sandboxes.join(task)).expect("mkdir");
            if with_net {
                std::fs::write(sandboxes.join(task).join("net"), "").expect("net");
            }
        }
        assert_eq!(
            pod_netns(&root, "ns", "web"),
            Some(sandboxes.join("ns.web.1").join("net"))
        );
        assert_eq!(pod_netns(&root, "ns", "plain"), None);
        assert_eq!(pod_netns(&root, "ns", "gone"), None);
    }

    #[tokio::test]
    async fn bytes_cross_both_ways_and_a_half_close_reaches_the_server() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accepts");
            let mut got = Vec::new();
            s.read_to_end(&mut got).await.expect("reads to EOF");
            s.write_all(&got).await.expect("echoes");
        });
        let socket = connect(None, port).await.expect("connects");
        let (relay_side, mut shim) = pair();
        let relaying = tokio::spawn(relay(socket, relay_side));
        shim.tx
            .send(Frame::new(DATA, "GET /"))
            .await
            .expect("sends");
        shim.tx
            .send(Frame::new(channel::CLOSE, vec![DATA]))
            .await
            .expect("half-closes");
        let mut echoed = Vec::new();
        while let Some(f) = shim.rx.recv().await {
            match f.channel {
                DATA => echoed.extend_from_slice(&f.data),
                channel::CLOSE => break,
                _ => {}
            }
        }
        assert_eq!(echoed, b"GET /");
        server.await.expect("server done");
        drop(shim);
        relaying.await.expect("relay ends");
    }

    #[tokio::test]
    async fn a_closed_port_is_refused_with_kubelets_kind_of_message() {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("binds");
            l.local_addr().expect("addr").port()
        };
        let err = connect(None, port).await.expect_err("nothing listens");
        assert!(
            err.starts_with(&format!("failed to connect to localhost:{port}")),
            "{err}"
        );
    }

    #[tokio::test]
    async fn a_missing_namespace_is_an_error_not_the_agents_network() {
        let err = connect(Some("/nonexistent/netns".into()), 80)
            .await
            .expect_err("no such namespace");
        assert!(err.contains("opening the namespace"), "{err}");
    }

    #[tokio::test]
    async fn the_socket_is_made_inside_the_namespace() {
        // Our own network namespace file: entering it must still reach a
        // listener here, which shows the thread entered and dialled from it.
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("binds");
        let port = listener.local_addr().expect("addr").port();
        let ns = PathBuf::from(format!("/proc/{}/ns/net", std::process::id()));
        match connect(Some(ns), port).await {
            Ok(_) => {}
            // setns needs CAP_SYS_ADMIN; without it say what was not shown.
            Err(e) if e.contains("entering the namespace") && std::env::var("CI").is_err() => {
                eprintln!("skipped: entering a network namespace needs CAP_SYS_ADMIN: {e}");
            }
            Err(e) => panic!("{e}"),
        }
    }
}
