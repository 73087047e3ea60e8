//! Every check with Kubernetes' messages (the expectations are pod-security-admission's
//! own, from its `check_*_test.go` and what kube-apiserver answers).
#![allow(clippy::unwrap_used)]

use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};

use super::{CHECKS, Violations, evaluate};
use crate::pod_security::level::{Level, LevelVersion, Version};

fn pod(v: Value) -> Pod {
    serde_json::from_value(v).unwrap()
}

/// A pod with one container `c` carrying `sc` as its securityContext, and `spec`
/// merged into its spec.
fn pod_with(spec: Value, sc: Value) -> Pod {
    let mut p = json!({
        "metadata": {"name": "x"},
        "spec": {"containers": [{"name": "c", "image": "busybox", "securityContext": sc}]},
    });
    if let (Some(s), Value::Object(extra)) = (p["spec"].as_object_mut(), spec) {
        s.extend(extra);
    }
    pod(p)
}

const BASELINE: LevelVersion = LevelVersion {
    level: Level::Baseline,
    version: Version::Latest,
};
const RESTRICTED: LevelVersion = LevelVersion {
    level: Level::Restricted,
    version: Version::Latest,
};

fn check(lv: LevelVersion, p: &Pod) -> Violations {
    evaluate(lv, &p.metadata, p.spec.as_ref().unwrap())
}

fn baseline(p: &Pod) -> String {
    check(BASELINE, p).details()
}

/// The security context that meets `restricted`.
fn hardened() -> Value {
    json!({
        "allowPrivilegeEscalation": false,
        "capabilities": {"drop": ["ALL"]},
        "runAsNonRoot": true,
        "seccompProfile": {"type": "RuntimeDefault"},
    })
}

#[test]
fn checks_are_listed_baseline_ids_sorted_then_restricted_ids_sorted() {
    let ids = |level| -> Vec<&str> {
        CHECKS
            .iter()
            .filter(|c| c.level == level)
            .map(|c| c.id)
            .collect()
    };
    for level in [Level::Baseline, Level::Restricted] {
        let mut sorted = ids(level);
        sorted.sort_unstable();
        assert_eq!(ids(level), sorted);
    }
    let first_restricted = CHECKS
        .iter()
        .position(|c| c.level == Level::Restricted)
        .unwrap();
    assert!(
        CHECKS[first_restricted..]
            .iter()
            .all(|c| c.level == Level::Restricted)
    );
    let newest = CHECKS
        .iter()
        .flat_map(|c| c.revisions.iter().map(|r| r.since))
        .max();
    assert_eq!(newest, Some(super::NEWEST_MINOR));
}

#[test]
fn privileged_allows_everything() {
    let p = pod_with(json!({"hostNetwork": true}), json!({"privileged": true}));
    assert!(check(LevelVersion::PRIVILEGED, &p).allowed());
}

#[test]
fn a_plain_pod_meets_baseline() {
    assert!(check(BASELINE, &pod_with(json!({}), json!({}))).allowed());
}

#[test]
fn host_namespaces() {
    let p = pod_with(
        json!({"hostNetwork": true, "hostPID": true, "hostIPC": true}),
        json!({}),
    );
    assert_eq!(
        baseline(&p),
        "host namespaces (hostNetwork=true, hostPID=true, hostIPC=true)"
    );
    assert_eq!(check(BASELINE, &p).reasons(), "host namespaces");
}

#[test]
fn privileged_containers() {
    let p = pod(json!({"metadata": {"name": "x"}, "spec": {
        "initContainers": [{"name": "i", "image": "b", "securityContext": {"privileged": true}}],
        "containers": [
            {"name": "a", "image": "b", "securityContext": {"privileged": true}},
            {"name": "b", "image": "b", "securityContext": {"privileged": false}},
        ],
    }}));
    assert_eq!(
        baseline(&p),
        "privileged (containers \"i\", \"a\" must not set securityContext.privileged=true)"
    );
}

#[test]
fn added_capabilities_beyond_the_default_set() {
    let p = pod_with(
        json!({}),
        json!({"capabilities": {"add": ["SYS_ADMIN", "CHOWN", "NET_RAW"]}}),
    );
    assert_eq!(
        baseline(&p),
        "non-default capabilities (container \"c\" must not include \"NET_RAW\", \"SYS_ADMIN\" in securityContext.capabilities.add)"
    );
    let ok = pod_with(json!({}), json!({"capabilities": {"add": ["CHOWN"]}}));
    assert!(check(BASELINE, &ok).allowed());
}

#[test]
fn host_path_volumes() {
    let p = pod_with(
        json!({"volumes": [
            {"name": "a", "hostPath": {"path": "/etc"}},
            {"name": "b", "emptyDir": {}},
            {"name": "c", "hostPath": {"path": "/var"}},
        ]}),
        json!({}),
    );
    assert_eq!(baseline(&p), "hostPath volumes (volumes \"a\", \"c\")");
}

