//! client-go's event aggregation seen with the real kubectl: a readiness
//! probe whose output changes on every attempt writes one `Unhealthy`
//! event per distinct message for the first nine, and from the tenth on
//! one event "(combined from similar events): <latest message>" whose
//! count climbs, which `kubectl describe pod` shows.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::cluster::*;
use framework::app::App;
use testkit::{Kubectl, ok, wait_until};

const T: Duration = Duration::from_secs(90);
const COMBINED: &str = "(combined from similar events): Readiness probe failed: attempt ";

/// `(message, count)` of the `Unhealthy` events about pod `name`.
async fn unhealthy(k: &Kubectl, name: &str) -> Vec<(String, i64)> {
    let list: serde_json::Value =
        serde_json::from_str(&ok(&k.run(&["get", "events", "-o", "json"]).await)).unwrap();
    list["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["involvedObject"]["name"] == name && e["reason"] == "Unhealthy")
        .map(|e| {
            (
                e["message"].as_str().unwrap_or_default().to_owned(),
                e["count"].as_i64().unwrap_or(0),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_failures_with_changing_messages_are_combined() {
    let mut cfg = app_config(Setup {
        agents: vec![agent("cpus:4;mem:4096;disk:4096", "", 0)],
        ..Setup::default()
    });
    cfg.executor.args = vec!["--container-runtime=process".into()];
    let app = App::start(cfg).await.expect("mesopod starts");
    let k = Kubectl::new(&app.api_url());
    // Each attempt counts itself in a file of the container's directory.
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: flaky\nspec:\n  terminationGracePeriodSeconds: 1\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"exec sleep 3600\"]\n    readinessProbe:\n      exec:\n        command: [\"/bin/sh\", \"-c\", \"n=$(( $(cat n 2>/dev/null || echo 0) + 1 )); echo $n > n; echo attempt $n; exit 1\"]\n      periodSeconds: 1\n";
    ok(&k.run_stdin(&["apply", "-f", "-"], Some(yaml)).await);
    let seen = wait_until(
        "a combined event counted twice",
        T,
        async || unhealthy(&k, "flaky").await,
        |events| {
            events
                .iter()
                .any(|(m, n)| m.starts_with(COMBINED) && *n >= 2)
        },
    )
    .await;
    let (combined, single): (Vec<_>, Vec<_>) =
        seen.iter().partition(|(m, _)| m.starts_with(COMBINED));
    assert_eq!(combined.len(), 1, "one combined event: {seen:?}");
    let mut messages: Vec<&str> = single.iter().map(|(m, _)| m.as_str()).collect();
    messages.sort();
    let first_nine: Vec<String> = (1..=9)
        .map(|i| format!("Readiness probe failed: attempt {i}\n"))
        .collect();
    assert_eq!(messages, first_nine, "{seen:?}");
    assert!(single.iter().all(|(_, n)| *n == 1), "{seen:?}");
    let describe = ok(&k.run(&["describe", "pod", "flaky"]).await);
    assert!(
        describe.contains("(combined from similar events): Readiness probe failed: attempt"),
        "{describe}"
    );
    app.shutdown().await;
}
