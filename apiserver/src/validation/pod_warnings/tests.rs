#![allow(clippy::unwrap_used)]
use serde_json::{Value, json};

use super::*;

/// The warnings on creating a pod named `p` with `spec` and `annotations`.
fn pod_with(annotations: Value, spec: Value) -> Vec<String> {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "p", "annotations": annotations},
        "spec": spec
    }))
    .unwrap();
    for_pod_create(&pod)
}

fn pod(spec: Value) -> Vec<String> {
    pod_with(json!({}), spec)
}

fn template(annotations: Value, spec: Value) -> Vec<String> {
    let t: PodTemplateSpec =
        serde_json::from_value(json!({"metadata": {"annotations": annotations}, "spec": spec}))
            .unwrap();
    for_template("spec.template", &t)
}

fn container(extra: Value) -> Value {
    let mut c = json!({"name": "c", "image": "i"});
    c.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    c
}

#[test]
fn a_plain_pod_gets_no_warning() {
    assert!(pod(json!({"containers": [container(json!({}))]})).is_empty());
}

#[test]
fn a_pod_name_that_is_no_dns_label_is_warned_about() {
    let p: Pod = serde_json::from_value(json!({
        "metadata": {"name": "a.b"}, "spec": {"containers": [container(json!({}))]}
    }))
    .unwrap();
    assert_eq!(
        for_pod_create(&p),
        [format!(
            "metadata.name: this is used in the Pod's hostname, which can result in surprising behavior; a DNS label is recommended: [{DNS1123_LABEL_MSG}]"
        )]
    );
}

#[test]
fn fractional_byte_values_are_told_in_canonical_form() {
    let got = pod(json!({
        "overhead": {"memory": "0.5", "ephemeral-storage": "1Ki", "cpu": "0.5"},
        "initContainers": [container(json!({"resources": {"limits": {"ephemeral-storage": "1.5m"}}}))],
        "containers": [container(json!({"resources": {
            "limits": {"memory": "0.1Ki"},
            "requests": {"memory": "1m", "ephemeral-storage": "1e-3", "cpu": "1m"}
        }}))]
    }));
    assert_eq!(
        got,
        [
            "spec.overhead[memory]: fractional byte value \"500m\" is invalid, must be an integer",
            "spec.initContainers[0].resources.limits[ephemeral-storage]: fractional byte value \"1500u\" is invalid, must be an integer",
            "spec.containers[0].resources.limits[memory]: fractional byte value \"102400m\" is invalid, must be an integer",
            "spec.containers[0].resources.requests[memory]: fractional byte value \"1m\" is invalid, must be an integer",
            "spec.containers[0].resources.requests[ephemeral-storage]: fractional byte value \"1e-3\" is invalid, must be an integer",
        ]
    );
}

#[test]
fn fractions_follow_kubes_milli_rounding() {
    assert_eq!(fractional_bytes("1.5Gi"), None);
    assert_eq!(fractional_bytes("128Mi"), None);
    assert_eq!(fractional_bytes("2e3"), None);
    // MilliValue rounds up: 0.9999999 is 1000 milli, a whole byte to kube.
    assert_eq!(fractional_bytes("0.9999999"), None);
    assert_eq!(fractional_bytes("1n").as_deref(), Some("1n"));
    assert_eq!(fractional_bytes("0.0000000001").as_deref(), Some("1n"));
    assert_eq!(fractional_bytes("1.25").as_deref(), Some("1250m"));
    assert_eq!(fractional_bytes("1500u").as_deref(), Some("1500u"));
    assert_eq!(fractional_bytes("-1m"), None);
}

