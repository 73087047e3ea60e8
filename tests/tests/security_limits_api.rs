//! The API server's per-request limits as a client sees them: 429 with
//! kube-apiserver's text and `Retry-After: 1` past the in-flight budgets and
//! the per-client watch cap, 413 for a 4 MiB body, 504 past
//! `--request-timeout` and past `--body-read-timeout` for a body that
//! dribbles in (while other clients' creates go through), and seats shared
//! fairly between users. Requests are held in flight by a log source that
//! answers only when the test lets it, so the counts are exact.
#![allow(clippy::unwrap_used)]

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use apiserver::limits::Limits;
use apiserver::limits::requests::PriorityLevels;
use apiserver::store::MemoryStore;
use apiserver::{Api, LogRequest, LogSource, SystemClock};
use bytes::Bytes;
use futures::StreamExt as _;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::sync::{Semaphore, watch};

/// Logs that answer once the gate opens, or one by one as `one` is given
/// permits.
struct GatedLogs {
    gate: watch::Receiver<bool>,
    one: Arc<Semaphore>,
}

impl LogSource for GatedLogs {
    fn logs(&self, _req: LogRequest) -> apiserver::logs::LogFuture<'_> {
        let (mut gate, one) = (self.gate.clone(), self.one.clone());
        Box::pin(async move {
            tokio::select! {
                _ = gate.wait_for(|open| *open) => {}
                permit = one.acquire() => permit.unwrap().forget(),
            }
            Ok(futures::stream::iter([Ok(Bytes::from_static(b"line\n"))]).boxed())
        })
    }
}

struct Shim {
    url: String,
    addr: SocketAddr,
    gate: watch::Sender<bool>,
    one: Arc<Semaphore>,
    levels: PriorityLevels,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Shim {
    async fn start(limits: Limits) -> Shim {
        let (gate, rx) = watch::channel(false);
        let one = Arc::new(Semaphore::new(0));
        let logs = GatedLogs {
            gate: rx,
            one: one.clone(),
        };
        let api = Api::start(
            Arc::new(MemoryStore::new().unwrap()),
            Arc::new(SystemClock),
            Arc::new(logs),
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let url = format!("http://{addr}");
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        // What `apiserver::serve_with_limits` serves, with its priority
        // levels in view.
        let (router, levels) =
            apiserver::limits::requests::layer_with_levels(apiserver::router(api.clone()), &limits);
        let task = tokio::spawn(connlimits::serve_with_shutdown(
            listener,
            router,
            limits.connections(),
            async move {
                let _ = stopped.await;
                api.close_watches();
            },
        ));
        let shim = Shim {
            url,
            addr,
            gate,
            one,
            levels,
            stop: Some(stop),
            task,
        };
        let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"main","image":"busybox"}]}}"#;
        let resp = shim
            .client()
            .post(format!("{}/api/v1/namespaces/default/pods", shim.url))
            .header("Content-Type", "application/json")
            .body(pod)
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201);
        shim
    }

    fn client(&self) -> reqwest::Client {
        testkit::init_crypto();
        reqwest::Client::new()
    }

    /// A request held in flight until the gate opens.
    fn held_log(&self) -> tokio::task::JoinHandle<u16> {
        self.held_log_of("")
    }

    /// [`Shim::held_log`] of `user` (the `x-user` header).
    fn held_log_of(&self, user: &str) -> tokio::task::JoinHandle<u16> {
        let (client, url, user) = (self.client(), self.url.clone(), user.to_owned());
        tokio::spawn(async move {
            let resp = client
                .get(format!("{url}/api/v1/namespaces/default/pods/p/log"))
                .header("x-user", user)
                .send()
                .await
                .unwrap();
            resp.status().as_u16()
        })
    }

    async fn stop(mut self) {
        let _ = self.gate.send(true);
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        tokio::time::timeout(Duration::from_secs(10), self.task)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    }
}

async fn get(url: &str) -> reqwest::Response {
    testkit::init_crypto();
    reqwest::get(url).await.unwrap()
}

