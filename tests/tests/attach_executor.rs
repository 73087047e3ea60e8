//! Attach's container side: a container with `stdin: true, stdinOnce: true`
//! reads what an attached client sends, the client sees its output live,
//! the client's end closes the container's stdin, and the container's end
//! ends the stream with a Success status; its CRI log holds the same
//! output. The executor's runtime runs in-process, in process mode and on
//! the embedded runtime of the mesopod binary (which needs root).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::containers_support;

use std::sync::Arc;
use std::time::Duration;

use containers_support::*;
use executor::backoff::Backoff;
use executor::layout::run_log;
use executor::logs::attach_io::Attachments;
use executor::logs::cri::{self, Stream};
use executor::objects::StaticObjects;
use executor::oci::{ContainerSettings, RuntimeKind};
use executor::streaming::attach::attach;
use executor::streaming::{Channels, Frame, Stdio, channel};
use executor::{PodPlan, PodState, Runtime, RuntimeConfig};
use images::ImageGcPolicy;
use mesos::proto::TaskId;

const ECHO: &str = "echo ready; while read l; do echo \"got $l\"; done; echo bye >&2";

fn pod(name: &str, image: &str) -> PodPlan {
    let pod = serde_json::json!({
        "metadata": {"name": name, "namespace": "ns", "uid": format!("uid-{name}")},
        "spec": {
            "restartPolicy": "Never",
            "containers": [{
                "name": "main", "image": image, "stdin": true, "stdinOnce": true,
                "command": ["sh", "-c", ECHO]
            }]
        }
    });
    PodPlan::from_task_data(Some(&serde_json::to_vec(&pod).unwrap())).unwrap()
}

async fn next(theirs: &mut Channels) -> Frame {
    tokio::time::timeout(in_process::T, theirs.rx.recv())
        .await
        .expect("a frame in time")
        .expect("the stream is open")
}

/// Attaches to `name`'s container once it logged `ready`, talks to it, and
/// checks the stream and the log.
async fn talk(
    rt: &mut Runtime,
    rx: &mut tokio::sync::mpsc::UnboundedReceiver<executor::PodUpdate>,
    sandbox: &std::path::Path,
    name: &str,
) {
    let log = sandbox.join(run_log("ns", name, &format!("uid-{name}"), "main", 0));
    testkit::wait_until(
        "the container's first line",
        in_process::T,
        async || std::fs::read(&log).unwrap_or_default(),
        |l| cri::texts(l, None).contains("ready"),
    )
    .await;
    let io = Attachments::global()
        .get("ns", name, "main")
        .expect("the container is attachable");
    let (ours, mut theirs) = Channels::pair();
    let stdio = Stdio {
        stdin: true,
        stdout: true,
        stderr: true,
        tty: false,
    };
    let session = tokio::spawn(async move { attach(&io, stdio, ours).await });
    // The tap starts at the attach: send until the first answer shows the
    // client is subscribed (a line sent before it is only in the log).
    let mut out = Vec::new();
    for i in 0.. {
        theirs
            .tx
            .send(Frame::new(channel::STDIN, format!("hello {i}\n")))
            .await
            .unwrap();
        let f = tokio::time::timeout(Duration::from_millis(500), theirs.rx.recv()).await;
        if let Ok(Some(f)) = f {
            assert_eq!(f.channel, channel::STDOUT);
            out.extend_from_slice(&f.data);
            break;
        }
        assert!(i < 100, "no output through the attach");
    }
    theirs
        .tx
        .send(Frame::new(channel::STDIN, "world\n"))
        .await
        .unwrap();
    while !String::from_utf8_lossy(&out).contains("got world\n") {
        let f = next(&mut theirs).await;
        assert_eq!(f.channel, channel::STDOUT, "{f:?}");
        out.extend_from_slice(&f.data);
    }
    // The client's stdin ends: stdinOnce closes the container's, its loop
    // ends, it says bye on stderr and exits.
    theirs
        .tx
        .send(Frame::new(channel::CLOSE, vec![channel::STDIN]))
        .await
        .unwrap();
    let bye = next(&mut theirs).await;
    assert_eq!(bye, Frame::new(channel::STDERR, &b"bye\n"[..]));
    let status = next(&mut theirs).await;
    assert_eq!(status.channel, channel::ERROR);
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&status.data).unwrap()["status"],
        "Success"
    );
    session.await.unwrap().unwrap();
    let (done, _) = in_process::until(rx, |u| u.state.is_terminal()).await;
    assert_eq!(done.state, PodState::Finished, "{done:?}");
    let text = cri::texts(&std::fs::read(&log).unwrap(), Some(Stream::Stdout));
    assert!(
        text.starts_with("ready\ngot hello ") && text.ends_with("got world\n"),
        "{text}"
    );
    assert_eq!(
        cri::texts(&std::fs::read(&log).unwrap(), Some(Stream::Stderr)),
        "bye\n"
    );
    let _ = rt;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_talks_to_a_process_mode_container() {
    let dir = tempfile::tempdir().unwrap();
    let sandbox = dir.path().join("sandbox");
    let (mut rt, mut rx) = Runtime::new(RuntimeConfig {
        sandbox: sandbox.clone(),
        host_ip: "127.0.0.1".into(),
        node_name: "agent-host".into(),
        backoff: Backoff {
            initial: Duration::from_millis(50),
            max: Duration::from_millis(200),
        },
        containers: ContainerSettings {
            runtime: RuntimeKind::Process,
            ..ContainerSettings::default()
        },
        objects: Arc::new(StaticObjects::default()),
    });
    rt.launch(TaskId::new("t-proc"), pod("proc", "busybox"))
        .unwrap();
    talk(&mut rt, &mut rx, &sandbox, "proc").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn attach_talks_to_an_embedded_runtime_container() {
    if !prerequisites(false) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    load_image(&dir.path().join("images"), IMAGE).await;
    let (mut rt, mut rx) = in_process::runtime(
        dir.path(),
        StaticObjects::default(),
        ImageGcPolicy::default(),
    );
    rt.launch(TaskId::new("t-oci"), pod("oci", IMAGE)).unwrap();
    talk(&mut rt, &mut rx, &dir.path().join("sandbox"), "oci").await;
}
