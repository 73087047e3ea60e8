//! #39, point 1: no pod can take the framework over through the embedded
//! cluster. Pods share the host's network, so this test stands where a pod
//! stands (the host's loopback) and tries what the security review did
//! from inside alice's pod: read the master's `/state`, SUBSCRIBE with
//! mesopod's framework id, KILL bob's task in another namespace, schedule a
//! machine's maintenance, call an
//! agent's executor API, and the `/admin` fault routes. Each is refused
//! (401, or 404 for the fault routes), and mesopod is unharmed: the same
//! process, the same subscription, bob's pod still running once, new pods
//! still placed, logs still read (with mesopod's own credential).
//!
//! The credential mesopod made at first start is private (0700/0600, as
//! is the store), works for an operator who reads it, and is used again
//! after a restart, when the recovered executors still authenticate.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::faults;

use std::io::{Read as _, Write as _};
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use base64::Engine as _;
use faults::{Mode, Proc, Reset, all_running, apply, copies, get_json, kubectl_ok, marker};
use testkit::wait_until_blocking;

const BASE: u32 = 93_117;

/// An HTTP/1.0 request on loopback: the status code and the whole answer.
fn raw(method: &str, url: &str, headers: &[(&str, String)], body: &str) -> (u16, String) {
    let rest = url.trim_start_matches("http://");
    let (host, path) = rest
        .split_once('/')
        .map_or((rest, "/".to_owned()), |(h, p)| (h, format!("/{p}")));
    let mut conn = std::net::TcpStream::connect(host).unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let extra: String = headers
        .iter()
        .map(|(k, v)| format!("{k}: {v}\r\n"))
        .collect();
    write!(
        conn,
        "{method} {path} HTTP/1.0\r\nHost: {host}\r\nContent-Type: application/json\r\nAccept: application/json\r\n{extra}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = Vec::new();
    // A refused SUBSCRIBE closes; an accepted one would stream until the
    // read timeout, which the status line below then shows.
    let _ = conn.read_to_end(&mut answer);
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let code = answer
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    (code, answer)
}

fn basic(principal: &str, secret: &str) -> (&'static str, String) {
    let encoded = base64::engine::general_purpose::STANDARD.encode(format!("{principal}:{secret}"));
    ("Authorization", format!("Basic {encoded}"))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

fn start(data: &str, log: &Path) -> Proc {
    Proc::spawn(
        &[
            "--listen",
            "127.0.0.1:0",
            "--data-dir",
            data,
            "--agents",
            "2",
            "--offer-ttl",
            "1s",
            "--container-runtime=process",
        ],
        "Kubernetes API",
        log,
    )
}

fn pod(namespace: &str, name: &str, i: usize) -> String {
    format!(
        "---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {namespace}\nspec:\n  restartPolicy: Never\n  terminationGracePeriodSeconds: 5\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"echo hello from {name}; exec sleep {}\"]\n    resources:\n      requests:\n        cpu: 10m\n        memory: 8Mi\n",
        marker(BASE, i)
    )
}

fn running_in(api: &str, namespace: &str, name: &str) -> serde_json::Value {
    wait_until_blocking(
        &format!("{namespace}/{name} Running"),
        Duration::from_secs(60),
        || get_json(&format!("{api}/api/v1/namespaces/{namespace}/pods/{name}")),
        |p| p["status"]["phase"] == "Running",
    )
}

#[test]
fn a_pod_on_the_host_network_cannot_take_over_the_embedded_cluster() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let data_s = data.to_str().unwrap().to_owned();
    let _reset = Reset(data.clone());
    let log = dir.path().join("mesopod.log");

    let first = start(&data_s, &log);
    let api = first.url();

    // What mesopod made at first start is its owner's alone.
    let auth_dir = data.join("mesos-auth");
    assert_eq!(mode(&data), 0o700, "the data dir");
    assert_eq!(mode(&data.join("apiserver.redb")), 0o600, "the store");
    assert_eq!(mode(&auth_dir), 0o700);
    assert_eq!(mode(&auth_dir.join("secret")), 0o600);
    assert_eq!(mode(&auth_dir.join("jwt_secret_key")), 0o600);
    let secret = std::fs::read_to_string(auth_dir.join("secret")).unwrap();

    for ns in ["alice", "bob"] {
        kubectl_ok(&api, &["create", "namespace", ns]);
    }
    apply(
        &api,
        &(pod("alice", "alice-app", 0) + &pod("bob", "bob-app", 1)),
    );
    running_in(&api, "alice", "alice-app");
    let bob = running_in(&api, "bob", "bob-app");
    let bob_task = bob["metadata"]["annotations"]["mesopod.io/task-id"]
        .as_str()
        .unwrap()
        .to_owned();
    let framework = get_json(&format!("{api}/debug/framework"));
    let fid = framework["framework_id"].as_str().unwrap().to_owned();
    let master = framework["master"]
        .as_str()
        .unwrap()
        .trim_end_matches('/')
        .to_owned();

    // The operator, who can read the data dir, can read /state; a pod cannot.
    let operator = basic("mesopod", secret.trim());
    let (code, state) = raw(
        "GET",
        &format!("{master}/state"),
        std::slice::from_ref(&operator),
        "",
    );
    assert_eq!(code, 200, "{state}");
    let state: serde_json::Value =
        serde_json::from_str(state.split_once("\r\n\r\n").unwrap().1).unwrap();
    let agents: Vec<String> = state["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| format!("http://127.0.0.1:{}", a["port"]))
        .collect();
    assert_eq!(agents.len(), 2);
    let (code, answer) = raw("GET", &format!("{master}/state"), &[], "");
    assert_eq!(code, 401, "{answer}");
    assert!(
        answer.contains(r#"Basic realm="mesos-master-readonly""#),
        "{answer}"
    );
    // Nor may it schedule a machine's maintenance, which would drain it.
    let schedule = r#"{"windows":[{"machine_ids":[{"hostname":"agent-0","ip":"127.0.0.1"}],"unavailability":{"start":{"nanoseconds":0}}}]}"#;
    for path in ["/master/maintenance/schedule", "/maintenance/schedule"] {
        let (code, answer) = raw("POST", &format!("{master}{path}"), &[], schedule);
        assert_eq!(code, 401, "{path}: {answer}");
        assert!(
            answer.contains(r#"Basic realm="mesos-master-readwrite""#),
            "{answer}"
        );
    }
    for agent in &agents {
        let (code, answer) = raw("GET", &format!("{agent}/state"), &[], "");
        assert_eq!(code, 401, "{agent}/state: {answer}");
    }

    // The takeover: SUBSCRIBE with mesopod's framework id, without a
    // credential and with a guessed one.
    let subscribe = format!(
        r#"{{"type":"SUBSCRIBE","subscribe":{{"framework_info":{{"id":{{"value":"{fid}"}},"user":"root","name":"mesopod","checkpoint":true,"failover_timeout":604800}}}}}}"#
    );
    let scheduler = format!("{master}/api/v1/scheduler");
    for headers in [vec![], vec![basic("mesopod", "guess")]] {
        let (code, answer) = raw("POST", &scheduler, &headers, &subscribe);
        assert_eq!(code, 401, "{answer}");
        assert!(!answer.contains("SUBSCRIBED"), "{answer}");
    }
    // A KILL of bob's task on a stream id of its own.
    let kill = format!(
        r#"{{"type":"KILL","framework_id":{{"value":"{fid}"}},"kill":{{"task_id":{{"value":"{bob_task}"}}}}}}"#
    );
    let stream = (
        "Mesos-Stream-Id",
        "00000000-0000-0000-0000-000000000000".to_owned(),
    );
    let (code, answer) = raw("POST", &scheduler, &[stream], &kill);
    assert_eq!(code, 401, "{answer}");
    // Posing as an executor on each agent.
    let executor_call = format!(
        r#"{{"type":"SUBSCRIBE","framework_id":{{"value":"{fid}"}},"executor_id":{{"value":"mesopod-executor"}},"subscribe":{{}}}}"#
    );
    for agent in &agents {
        let (code, answer) = raw(
            "POST",
            &format!("{agent}/api/v1/executor"),
            &[],
            &executor_call,
        );
        assert_eq!(code, 401, "{agent}: {answer}");
    }
    // The fault routes are not served at all.
    let (code, _) = raw(
        "POST",
        &format!("{master}/admin/agents/x/partition"),
        &[],
        "",
    );
    assert_eq!(code, 404);

    // mesopod is unharmed: still subscribed as the same framework, bob's
    // pod runs once, logs are read with its own credential, and new pods
    // are placed.
    let now = get_json(&format!("{api}/debug/framework"));
    assert_eq!(now["framework_id"], fid.as_str());
    assert_eq!(now["subscribed"], true);
    assert_eq!(copies(Mode::Process, &marker(BASE, 1)), 1, "bob's pod runs");
    let logs = kubectl_ok(&api, &["logs", "-n", "alice", "alice-app"]);
    assert!(logs.contains("hello from alice-app"), "{logs}");
    apply(&api, &faults::pods_yaml("after", BASE + 1, 1));
    all_running(&api, "after", 1, Duration::from_secs(60));

    // After a restart the same credential is used, and the executors that
    // were recovered still authenticate with their tokens.
    first.sigterm();
    let next = start(&data_s, &log);
    let api = next.url();
    wait_until_blocking(
        "mesopod subscribed again",
        Duration::from_secs(30),
        || get_json(&format!("{api}/debug/framework")),
        |f| f["subscribed"] == true && f["framework_id"] == fid.as_str(),
    );
    assert_eq!(
        std::fs::read_to_string(auth_dir.join("secret")).unwrap(),
        secret
    );
    assert_eq!(
        copies(Mode::Process, &marker(BASE, 1)),
        1,
        "bob's pod runs once"
    );
    let logs = kubectl_ok(&api, &["logs", "-n", "bob", "bob-app"]);
    assert!(logs.contains("hello from bob-app"), "{logs}");
    apply(&api, &faults::pods_yaml("later", BASE + 2, 1));
    all_running(&api, "later", 1, Duration::from_secs(60));
    let panics = faults::panics(&[&log]);
    assert_eq!(panics, 0, "panics in {}", log.display());
}
