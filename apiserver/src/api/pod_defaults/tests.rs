//! A golden test: the expectations are kube-apiserver's, read from its defaulting
//! code (`pkg/apis/core/v1/defaults.go`, 1.33), function by function, not from
//! mesopod's output.
#![allow(clippy::unwrap_used)]

use k8s_openapi::api::core::v1::PodSpec;
use serde_json::{Value, json};

use super::*;

fn spec_in() -> Value {
    json!({
        "containers": [{
            "name": "c",
            "image": "busybox",
            "resources": {"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"cpu": "500m"}},
            "ports": [{"containerPort": 80}],
            "livenessProbe": {"httpGet": {"port": 80}},
            "readinessProbe": {"tcpSocket": {"port": 80}, "periodSeconds": 5},
            "startupProbe": {"exec": {"command": ["true"]}, "failureThreshold": 30},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit"}}},
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
        }],
        "initContainers": [{"name": "i", "image": "registry.local:5000/busybox:1.36"}],
        "volumes": [
            {"name": "e"},
            {"name": "s", "secret": {"secretName": "x"}},
            {"name": "cm", "configMap": {"name": "x", "defaultMode": 256}},
            {"name": "d", "downwardAPI": {"items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name"}}]}},
            {"name": "h", "hostPath": {"path": "/tmp"}},
            {"name": "pr", "projected": {"sources": [
                {"serviceAccountToken": {"path": "token"}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
            ]}}
        ]
    })
}

/// What kube-apiserver's `SetDefaults_PodSpec` makes of [`spec_in`] (a pod gets
/// `SetDefaults_Pod` besides).
fn kube_spec_out() -> Value {
    json!({
        // SetDefaults_PodSpec.
        "restartPolicy": "Always",
        "dnsPolicy": "ClusterFirst",
        "schedulerName": "default-scheduler",
        "terminationGracePeriodSeconds": 30,
        "securityContext": {},
        "enableServiceLinks": true,
        "containers": [{
            "name": "c",
            "image": "busybox",
            // SetDefaults_Container: no tag is :latest, pulled Always.
            "imagePullPolicy": "Always",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            "resources": {"limits": {"cpu": "1", "memory": "64Mi"}, "requests": {"cpu": "500m"}},
            // SetDefaults_ContainerPort.
            "ports": [{"containerPort": 80, "protocol": "TCP"}],
            // SetDefaults_Probe and SetDefaults_HTTPGetAction.
            "livenessProbe": {"httpGet": {"port": 80, "path": "/", "scheme": "HTTP"},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 3},
            "readinessProbe": {"tcpSocket": {"port": 80},
                "timeoutSeconds": 1, "periodSeconds": 5, "successThreshold": 1, "failureThreshold": 3},
            "startupProbe": {"exec": {"command": ["true"]},
                "timeoutSeconds": 1, "periodSeconds": 10, "successThreshold": 1, "failureThreshold": 30},
            "lifecycle": {"preStop": {"httpGet": {"port": 80, "path": "/quit", "scheme": "HTTP"}}},
            // SetDefaults_ObjectFieldSelector.
            "env": [{"name": "N", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}}]
        }],
        "initContainers": [{
            "name": "i",
            "image": "registry.local:5000/busybox:1.36",
            // A tag other than latest (the registry's port is no tag).
            "imagePullPolicy": "IfNotPresent",
            "terminationMessagePath": "/dev/termination-log",
            "terminationMessagePolicy": "File",
            // ResourceRequirements is a struct in Go: always written.
            "resources": {}
        }],
        "volumes": [
            // SetDefaults_Volume: no source is an emptyDir.
            {"name": "e", "emptyDir": {}},
            // SetDefaults_SecretVolumeSource, _ConfigMapVolumeSource: 0644 unless given.
            {"name": "s", "secret": {"secretName": "x", "defaultMode": 420}},
            {"name": "cm", "configMap": {"name": "x", "defaultMode": 256}},
            {"name": "d", "downwardAPI": {"defaultMode": 420,
                "items": [{"path": "n", "fieldRef": {"fieldPath": "metadata.name", "apiVersion": "v1"}}]}},
            // SetDefaults_HostPathVolumeSource: HostPathUnset.
            {"name": "h", "hostPath": {"path": "/tmp", "type": ""}},
            // SetDefaults_ProjectedVolumeSource, _ServiceAccountTokenProjection.
            {"name": "pr", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}},
                {"downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace", "apiVersion": "v1"}}]}}
            ]}}
        ]
    })
}

