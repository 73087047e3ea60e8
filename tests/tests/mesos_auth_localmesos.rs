//! localmesos enforcing Mesos' authentication, as its peers see it:
//! framework calls without or with wrong HTTP basic credentials get 401 with
//! `WWW-Authenticate`; a FrameworkInfo.principal other than the
//! authenticated one is refused with Mesos' message; pymesos with a
//! principal and secret runs a task. Executors: the mesopod executor sends
//! its agent-minted token and runs its pod; an executor call without a
//! token, with a forged one or with another executor's is refused.
//! mesos-go (Debian's package of it, its v1 HTTP client) does the same as
//! pymesos, and with a wrong secret gets the 401. Another principal with
//! valid credentials cannot take a framework over by its id; with
//! `authenticate_http_readonly`, `/state` and the sandbox files need
//! credentials too.
#![allow(clippy::unwrap_used)]

use crate::common;

use std::time::Duration;

use common::{harness, mesosgo, pymesos};
use localmesos::{AgentConfig, Config, Credentials, LocalMesos, Security, Timing};
use mesos::codec::Codec;
use mesos::proto::TaskState;

const PRINCIPAL: &str = "mesopod";
const SECRET: &str = "s3cret-value";

async fn authenticated_cluster() -> LocalMesos {
    LocalMesos::start(Config {
        agents: vec![AgentConfig::from_flags("cpus:2;mem:1024", "", 0).unwrap()],
        timing: Timing {
            allocation_interval: Duration::from_millis(50),
            status_update_retry_min: Duration::from_millis(300),
            status_update_retry_max: Duration::from_secs(2),
            executor_shutdown_grace: Duration::from_millis(300),
            ..Timing::default()
        },
        security: Security {
            framework_credentials: Some(Credentials::single(PRINCIPAL, SECRET)),
            ..Security::default()
        },
        ..Config::default()
    })
    .await
    .unwrap()
}

