#![allow(clippy::unwrap_used)]
use super::*;
use crate::objects::{ServiceAccountToken, StaticObjects};
use crate::pod::PodPlan;
use futures::FutureExt as _;
use serde_json::json;

fn pod(volume: serde_json::Value) -> (PodPlan, Volume) {
    let p = json!({"metadata": {"name": "web", "namespace": "ns", "labels": {"b": "2", "a": "1"}},
        "spec": {"nodeName": "n1", "volumes": [volume], "containers": [{"name": "c"}]}});
    let plan = PodPlan::from_pod(serde_json::from_value(p).unwrap()).unwrap();
    let v = plan.pod.spec.as_ref().unwrap().volumes.as_ref().unwrap()[0].clone();
    (plan, v)
}

fn files(
    plan: &PodPlan,
    v: &Volume,
    o: &StaticObjects,
    now: SystemTime,
    tokens: &mut Tokens,
) -> Result<Payload, String> {
    let cx = PodContext {
        pod: &plan.pod,
        key: &plan.key,
        node_name: "n1",
        host_ip: "10.0.0.1",
        pod_ip: "10.0.0.1",
        containers: &plan.containers,
    };
    let src = Sources {
        objects: o,
        cx: &cx,
        now,
    };
    payload(v, &src, tokens)
        .now_or_never()
        .unwrap()
        .map(Option::unwrap)
}

fn text(p: &Payload, path: &str) -> String {
    String::from_utf8(p[path].data.clone()).unwrap()
}

#[test]
fn projected_sources_combine_with_modes_and_the_token_is_refreshed_at_80_percent() {
    let o = StaticObjects::default();
    o.set_config_map(
        serde_json::from_value(json!({"metadata": {"name": "root-ca", "namespace": "ns"},
            "data": {"ca.crt": "PEM"}}))
        .unwrap(),
    );
    o.set_token(ServiceAccountToken {
        token: "first".into(),
        expiration_timestamp: String::new(),
    });
    let (plan, v) = pod(
        json!({"name": "kube-api-access-x", "projected": {"defaultMode": 0o640, "sources": [
        {"serviceAccountToken": {"path": "token", "expirationSeconds": 1000}},
        {"configMap": {"name": "root-ca", "items": [{"key": "ca.crt", "path": "ca.crt", "mode": 0o444}]}},
        {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}},
                                   {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}}),
    );
    let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
    let mut tokens = Tokens::default();
    let p = files(&plan, &v, &o, t0, &mut tokens).unwrap();
    assert_eq!(text(&p, "token"), "first");
    assert_eq!(p["token"].mode, 0o640);
    assert_eq!(
        (text(&p, "ca.crt"), p["ca.crt"].mode),
        ("PEM".into(), 0o444)
    );
    assert_eq!(text(&p, "namespace"), "ns");
    assert_eq!(text(&p, "labels"), "a=\"1\"\nb=\"2\"\n");
    o.set_token(ServiceAccountToken {
        token: "second".into(),
        expiration_timestamp: String::new(),
    });
    let before = files(&plan, &v, &o, t0 + Duration::from_secs(799), &mut tokens).unwrap();
    assert_eq!(
        text(&before, "token"),
        "first",
        "kept until 80% of its lifetime"
    );
    let after = files(&plan, &v, &o, t0 + Duration::from_secs(800), &mut tokens).unwrap();
    assert_eq!(text(&after, "token"), "second");
}

#[test]
fn missing_objects_and_keys_are_kubelets_errors_unless_optional() {
    let o = StaticObjects::default();
    let mut tokens = Tokens::default();
    let now = SystemTime::now();
    let (plan, v) = pod(json!({"name": "v", "configMap": {"name": "gone"}}));
    assert_eq!(
        files(&plan, &v, &o, now, &mut tokens).unwrap_err(),
        "configmap \"gone\" not found"
    );
    let (plan, v) = pod(json!({"name": "v", "secret": {"secretName": "gone", "optional": true}}));
    assert!(files(&plan, &v, &o, now, &mut tokens).unwrap().is_empty());
    o.set_secret(
        serde_json::from_value(
            json!({"metadata": {"name": "s", "namespace": "ns"}, "data": {"a": "eA=="}}),
        )
        .unwrap(),
    );
    let (plan, v) = pod(json!({"name": "v", "secret": {"secretName": "s",
        "items": [{"key": "b", "path": "b"}]}}));
    assert_eq!(
        files(&plan, &v, &o, now, &mut tokens).unwrap_err(),
        "secret references non-existent secret key: b"
    );
    let (plan, v) = pod(json!({"name": "v", "secret": {"secretName": "s",
        "items": [{"key": "a", "path": "../escape"}]}}));
    assert!(
        files(&plan, &v, &o, now, &mut tokens)
            .unwrap_err()
            .contains("..")
    );
}
