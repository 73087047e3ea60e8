//! The resources the shim serves and what differs between them: names, keys, scope and
//! the fields a field selector may name.

/// A served resource of the core `v1` group, or of a named group's `v1` (Lease, the
/// RBAC kinds, the workloads of `apps` and `batch`), or `autoscaling/v2`'s
/// HorizontalPodAutoscaler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Resource {
    /// `pods`, namespaced.
    Pods,
    /// `nodes`, cluster-scoped; written only through [`crate::Api`].
    Nodes,
    /// `events`, namespaced.
    Events,
    /// `namespaces`, cluster-scoped.
    Namespaces,
    /// `configmaps`, namespaced.
    ConfigMaps,
    /// `secrets`, namespaced.
    Secrets,
    /// `serviceaccounts`, namespaced.
    ServiceAccounts,
    /// `leases` of `coordination.k8s.io/v1`, namespaced.
    Leases,
    /// `roles` of `rbac.authorization.k8s.io/v1`, namespaced.
    Roles,
    /// `clusterroles` of `rbac.authorization.k8s.io/v1`, cluster-scoped.
    ClusterRoles,
    /// `rolebindings` of `rbac.authorization.k8s.io/v1`, namespaced.
    RoleBindings,
    /// `clusterrolebindings` of `rbac.authorization.k8s.io/v1`, cluster-scoped.
    ClusterRoleBindings,
    /// `replicasets` of `apps/v1`, namespaced, with `status` and `scale`.
    ReplicaSets,
    /// `deployments` of `apps/v1`, namespaced, with `status` and `scale`.
    Deployments,
    /// `replicationcontrollers` of core `v1`, namespaced, with `status` and `scale`.
    ReplicationControllers,
    /// `daemonsets` of `apps/v1`, namespaced, with `status`.
    DaemonSets,
    /// `statefulsets` of `apps/v1`, namespaced, with `status` and `scale`.
    StatefulSets,
    /// `controllerrevisions` of `apps/v1`, namespaced.
    ControllerRevisions,
    /// `jobs` of `batch/v1`, namespaced, with `status`.
    Jobs,
    /// `cronjobs` of `batch/v1`, namespaced, with `status`.
    CronJobs,
    /// `priorityclasses` of `scheduling.k8s.io/v1`, cluster-scoped.
    PriorityClasses,
    /// `poddisruptionbudgets` of `policy/v1`, namespaced, with `status`.
    PodDisruptionBudgets,
    /// `limitranges`, namespaced.
    LimitRanges,
    /// `resourcequotas`, namespaced, with `status`.
    ResourceQuotas,
    /// `horizontalpodautoscalers` of `autoscaling/v2` (the one kind stored in a `v2`;
    /// also served as `autoscaling/v1`, converted at the edge), namespaced, with
    /// `status`.
    HorizontalPodAutoscalers,
}

impl Resource {
    /// The namespaced resources whose objects a namespace's deletion removes, besides pods
    /// (which are deleted with their grace periods first).
    pub const NAMESPACE_CONTENTS: [Resource; 19] = [
        Self::Events,
        Self::ConfigMaps,
        Self::Secrets,
        Self::ServiceAccounts,
        Self::Leases,
        Self::Roles,
        Self::RoleBindings,
        Self::Deployments,
        Self::ReplicaSets,
        Self::ReplicationControllers,
        Self::DaemonSets,
        Self::StatefulSets,
        Self::ControllerRevisions,
        Self::Jobs,
        Self::CronJobs,
        Self::PodDisruptionBudgets,
        Self::LimitRanges,
        Self::ResourceQuotas,
        Self::HorizontalPodAutoscalers,
    ];