#[test]
fn host_ports_sorted_as_text() {
    let p = pod_with(
        json!({"containers": [
            {"name": "a", "image": "b", "ports": [{"containerPort": 80, "hostPort": 8080}, {"containerPort": 81}]},
            {"name": "b", "image": "b", "ports": [{"containerPort": 443, "hostPort": 443}]},
        ]}),
        json!({}),
    );
    assert_eq!(
        baseline(&p),
        "hostPort (containers \"a\", \"b\" use hostPorts 443, 8080)"
    );
    let one = pod_with(
        json!({"containers": [{"name": "a", "image": "b", "ports": [{"containerPort": 80, "hostPort": 80}]}]}),
        json!({}),
    );
    assert_eq!(
        baseline(&one),
        "hostPort (container \"a\" uses hostPort 80)"
    );
}

#[test]
fn app_armor_profiles_and_annotations() {
    let p = pod(json!({
        "metadata": {"name": "x", "annotations": {
            "container.apparmor.security.beta.kubernetes.io/c": "unconfined",
            "container.apparmor.security.beta.kubernetes.io/d": "localhost/mine",
        }},
        "spec": {
            "securityContext": {"appArmorProfile": {"type": "Unconfined"}},
            "containers": [{"name": "c", "image": "b", "securityContext": {"appArmorProfile": {"type": "Unconfined"}}}],
        },
    }));
    assert_eq!(
        baseline(&p),
        "forbidden AppArmor profiles (pod and container \"c\" and annotation must not set AppArmor profile type to \"Unconfined\", \"container.apparmor.security.beta.kubernetes.io/c=\"unconfined\"\")"
    );
}

#[test]
fn proc_mount_other_than_default() {
    let p = pod_with(json!({}), json!({"procMount": "Unmasked"}));
    assert_eq!(
        baseline(&p),
        "procMount (container \"c\" must not set securityContext.procMount to \"Unmasked\")"
    );
}

#[test]
fn se_linux_options() {
    let p = pod_with(
        json!({"securityContext": {"seLinuxOptions": {"type": "spc_t"}}}),
        json!({"seLinuxOptions": {"user": "me", "role": "r"}}),
    );
    assert_eq!(
        baseline(&p),
        "seLinuxOptions (pod and container \"c\" set forbidden securityContext.seLinuxOptions: type \"spc_t\"; user may not be set; role may not be set)"
    );
    // container_engine_t is allowed from 1.31 on.
    let engine = pod_with(
        json!({}),
        json!({"seLinuxOptions": {"type": "container_engine_t"}}),
    );
    assert!(check(BASELINE, &engine).allowed());
    let v130 = LevelVersion {
        level: Level::Baseline,
        version: Version::Minor(30),
    };
    assert_eq!(
        check(v130, &engine).details(),
        "seLinuxOptions (container \"c\" set forbidden securityContext.seLinuxOptions: type \"container_engine_t\")"
    );
}

