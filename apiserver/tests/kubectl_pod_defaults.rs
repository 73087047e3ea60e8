//! What kube-apiserver fills in on every pod, read back through the real kubectl:
//! what clients dereference must be there (`kubectl debug` read a
//! `spec.securityContext` the API left out, and crashed).

use common::Server;
use serde_json::Value;
use testkit::{Kubectl, ok};

use super::common;

const POD: &str = "apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: default
spec:
  containers:
  - name: c
    image: busybox:1.36
    resources:
      limits: {memory: 64Mi}
    readinessProbe:
      httpGet: {port: 80}
  volumes:
  - name: scratch
";

const DEPLOYMENT: &str = "apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: default
spec:
  selector:
    matchLabels: {app: d}
  template:
    metadata:
      labels: {app: d}
    spec:
      containers:
      - name: c
        image: busybox:1.36
        resources:
          limits: {memory: 64Mi}
";

async fn json_of(k: &Kubectl, what: &[&str]) -> Value {
    let mut args = vec!["get"];
    args.extend_from_slice(what);
    args.extend_from_slice(&["-o", "json"]);
    serde_json::from_str(&ok(&k.run(&args).await)).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pods_and_templates_come_back_with_kube_apiservers_defaults() {
    let server = Server::start().await;
    let k = Kubectl::new(&server.url);
    k.apply(POD).await;
    let pod = json_of(&k, &["pod", "p"]).await;
    let spec = &pod["spec"];
    assert_eq!(spec["securityContext"], serde_json::json!({}), "{spec}");
    assert_eq!(spec["enableServiceLinks"], true);
    assert_eq!(spec["volumes"][0]["emptyDir"], serde_json::json!({}));
    let c = &spec["containers"][0];
    assert_eq!(c["resources"]["requests"]["memory"], "64Mi", "{c}");
    let probe = &c["readinessProbe"];
    assert_eq!(
        (
            &probe["httpGet"]["path"],
            &probe["httpGet"]["scheme"],
            &probe["timeoutSeconds"],
            &probe["periodSeconds"],
            &probe["successThreshold"],
            &probe["failureThreshold"]
        ),
        (
            &Value::from("/"),
            &Value::from("HTTP"),
            &Value::from(1),
            &Value::from(10),
            &Value::from(1),
            &Value::from(3)
        )
    );
    // A label is an update: the defaults it brings change no spec field.
    ok(&k.run(&["label", "pod", "p", "x=y"]).await);

    // A template keeps the defaults mesopod always gave it (see
    // `api/pod_defaults.rs`), and its limits stay limits only.
    k.apply(DEPLOYMENT).await;
    let d = json_of(&k, &["deployment", "d"]).await;
    let spec = &d["spec"]["template"]["spec"];
    assert_eq!(spec["restartPolicy"], "Always", "{spec}");
    assert!(spec["securityContext"].is_null(), "{spec}");
    assert_eq!(
        spec["containers"][0]["resources"],
        serde_json::json!({"limits": {"memory": "64Mi"}})
    );
}
