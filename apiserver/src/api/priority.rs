//! kube-apiserver's Priority admission: a new pod's `priorityClassName` must name a
//! PriorityClass, and `spec.priority` and `spec.preemptionPolicy` are filled from it
//! (from the global default class, or 0 and `PreemptLowerPriority`, when the pod
//! names none). A pod may carry either field only with the value admission would
//! give it. The scheduler's queue orders pods by the priority written here.
//!
//! Also the system classes, created at start as kube-apiserver's bootstrap does.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::scheduling::v1::PriorityClass;

use super::{Api, WriteOptions};
use crate::error::ApiError;
use crate::kinds::priorityclass::{DEFAULT_PREEMPTION_POLICY, global_default, system_classes};
use crate::resource::Resource;

impl Api {
    /// Creates a PriorityClass, as `POST /apis/scheduling.k8s.io/v1/priorityclasses`
    /// does: 409 if the name is taken, 422 if invalid.
    pub async fn create_priorityclass(
        &self,
        class: PriorityClass,
    ) -> Result<PriorityClass, ApiError> {
        self.create_object("", class, WriteOptions::default(), None)
            .await
    }

    /// Creates `system-node-critical` and `system-cluster-critical` where missing.
    pub(crate) async fn ensure_system_priority_classes(&self) -> Result<(), ApiError> {
        for class in system_classes() {
            let name = class.metadata.name.clone().unwrap_or_default();
            if self
                .get_value(&Resource::PriorityClasses.key("", &name))
                .is_some()
            {
                continue;
            }
            match self
                .create_object("", class, WriteOptions::default(), None)
                .await
            {
                Ok(_) | Err(ApiError::AlreadyExists { .. }) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Resolves the priority of pod `name` about to be created (see the module doc).
    pub(super) fn admit_priority(&self, name: &str, pod: &mut Pod) -> Result<(), ApiError> {
        let Some(spec) = pod.spec.as_mut() else {
            return Ok(());
        };
        let forbidden =
            |why: String| ApiError::Forbidden(format!("pods \"{name}\" is forbidden: {why}"));
        let class = match spec
            .priority_class_name
            .as_deref()
            .filter(|n| !n.is_empty())
        {
            Some(class_name) => {
                let class = self
                    .get_typed::<PriorityClass>(Resource::PriorityClasses, "", class_name)
                    .map(|(c, _)| c)
                    .map_err(|e| match e {
                        ApiError::NotFound { .. } => {
                            forbidden(format!("no PriorityClass with name {class_name} was found"))
                        }
                        other => other,
                    })?;
                Some(class)
            }
            None => global_default(self)?,
        };
        let (value, policy) = match &class {
            Some(c) => (
                c.value,
                c.preemption_policy
                    .clone()
                    .unwrap_or_else(|| DEFAULT_PREEMPTION_POLICY.into()),
            ),
            None => (0, DEFAULT_PREEMPTION_POLICY.into()),
        };
        if let Some(given) = spec.priority
            && given != value
        {
            return Err(forbidden(format!(
                "the integer value of priority ({given}) must not be provided in pod spec; priority admission controller computed {value} from the given PriorityClass name"
            )));
        }
        if let Some(given) = spec.preemption_policy.as_deref()
            && given != policy
        {
            return Err(forbidden(format!(
                "the string value of PreemptionPolicy ({given}) must not be provided in pod spec; priority admission controller computed {policy} from the given PriorityClass name"
            )));
        }
        if spec
            .priority_class_name
            .as_deref()
            .is_none_or(str::is_empty)
        {
            spec.priority_class_name = class.and_then(|c| c.metadata.name);
        }
        spec.priority = Some(value);
        spec.preemption_policy = Some(policy);
        Ok(())
    }
}
