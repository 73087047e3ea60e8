//! Real bodies, as kubectl and client-go write them, and the JSON they read as.

use k8s_openapi::api::apps::v1::{ControllerRevision, Deployment};
use k8s_openapi::api::authentication::v1::TokenRequest;
use k8s_openapi::api::batch::v1::Job;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PersistentVolumeClaim, Pod, Secret};
use k8s_openapi::api::rbac::v1::ClusterRole;
use serde_json::{Value, json};

use super::{body, build, decode_as, envelope_with};
use crate::protobuf::{decode, decode_object};

/// The metadata Go writes for an object that sets only `name` (and `labels`): every
/// string, the generation and the zero creation time are there too.
fn go_metadata(name: &str, labels: Value) -> Value {
    json!({
        "name": name, "generateName": "", "namespace": "", "selfLink": "", "uid": "",
        "resourceVersion": "", "generation": 0, "creationTimestamp": {}, "labels": labels,
    })
}

/// `kubectl create deployment web --image=busybox:1.36 --replicas=3 --port=80 --
/// sleep 3600`, with the non-pointer fields Go writes whatever their value.
fn kubectl_deployment() -> Value {
    json!({
        "metadata": go_metadata("web", json!({"app": "web"})),
        "spec": {
            "replicas": 3,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": go_metadata("", json!({"app": "web"})),
                "spec": {
                    "containers": [{
                        "name": "busybox", "image": "busybox:1.36",
                        "command": ["sleep", "3600"], "workingDir": "",
                        "ports": [{"name": "", "hostPort": 0, "containerPort": 80, "protocol": "", "hostIP": ""}],
                        "resources": {}, "terminationMessagePath": "", "imagePullPolicy": "",
                        "stdin": false, "stdinOnce": false, "tty": false,
                        "terminationMessagePolicy": "",
                    }],
                    "restartPolicy": "", "dnsPolicy": "", "serviceAccountName": "",
                    "serviceAccount": "", "nodeName": "", "hostNetwork": false,
                    "hostPID": false, "hostIPC": false, "hostname": "", "subdomain": "",
                    "schedulerName": "",
                },
            },
            "strategy": {"type": ""},
            "minReadySeconds": 0,
            "paused": false,
        },
        "status": {
            "observedGeneration": 0, "replicas": 0, "updatedReplicas": 0,
            "readyReplicas": 0, "availableReplicas": 0, "unavailableReplicas": 0,
        },
    })
}

pub(super) fn deployment_body() -> Vec<u8> {
    let d = build("k8s.io.api.apps.v1.Deployment", &kubectl_deployment());
    body("apps/v1", "Deployment", &d)
}

#[test]
fn kubectl_create_deployment_reads_as_the_json_kubectl_would_send() {
    let v = decode_as::<Deployment>(&deployment_body());
    assert_eq!(
        v,
        json!({
            "apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": "web", "labels": {"app": "web"}, "creationTimestamp": null},
            "spec": {
                "replicas": 3,
                "selector": {"matchLabels": {"app": "web"}},
                "template": {
                    "metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
                    "spec": {
                        "containers": [{
                            "name": "busybox", "image": "busybox:1.36",
                            "command": ["sleep", "3600"],
                            "ports": [{"containerPort": 80}],
                            "resources": {},
                        }],
                    },
                },
                "strategy": {},
            },
            "status": {
                "observedGeneration": 0, "replicas": 0, "updatedReplicas": 0,
                "readyReplicas": 0, "availableReplicas": 0, "unavailableReplicas": 0,
            },
        })
    );
}

#[test]
fn namespaces_configmaps_and_secrets_read_with_their_data() {
    let ns = build(
        "k8s.io.api.core.v1.Namespace",
        &json!({"metadata": go_metadata("team-a", json!({"team": "a"})), "spec": {}, "status": {"phase": ""}}),
    );
    assert_eq!(
        decode_as::<Namespace>(&body("v1", "Namespace", &ns)),
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a", "labels": {"team": "a"}, "creationTimestamp": null}, "spec": {}, "status": {}})
    );

    let cm = build(
        "k8s.io.api.core.v1.ConfigMap",
        &json!({"metadata": {"name": "cfg"}, "data": {"a": "1", "empty": ""}, "binaryData": {"bin": "hello"}}),
    );
    assert_eq!(
        decode_as::<ConfigMap>(&body("v1", "ConfigMap", &cm)),
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg"}, "data": {"a": "1", "empty": ""}, "binaryData": {"bin": "aGVsbG8="}})
    );

    let secret = build(
        "k8s.io.api.core.v1.Secret",
        &json!({"metadata": {"name": "s"}, "data": {"password": "hunter2"}, "stringData": {"user": "admin"}, "type": "Opaque", "immutable": true}),
    );
    assert_eq!(
        decode_as::<Secret>(&body("v1", "Secret", &secret)),
        json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"password": "aHVudGVyMg=="}, "stringData": {"user": "admin"}, "type": "Opaque", "immutable": true})
    );
}