    /// The kinds the garbage collector follows: every served kind whose objects may own
    /// others or be owned (kube-controller-manager's collector follows every deletable
    /// resource but events; nodes and namespaces have deletions of their own). A kind
    /// the shim starts serving is one more entry here.
    pub const COLLECTED: [Resource; 22] = [
        Self::Pods,
        Self::ConfigMaps,
        Self::Secrets,
        Self::ServiceAccounts,
        Self::Leases,
        Self::Roles,
        Self::ClusterRoles,
        Self::RoleBindings,
        Self::ClusterRoleBindings,
        Self::ReplicaSets,
        Self::Deployments,
        Self::ReplicationControllers,
        Self::DaemonSets,
        Self::StatefulSets,
        Self::ControllerRevisions,
        Self::Jobs,
        Self::CronJobs,
        Self::PriorityClasses,
        Self::PodDisruptionBudgets,
        Self::LimitRanges,
        Self::ResourceQuotas,
        Self::HorizontalPodAutoscalers,
    ];

    /// The collected resource ([`Resource::COLLECTED`]) of objects of `kind` in
    /// `api_version`, as an owner reference names them.
    pub fn of_kind(api_version: &str, kind: &str) -> Option<Resource> {
        Self::COLLECTED
            .into_iter()
            .find(|r| r.kind() == kind && r.api_version() == api_version)
    }

    /// The collected resource ([`Resource::COLLECTED`]) named `plural`.
    pub fn of_plural(plural: &str) -> Option<Resource> {
        Self::COLLECTED.into_iter().find(|r| r.plural() == plural)
    }

