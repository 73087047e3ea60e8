//! The roles and bindings every cluster starts with, as kube-apiserver's RBAC
//! bootstrap policy defines them (trimmed to the resources that exist in clusters,
//! without aggregation: `admin`, `edit` and `view` hold their rules directly).

use std::collections::BTreeMap;

use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, PolicyRule, RoleRef, Subject};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::kinds::GROUP;
use super::rules::{rule, url_rule};
use crate::auth::user::{AUTHENTICATED, MASTERS, SCHEDULER, UNAUTHENTICATED};

const READ: &[&str] = &["get", "list", "watch"];
const WRITE: &[&str] = &["create", "delete", "deletecollection", "patch", "update"];

fn meta(name: &str) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        labels: Some(BTreeMap::from([(
            "kubernetes.io/bootstrapping".to_owned(),
            "rbac-defaults".to_owned(),
        )])),
        annotations: Some(BTreeMap::from([(
            "rbac.authorization.kubernetes.io/autoupdate".to_owned(),
            "true".to_owned(),
        )])),
        ..ObjectMeta::default()
    }
}

fn role(name: &str, rules: Vec<PolicyRule>) -> ClusterRole {
    ClusterRole {
        metadata: meta(name),
        rules: Some(rules),
        ..ClusterRole::default()
    }
}

fn view_rules() -> Vec<PolicyRule> {
    vec![
        rule(
            &[""],
            &[
                "configmaps",
                "endpoints",
                "persistentvolumeclaims",
                "persistentvolumeclaims/status",
                "pods",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "serviceaccounts",
                "services",
                "services/status",
            ],
            READ,
        ),
        rule(
            &[""],
            &[
                "bindings",
                "events",
                "limitranges",
                "namespaces/status",
                "pods/log",
                "pods/status",
                "replicationcontrollers/status",
                "resourcequotas",
                "resourcequotas/status",
            ],
            READ,
        ),
        rule(&[""], &["namespaces"], READ),
        rule(
            &["apps"],
            &[
                "controllerrevisions",
                "daemonsets",
                "daemonsets/status",
                "deployments",
                "deployments/scale",
                "deployments/status",
                "replicasets",
                "replicasets/scale",
                "replicasets/status",
                "statefulsets",
                "statefulsets/scale",
                "statefulsets/status",
            ],
            READ,
        ),
        rule(
            &["batch"],
            &["cronjobs", "cronjobs/status", "jobs", "jobs/status"],
            READ,
        ),
        rule(&["coordination.k8s.io"], &["leases"], READ),
        rule(
            &["autoscaling"],
            &[
                "horizontalpodautoscalers",
                "horizontalpodautoscalers/status",
            ],
            READ,
        ),
        rule(
            &["policy"],
            &["poddisruptionbudgets", "poddisruptionbudgets/status"],
            READ,
        ),
        // metrics-server's `system:aggregated-metrics-reader`, aggregated to view.
        metrics_reader_rule(),
    ]
}

/// `kubectl top`'s reads, as metrics-server's `system:aggregated-metrics-reader` grants them.
fn metrics_reader_rule() -> PolicyRule {
    rule(&["metrics.k8s.io"], &["pods", "nodes"], READ)
}

fn edit_rules() -> Vec<PolicyRule> {
    let mut rules = view_rules();
    rules.extend([
        rule(
            &[""],
            &[
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "secrets",
                "services/proxy",
            ],
            READ,
        ),
        rule(&[""], &["serviceaccounts"], &["impersonate"]),
        rule(
            &[""],
            &[
                "pods",
                "pods/attach",
                "pods/exec",
                "pods/portforward",
                "pods/proxy",
                "configmaps",
                "events",
                "persistentvolumeclaims",
                "replicationcontrollers",
                "replicationcontrollers/scale",
                "secrets",
                "serviceaccounts",
                "services",
                "services/proxy",
            ],
            WRITE,
        ),
        rule(&[""], &["serviceaccounts/token"], &["create"]),
        rule(&[""], &["pods/eviction"], &["create"]),
        rule(
            &["apps"],
            &[
                "daemonsets",
                "deployments",
                "deployments/rollback",
                "deployments/scale",
                "replicasets",
                "replicasets/scale",
                "statefulsets",
                "statefulsets/scale",
            ],
            WRITE,
        ),
        rule(&["autoscaling"], &["horizontalpodautoscalers"], WRITE),
        rule(&["batch"], &["cronjobs", "jobs"], WRITE),
        rule(&["policy"], &["poddisruptionbudgets"], WRITE),
    ]);
    rules
}

fn admin_rules() -> Vec<PolicyRule> {
    let mut rules = edit_rules();
    let mut rw: Vec<&str> = READ.to_vec();
    rw.extend(WRITE);
    rules.extend([
        rule(
            &["authorization.k8s.io"],
            &["localsubjectaccessreviews"],
            &["create"],
        ),
        rule(&[GROUP], &["rolebindings", "roles"], &rw),
    ]);
    rules
}

/// What the scheduler's in-process writes need: it binds pods, writes their status,
/// removes finished ones, keeps the Nodes of agents and writes events.
fn scheduler_rules() -> Vec<PolicyRule> {
    vec![
        rule(&[""], &["pods"], &["get", "list", "watch", "delete"]),
        rule(&[""], &["bindings", "pods/binding"], &["create"]),
        rule(&[""], &["pods/status"], &["patch", "update"]),
        rule(
            &[""],
            &["nodes"],
            &[
                "get", "list", "watch", "create", "update", "patch", "delete",
            ],
        ),
        rule(
            &["", "events.k8s.io"],
            &["events"],
            &["create", "patch", "update"],
        ),
        rule(
            &["coordination.k8s.io"],
            &["leases"],
            &["create", "get", "update"],
        ),
    ]
}