#[test]
fn seccomp_unconfined_and_the_old_annotations() {
    let p = pod_with(
        json!({"securityContext": {"seccompProfile": {"type": "Unconfined"}}}),
        json!({}),
    );
    assert_eq!(
        baseline(&p),
        "seccompProfile (pod must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
    let annotated = pod(json!({
        "metadata": {"name": "x", "annotations": {"seccomp.security.alpha.kubernetes.io/pod": "unconfined"}},
        "spec": {"containers": [{"name": "c", "image": "b"}]},
    }));
    // Before 1.19 the annotations were the setting; from then on they are not read.
    assert!(check(BASELINE, &annotated).allowed());
    let v118 = LevelVersion {
        level: Level::Baseline,
        version: Version::Minor(18),
    };
    assert_eq!(
        check(v118, &annotated).details(),
        "seccompProfile (forbidden annotation seccomp.security.alpha.kubernetes.io/pod=\"unconfined\")"
    );
}

#[test]
fn sysctls_outside_the_safe_set_by_version() {
    let p = pod_with(
        json!({"securityContext": {"sysctls": [
            {"name": "net.ipv4.tcp_rmem", "value": "1"},
            {"name": "kernel.msgmax", "value": "1"},
            {"name": "kernel.shm_rmid_forced", "value": "1"},
        ]}}),
        json!({}),
    );
    assert_eq!(baseline(&p), "forbidden sysctls (kernel.msgmax)");
    let v131 = LevelVersion {
        level: Level::Baseline,
        version: Version::Minor(31),
    };
    assert_eq!(
        check(v131, &p).details(),
        "forbidden sysctls (net.ipv4.tcp_rmem, kernel.msgmax)"
    );
}

#[test]
fn windows_host_process() {
    let p = pod_with(
        json!({"securityContext": {"windowsOptions": {"hostProcess": true}}}),
        json!({"windowsOptions": {"hostProcess": true}}),
    );
    assert_eq!(
        baseline(&p),
        "hostProcess (pod and container \"c\" must not set securityContext.windowsOptions.hostProcess=true)"
    );
}

#[test]
fn several_baseline_violations_in_kubernetes_order() {
    let p = pod_with(
        json!({"hostNetwork": true}),
        json!({"privileged": true, "capabilities": {"add": ["SYS_ADMIN"]}}),
    );
    assert_eq!(
        baseline(&p),
        "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add), host namespaces (hostNetwork=true), privileged (container \"c\" must not set securityContext.privileged=true)"
    );
}

#[test]
fn a_plain_pod_violates_restricted_in_every_restricted_check() {
    let p = pod_with(json!({}), json!({}));
    assert_eq!(
        check(RESTRICTED, &p).details(),
        "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false), unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]), runAsNonRoot != true (pod or container \"c\" must set securityContext.runAsNonRoot=true), seccompProfile (pod or container \"c\" must set securityContext.seccompProfile.type to \"RuntimeDefault\" or \"Localhost\")"
    );
}

#[test]
fn a_hardened_pod_meets_restricted() {
    let p = pod_with(json!({}), hardened());
    assert!(
        check(RESTRICTED, &p).allowed(),
        "{:?}",
        check(RESTRICTED, &p)
    );
    let pod_level = pod_with(
        json!({"securityContext": {"runAsNonRoot": true, "seccompProfile": {"type": "Localhost", "localhostProfile": "p.json"}}}),
        json!({"allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}),
    );
    assert!(check(RESTRICTED, &pod_level).allowed());
}

#[test]
fn restricted_capabilities_replace_the_baseline_check() {
    let mut sc = hardened();
    sc["capabilities"] = json!({"drop": ["NET_RAW"], "add": ["SYS_ADMIN"]});
    let p = pod_with(json!({}), sc);
    assert_eq!(
        check(RESTRICTED, &p).details(),
        "unrestricted capabilities (container \"c\" must set securityContext.capabilities.drop=[\"ALL\"]; container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add)"
    );
    // Before 1.22 restricted had no capabilities check of its own: baseline's applies.
    let v121 = LevelVersion {
        level: Level::Restricted,
        version: Version::Minor(21),
    };
    assert_eq!(
        check(v121, &p).details(),
        "non-default capabilities (container \"c\" must not include \"SYS_ADMIN\" in securityContext.capabilities.add)"
    );
}

#[test]
fn restricted_volume_types_replace_the_host_path_check() {
    let p = pod_with(
        json!({"volumes": [
            {"name": "h", "hostPath": {"path": "/"}},
            {"name": "n", "nfs": {"server": "s", "path": "/"}},
            {"name": "ok", "configMap": {"name": "c"}},
            {"name": "pv", "persistentVolumeClaim": {"claimName": "c"}},
        ]}),
        hardened(),
    );
    assert_eq!(
        check(RESTRICTED, &p).details(),
        "restricted volume types (volumes \"h\", \"n\" use restricted volume types \"hostPath\", \"nfs\")"
    );
}

#[test]
fn run_as_non_root_explicitly_false() {
    let mut sc = hardened();
    sc["runAsNonRoot"] = json!(false);
    let p = pod_with(json!({"securityContext": {"runAsNonRoot": false}}), sc);
    assert_eq!(
        check(RESTRICTED, &p).details(),
        "runAsNonRoot != true (pod and container \"c\" must not set securityContext.runAsNonRoot=false)"
    );
}

#[test]
fn run_as_user_zero_from_1_23() {
    let mut sc = hardened();
    sc["runAsUser"] = json!(0);
    let p = pod_with(json!({"securityContext": {"runAsUser": 0}}), sc);
    assert_eq!(
        check(RESTRICTED, &p).details(),
        "runAsUser=0 (pod and container \"c\" must not set runAsUser=0)"
    );
    let v122 = LevelVersion {
        level: Level::Restricted,
        version: Version::Minor(22),
    };
    assert!(check(v122, &p).allowed());
}

#[test]
fn allow_privilege_escalation_true() {
    let mut sc = hardened();
    sc["allowPrivilegeEscalation"] = json!(true);
    assert_eq!(
        check(RESTRICTED, &pod_with(json!({}), sc)).details(),
        "allowPrivilegeEscalation != false (container \"c\" must set securityContext.allowPrivilegeEscalation=false)"
    );
}

#[test]
fn seccomp_restricted_explicitly_unconfined() {
    let mut sc = hardened();
    sc["seccompProfile"] = json!({"type": "Unconfined"});
    assert_eq!(
        check(RESTRICTED, &pod_with(json!({}), sc)).details(),
        "seccompProfile (container \"c\" must not set securityContext.seccompProfile.type to \"Unconfined\")"
    );
}

#[test]
fn windows_pods_skip_the_linux_only_restricted_checks() {
    let p = pod_with(
        json!({"os": {"name": "windows"}, "securityContext": {"runAsNonRoot": true}}),
        json!({}),
    );
    assert!(
        check(RESTRICTED, &p).allowed(),
        "{:?}",
        check(RESTRICTED, &p)
    );
}

#[test]
fn go_quoting_escapes_as_go_does() {
    assert_eq!(super::go_quote("a\"b\\c\n\u{1}"), "\"a\\\"b\\\\c\\n\\x01\"");
}
