//! Executors' node credentials (#18): each real `mesopod executor` registers a public
//! key through Mesos, and a node credential reads exactly what the Node authorizer
//! allows: Secrets referenced by pods bound to its node, tokens for those pods only.
//! A key that did not come through Mesos is refused, and no Secret value reaches Mesos.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use apiserver::auth::node_keys::NodeKey;
use executor::apiclient::protocol::{self, NODE_KEY_MESSAGE, NODE_REGISTERED_MESSAGE, Registered};
use executor::apiclient::{ApiClient, Credential};
use executor::objects::{ObjectsError, PodObjects};
use framework::app::App;
use testkit::{ok, stderr, wait_until};

const PLANTED: &str = "planted-s3cr3t-7f1c2a";
const K: &str = common::KUBECTL_133;

struct Cluster {
    app: App,
    dir: tempfile::TempDir,
}

impl Cluster {
    /// A secure mesopod (`--authorization-mode=Node,RBAC`) with two agents running the
    /// real executor.
    async fn start() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let tokens = dir.path().join("tokens.csv");
        std::fs::write(&tokens, "nobody-token,nobody,1000\n").unwrap();
        let data = dir.path().join("data");
        let mut cfg = common::cluster::app_config(common::cluster::Setup {
            agents: (0..2)
                .map(|i| common::cluster::agent("cpus:4;mem:4096;disk:4096", "", i))
                .collect(),
            data_dir: Some(data.clone()),
            ..Default::default()
        });
        let mut args = common::secure::security_args(&tokens);
        args.authorization_mode = "Node,RBAC".into();
        let (listen, security) = args.resolve(&data, cfg.listen).unwrap();
        cfg.listen = listen;
        cfg.security = security;
        let app = App::start(cfg).await.expect("secure mesopod starts");
        Self { app, dir }
    }

    fn ca_file(&self) -> String {
        self.dir
            .path()
            .join("data/pki/ca.crt")
            .display()
            .to_string()
    }

    fn ca_pem(&self) -> String {
        std::fs::read_to_string(self.ca_file()).unwrap()
    }

    async fn admin(&self, args: &[&str], stdin: Option<&str>) -> std::process::Output {
        let kc = format!(
            "--kubeconfig={}",
            self.dir.path().join("data/kubeconfig").display()
        );
        let mut all = vec![kc.as_str()];
        all.extend_from_slice(args);
        common::kubectl(K, &self.app.api_url())
            .run_stdin(&all, stdin)
            .await
    }

    /// kubectl as the bearer of `token`.
    async fn as_token(&self, token: &str, args: &[&str]) -> std::process::Output {
        let ca = format!("--certificate-authority={}", self.ca_file());
        let t = format!("--token={token}");
        let mut all = vec![ca.as_str(), t.as_str()];
        all.extend_from_slice(args);
        common::kubectl(K, &self.app.api_url()).run(&all).await
    }

    /// A credential for `node` registered the way the scheduler registers an
    /// executor's (when `register`), and told where the API is.
    fn credential(&self, node: &str, register: bool) -> Arc<Credential> {
        let c = Arc::new(Credential::generate().unwrap());
        let key: protocol::NodeKey = protocol::decode(NODE_KEY_MESSAGE, &c.key_message()).unwrap();
        use base64::Engine as _;
        let public_key = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(&key.public_key)
            .unwrap();
        let kid = apiserver::auth::node_keys::key_id(&public_key);
        if register {
            self.app
                .node_keys()
                .register(NodeKey {
                    node: node.into(),
                    agent_id: format!("test-agent-{node}"),
                    executor_id: "test-executor".into(),
                    public_key,
                })
                .unwrap();
        }
        let answer = Registered {
            kid,
            node: node.into(),
            server: self.app.api_url(),
            ca_pem: self.ca_pem(),
            stream_key: String::new(),
        };
        assert!(c.on_message(&protocol::encode(NODE_REGISTERED_MESSAGE, &answer)));
        c
    }
}

/// The executors' stderr logs under the agents' sandboxes.
fn executor_logs(dir: &std::path::Path) -> Vec<String> {
    let mut found = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return found;
    };
    for e in entries.flatten() {
        let path = e.path();
        if path.is_dir() {
            found.extend(executor_logs(&path));
        } else if path.file_name().is_some_and(|n| n == "stderr")
            && let Ok(text) = std::fs::read_to_string(&path)
            && text.contains("mesopod executor starting")
        {
            found.push(text);
        }
    }
    found
}

fn secret(name: &str, value: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\nstringData:\n  password: {value}\n"
    )
}