    /// The plural name used in URLs and `Status.details.kind`.
    pub fn plural(self) -> &'static str {
        match self {
            Self::Pods => "pods",
            Self::Nodes => "nodes",
            Self::Events => "events",
            Self::Namespaces => "namespaces",
            Self::ConfigMaps => "configmaps",
            Self::Secrets => "secrets",
            Self::ServiceAccounts => "serviceaccounts",
            Self::Leases => "leases",
            Self::Roles => "roles",
            Self::ClusterRoles => "clusterroles",
            Self::RoleBindings => "rolebindings",
            Self::ClusterRoleBindings => "clusterrolebindings",
            Self::ReplicaSets => "replicasets",
            Self::Deployments => "deployments",
            Self::ReplicationControllers => "replicationcontrollers",
            Self::DaemonSets => "daemonsets",
            Self::StatefulSets => "statefulsets",
            Self::ControllerRevisions => "controllerrevisions",
            Self::Jobs => "jobs",
            Self::CronJobs => "cronjobs",
            Self::PriorityClasses => "priorityclasses",
            Self::PodDisruptionBudgets => "poddisruptionbudgets",
            Self::LimitRanges => "limitranges",
            Self::ResourceQuotas => "resourcequotas",
            Self::HorizontalPodAutoscalers => "horizontalpodautoscalers",
        }
    }

    /// The object kind.
    pub fn kind(self) -> &'static str {
        match self {
            Self::Pods => "Pod",
            Self::Nodes => "Node",
            Self::Events => "Event",
            Self::Namespaces => "Namespace",
            Self::ConfigMaps => "ConfigMap",
            Self::Secrets => "Secret",
            Self::ServiceAccounts => "ServiceAccount",
            Self::Leases => "Lease",
            Self::Roles => "Role",
            Self::ClusterRoles => "ClusterRole",
            Self::RoleBindings => "RoleBinding",
            Self::ClusterRoleBindings => "ClusterRoleBinding",
            Self::ReplicaSets => "ReplicaSet",
            Self::Deployments => "Deployment",
            Self::ReplicationControllers => "ReplicationController",
            Self::DaemonSets => "DaemonSet",
            Self::StatefulSets => "StatefulSet",
            Self::ControllerRevisions => "ControllerRevision",
            Self::Jobs => "Job",
            Self::CronJobs => "CronJob",
            Self::PriorityClasses => "PriorityClass",
            Self::PodDisruptionBudgets => "PodDisruptionBudget",
            Self::LimitRanges => "LimitRange",
            Self::ResourceQuotas => "ResourceQuota",
            Self::HorizontalPodAutoscalers => "HorizontalPodAutoscaler",
        }
    }

    /// The list kind.
    pub fn list_kind(self) -> &'static str {
        match self {
            Self::Pods => "PodList",
            Self::Nodes => "NodeList",
            Self::Events => "EventList",
            Self::Namespaces => "NamespaceList",
            Self::ConfigMaps => "ConfigMapList",
            Self::Secrets => "SecretList",
            Self::ServiceAccounts => "ServiceAccountList",
            Self::Leases => "LeaseList",
            Self::Roles => "RoleList",
            Self::ClusterRoles => "ClusterRoleList",
            Self::RoleBindings => "RoleBindingList",
            Self::ClusterRoleBindings => "ClusterRoleBindingList",
            Self::ReplicaSets => "ReplicaSetList",
            Self::Deployments => "DeploymentList",
            Self::ReplicationControllers => "ReplicationControllerList",
            Self::DaemonSets => "DaemonSetList",
            Self::StatefulSets => "StatefulSetList",
            Self::ControllerRevisions => "ControllerRevisionList",
            Self::Jobs => "JobList",
            Self::CronJobs => "CronJobList",
            Self::PriorityClasses => "PriorityClassList",
            Self::PodDisruptionBudgets => "PodDisruptionBudgetList",
            Self::LimitRanges => "LimitRangeList",
            Self::ResourceQuotas => "ResourceQuotaList",
            Self::HorizontalPodAutoscalers => "HorizontalPodAutoscalerList",
        }
    }

    /// The API group (`""` for the core group).
    pub fn group(self) -> &'static str {
        match self {
            Self::Leases => "coordination.k8s.io",
            Self::Roles | Self::ClusterRoles | Self::RoleBindings | Self::ClusterRoleBindings => {
                "rbac.authorization.k8s.io"
            }
            Self::ReplicaSets
            | Self::Deployments
            | Self::DaemonSets
            | Self::StatefulSets
            | Self::ControllerRevisions => "apps",
            Self::Jobs | Self::CronJobs => "batch",
            Self::PriorityClasses => "scheduling.k8s.io",
            Self::PodDisruptionBudgets => "policy",
            Self::HorizontalPodAutoscalers => "autoscaling",
            _ => "",
        }
    }

    /// The `apiVersion` its objects and lists carry (`v1`, `coordination.k8s.io/v1`).
    pub fn api_version(self) -> &'static str {
        match self {
            Self::Leases => "coordination.k8s.io/v1",
            Self::Roles | Self::ClusterRoles | Self::RoleBindings | Self::ClusterRoleBindings => {
                "rbac.authorization.k8s.io/v1"
            }
            Self::ReplicaSets
            | Self::Deployments
            | Self::DaemonSets
            | Self::StatefulSets
            | Self::ControllerRevisions => "apps/v1",
            Self::Jobs | Self::CronJobs => "batch/v1",
            Self::PriorityClasses => "scheduling.k8s.io/v1",
            Self::PodDisruptionBudgets => "policy/v1",
            Self::HorizontalPodAutoscalers => "autoscaling/v2",
            _ => "v1",
        }
    }

    /// The name errors give it: the plural, with its group when it has one
    /// (`roles.rbac.authorization.k8s.io "x" not found`, as kube-apiserver says).
    pub(crate) fn qualified(self) -> String {
        match self.group() {
            "" => self.plural().to_owned(),
            g => format!("{}.{g}", self.plural()),
        }
    }

    /// `e` with the resource named as [`Resource::qualified`] (the store names it by its
    /// key prefix, the plural alone).
    pub(crate) fn qualify(self, e: crate::ApiError) -> crate::ApiError {
        use crate::ApiError;
        let resource = self.qualified();
        match e {
            ApiError::NotFound { name, .. } => ApiError::NotFound { resource, name },
            ApiError::AlreadyExists { name, .. } => ApiError::AlreadyExists { resource, name },
            ApiError::Conflict { name, detail, .. } => ApiError::Conflict {
                resource,
                name,
                detail,
            },
            other => other,
        }
    }

    /// The URL path its group and version are served under (`/api/v1`, `/apis/G/V`).
    pub(crate) fn base_path(self) -> String {
        match self.group() {
            "" => "/api/v1".to_owned(),
            _ => format!("/apis/{}", self.api_version()),
        }
    }

    /// Whether objects live in a namespace.
    pub fn namespaced(self) -> bool {
        !matches!(
            self,
            Self::Nodes
                | Self::Namespaces
                | Self::ClusterRoles
                | Self::ClusterRoleBindings
                | Self::PriorityClasses
        )
    }

    /// The store key of one object (`ns` is ignored for cluster-scoped resources).
    pub(crate) fn key(self, ns: &str, name: &str) -> String {
        if self.namespaced() {
            format!("{}/{ns}/{name}", self.plural())
        } else {
            format!("{}/{name}", self.plural())
        }
    }

    /// The store key prefix of all objects, or of one namespace's.
    pub(crate) fn prefix(self, ns: Option<&str>) -> String {
        match ns {
            Some(ns) if self.namespaced() => format!("{}/{ns}/", self.plural()),
            _ => format!("{}/", self.plural()),
        }
    }

    /// The field a field selector's `label` names on this resource, or kube-apiserver's
    /// refusal (its field label conversion functions, `pkg/apis/core/v1/conversion.go`,
    /// and apimachinery's default for kinds without one).
    pub(crate) fn convert_field_label(self, label: &str) -> Result<String, String> {
        let unsupported = || Err(format!("field label not supported: {label}"));
        let ok = || Ok(label.to_owned());
        match self {
            Self::Pods => match label {
                "metadata.name"
                | "metadata.namespace"
                | "spec.nodeName"
                | "spec.restartPolicy"
                | "spec.schedulerName"
                | "spec.serviceAccountName"
                | "spec.hostNetwork"
                | "status.phase"
                | "status.podIP"
                | "status.podIPs"
                | "status.nominatedNodeName" => ok(),
                // Old v1 clients' name for it.
                "spec.host" => Ok("spec.nodeName".to_owned()),
                _ => unsupported(),
            },
            Self::Nodes => match label {
                "metadata.name" | "spec.unschedulable" => ok(),
                _ => unsupported(),
            },
            Self::Events => match label {
                "involvedObject.kind"
                | "involvedObject.namespace"
                | "involvedObject.name"
                | "involvedObject.uid"
                | "involvedObject.apiVersion"
                | "involvedObject.resourceVersion"
                | "involvedObject.fieldPath"
                | "reason"
                | "reportingComponent"
                | "source"
                | "type"
                | "metadata.namespace"
                | "metadata.name" => ok(),
                _ => unsupported(),
            },
            Self::Namespaces => match label {
                "status.phase" | "metadata.name" => ok(),
                _ => unsupported(),
            },
            Self::Secrets => match label {
                "type" | "metadata.namespace" | "metadata.name" => ok(),
                _ => unsupported(),
            },
            // pkg/apis/batch/v1 conversion: Jobs also select by `status.successful`, which
            // their field set fills from `status.succeeded`.
            Self::Jobs => match label {
                "metadata.name" | "metadata.namespace" => ok(),
                "status.successful" => Ok("status.succeeded".to_owned()),
                _ => Err(format!(
                    "field label {label:?} not supported for batchv1.Job"
                )),
            },
            // pkg/apis/apps/v1 and core/v1 conversions: ReplicaSets and
            // ReplicationControllers also select by status.replicas.
            Self::ReplicaSets | Self::ReplicationControllers => match label {
                "metadata.name" | "metadata.namespace" | "status.replicas" => ok(),
                _ => unsupported(),
            },
            Self::ConfigMaps
            | Self::ServiceAccounts
            | Self::Leases
            | Self::Roles
            | Self::ClusterRoles
            | Self::RoleBindings
            | Self::ClusterRoleBindings
            | Self::Deployments
            | Self::DaemonSets
            | Self::StatefulSets
            | Self::ControllerRevisions
            | Self::CronJobs
            | Self::PriorityClasses
            | Self::PodDisruptionBudgets
            | Self::LimitRanges
            | Self::ResourceQuotas
            | Self::HorizontalPodAutoscalers => match label {
                "metadata.name" | "metadata.namespace" => ok(),
                _ => Err(format!(
                    "{label:?} is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
                )),
            },
        }
    }
}