/// The bootstrap ClusterRoles.
pub fn cluster_roles() -> Vec<ClusterRole> {
    vec![
        role(
            "cluster-admin",
            vec![rule(&["*"], &["*"], &["*"]), url_rule(&["*"], &["*"])],
        ),
        role("admin", admin_rules()),
        role("edit", edit_rules()),
        role("view", view_rules()),
        role(
            "system:aggregated-metrics-reader",
            vec![metrics_reader_rule()],
        ),
        role(
            "system:basic-user",
            vec![
                rule(
                    &["authorization.k8s.io"],
                    &["selfsubjectaccessreviews", "selfsubjectrulesreviews"],
                    &["create"],
                ),
                rule(
                    &["authentication.k8s.io"],
                    &["selfsubjectreviews"],
                    &["create"],
                ),
            ],
        ),
        role(
            "system:discovery",
            vec![url_rule(
                &[
                    "/api",
                    "/api/*",
                    "/apis",
                    "/apis/*",
                    "/healthz",
                    "/livez",
                    "/openapi",
                    "/openapi/*",
                    "/readyz",
                    "/version",
                    "/version/",
                ],
                &["get"],
            )],
        ),
        role(
            "system:public-info-viewer",
            vec![url_rule(
                &["/healthz", "/livez", "/readyz", "/version", "/version/"],
                &["get"],
            )],
        ),
        role(SCHEDULER, scheduler_rules()),
    ]
}

fn binding(name: &str, role: &str, kind: &str, subjects: &[&str]) -> ClusterRoleBinding {
    ClusterRoleBinding {
        metadata: meta(name),
        role_ref: RoleRef {
            api_group: GROUP.into(),
            kind: "ClusterRole".into(),
            name: role.into(),
        },
        subjects: Some(
            subjects
                .iter()
                .map(|s| Subject {
                    api_group: Some(GROUP.into()),
                    kind: kind.into(),
                    name: (*s).into(),
                    namespace: None,
                })
                .collect(),
        ),
    }
}

/// The bootstrap ClusterRoleBindings.
pub fn cluster_role_bindings() -> Vec<ClusterRoleBinding> {
    vec![
        binding("cluster-admin", "cluster-admin", "Group", &[MASTERS]),
        binding(
            "system:basic-user",
            "system:basic-user",
            "Group",
            &[AUTHENTICATED],
        ),
        binding(
            "system:discovery",
            "system:discovery",
            "Group",
            &[AUTHENTICATED],
        ),
        binding(
            "system:public-info-viewer",
            "system:public-info-viewer",
            "Group",
            &[AUTHENTICATED, UNAUTHENTICATED],
        ),
        binding(SCHEDULER, SCHEDULER, "User", &[SCHEDULER]),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::rbac::rules::allows;
    use crate::auth::request_info::Attributes;

    fn role_allows(rules: &[PolicyRule], verb: &str, resource: &str) -> bool {
        let a = Attributes::resource(verb, "apps", resource, "default", "web");
        rules.iter().any(|r| allows(r, &a))
    }

    /// kube's `view` reads the workloads' status and scale, and their revisions; its
    /// `edit` scales them (`kubectl scale`) but writes no status, which is the
    /// controllers'.
    #[test]
    fn view_reads_and_edit_scales_workloads_as_in_kubernetes() {
        let view = view_rules();
        for resource in [
            "controllerrevisions",
            "daemonsets/status",
            "deployments/scale",
            "deployments/status",
            "replicasets/scale",
            "replicasets/status",
            "statefulsets/scale",
            "statefulsets/status",
        ] {
            assert!(role_allows(&view, "get", resource), "view gets {resource}");
        }
        assert!(!role_allows(&view, "update", "deployments/scale"));
        let edit = edit_rules();
        for resource in [
            "deployments/scale",
            "replicasets/scale",
            "statefulsets/scale",
        ] {
            assert!(
                role_allows(&edit, "patch", resource),
                "edit patches {resource}"
            );
        }
        assert!(!role_allows(&edit, "update", "deployments/status"));
        assert!(!role_allows(&edit, "create", "controllerrevisions"));
    }

    /// kube's `view` reads Jobs and CronJobs and their status; `edit` writes both kinds
    /// (`kubectl create job`, `delete cronjob`) but not their status, which is the
    /// controllers'.
    #[test]
    fn view_reads_and_edit_writes_jobs_and_cronjobs_as_in_kubernetes() {
        let allows = |rules: &[PolicyRule], verb: &str, resource: &str| {
            let a = Attributes::resource(verb, "batch", resource, "default", "x");
            rules.iter().any(|r| allows(r, &a))
        };
        let (view, edit, admin) = (view_rules(), edit_rules(), admin_rules());
        for resource in ["jobs", "jobs/status", "cronjobs", "cronjobs/status"] {
            for rules in [&view, &edit, &admin] {
                assert!(allows(rules, "watch", resource), "{resource}");
            }
        }
        assert!(!allows(&view, "create", "jobs"));
        for resource in ["jobs", "cronjobs"] {
            for verb in ["create", "patch", "delete", "deletecollection"] {
                assert!(allows(&edit, verb, resource), "edit {verb} {resource}");
                assert!(allows(&admin, verb, resource), "admin {verb} {resource}");
            }
        }
        assert!(!allows(&edit, "update", "jobs/status"));
    }
}
