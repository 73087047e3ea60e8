//! mesopod compacts etcd itself (`--etcd-compaction-interval`, here 200ms instead of
//! kube-apiserver's 5m): a watch from before the compacted revision is then answered
//! as kube-apiserver answers it, a 410 Expired ERROR event.
//! Needs etcd (`.ci/install-etcd.sh`): skipped without it, failed under `CI=true`.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use apiserver::store::{EtcdConfig, EtcdStore};
use apiserver::{Api, SystemClock};
use common::{Http, Server, TestLogs};
use futures::StreamExt;
use serde_json::{Value, json};
use testkit::etcd::Etcd;

/// The first event of a watch.
async fn first_event(url: &str) -> Value {
    testkit::init_crypto();
    let resp = reqwest::get(url).await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut stream = resp.bytes_stream();
    let mut line = Vec::new();
    while !line.contains(&b'\n') {
        line.extend_from_slice(&stream.next().await.unwrap().unwrap());
    }
    let end = line.iter().position(|b| *b == b'\n').unwrap();
    serde_json::from_slice(&line[..end]).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_watch_from_before_mesopods_own_compaction_is_410() {
    let Some(etcd) = Etcd::start("a_watch_from_before_mesopods_own_compaction_is_410").await else {
        return;
    };
    let mut config = EtcdConfig::new(vec![etcd.url.clone()]);
    config.compaction_interval = Duration::from_millis(200);
    let store = EtcdStore::connect(config, None).await.unwrap();
    let api = Api::start(Arc::new(store), Arc::new(SystemClock), Arc::new(TestLogs))
        .await
        .unwrap();
    let server = Server::serve(api).await;
    let http = Http::new(&server);
    let path = "/api/v1/namespaces/default/configmaps";
    let (code, first) = http
        .json("POST", path, &json!({"metadata": {"name": "a"}}))
        .await;
    assert_eq!(code, 201, "{first}");
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_owned();
    let (code, body) = http
        .json("POST", path, &json!({"metadata": {"name": "b"}}))
        .await;
    assert_eq!(code, 201, "{body}");
    let url = format!("{}{path}?watch=true&resourceVersion={rv}", server.url);
    // Before compaction the watch replays b; once mesopod compacted past it, 410.
    let event = testkit::wait_until(
        "mesopod compacts etcd",
        Duration::from_secs(20),
        async || first_event(&url).await,
        |e: &Value| e["type"] == "ERROR",
    )
    .await;
    assert_eq!(event["object"]["code"], 410, "{event}");
    assert_eq!(event["object"]["reason"], "Expired", "{event}");
    // A watch from now on works. mesopod keeps compacting every 200 ms (its
    // own compaction key's writes move the revision on), so on a loaded
    // machine a list's revision can itself fall below the next compaction
    // before the watch opens: that attempt is 410 too, and a fresh list and
    // watch must then work.
    let mut attempt = 0;
    let event = testkit::wait_until(
        "a watch from a fresh list to see the next create",
        Duration::from_secs(20),
        async || {
            attempt += 1;
            let (_, list) = http.get(path).await;
            let now = list["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_owned();
            let name = format!("c{attempt}");
            let (code, body) = http
                .json("POST", path, &json!({"metadata": {"name": name}}))
                .await;
            assert_eq!(code, 201, "{body}");
            let event = first_event(&format!(
                "{}{path}?watch=true&resourceVersion={now}",
                server.url
            ))
            .await;
            (event, name)
        },
        |(e, _): &(Value, String)| e["type"] != "ERROR",
    )
    .await;
    assert_eq!(
        (
            event.0["type"].as_str(),
            event.0["object"]["metadata"]["name"].as_str()
        ),
        (Some("ADDED"), Some(event.1.as_str()))
    );
    server.stop().await;
}
