//! The API server's per-request limits as a client sees them: 429 with
//! kube-apiserver's text and `Retry-After: 1` past the in-flight budgets and
//! the per-client watch cap, 413 for a 4 MiB body, 504 past
//! `--request-timeout`. Requests are held in flight by a log source that
//! answers only when the test opens its gate, so the counts are exact.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;
use std::time::Duration;

use apiserver::limits::Limits;
use apiserver::store::MemoryStore;
use apiserver::{Api, LogRequest, LogSource, SystemClock};
use bytes::Bytes;
use futures::StreamExt as _;
use tokio::sync::watch;

/// Logs that answer once the gate opens.
struct GatedLogs(watch::Receiver<bool>);

impl LogSource for GatedLogs {
    fn logs(&self, _req: LogRequest) -> apiserver::logs::LogFuture<'_> {
        let mut gate = self.0.clone();
        Box::pin(async move {
            let _ = gate.wait_for(|open| *open).await;
            Ok(futures::stream::iter([Ok(Bytes::from_static(b"line\n"))]).boxed())
        })
    }
}

struct Shim {
    url: String,
    gate: watch::Sender<bool>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Shim {
    async fn start(limits: Limits) -> Shim {
        let (gate, rx) = watch::channel(false);
        let api = Api::start(
            Arc::new(MemoryStore::new().unwrap()),
            Arc::new(SystemClock),
            Arc::new(GatedLogs(rx)),
        )
        .await
        .unwrap();
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(apiserver::serve_with_limits(
            listener,
            api,
            limits,
            async move {
                let _ = stopped.await;
            },
        ));
        let shim = Shim {
            url,
            gate,
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
        let (client, url) = (self.client(), self.url.clone());
        tokio::spawn(async move {
            let resp = client
                .get(format!("{url}/api/v1/namespaces/default/pods/p/log"))
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
