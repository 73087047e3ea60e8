//! The official Kubernetes Python client over TLS with a bearer token: a user who may
//! edit namespace `a` lists and creates pods there, and gets 403 in `b`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::time::Duration;

use common::secure::Secure;

const SCRIPT: &str = r#"
import sys
from kubernetes import client
from kubernetes.client.rest import ApiException

url, ca, token = sys.argv[1], sys.argv[2], sys.argv[3]
cfg = client.Configuration()
cfg.host = url
cfg.ssl_ca_cert = ca
cfg.api_key = {"authorization": token}
cfg.api_key_prefix = {"authorization": "Bearer"}
v1 = client.CoreV1Api(client.ApiClient(cfg))
pod = client.V1Pod(
    metadata=client.V1ObjectMeta(name="from-python"),
    spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="busybox", command=["sleep", "30"])]),
)
print("created", v1.create_namespaced_pod("a", pod).metadata.name)
print("listed", ",".join(p.metadata.name for p in v1.list_namespaced_pod("a").items))
try:
    v1.list_namespaced_pod("b")
    print("listed b")
except ApiException as e:
    print("b", e.status, e.reason)
"#;

fn python_has_kubernetes() -> bool {
    std::process::Command::new("python3")
        .args(["-c", "import kubernetes"])
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_client_uses_a_bearer_token_over_tls() {
    if !python_has_kubernetes() {
        assert!(
            std::env::var("CI").as_deref() != Ok("true"),
            "the Python kubernetes client is missing (.ci/install-python-kubernetes.sh installs it)"
        );
        eprintln!(
            "skipped: the Python kubernetes client is not installed (.ci/install-python-kubernetes.sh)"
        );
        return;
    }
    let s = Secure::start().await;
    s.tenants(&[]).await;
    let ca = s.data_dir().join("pki/ca.crt");
    let out = tokio::time::timeout(
        Duration::from_secs(60),
        tokio::process::Command::new("python3")
            .args([
                "-c",
                SCRIPT,
                &s.app.api_url(),
                ca.to_str().unwrap(),
                "alice-token",
            ])
            .output(),
    )
    .await
    .expect("the script finishes")
    .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        text,
        "created from-python\nlisted from-python\nb 403 Forbidden\n"
    );
    s.app.shutdown().await;
}
