//! `spec.podFailurePolicy` (KCM's `pod_failure_policy.go`): the first rule
//! that matches a failed pod decides what its failure means.

use k8s_openapi::api::batch::v1::{
    PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern,
};
use k8s_openapi::api::core::v1::{ContainerStatus, Pod, PodCondition};

/// What a matched rule does with a failed pod.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PolicyAction {
    /// The Job fails at once (reason `PodFailurePolicy`, this message).
    FailJob(String),
    /// The pod's index fails (with backoffLimitPerIndex); the failure
    /// counts.
    FailIndex,
    /// The failure does not count towards backoffLimit; a replacement is
    /// made.
    Ignore,
    /// The default: the failure counts.
    Count,
}

impl PolicyAction {
    /// Whether the failure counts towards `backoffLimit` (everything but
    /// Ignore).
    pub(crate) fn counts(&self) -> bool {
        !matches!(self, PolicyAction::Ignore)
    }
}

/// KCM's `matchPodFailurePolicy`: the action of the first rule that matches
/// the failed `pod`, or `None` when no rule does (or there is no policy):
/// the failure then counts. A rule with `onExitCodes` looks only at exit
/// codes; one with only `onPodConditions` at conditions. A rule with an
/// action this version does not know is skipped, as the API asks clients
/// to.
pub(crate) fn matching_action(
    policy: Option<&PodFailurePolicy>,
    pod: &Pod,
) -> Option<PolicyAction> {
    let policy = policy?;
    let status = pod.status.as_ref();
    let ns = pod.metadata.namespace.as_deref().unwrap_or_default();
    let name = pod.metadata.name.as_deref().unwrap_or_default();
    for (index, rule) in policy.rules.iter().enumerate() {
        let action = rule.action.as_str();
        if let Some(req) = rule.on_exit_codes.as_ref() {
            let Some(c) = status.and_then(|s| {
                matching_container(s.container_statuses.as_deref(), req)
                    .or_else(|| matching_container(s.init_container_statuses.as_deref(), req))
            }) else {
                continue;
            };
            let code = c
                .state
                .as_ref()
                .and_then(|st| st.terminated.as_ref())
                .map_or(0, |t| t.exit_code);
            match known(action, || {
                format!(
                    "Container {} for pod {ns}/{name} failed with exit code {code} matching FailJob rule at index {index}",
                    c.name
                )
            }) {
                Some(a) => return Some(a),
                None => continue,
            }
        } else if let Some(patterns) = rule.on_pod_conditions.as_deref() {
            let Some(cond) = status
                .and_then(|s| s.conditions.as_deref())
                .and_then(|conds| matching_condition(conds, patterns))
            else {
                continue;
            };
            match known(action, || {
                format!(
                    "Pod {ns}/{name} has condition {} matching FailJob rule at index {index}",
                    cond.type_
                )
            }) {
                Some(a) => return Some(a),
                None => continue,
            }
        }
    }
    None
}

/// Whether the failure of `pod` counts towards backoffLimit.
pub(crate) fn failure_counts(policy: Option<&PodFailurePolicy>, pod: &Pod) -> bool {
    matching_action(policy, pod).is_none_or(|a| a.counts())
}

fn known(action: &str, fail_job_message: impl FnOnce() -> String) -> Option<PolicyAction> {
    match action {
        "FailJob" => Some(PolicyAction::FailJob(fail_job_message())),
        "FailIndex" => Some(PolicyAction::FailIndex),
        "Ignore" => Some(PolicyAction::Ignore),
        "Count" => Some(PolicyAction::Count),
        _ => None,
    }
}

/// The first terminated container with a non-zero exit code that the
/// requirement matches (KCM's `getMatchingContainerFromList`).
fn matching_container<'a>(
    statuses: Option<&'a [ContainerStatus]>,
    req: &PodFailurePolicyOnExitCodesRequirement,
) -> Option<&'a ContainerStatus> {
    statuses?.iter().find(|c| {
        let Some(t) = c.state.as_ref().and_then(|s| s.terminated.as_ref()) else {
            return false;
        };
        req.container_name.as_deref().is_none_or(|n| n == c.name)
            && t.exit_code != 0
            && match req.operator.as_str() {
                "In" => req.values.contains(&t.exit_code),
                "NotIn" => !req.values.contains(&t.exit_code),
                // An operator this version does not know is not satisfied.
                _ => false,
            }
    })
}

