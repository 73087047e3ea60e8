//! Protobuf bodies through the HTTP routes, as kubectl sends them.

use axum::body::Body;
use axum::http::Request;
use serde_json::{Value, json};
use tower::ServiceExt as _;

use super::build;
use super::kinds::{deployment_body, pod_body};
use crate::protobuf::PROTOBUF;

async fn post(path: &str, bytes: Vec<u8>) -> (u16, Value) {
    let router = crate::http::router(crate::Api::in_memory().await.unwrap());
    let req = Request::builder()
        .method("POST")
        .uri(path)
        .header("content-type", PROTOBUF)
        .header("accept", "application/json, */*")
        .body(Body::from(bytes))
        .unwrap();
    let resp = router.oneshot(req).await.unwrap();
    let code = resp.status().as_u16();
    let bytes = axum::body::to_bytes(resp.into_body(), 1 << 20)
        .await
        .unwrap();
    (code, serde_json::from_slice(&bytes).unwrap_or(Value::Null))
}

#[tokio::test]
async fn deployments_and_pods_are_created_from_protobuf() {
    let (code, d) = post(
        "/apis/apps/v1/namespaces/default/deployments",
        deployment_body(),
    )
    .await;
    assert_eq!(code, 201, "{d}");
    assert_eq!(d["spec"]["replicas"], 3);
    assert_eq!(
        d["spec"]["template"]["spec"]["containers"][0]["command"],
        json!(["sleep", "3600"])
    );
    // The status Go wrote is the server's to set.
    assert_eq!(d.get("status").and_then(|s| s.get("replicas")), None);

    let (code, p) = post("/api/v1/namespaces/default/pods", pod_body()).await;
    assert_eq!(code, 201, "{p}");
    assert_eq!(
        p["spec"]["containers"][0]["resources"]["limits"]["cpu"],
        "500m"
    );
}

#[tokio::test]
async fn bad_protobuf_is_400_and_a_secret_never_quotes_its_values() {
    let (code, status) = post(
        "/api/v1/namespaces/default/configmaps",
        b"k8s\0\xff".to_vec(),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .contains("error decoding protobuf body")
    );
    // A Secret whose data is fine but whose type is not UTF-8.
    let mut secret = build(
        "k8s.io.api.core.v1.Secret",
        &json!({"metadata": {"name": "s"}, "data": {"k": "hunter2"}}),
    );
    secret.set_field_by_name("type", prost_reflect::Value::String("x".into()));
    let mut raw = prost::Message::encode_to_vec(&secret);
    let at = raw.len() - 1;
    raw[at] = 0xff;
    let (code, status) = post(
        "/api/v1/namespaces/default/secrets",
        super::envelope_with("v1", "Secret", &raw),
    )
    .await;
    assert_eq!(code, 400, "{status}");
    assert!(!status.to_string().contains("hunter2"), "{status}");
}

#[tokio::test]
async fn kubectl_autoscale_of_kubectl_1_27_creates_an_autoscaling_v1_autoscaler_from_protobuf() {
    // As the typed client writes it: every non-pointer field, the zero status too.
    let hpa = build(
        "k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler",
        &json!({
            "metadata": {"name": "web", "namespace": "", "generateName": "", "uid": "", "resourceVersion": "", "generation": 0, "creationTimestamp": {}},
            "spec": {
                "scaleTargetRef": {"kind": "Deployment", "name": "web", "apiVersion": "apps/v1"},
                "minReplicas": 1, "maxReplicas": 3, "targetCPUUtilizationPercentage": 50,
            },
            "status": {"currentReplicas": 0, "desiredReplicas": 0},
        }),
    );
    let (code, created) = post(
        "/apis/autoscaling/v1/namespaces/default/horizontalpodautoscalers",
        super::body("autoscaling/v1", "HorizontalPodAutoscaler", &hpa),
    )
    .await;
    assert_eq!(code, 201, "{created}");
    assert_eq!(created["apiVersion"], "autoscaling/v1");
    assert_eq!(created["spec"]["targetCPUUtilizationPercentage"], 50);
    assert_eq!(created["spec"]["minReplicas"], 1);
    assert_eq!(created.get("status"), None);
}