async fn assert_too_many(resp: reqwest::Response) {
    assert_eq!(resp.status(), 429);
    assert_eq!(resp.headers()["retry-after"], "1");
    assert!(
        resp.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/plain")
    );
    assert_eq!(
        resp.text().await.unwrap(),
        "Too many requests, please try again later.\n"
    );
}

#[tokio::test]
async fn a_burst_past_max_requests_inflight_gets_429_and_writes_have_their_own_budget() {
    let shim = Shim::start(Limits {
        max_requests_inflight: 8,
        max_mutating_requests_inflight: 2,
        // Refuse at once rather than queue (APF's `Reject`).
        queue_length_limit: 0,
        // Stands in for authentication's `system:masters`.
        exempt: Arc::new(|r| r.headers().contains_key("x-exempt")),
        ..Limits::default()
    })
    .await;
    // A burst of 20 slow reads: 8 are served, 12 are turned away at once.
    let burst: Vec<_> = (0..20).map(|_| shim.held_log()).collect();
    let refused = testkit::wait_until(
        "12 of the burst refused",
        Duration::from_secs(10),
        async || burst.iter().filter(|h| h.is_finished()).count(),
        |done| *done == 12,
    )
    .await;
    assert_eq!(refused, 12);
    // Another read is refused while the budget is full...
    assert_too_many(get(&format!("{}/api/v1/pods", shim.url)).await).await;
    // ...except for an exempt user...
    let exempt = shim
        .client()
        .get(format!("{}/api/v1/pods", shim.url))
        .header("x-exempt", "1")
        .send()
        .await
        .unwrap();
    assert_eq!(exempt.status(), 200);
    // ...and a write has its own budget.
    let resp = shim
        .client()
        .post(format!("{}/api/v1/namespaces", shim.url))
        .header("Content-Type", "application/json")
        .body(r#"{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"b"}}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 201);
    let _ = shim.gate.send(true);
    let mut codes = Vec::new();
    for h in burst {
        codes.push(h.await.unwrap());
    }
    assert_eq!(codes.iter().filter(|c| **c == 200).count(), 8, "{codes:?}");
    assert_eq!(codes.iter().filter(|c| **c == 429).count(), 12, "{codes:?}");
    // The budget is free again.
    assert_eq!(
        get(&format!("{}/api/v1/pods", shim.url)).await.status(),
        200
    );
    shim.stop().await;
}

#[tokio::test]
async fn a_four_mib_body_gets_413_with_kube_apiservers_status() {
    let shim = Shim::start(Limits::default()).await;
    let big = format!(
        r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"big","annotations":{{"a":"{}"}}}},"spec":{{"containers":[{{"name":"c","image":"busybox"}}]}}}}"#,
        "x".repeat(4 * 1024 * 1024)
    );
    let resp = shim
        .client()
        .post(format!("{}/api/v1/namespaces/default/pods", shim.url))
        .header("Content-Type", "application/json")
        .body(big)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 413);
    let status: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(status["reason"], "RequestEntityTooLarge");
    assert_eq!(
        status["message"],
        "Request entity too large: limit is 3145728"
    );
    assert_eq!(status["code"], 413);
    shim.stop().await;
}

#[tokio::test]
async fn a_request_past_request_timeout_gets_504_timeout() {
    let shim = Shim::start(Limits {
        request_timeout: Duration::from_millis(300),
        ..Limits::default()
    })
    .await;
    let code = shim.held_log().await.unwrap();
    assert_eq!(code, 504);
    let resp = shim
        .client()
        .get(format!("{}/api/v1/namespaces/default/pods/p/log", shim.url))
        .send()
        .await
        .unwrap();
    let status: serde_json::Value = resp.json().await.unwrap();
    assert_eq!(status["reason"], "Timeout");
    assert_eq!(
        status["message"],
        "Timeout: request did not complete within the allotted timeout"
    );
    // Watches are long-running: never cut by the request timeout.
    let mut watch = shim
        .client()
        .get(format!("{}/api/v1/pods?watch=true", shim.url))
        .send()
        .await
        .unwrap();
    assert_eq!(watch.status(), 200);
    let first = watch.chunk().await.unwrap().unwrap();
    assert!(String::from_utf8_lossy(&first).contains("\"ADDED\""));
    shim.stop().await;
}