/// A pod on `node` that references `secret` (as its pull secret: the executor's
/// process mode runs it without reading it, so the pod runs on any branch).
fn pod(name: &str, node: &str, secret: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n  nodeSelector:\n    kubernetes.io/hostname: {node}\n  imagePullSecrets:\n  - name: {secret}\n  containers:\n  - name: main\n    image: busybox\n    command: [sleep, \"60\"]\n    resources:\n      requests:\n        cpu: 100m\n        memory: 32Mi\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_credential_reads_only_what_its_pods_reference_and_nothing_reaches_mesos() {
    let c = Cluster::start().await;
    for (name, value) in [("s-a", PLANTED), ("s-b", "other-value")] {
        ok(&c
            .admin(&["apply", "-f", "-"], Some(&secret(name, value)))
            .await);
    }
    ok(&c
        .admin(&["apply", "-f", "-"], Some(&pod("pa", "agent-0", "s-a")))
        .await);
    ok(&c
        .admin(&["apply", "-f", "-"], Some(&pod("pb", "agent-1", "s-b")))
        .await);
    for name in ["pa", "pb"] {
        common::cluster::wait_pod(c.app.api(), "default", name, Duration::from_secs(60), |p| {
            common::cluster::phase(p) == "Running"
        })
        .await;
    }
    // Both real executors sent their keys through Mesos and the scheduler registered them.
    wait_until(
        "both executors' node keys",
        Duration::from_secs(20),
        async || c.app.node_keys().len(),
        |n| *n == 2,
    )
    .await;

    // ... and each got the scheduler's answer (the node and the API), as it logs.
    let work = c.app.local().unwrap().work_dir().to_owned();
    let logs = wait_until(
        "both executors registered",
        Duration::from_secs(20),
        async || executor_logs(&work),
        |logs| {
            logs.iter()
                .filter(|l| l.contains("node credential registered"))
                .count()
                == 2
        },
    )
    .await;
    for node in ["agent-0", "agent-1"] {
        assert!(
            logs.iter()
                .any(|l| l.contains(&format!("node=\"{node}\""))
                    || l.contains(&format!("node={node}"))),
            "{logs:?}"
        );
    }

    let node_a = c.credential("agent-0", true);
    let client = ApiClient::new(node_a.clone(), None);
    let mine = client
        .secret("default", "s-a")
        .await
        .unwrap()
        .expect("s-a exists");
    assert_eq!(
        mine.data.unwrap()["password"].0,
        PLANTED.as_bytes(),
        "the node reads its pod's Secret"
    );
    let theirs = client.secret("default", "s-b").await.unwrap_err();
    assert_eq!(
        theirs,
        ObjectsError::Forbidden(
            "secrets \"s-b\" is forbidden: User \"system:node:agent-0\" cannot get resource \"secrets\" in API group \"\" in the namespace \"default\": no relationship found between node 'agent-0' and this object".into()
        )
    );
    assert!(
        matches!(
            client.secret("default", "nothing").await,
            Err(ObjectsError::Forbidden(_))
        ),
        "an object outside the node's scope is 403 even when absent"
    );

    // The same credential through kubectl: get works, a list does not.
    let token = node_a.token("agent-0").unwrap();
    ok(&c.as_token(&token, &["get", "secret", "s-a"]).await);
    let list = c.as_token(&token, &["get", "secrets"]).await;
    assert!(!list.status.success());
    assert!(
        stderr(&list).contains("User \"system:node:agent-0\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\": can only get individual resources of this type"),
        "{}",
        stderr(&list)
    );
    let pods = c.as_token(&token, &["get", "pods"]).await;
    assert!(stderr(&pods).contains("Forbidden"), "{}", stderr(&pods));

    // A key that never came through Mesos: 401.
    let forged = c.credential("agent-0", false);
    let forged_token = forged.token("agent-0").unwrap();
    let refused = c.as_token(&forged_token, &["get", "secret", "s-a"]).await;
    assert!(
        stderr(&refused).contains("You must be logged in to the server"),
        "{}",
        stderr(&refused)
    );
    let forged_client =
        ApiClient::new(forged, None).with_registration_wait(Duration::from_millis(300));
    assert!(matches!(
        forged_client.secret("default", "s-a").await,
        Err(ObjectsError::Unavailable { .. })
    ));

    // TokenRequest: for its own pod the node gets a token that authenticates as the
    // pod's service account; for a pod on another node, 403.
    let pa = c.app.api().get_pod("default", "pa").unwrap();
    let pb = c.app.api().get_pod("default", "pb").unwrap();
    let sa = client.service_account_token(&pa, None, 3607).await.unwrap();
    let whoami = ok(&c
        .as_token(
            &sa.token,
            &[
                "auth",
                "whoami",
                "-o",
                "jsonpath={.status.userInfo.username}",
            ],
        )
        .await);
    assert_eq!(whoami, "system:serviceaccount:default:default");
    let other = client
        .service_account_token(&pb, None, 3607)
        .await
        .unwrap_err();
    assert_eq!(
        other,
        ObjectsError::Forbidden(
            "serviceaccounts \"default\" is forbidden: node requested token bound to a pod scheduled on a different node".into()
        )
    );

    // The planted value is nowhere in Mesos: not in the master's /state (which holds
    // every TaskInfo and ExecutorInfo, environment included), nor in any agent's.
    let http = reqwest::Client::new();
    let master = c.app.master_url().trim_end_matches('/').to_owned();
    let state = http
        .get(format!("{master}/master/state"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        state.contains("\"pa\"") || state.contains("default/pa"),
        "the tasks are in /state"
    );
    let encoded = {
        use base64::Engine as _;
        base64::engine::general_purpose::STANDARD.encode(PLANTED)
    };
    for needle in [PLANTED, encoded.as_str()] {
        assert!(
            !state.contains(needle),
            "the master's /state leaks the Secret"
        );
    }
    let parsed: serde_json::Value = serde_json::from_str(&state).unwrap();
    let agents: Vec<String> = parsed["slaves"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["pid"].as_str()?.split('@').nth(1).map(str::to_owned))
        .collect();
    assert_eq!(agents.len(), 2, "{}", parsed["slaves"]);
    for agent in agents {
        let body = http
            .get(format!("http://{agent}/state"))
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap();
        assert!(body.contains("executors"), "{body}");
        for needle in [PLANTED, encoded.as_str()] {
            assert!(
                !body.contains(needle),
                "agent {agent}'s /state leaks the Secret"
            );
        }
    }
    c.app.shutdown().await;
}

/// A pod that runs nowhere (no agents needed): only its admission is looked at.
fn plain_pod(name: &str, extra_spec: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\nspec:\n{extra_spec}  containers:\n  - name: main\n    image: busybox\n  initContainers:\n  - name: init\n    image: busybox\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_account_admission_mounts_the_token_volume_unless_automount_is_false() {
    let c = Cluster::start().await;
    let ca = c.ca_pem();
    // Every namespace holds the API's CA, new ones included.
    ok(&c.admin(&["create", "namespace", "fresh"], None).await);
    for ns in ["default", "kube-system", "fresh"] {
        let got = ok(&c
            .admin(
                &[
                    "get",
                    "configmap",
                    "kube-root-ca.crt",
                    "-n",
                    ns,
                    "-o",
                    "jsonpath={.data.ca\\.crt}",
                ],
                None,
            )
            .await);
        assert_eq!(got.trim(), ca.trim(), "namespace {ns}");
    }

    ok(&c
        .admin(&["apply", "-f", "-"], Some(&plain_pod("auto", "")))
        .await);
    let spec = c
        .app
        .api()
        .get_pod("default", "auto")
        .unwrap()
        .spec
        .unwrap();
    let volumes = spec.volumes.clone().unwrap();
    assert_eq!(volumes.len(), 1, "{volumes:?}");
    let name = volumes[0].name.clone();
    assert!(name.starts_with("kube-api-access-"), "{name}");
    let sources = volumes[0]
        .projected
        .as_ref()
        .unwrap()
        .sources
        .as_ref()
        .unwrap();
    let token = sources[0].service_account_token.as_ref().unwrap();
    assert_eq!(
        (token.path.as_str(), token.expiration_seconds),
        ("token", Some(3607))
    );
    assert_eq!(
        sources[1].config_map.as_ref().unwrap().name,
        "kube-root-ca.crt"
    );
    assert!(sources[2].downward_api.is_some());
    for ctr in spec
        .containers
        .iter()
        .chain(spec.init_containers.iter().flatten())
    {
        let m = &ctr.volume_mounts.as_ref().unwrap()[0];
        assert_eq!(m.name, name);
        assert_eq!(
            m.mount_path,
            "/var/run/secrets/kubernetes.io/serviceaccount"
        );
        assert_eq!(m.read_only, Some(true));
    }

    // automountServiceAccountToken: false on the pod, or on its ServiceAccount.
    ok(&c
        .admin(
            &["apply", "-f", "-"],
            Some(&plain_pod(
                "manual",
                "  automountServiceAccountToken: false\n",
            )),
        )
        .await);
    ok(&c
        .admin(
            &["apply", "-f", "-"],
            Some("apiVersion: v1\nkind: ServiceAccount\nmetadata:\n  name: quiet\nautomountServiceAccountToken: false\n"),
        )
        .await);
    ok(&c
        .admin(
            &["apply", "-f", "-"],
            Some(&plain_pod("by-account", "  serviceAccountName: quiet\n")),
        )
        .await);
    for name in ["manual", "by-account"] {
        let spec = c.app.api().get_pod("default", name).unwrap().spec.unwrap();
        assert!(spec.volumes.unwrap_or_default().is_empty(), "{name}");
        assert!(
            spec.containers[0]
                .volume_mounts
                .clone()
                .unwrap_or_default()
                .is_empty(),
            "{name}"
        );
    }
    // The pod's own true wins over its account's false, as in Kubernetes.
    ok(&c
        .admin(
            &["apply", "-f", "-"],
            Some(&plain_pod(
                "pod-wins",
                "  serviceAccountName: quiet\n  automountServiceAccountToken: true\n",
            )),
        )
        .await);
    let spec = c
        .app
        .api()
        .get_pod("default", "pod-wins")
        .unwrap()
        .spec
        .unwrap();
    assert_eq!(spec.volumes.unwrap().len(), 1);
    c.app.shutdown().await;
}