fn subscribe_body(principal: Option<&str>) -> String {
    let principal = principal.map_or(String::new(), |p| format!(r#","principal":"{p}""#));
    format!(
        r#"{{"type":"SUBSCRIBE","subscribe":{{"framework_info":{{"user":"nobody","name":"raw"{principal}}}}}}}"#
    )
}

async fn subscribe(
    url: &str,
    auth: Option<(&str, &str)>,
    principal: Option<&str>,
) -> reqwest::Response {
    testkit::init_crypto();
    let mut req = reqwest::Client::new()
        .post(format!("{url}/api/v1/scheduler"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .body(subscribe_body(principal));
    if let Some((p, s)) = auth {
        req = req.basic_auth(p, Some(s));
    }
    req.send().await.unwrap()
}

#[tokio::test]
async fn framework_calls_need_the_right_credentials_and_principal() {
    let cluster = authenticated_cluster().await;
    let url = cluster.master_url().to_owned();
    for auth in [None, Some((PRINCIPAL, "wrong")), Some(("nobody", SECRET))] {
        let resp = subscribe(&url, auth, None).await;
        assert_eq!(resp.status(), 401, "{auth:?}");
        assert_eq!(
            resp.headers()["www-authenticate"],
            r#"Basic realm="mesos-master-scheduler""#
        );
        assert_eq!(resp.text().await.unwrap(), "401 Unauthorized.");
    }
    // 401 comes before everything else, even the method check.
    testkit::init_crypto();
    let get = reqwest::get(format!("{url}/api/v1/scheduler"))
        .await
        .unwrap();
    assert_eq!(get.status(), 401);

    let resp = subscribe(&url, Some((PRINCIPAL, SECRET)), Some("someone-else")).await;
    assert_eq!(resp.status(), 400);
    assert_eq!(
        resp.text().await.unwrap(),
        "Failed to validate scheduler::Call: Authenticated principal 'mesopod' does not match principal 'someone-else' set in `FrameworkInfo`"
    );
    assert!(cluster.state().frameworks.is_empty(), "nobody registered");

    // Without a principal in FrameworkInfo, the master fills in the authenticated one.
    let resp = subscribe(&url, Some((PRINCIPAL, SECRET)), None).await;
    assert_eq!(resp.status(), 200);
    let state = cluster.state_json();
    assert_eq!(state["frameworks"][0]["principal"], PRINCIPAL);
    drop(resp);
    cluster.shutdown().await;
}

/// Reads a SUBSCRIBE response's stream until it holds `needle` (RecordIO
/// of JSON events, so the text is searchable as is).
async fn stream_until(resp: &mut reqwest::Response, needle: &str) -> String {
    let mut seen = String::new();
    tokio::time::timeout(Duration::from_secs(10), async {
        while !seen.contains(needle) {
            match resp.chunk().await.unwrap() {
                Some(chunk) => seen.push_str(&String::from_utf8_lossy(&chunk)),
                None => break,
            }
        }
    })
    .await
    .unwrap_or_else(|_| panic!("no {needle:?} in the stream: {seen}"));
    seen
}

#[tokio::test]
async fn another_principal_cannot_take_a_framework_over_by_its_id() {
    let cluster = LocalMesos::start(Config {
        security: Security {
            framework_credentials: Some(
                Credentials::from_json(
                    br#"{"credentials":[{"principal":"alice","secret":"a-secret"},{"principal":"mallory","secret":"m-secret"}]}"#,
                )
                .unwrap(),
            ),
            ..Security::default()
        },
        ..Config::default()
    })
    .await
    .unwrap();
    let url = cluster.master_url().to_owned();
    let mut alice = subscribe(&url, Some(("alice", "a-secret")), None).await;
    assert_eq!(alice.status(), 200);
    stream_until(&mut alice, "SUBSCRIBED").await;
    let id = cluster.state_json()["frameworks"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // mallory holds valid credentials and alice's framework id.
    let takeover = format!(
        r#"{{"type":"SUBSCRIBE","subscribe":{{"framework_info":{{"id":{{"value":"{id}"}},"user":"nobody","name":"raw"}}}}}}"#
    );
    let mut refused = reqwest::Client::new()
        .post(format!("{url}/api/v1/scheduler"))
        .header("Content-Type", "application/json")
        .header("Accept", "application/json")
        .basic_auth("mallory", Some("m-secret"))
        .body(takeover)
        .send()
        .await
        .unwrap();
    let events = stream_until(
        &mut refused,
        "Changing framework's principal is not allowed.",
    )
    .await;
    assert!(!events.contains("SUBSCRIBED"), "{events}");

    // alice's subscription is untouched: same principal, still connected,
    // and her stream got no "failed over".
    let state = cluster.state_json();
    assert_eq!(state["frameworks"].as_array().unwrap().len(), 1);
    assert_eq!(state["frameworks"][0]["principal"], "alice");
    assert_eq!(state["frameworks"][0]["connected"], true);
    let more = stream_until(&mut alice, "HEARTBEAT").await;
    assert!(!more.contains("failed over"), "{more}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn with_authenticate_http_readonly_state_and_files_need_credentials() {
    let cluster = LocalMesos::start(Config {
        agents: vec![AgentConfig::from_flags("cpus:2;mem:1024", "", 0).unwrap()],
        security: Security {
            framework_credentials: Some(Credentials::single(PRINCIPAL, SECRET)),
            authenticate_http_readonly: true,
            ..Security::default()
        },
        ..Config::default()
    })
    .await
    .unwrap();
    testkit::init_crypto();
    let http = reqwest::Client::new();
    let url = cluster.master_url().to_owned();
    let master_state = format!("{url}/state");
    let agents = http
        .get(&master_state)
        .basic_auth(PRINCIPAL, Some(SECRET))
        .send()
        .await
        .unwrap();
    assert_eq!(agents.status(), 200);
    let agents: serde_json::Value = agents.json().await.unwrap();
    let agent = format!("http://127.0.0.1:{}", agents["slaves"][0]["port"]);
    for (target, realm) in [
        (master_state.clone(), "mesos-master-readonly"),
        (format!("{url}/master/state.json"), "mesos-master-readonly"),
        (format!("{agent}/state"), "mesos-agent-readonly"),
        (
            format!("{agent}/files/browse?path=/"),
            "mesos-agent-readonly",
        ),
    ] {
        for auth in [None, Some((PRINCIPAL, "wrong"))] {
            let mut req = http.get(&target);
            if let Some((p, s)) = auth {
                req = req.basic_auth(p, Some(s));
            }
            let resp = req.send().await.unwrap();
            assert_eq!(resp.status(), 401, "{target} {auth:?}");
            assert_eq!(
                resp.headers()["www-authenticate"],
                format!(r#"Basic realm="{realm}""#).as_str()
            );
        }
    }
    let agent_state = http
        .get(format!("{agent}/state"))
        .basic_auth(PRINCIPAL, Some(SECRET))
        .send()
        .await
        .unwrap();
    assert_eq!(agent_state.status(), 200);
    // `/version` names nothing and stays open, as in Mesos.
    assert_eq!(
        http.get(format!("{url}/version"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn mesos_client_gets_a_typed_401_with_the_challenge() {
    let cluster = authenticated_cluster().await;
    let client = mesos::client::SchedulerClient::with_security(
        vec![cluster.master_url().to_owned()],
        Codec::Protobuf,
        &mesos::client::ClientSecurity {
            credential: Some(mesos::client::Credential::new(PRINCIPAL, "wrong").unwrap()),
            ..Default::default()
        },
    )
    .unwrap();
    let call = mesos::proto::scheduler::Call {
        r#type: Some(mesos::proto::scheduler::call::Type::Subscribe as i32),
        subscribe: Some(mesos::proto::scheduler::call::Subscribe {
            framework_info: Some(mesos::proto::FrameworkInfo {
                user: "nobody".into(),
                name: "typed".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let err = client.subscribe(call).await.err().unwrap();
    assert!(
        matches!(&err, mesos::client::ClientError::Unauthorized { challenge, .. } if challenge.contains("mesos-master-scheduler")),
        "{err}"
    );
    cluster.shutdown().await;
}

#[tokio::test]
async fn pymesos_with_a_principal_and_secret_runs_a_task() {
    if !pymesos::available_or_skip("pymesos auth test") {
        return;
    }
    let cluster = authenticated_cluster().await;
    let mut script = pymesos::Script::start(
        "pymesos_auth_scheduler.py",
        &[
            cluster.master_addr().to_string(),
            PRINCIPAL.into(),
            SECRET.into(),
        ],
    );
    let finished = script
        .until(Duration::from_secs(60), |l| match l {
            "DONE" => Some(true),
            "TIMEOUT" => Some(false),
            _ => None,
        })
        .await;
    let seen = script.seen.join("\n");
    assert!(finished, "pymesos did not finish its task:\n{seen}");
    assert!(seen.contains("REGISTERED"), "{seen}");
    assert!(seen.contains("STATE TASK_FINISHED"), "{seen}");
    let (status, _, stderr) = script.finish().await;
    assert!(status.success(), "{status:?}\n{stderr}");
    cluster.shutdown().await;
}

/// `tests/go/mesosgoauth` against an authenticating localmesos with
/// `secret`: what it printed on stdout, its exit status and its stderr.
async fn mesos_go_run(cluster: &LocalMesos, secret: &str) -> (Vec<String>, bool, String) {
    let program = mesosgo::build("mesosgoauth").await;
    let mut peer = pymesos::Script::spawn(
        tokio::process::Command::new(program)
            .arg(cluster.master_addr().to_string())
            .args([PRINCIPAL, secret]),
    );
    peer.until(Duration::from_secs(60), |l| match l {
        "DONE" => Some(true),
        "FAILED" => Some(false),
        _ => None,
    })
    .await;
    let mut seen = std::mem::take(&mut peer.seen);
    let (status, rest, stderr) = peer.finish().await;
    seen.extend(rest);
    (seen, status.success(), stderr)
}

#[tokio::test]
async fn mesos_go_with_a_principal_and_secret_runs_a_task() {
    if !mesosgo::available_or_skip("mesos-go auth test") {
        return;
    }
    let cluster = authenticated_cluster().await;
    let (seen, ok, stderr) = mesos_go_run(&cluster, SECRET).await;
    let text = seen.join("\n");
    assert!(ok, "mesos-go did not finish its task:\n{text}\n{stderr}");
    assert!(text.contains("REGISTERED"), "{text}");
    assert!(text.contains("STATE TASK_RUNNING"), "{text}");
    assert!(text.contains("STATE TASK_FINISHED"), "{text}");
    assert_eq!(seen.last().map(String::as_str), Some("DONE"), "{text}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn mesos_go_with_a_wrong_secret_gets_401() {
    if !mesosgo::available_or_skip("mesos-go wrong secret test") {
        return;
    }
    let cluster = authenticated_cluster().await;
    let (seen, ok, stderr) = mesos_go_run(&cluster, "not-the-secret").await;
    assert!(!ok, "mesos-go subscribed with a wrong secret: {seen:?}");
    assert!(
        !seen.iter().any(|l| l.starts_with("REGISTERED")),
        "{seen:?}"
    );
    assert!(stderr.contains("401 Unauthorized"), "{stderr}");
    cluster.shutdown().await;
}

#[tokio::test]
async fn executors_must_present_their_agent_minted_token() {
    let key = b"agent jwt secret key".to_vec();
    let mut sched = harness::start_with(Security {
        jwt_secret_key: Some(key.clone().into()),
        authenticate_http_executors: true,
        ..Security::default()
    })
    .await;
    // The mesopod executor reads MESOS_EXECUTOR_AUTHENTICATION_TOKEN and
    // sends it: its pod runs.
    sched
        .launch(
            "t1",
            harness::sh_pod("p1", "Never", "echo ran > /dev/null; sleep 30"),
        )
        .await;
    sched.until("t1", TaskState::TaskRunning).await;

    let fid = sched.framework_id.value.clone();
    let endpoint = sched.agent_endpoint();
    let call = |token: Option<String>| {
        let body = format!(
            r#"{{"type":"SUBSCRIBE","framework_id":{{"value":"{fid}"}},"executor_id":{{"value":"{}"}},"subscribe":{{}}}}"#,
            harness::EXECUTOR_ID
        );
        testkit::init_crypto();
        let mut req = reqwest::Client::new()
            .post(format!("http://{endpoint}/api/v1/executor"))
            .header("Content-Type", "application/json")
            .header("Accept", "application/json")
            .body(body);
        if let Some(t) = token {
            req = req.bearer_auth(t);
        }
        async move { req.send().await.unwrap() }
    };
    let none = call(None).await;
    assert_eq!(none.status(), 401);
    assert_eq!(
        none.headers()["www-authenticate"],
        r#"Basic realm="mesos-agent-executor",Bearer realm="mesos-agent-executor""#
    );
    let forged =
        localmesos::security::executor_token(b"not the key", &fid, harness::EXECUTOR_ID, "c");
    let bad = call(Some(forged)).await;
    assert_eq!(bad.status(), 401);
    assert!(
        bad.headers()["www-authenticate"]
            .to_str()
            .unwrap()
            .contains(r#"error="invalid_token""#)
    );
    let other = localmesos::security::executor_token(&key, &fid, "another-executor", "c");
    let wrong = call(Some(other)).await;
    assert_eq!(wrong.status(), 403);
    assert!(
        wrong
            .text()
            .await
            .unwrap()
            .contains("does not contain an 'eid' claim"),
    );
    // The executor is still connected and its pod still running.
    let state = sched.cluster.state();
    assert!(
        state
            .task("t1")
            .is_some_and(|t| t.state == TaskState::TaskRunning)
    );
    sched.kill("t1", None).await;
    sched.until_terminal("t1").await;
    sched.finish().await;
}