#[tokio::test]
async fn each_client_may_hold_max_watches_per_user_watches() {
    let shim = Shim::start(Limits {
        max_watches_per_user: 3,
        ..Limits::default()
    })
    .await;
    let watch = || async {
        shim.client()
            .get(format!("{}/api/v1/pods?watch=true", shim.url))
            .send()
            .await
            .unwrap()
    };
    let mut open = Vec::new();
    for _ in 0..3 {
        let w = watch().await;
        assert_eq!(w.status(), 200);
        open.push(w);
    }
    assert_too_many(watch().await).await;
    // Lists and gets are not watches.
    assert_eq!(
        get(&format!("{}/api/v1/pods", shim.url)).await.status(),
        200
    );
    // A watch that ends gives its place back.
    drop(open.pop());
    let again = testkit::wait_until(
        "a watch place is free",
        Duration::from_secs(10),
        async || watch().await,
        |w| w.status() == 200,
    )
    .await;
    open.push(again);
    drop(open);
    shim.stop().await;
}

#[tokio::test]
async fn a_user_with_many_requests_waiting_does_not_hold_up_another_users_one() {
    let shim = Shim::start(Limits {
        max_requests_inflight: 2,
        queue_length_limit: 10,
        // Stands in for the authenticated user, whom the default
        // distinguisher reads (`user_or_connection`).
        flow_distinguisher: Arc::new(|r| {
            let user = r.headers().get("x-user").and_then(|v| v.to_str().ok());
            user.unwrap_or("").to_owned()
        }),
        ..Limits::default()
    })
    .await;
    let level = shim.levels.read_only.clone().unwrap();
    // alice takes both seats and queues ten more: her queue is full.
    let mut alice: Vec<_> = (0..2).map(|_| shim.held_log_of("alice")).collect();
    testkit::wait_until(
        "alice holds both seats",
        Duration::from_secs(10),
        async || level.in_use(),
        |n| *n == 2,
    )
    .await;
    alice.extend((0..10).map(|_| shim.held_log_of("alice")));
    testkit::wait_until(
        "alice's queue is full",
        Duration::from_secs(10),
        async || level.waiting(),
        |n| *n == 10,
    )
    .await;
    let more = shim
        .client()
        .get(format!("{}/api/v1/pods", shim.url))
        .header("x-user", "alice")
        .send()
        .await
        .unwrap();
    assert_too_many(more).await;
    // bob's one list waits in his own queue, not behind alice's ten.
    let bob = {
        let (client, url) = (shim.client(), shim.url.clone());
        tokio::spawn(async move {
            let resp = client
                .get(format!("{url}/api/v1/pods"))
                .header("x-user", "bob")
                .send()
                .await
                .unwrap();
            resp.status().as_u16()
        })
    };
    testkit::wait_until(
        "bob waits",
        Duration::from_secs(10),
        async || level.waiting(),
        |n| *n == 11,
    )
    .await;
    // The first seat that frees is alice's turn, the second bob's.
    shim.one.add_permits(1);
    testkit::wait_until(
        "alice's next request seated",
        Duration::from_secs(10),
        async || level.waiting(),
        |n| *n == 10,
    )
    .await;
    assert!(!bob.is_finished());
    shim.one.add_permits(1);
    let code = tokio::time::timeout(Duration::from_secs(10), bob)
        .await
        .expect("bob is served at the second freed seat")
        .unwrap();
    assert_eq!(code, 200);
    // bob's seat, freed, went to alice: eight of hers still wait, so bob
    // went ahead of them.
    assert_eq!(level.waiting(), 8);
    let _ = shim.gate.send(true);
    for h in alice {
        assert_eq!(h.await.unwrap(), 200);
    }
    shim.stop().await;
}