/// The first pod condition (in the pod's order) that a pattern matches:
/// same type and same status (`status` defaults to `True`).
fn matching_condition<'a>(
    conds: &'a [PodCondition],
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
) -> Option<&'a PodCondition> {
    conds.iter().find(|c| {
        patterns.iter().any(|p| {
            let want = if p.status.is_empty() {
                "True"
            } else {
                p.status.as_str()
            };
            p.type_ == c.type_ && want == c.status
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::PodFailurePolicyRule;
    use k8s_openapi::api::core::v1::{ContainerState, ContainerStateTerminated, PodStatus};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn failed_pod(exit_codes: &[(&str, i32)], conds: &[(&str, &str)]) -> Pod {
        Pod {
            metadata: ObjectMeta {
                name: Some("p".into()),
                namespace: Some("ns".into()),
                ..Default::default()
            },
            spec: None,
            status: Some(PodStatus {
                phase: Some("Failed".into()),
                container_statuses: Some(
                    exit_codes
                        .iter()
                        .map(|(n, code)| ContainerStatus {
                            name: (*n).into(),
                            state: Some(ContainerState {
                                terminated: Some(ContainerStateTerminated {
                                    exit_code: *code,
                                    ..Default::default()
                                }),
                                ..Default::default()
                            }),
                            ..Default::default()
                        })
                        .collect(),
                ),
                conditions: Some(
                    conds
                        .iter()
                        .map(|(t, s)| PodCondition {
                            type_: (*t).into(),
                            status: (*s).into(),
                            ..Default::default()
                        })
                        .collect(),
                ),
                ..Default::default()
            }),
        }
    }

    fn exit_rule(
        action: &str,
        op: &str,
        values: &[i32],
        container: Option<&str>,
    ) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: Some(PodFailurePolicyOnExitCodesRequirement {
                container_name: container.map(Into::into),
                operator: op.into(),
                values: values.to_vec(),
            }),
            on_pod_conditions: None,
        }
    }

    fn cond_rule(action: &str, type_: &str) -> PodFailurePolicyRule {
        PodFailurePolicyRule {
            action: action.into(),
            on_exit_codes: None,
            on_pod_conditions: Some(vec![PodFailurePolicyOnPodConditionsPattern {
                type_: type_.into(),
                status: String::new(),
            }]),
        }
    }

    #[test]
    fn the_first_matching_rule_wins_with_kcms_fail_job_message() {
        let policy = PodFailurePolicy {
            rules: vec![
                exit_rule("Ignore", "In", &[1], Some("other")),
                exit_rule("FailJob", "In", &[42], None),
                exit_rule("Count", "NotIn", &[0], None),
            ],
        };
        let pod = failed_pod(&[("main", 42)], &[]);
        assert_eq!(
            matching_action(Some(&policy), &pod),
            Some(PolicyAction::FailJob(
                "Container main for pod ns/p failed with exit code 42 matching FailJob rule at index 1"
                    .into()
            ))
        );
        let pod = failed_pod(&[("main", 3)], &[]);
        assert_eq!(
            matching_action(Some(&policy), &pod),
            Some(PolicyAction::Count)
        );
        let pod = failed_pod(&[("other", 1)], &[]);
        assert_eq!(
            matching_action(Some(&policy), &pod),
            Some(PolicyAction::Ignore)
        );
        assert!(!failure_counts(Some(&policy), &pod));
    }

    #[test]
    fn exit_code_zero_and_running_containers_never_match() {
        let policy = PodFailurePolicy {
            rules: vec![exit_rule("FailJob", "NotIn", &[5], None)],
        };
        assert_eq!(
            matching_action(Some(&policy), &failed_pod(&[("a", 0)], &[])),
            None
        );
        assert_eq!(matching_action(Some(&policy), &failed_pod(&[], &[])), None);
        assert!(failure_counts(Some(&policy), &failed_pod(&[], &[])));
        assert!(failure_counts(None, &failed_pod(&[], &[])));
    }

    #[test]
    fn a_disruption_target_condition_matches_an_on_pod_conditions_rule() {
        let policy = PodFailurePolicy {
            rules: vec![
                cond_rule("Ignore", "DisruptionTarget"),
                cond_rule("FailJob", "ConfigIssue"),
            ],
        };
        let lost = failed_pod(&[], &[("Ready", "False"), ("DisruptionTarget", "True")]);
        assert_eq!(
            matching_action(Some(&policy), &lost),
            Some(PolicyAction::Ignore)
        );
        let not_lost = failed_pod(&[], &[("DisruptionTarget", "False")]);
        assert_eq!(matching_action(Some(&policy), &not_lost), None);
        let bad = failed_pod(&[], &[("ConfigIssue", "True")]);
        assert_eq!(
            matching_action(Some(&policy), &bad),
            Some(PolicyAction::FailJob(
                "Pod ns/p has condition ConfigIssue matching FailJob rule at index 1".into()
            ))
        );
    }

    #[test]
    fn unknown_actions_and_operators_are_skipped() {
        let policy = PodFailurePolicy {
            rules: vec![
                exit_rule("Explode", "In", &[1], None),
                exit_rule("FailJob", "Near", &[1], None),
                exit_rule("Ignore", "In", &[1], None),
            ],
        };
        assert_eq!(
            matching_action(Some(&policy), &failed_pod(&[("a", 1)], &[])),
            Some(PolicyAction::Ignore)
        );
    }
}