#[test]
fn deprecated_node_labels_in_the_selector_and_node_affinity() {
    let got = template(
        json!({}),
        json!({
            "nodeSelector": {"beta.kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux"},
            "affinity": {"nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                    {"matchExpressions": [
                        {"key": "k", "operator": "Exists"},
                        {"key": "failure-domain.beta.kubernetes.io/zone", "operator": "Exists"}
                    ]}
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference":
                    {"matchExpressions": [{"key": "node-role.kubernetes.io/master", "operator": "Exists"}]}}]
            }},
            "containers": [container(json!({}))]
        }),
    );
    assert_eq!(
        got,
        [
            "spec.template.spec.nodeSelector[beta.kubernetes.io/arch]: deprecated since v1.14; use \"kubernetes.io/arch\" instead",
            "spec.template.spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[0].matchExpressions[1].key: failure-domain.beta.kubernetes.io/zone is deprecated since v1.17; use \"topology.kubernetes.io/zone\" instead",
            "spec.template.spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[0].key: node-role.kubernetes.io/master is use \"node-role.kubernetes.io/control-plane\" instead",
        ]
    );
}

#[test]
fn deprecated_seccomp_apparmor_and_other_annotations() {
    let annotations = json!({
        "scheduler.alpha.kubernetes.io/critical-pod": "",
        "security.alpha.kubernetes.io/sysctls": "a=1",
        "seccomp.security.alpha.kubernetes.io/pod": "runtime/default",
        "container.seccomp.security.alpha.kubernetes.io/a": "runtime/default",
        "container.seccomp.security.alpha.kubernetes.io/b": "runtime/default",
        "container.apparmor.security.beta.kubernetes.io/a": "runtime/default"
    });
    let spec = json!({"containers": [
        {"name": "a", "image": "i"},
        {"name": "b", "image": "i", "securityContext": {"seccompProfile": {"type": "RuntimeDefault"}}}
    ]});
    let seccomp = "non-functional in v1.27+; use the \"seccompProfile\" field instead";
    let apparmor = "deprecated since v1.30; use the \"appArmorProfile\" field instead";
    assert_eq!(
        template(annotations.clone(), spec.clone()),
        [
            "spec.template.metadata.annotations[scheduler.alpha.kubernetes.io/critical-pod]: non-functional in v1.16+; use the \"priorityClassName\" field instead".to_owned(),
            "spec.template.metadata.annotations[security.alpha.kubernetes.io/sysctls]: non-functional in v1.11+; use the \"sysctls\" field instead".to_owned(),
            format!("spec.template.metadata.annotations[seccomp.security.alpha.kubernetes.io/pod]: {seccomp}"),
            format!("spec.template.metadata.annotations[container.seccomp.security.alpha.kubernetes.io/a]: {seccomp}"),
            format!("spec.template.metadata.annotations[container.apparmor.security.beta.kubernetes.io/a]: {apparmor}"),
        ]
    );
    // A pod's AppArmor warning comes first: kube gives it while preparing the create.
    assert_eq!(
        pod_with(annotations, spec)[0],
        format!(
            "metadata.annotations[container.apparmor.security.beta.kubernetes.io/a]: {apparmor}"
        )
    );
}

#[test]
fn image_pull_secrets_named_twice_or_not_at_all() {
    let got = pod(json!({
        "imagePullSecrets": [{"name": "a"}, {"name": ""}, {"name": "a"}, {"name": ""}],
        "containers": [container(json!({}))]
    }));
    assert_eq!(
        got,
        [
            "spec.imagePullSecrets[2].name: duplicate name \"a\"",
            "spec.imagePullSecrets[3].name: duplicate name \"\"",
            "spec.imagePullSecrets[1].name: invalid empty name \"\"",
            "spec.imagePullSecrets[3].name: invalid empty name \"\"",
        ]
    );
}