pub(super) fn cluster_role_body() -> Vec<u8> {
    let role = build(
        "k8s.io.api.rbac.v1.ClusterRole",
        &json!({"metadata": go_metadata("pod-reader", json!({})), "rules": [
            {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
            {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
        ]}),
    );
    body("rbac.authorization.k8s.io/v1", "ClusterRole", &role)
}

#[test]
fn a_cluster_role_keeps_the_core_groups_empty_name_in_its_rules() {
    assert_eq!(
        decode_as::<ClusterRole>(&cluster_role_body()),
        json!({
            "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "pod-reader", "creationTimestamp": null},
            "rules": [
                {"verbs": ["get", "list"], "apiGroups": [""], "resources": ["pods"]},
                {"verbs": ["get"], "nonResourceURLs": ["/healthz"]},
            ],
        })
    );
}

pub(super) fn pod_body() -> Vec<u8> {
    let pod = build(
        "k8s.io.api.core.v1.Pod",
        &json!({
            "metadata": {"name": "p", "namespace": "default", "creationTimestamp": {"seconds": 1_700_000_000, "nanos": 5}},
            "spec": {
                "containers": [{
                    "name": "c", "image": "nginx",
                    "resources": {
                        "limits": {"cpu": {"string": "500m"}, "memory": {"string": "128Mi"}},
                        "requests": {"cpu": {"string": "250m"}},
                    },
                    "livenessProbe": {
                        "handler": {"httpGet": {"path": "/healthz", "port": {"type": 0, "intVal": 8080}, "host": ""}},
                        "initialDelaySeconds": 3, "timeoutSeconds": 0, "periodSeconds": 0,
                        "successThreshold": 0, "failureThreshold": 0,
                    },
                    "readinessProbe": {"handler": {"tcpSocket": {"port": {"type": 1, "strVal": "http"}}}},
                    "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false},
                }],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
                "volumes": [{"name": "cfg", "volumeSource": {"configMap": {"localObjectReference": {"name": "settings"}, "defaultMode": 420}}}],
                "terminationGracePeriodSeconds": 0,
                "hostNetwork": true, "hostPID": false,
            },
            "status": {"phase": "", "qosClass": ""},
        }),
    );
    body("v1", "Pod", &pod)
}

#[test]
fn a_pod_reads_with_quantities_int_or_strings_times_and_inlined_structs() {
    assert_eq!(
        decode_as::<Pod>(&pod_body()),
        json!({
            "apiVersion": "v1", "kind": "Pod",
            // Go's Time.Unmarshal keeps whole seconds.
            "metadata": {"name": "p", "namespace": "default", "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {
                "containers": [{
                    "name": "c", "image": "nginx",
                    "resources": {"limits": {"cpu": "500m", "memory": "128Mi"}, "requests": {"cpu": "250m"}},
                    // A probe's plain zeros are unset, so its periods get their defaults.
                    "livenessProbe": {"httpGet": {"path": "/healthz", "port": 8080}, "initialDelaySeconds": 3},
                    "readinessProbe": {"tcpSocket": {"port": "http"}},
                    // Zero and false chosen through pointers are kept.
                    "securityContext": {"runAsUser": 0, "allowPrivilegeEscalation": false},
                }],
                "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
                "volumes": [{"name": "cfg", "configMap": {"name": "settings", "defaultMode": 420}}],
                "terminationGracePeriodSeconds": 0,
                "hostNetwork": true,
            },
            "status": {},
        })
    );
}

#[test]
fn a_job_reads_with_its_pointer_zeros_and_start_time() {
    let job = build(
        "k8s.io.api.batch.v1.Job",
        &json!({
            "metadata": {"name": "pi"},
            "spec": {
                "parallelism": 0, "completions": 1, "backoffLimit": 4, "ttlSecondsAfterFinished": 0,
                "template": {
                    "metadata": {"creationTimestamp": {}},
                    "spec": {"containers": [{"name": "pi", "image": "perl", "command": ["perl", "-e", "print 1"]}], "restartPolicy": "Never"},
                },
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42, 43]}}]},
            },
            "status": {"startTime": {"seconds": 1_700_000_000}, "active": 0, "succeeded": 0, "failed": 0},
        }),
    );
    assert_eq!(
        decode_as::<Job>(&body("batch/v1", "Job", &job)),
        json!({
            "apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "pi"},
            "spec": {
                "parallelism": 0, "completions": 1, "backoffLimit": 4, "ttlSecondsAfterFinished": 0,
                "template": {
                    "metadata": {"creationTimestamp": null},
                    "spec": {"containers": [{"name": "pi", "image": "perl", "command": ["perl", "-e", "print 1"]}], "restartPolicy": "Never"},
                },
                "podFailurePolicy": {"rules": [{"action": "FailJob", "onExitCodes": {"operator": "In", "values": [42, 43]}}]},
            },
            "status": {"startTime": "2023-11-14T22:13:20Z", "active": 0, "succeeded": 0, "failed": 0},
        })
    );
}