fn defaulted(spec: Value, pod: bool) -> Value {
    let mut spec: PodSpec = serde_json::from_value(spec).unwrap();
    if pod {
        default_pod_spec(&mut spec);
        default_pod_requests(&mut spec);
    } else {
        default_template_spec(&mut spec);
    }
    serde_json::to_value(spec).unwrap()
}

#[test]
fn a_pods_spec_is_defaulted_as_kube_apiserver_defaults_it() {
    let mut want = kube_spec_out();
    // SetDefaults_Pod: memory had a limit and no request.
    want["containers"][0]["resources"]["requests"] = json!({"cpu": "500m", "memory": "64Mi"});
    assert_eq!(defaulted(spec_in(), true), want);
}

#[test]
fn a_template_gets_the_defaults_mesopod_always_gave_and_they_are_kubes() {
    let got = defaulted(spec_in(), false);
    let kube = kube_spec_out();
    for field in [
        "restartPolicy",
        "dnsPolicy",
        "schedulerName",
        "terminationGracePeriodSeconds",
    ] {
        assert_eq!(got[field], kube[field], "{field}");
    }
    for (i, list) in [(0, "containers"), (0, "initContainers")] {
        for field in [
            "imagePullPolicy",
            "terminationMessagePath",
            "terminationMessagePolicy",
        ] {
            assert_eq!(got[list][i][field], kube[list][i][field], "{list}.{field}");
        }
    }
    assert_eq!(
        got["containers"][0]["ports"],
        kube["containers"][0]["ports"]
    );
    // And no more: what kube adds beyond them stays out of a stored template.
    assert!(got["securityContext"].is_null(), "{got}");
    assert!(got["enableServiceLinks"].is_null());
    assert_eq!(got["volumes"], spec_in()["volumes"]);
    assert_eq!(
        got["containers"][0]["livenessProbe"],
        spec_in()["containers"][0]["livenessProbe"]
    );
}

#[test]
fn defaulting_twice_changes_nothing() {
    let once = defaulted(spec_in(), true);
    assert_eq!(defaulted(once.clone(), true), once);
}

#[test]
fn what_the_client_set_is_kept() {
    let spec = json!({
        "restartPolicy": "Never",
        "dnsPolicy": "Default",
        "enableServiceLinks": false,
        "securityContext": {"runAsUser": 1000},
        "terminationGracePeriodSeconds": 0,
        "containers": [{"name": "c", "image": "busybox:latest@sha256:0000000000000000000000000000000000000000000000000000000000000000",
            "imagePullPolicy": "Never",
            "livenessProbe": {"httpGet": {"port": 80, "scheme": "HTTPS", "path": "/h"}}}]
    });
    let out = defaulted(spec, true);
    assert_eq!(out["restartPolicy"], "Never");
    assert_eq!(out["dnsPolicy"], "Default");
    assert_eq!(out["enableServiceLinks"], false);
    assert_eq!(out["securityContext"], json!({"runAsUser": 1000}));
    assert_eq!(out["terminationGracePeriodSeconds"], 0);
    let c = &out["containers"][0];
    assert_eq!(c["imagePullPolicy"], "Never");
    assert_eq!(
        c["livenessProbe"]["httpGet"],
        json!({"port": 80, "scheme": "HTTPS", "path": "/h"})
    );
}

#[test]
fn a_digest_is_pulled_if_not_present_whatever_its_tag() {
    for (image, want) in [
        ("busybox", "Always"),
        ("busybox:latest", "Always"),
        ("localhost:5000/busybox", "Always"),
        ("busybox:1.36", "IfNotPresent"),
        ("busybox@sha256:abc", "IfNotPresent"),
    ] {
        assert_eq!(pull_policy(image), want, "{image}");
    }
}