/// Whether `got` holds a whole HTTP/1.1 response with a Content-Length.
fn response_complete(got: &[u8]) -> bool {
    let Some(end) = got.windows(4).position(|w| w == b"\r\n\r\n") else {
        return false;
    };
    let head = String::from_utf8_lossy(&got[..end]).to_ascii_lowercase();
    let length = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse::<usize>().ok())
        .unwrap_or(0);
    got.len() >= end + 4 + length
}

/// A create whose body comes at one byte a second, sent on a connection of
/// its own: what kube-apiserver's answer to it was, and when it came.
async fn dribble(addr: SocketAddr) -> (String, Duration) {
    let started = Instant::now();
    let mut sock = tokio::net::TcpStream::connect(addr).await.unwrap();
    sock.write_all(
        b"POST /api/v1/namespaces/default/pods HTTP/1.1\r\nHost: x\r\n\
          Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{",
    )
    .await
    .unwrap();
    let (mut rx, mut tx) = sock.into_split();
    let send = async move {
        let mut tick = tokio::time::interval(Duration::from_secs(1));
        tick.tick().await;
        loop {
            tick.tick().await;
            if tx.write_all(b" ").await.is_err() {
                std::future::pending::<()>().await;
            }
        }
    };
    let answer = async move {
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = rx.read(&mut buf).await {
            got.extend_from_slice(&buf[..n]);
            if response_complete(&got) {
                break;
            }
        }
        String::from_utf8_lossy(&got).into_owned()
    };
    tokio::select! {
        answer = answer => (answer, started.elapsed()),
        () = send => unreachable!("the sender never ends"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_bodies_hold_no_seat_and_get_504_while_other_creates_go_through() {
    const BODY_READ_TIMEOUT: Duration = Duration::from_millis(4500);
    let shim = Shim::start(Limits {
        // Far fewer seats than slow senders: before bodies were received
        // ahead of the seat, these 200 took every one for 60 s.
        max_mutating_requests_inflight: 10,
        // Half a second off the senders' ticks, so no byte is in flight
        // as the answer goes out.
        body_read_timeout: BODY_READ_TIMEOUT,
        ..Limits::default()
    })
    .await;
    let slow: Vec<_> = (0..200).map(|_| tokio::spawn(dribble(shim.addr))).collect();

    // kubectl creates a pod while they dribble...
    let kubectl = testkit::Kubectl::new(&shim.url);
    let started = Instant::now();
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"prompt"},"spec":{"containers":[{"name":"c","image":"busybox"}]}}"#;
    let out = testkit::ok(&kubectl.run_stdin(&["create", "-f", "-"], Some(pod)).await);
    assert!(out.contains("pod/prompt created"), "{out}");
    let took = started.elapsed();
    assert!(
        took < Duration::from_secs(4),
        "kubectl create took {took:?}"
    );
    // ...and POSTs go through one after another until every slow sender
    // has had its answer.
    let client = shim.client();
    let mut created = 0;
    while !slow.iter().all(|h| h.is_finished()) {
        let started = Instant::now();
        let resp = client
            .post(format!("{}/api/v1/namespaces/default/configmaps", shim.url))
            .header("Content-Type", "application/json")
            .body(format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"cm-{created}"}}}}"#
            ))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 201, "{}", resp.text().await.unwrap());
        let took = started.elapsed();
        assert!(took < Duration::from_secs(2), "a create took {took:?}");
        created += 1;
    }
    assert!(created > 0);
    assert_eq!(
        shim.levels.mutating.as_ref().unwrap().in_use(),
        0,
        "no seat is left taken"
    );
    for h in slow {
        let (answer, after) = h.await.unwrap();
        assert!(answer.starts_with("HTTP/1.1 504"), "{answer}");
        assert!(answer.contains(r#""reason":"Timeout""#), "{answer}");
        assert!(
            answer.contains("Timeout: request did not complete within the allotted timeout"),
            "{answer}"
        );
        assert!(
            after >= BODY_READ_TIMEOUT && after < Duration::from_secs(20),
            "answered after {after:?}"
        );
    }
    shim.stop().await;
}