#[test]
fn a_lease_reads_its_micro_times_to_the_microsecond() {
    let lease = build(
        "k8s.io.api.coordination.v1.Lease",
        &json!({"metadata": {"name": "l"}, "spec": {
            "holderIdentity": "node-1", "leaseDurationSeconds": 40,
            "renewTime": {"seconds": 1_700_000_000, "nanos": 123_456_789}, "acquireTime": {},
        }}),
    );
    let v = decode_as::<Lease>(&body("coordination.k8s.io/v1", "Lease", &lease));
    assert_eq!(
        v["spec"],
        json!({"holderIdentity": "node-1", "leaseDurationSeconds": 40, "renewTime": "2023-11-14T22:13:20.123456Z", "acquireTime": null})
    );
}

#[test]
fn embedded_json_reads_as_the_json_it_holds() {
    let rev = build(
        "k8s.io.api.apps.v1.ControllerRevision",
        &json!({
            "metadata": {"name": "r", "managedFields": [{
                "manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1",
                "fieldsV1": {"raw": "{\"f:data\":{}}"}, "time": {"seconds": 0},
            }]},
            "data": {"raw": "{\"spec\":{\"replicas\":1}}"},
            "revision": 2,
        }),
    );
    let v = decode_as::<ControllerRevision>(&body("apps/v1", "ControllerRevision", &rev));
    assert_eq!(v["data"], json!({"spec": {"replicas": 1}}));
    assert_eq!(
        v["metadata"]["managedFields"],
        json!([{"manager": "kubectl", "operation": "Update", "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {}}, "time": "1970-01-01T00:00:00Z"}])
    );
    assert_eq!(v["revision"], 2);
}

#[test]
fn reviews_and_token_requests_read_with_their_string_list_maps() {
    let tr = build(
        "k8s.io.api.authentication.v1.TokenRequest",
        &json!({"metadata": {"name": "default"}, "spec": {"audiences": ["api"], "expirationSeconds": 3600, "boundObjectRef": {"kind": "Pod", "name": "p", "apiVersion": "v1"}}}),
    );
    let v = decode_as::<TokenRequest>(&body("authentication.k8s.io/v1", "TokenRequest", &tr));
    assert_eq!(
        v["spec"],
        json!({"audiences": ["api"], "expirationSeconds": 3600, "boundObjectRef": {"kind": "Pod", "name": "p", "apiVersion": "v1"}})
    );
    let review = build(
        "k8s.io.api.authentication.v1.SelfSubjectReview",
        &json!({"status": {"userInfo": {"username": "alice", "extra": {"scopes": {"items": ["a", "b"]}}}}}),
    );
    let v = decode_object(
        &body("authentication.k8s.io/v1", "SelfSubjectReview", &review),
        "authentication.k8s.io/v1",
        "SelfSubjectReview",
    )
    .unwrap();
    assert_eq!(
        v["status"],
        json!({"userInfo": {"username": "alice", "extra": {"scopes": ["a", "b"]}}})
    );
}

#[test]
fn an_empty_storage_class_is_kept_as_the_choice_of_none() {
    let pvc = build(
        "k8s.io.api.core.v1.PersistentVolumeClaim",
        &json!({"metadata": {"name": "data"}, "spec": {"storageClassName": "", "volumeName": ""}}),
    );
    let v = decode_as::<PersistentVolumeClaim>(&body("v1", "PersistentVolumeClaim", &pvc));
    assert_eq!(v["spec"], json!({"storageClassName": ""}));
}

#[test]
fn an_envelope_without_kind_holds_the_endpoints_and_unknown_fields_are_skipped() {
    let d = build("k8s.io.api.apps.v1.Deployment", &kubectl_deployment());
    let mut raw = prost::Message::encode_to_vec(&d);
    // Field 999 (varint 1): what a newer client might add.
    raw.extend_from_slice(&[0xb8, 0x3e, 0x01]);
    let v = decode_as::<Deployment>(&envelope_with("", "", &raw));
    assert_eq!(v["kind"], "Deployment");
    assert_eq!(v["spec"]["replicas"], 3);
    // The generic entry point (DeleteOptions, Scale, ...) needs the kind named.
    let opts = build(
        "k8s.io.apimachinery.pkg.apis.meta.v1.DeleteOptions",
        &json!({"gracePeriodSeconds": 0, "propagationPolicy": "Foreground", "dryRun": ["All"]}),
    );
    assert_eq!(
        decode(&body("v1", "DeleteOptions", &opts)).unwrap(),
        json!({"apiVersion": "v1", "kind": "DeleteOptions", "gracePeriodSeconds": 0, "propagationPolicy": "Foreground", "dryRun": ["All"]})
    );
}