#[test]
fn an_env_var_that_hides_an_earlier_one_unless_it_builds_on_it() {
    let got = template(
        json!({}),
        json!({"containers": [container(json!({"env": [
            {"name": "X", "value": "a"},
            {"name": "X", "value": "$(X):b"},
            {"name": "X", "value": "$(X)"},
            {"name": "X", "value": "c"},
            {"name": "X", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
            {"name": "Y", "value": "y"}
        ]}))]}),
    );
    let hides = "hides previous definition of \"X\", which may be dropped when using apply";
    assert_eq!(
        got,
        [
            format!("spec.template.spec.containers[0].env[2]: {hides}"),
            format!("spec.template.spec.containers[0].env[3]: {hides}"),
            format!("spec.template.spec.containers[0].env[4]: {hides}"),
        ]
    );
}

#[test]
fn ports_given_twice_across_containers() {
    let got = pod(json!({"containers": [
        container(json!({"ports": [
            {"containerPort": 80, "protocol": "TCP"},
            {"name": "h", "containerPort": 81, "hostIP": "10.0.0.1", "protocol": "TCP"},
            {"containerPort": 82, "hostPort": 8082, "hostIP": "10.0.0.1", "protocol": "TCP"}
        ]})),
        {"name": "d", "image": "i", "ports": [
            {"containerPort": 80, "protocol": "TCP"},
            {"containerPort": 80, "hostPort": 8080, "protocol": "TCP"},
            {"containerPort": 82, "hostPort": 8082, "protocol": "TCP"},
            {"containerPort": 80, "protocol": "UDP"}
        ]}
    ]}));
    assert_eq!(
        got,
        [
            "spec.containers[0].ports[1]: hostIP set without hostPort: {Name:h HostPort:0 ContainerPort:81 Protocol:TCP HostIP:10.0.0.1}",
            "spec.containers[1].ports[0]: duplicate port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[1]: overlapping port definition with spec.containers[0].ports[0]",
            "spec.containers[1].ports[1]: overlapping port definition with spec.containers[1].ports[0]",
            "spec.containers[1].ports[2]: dangerously ambiguous port definition with spec.containers[0].ports[2]",
        ]
    );
}

#[test]
fn a_null_label_selector_in_a_preferred_pod_affinity_term() {
    let got = pod(json!({
        "affinity": {
            "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "k", "labelSelector": {}}},
                {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}}
            ]},
            "podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 1, "podAffinityTerm": {"topologyKey": "k"}}
            ]}
        },
        "containers": [container(json!({}))]
    }));
    assert_eq!(
        got,
        [
            "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution[1].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod",
            "spec.affinity.podAntiAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].podAffinityTerm.labelSelector: a null labelSelector results in matching no pod",
        ]
    );
}

#[test]
fn overlapping_paths_within_a_volume() {
    let got = pod(json!({
        "volumes": [
            {"name": "c", "configMap": {"name": "cm", "items": [
                {"key": "a", "path": "test"}, {"key": "b", "path": "test/app"}]}},
            {"name": "s", "secret": {"secretName": "sec", "items": [
                {"key": "a", "path": "x"}, {"key": "b", "path": "x/"}]}},
            {"name": "d", "downwardAPI": {"items": [
                {"path": "n", "fieldRef": {"fieldPath": "metadata.name"}},
                {"path": "m", "fieldRef": {"fieldPath": "metadata.name"}}]}}
        ],
        "containers": [container(json!({}))]
    }));
    assert_eq!(
        got,
        [
            "volume \"c\" (ConfigMap \"cm\"): overlapping paths: \"test/app\" with \"test\"",
            "volume \"s\" (Secret \"sec\"): overlapping paths: \"x\" with \"x\"",
        ]
    );
}

#[test]
fn overlapping_paths_across_projected_sources() {
    let got = pod(json!({
        "volumes": [{"name": "p", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token"}},
            {"configMap": {"name": "cm", "items": [{"key": "k", "path": "token"}]}},
            {}
        ]}}],
        "containers": [container(json!({}))]
    }));
    assert_eq!(
        got,
        [
            "volume \"p\" (Projected ConfigMap \"cm\"): overlapping paths: \"token\" with \"token\"",
            "volume \"p\" (Projected) has no sources provided",
        ]
    );
}

#[test]
fn the_token_volume_serviceaccount_admission_adds_is_quiet() {
    let got = pod(json!({
        "volumes": [{"name": "kube-api-access", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}]}}
        ]}}],
        "containers": [container(json!({}))]
    }));
    assert!(got.is_empty(), "{got:?}");
}
