//! A Job's spec checked as kube-apiserver's `validateJobSpec` checks it
//! (`pkg/apis/batch/validation`), in its order and with its messages: the counts, the
//! Indexed rules, `podFailurePolicy`, `successPolicy`, `podReplacementPolicy`, the pod
//! template and its restart policy. A Job's spec and a CronJob's `spec.jobTemplate.spec`
//! share it; what differs (the selector) is checked by each kind.

use std::collections::{BTreeSet, HashSet};

use k8s_openapi::api::batch::v1::{
    JobSpec, PodFailurePolicy, PodFailurePolicyOnExitCodesRequirement,
    PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule, SuccessPolicy, SuccessPolicyRule,
};

use super::indexes::count_indexes;
use super::{INDEXED, NON_INDEXED, go_json, invalid_omit, required, too_many};
use crate::CauseKind;
use crate::kinds::apps::{check_template_pod_at, non_negative};
use crate::validation::{Causes, DNS1123_SUBDOMAIN_MSG, QUALIFIED_NAME_MSG, is_qualified_name};

/// An Indexed Job's largest parallelism: it bounds the length of
/// `status.completedIndexes`.
const MAX_PARALLELISM_INDEXED: i32 = 100_000;

/// An Indexed Job's largest `maxFailedIndexes`, for the same reason.
const MAX_FAILED_INDEXES: i32 = 100_000;

/// Above this many completions, a Job with a backoff limit per index must bound its
/// failed indexes and its parallelism more tightly ([`HIGH_COMPLETIONS_LIMIT`]).
const COMPLETIONS_SOFT_LIMIT: i32 = 100_000;

/// The bound on parallelism and on `maxFailedIndexes` past [`COMPLETIONS_SOFT_LIMIT`].
const HIGH_COMPLETIONS_LIMIT: i32 = 10_000;

/// Rules of a `podFailurePolicy`, and of a `successPolicy`.
const MAX_RULES: usize = 20;

/// Exit codes of one `onExitCodes` requirement.
const MAX_EXIT_CODES: usize = 255;

/// Patterns of one `onPodConditions`.
const MAX_POD_CONDITIONS: usize = 20;

/// `spec.managedBy`'s length.
const MAX_MANAGED_BY: usize = 63;

/// `succeededIndexes`' length in bytes.
const MAX_SUCCEEDED_INDEXES: usize = 64 * 1024;

/// The actions a pod failure policy rule may take, sorted as Go's `sets.List` gives them.
const ACTIONS: [&str; 4] = ["Count", "FailIndex", "FailJob", "Ignore"];

/// The operators of `onExitCodes`.
const OPERATORS: [&str; 2] = ["In", "NotIn"];

/// The statuses `onPodConditions` may match.
const CONDITION_STATUSES: [&str; 3] = ["False", "True", "Unknown"];

/// The replacement policies, sorted.
const REPLACEMENT_POLICIES: [&str; 2] = ["Failed", "TerminatingOrFailed"];

/// Whether `spec` runs in Indexed mode (unset is NonIndexed).
pub(super) fn is_indexed(spec: &JobSpec) -> bool {
    spec.completion_mode.as_deref() == Some(INDEXED)
}

/// kube's `validateJobSpec` of the spec at `path` (`spec`, `spec.jobTemplate.spec`).
pub(super) fn check_job_spec(causes: &mut Causes, spec: &JobSpec, path: &str) {
    let at = |field: &str| format!("{path}.{field}");
    non_negative(causes, &at("parallelism"), spec.parallelism);
    non_negative(causes, &at("completions"), spec.completions);
    if let Some(d) = spec.active_deadline_seconds
        && d < 0
    {
        causes.invalid_number(at("activeDeadlineSeconds"), d, NEGATIVE);
    }
    non_negative(causes, &at("backoffLimit"), spec.backoff_limit);
    non_negative(
        causes,
        &at("ttlSecondsAfterFinished"),
        spec.ttl_seconds_after_finished,
    );
    non_negative(
        causes,
        &at("backoffLimitPerIndex"),
        spec.backoff_limit_per_index,
    );
    if spec.max_failed_indexes.is_some() {
        non_negative(causes, &at("maxFailedIndexes"), spec.max_failed_indexes);
        if spec.backoff_limit_per_index.is_none() {
            required(
                causes,
                &at("backoffLimitPerIndex"),
                "when maxFailedIndexes is specified",
            );
        }
    }
    if let Some(managed_by) = &spec.managed_by {
        check_domain_prefixed_path(causes, &at("managedBy"), managed_by);
        if managed_by.len() > MAX_MANAGED_BY {
            causes.push(
                CauseKind::TooLong,
                at("managedBy"),
                format!("Too long: may not be more than {MAX_MANAGED_BY} bytes"),
            );
        }
    }
    check_completion_mode(causes, spec, path);
    if let Some(policy) = &spec.pod_failure_policy {
        check_pod_failure_policy(causes, spec, policy, &at("podFailurePolicy"));
    }
    if let Some(policy) = &spec.success_policy {
        if is_indexed(spec) {
            check_success_policy(causes, spec.completions, policy, &at("successPolicy"));
        } else {
            causes.push(
                CauseKind::Invalid,
                at("successPolicy"),
                format!(
                    "Invalid value: {}: requires indexed completion mode",
                    go_json(policy)
                ),
            );
        }
    }
    if let Some(replacement) = spec.pod_replacement_policy.as_deref() {
        if spec.pod_failure_policy.is_some() {
            if replacement != "Failed" {
                causes.unsupported(at("podReplacementPolicy"), replacement, &["Failed"]);
            }
        } else if !REPLACEMENT_POLICIES.contains(&replacement) {
            causes.unsupported(
                at("podReplacementPolicy"),
                replacement,
                &REPLACEMENT_POLICIES,
            );
        }
    }
    check_template_pod_at(causes, &spec.template, &at("template"));
    check_restart_policy(causes, spec, &at("template.spec.restartPolicy"));
}

/// `field: Invalid value: N: must be greater than or equal to 0`'s detail.
const NEGATIVE: &str = "must be greater than or equal to 0";

/// `completionMode`: a known mode; Indexed needs completions and bounds parallelism and
/// failed indexes; a backoff limit per index needs Indexed.
fn check_completion_mode(causes: &mut Causes, spec: &JobSpec, path: &str) {
    let at = |field: &str| format!("{path}.{field}");
    let mode = spec.completion_mode.as_deref();
    if let Some(mode) = mode {
        if mode != NON_INDEXED && mode != INDEXED {
            causes.unsupported(at("completionMode"), mode, &[NON_INDEXED, INDEXED]);
        }
        if mode == INDEXED {
            check_indexed_bounds(causes, spec, path);
        }
    }
    if mode.is_none_or(|m| m == NON_INDEXED) {
        for (field, value) in [
            ("backoffLimitPerIndex", spec.backoff_limit_per_index),
            ("maxFailedIndexes", spec.max_failed_indexes),
        ] {
            if let Some(v) = value {
                causes.invalid_number(at(field), v.into(), "requires indexed completion mode");
            }
        }
    }
}

/// The limits of an Indexed Job.
fn check_indexed_bounds(causes: &mut Causes, spec: &JobSpec, path: &str) {
    let at = |field: &str| format!("{path}.{field}");
    if spec.completions.is_none() {
        required(
            causes,
            &at("completions"),
            "when completion mode is Indexed",
        );
    }
    if let Some(p) = spec.parallelism
        && p > MAX_PARALLELISM_INDEXED
    {
        causes.invalid_number(
            at("parallelism"),
            p.into(),
            &format!(
                "must be less than or equal to {MAX_PARALLELISM_INDEXED} when completion mode is Indexed"
            ),
        );
    }
    let max_failed = spec.max_failed_indexes;
    if let (Some(c), Some(m)) = (spec.completions, max_failed)
        && m > c
    {
        causes.invalid_number(
            at("maxFailedIndexes"),
            m.into(),
            "must be less than or equal to completions",
        );
    }
    if let Some(m) = max_failed
        && m > MAX_FAILED_INDEXES
    {
        causes.invalid_number(
            at("maxFailedIndexes"),
            m.into(),
            &format!("must be less than or equal to {MAX_FAILED_INDEXES}"),
        );
    }
    let high = spec.completions.is_some_and(|c| c > COMPLETIONS_SOFT_LIMIT);
    if !high || spec.backoff_limit_per_index.is_none() {
        return;
    }
    let why = format!(
        "must be less than or equal to {HIGH_COMPLETIONS_LIMIT} when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
    );
    if max_failed.is_none() {
        required(
            causes,
            &at("maxFailedIndexes"),
            &format!("must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}"),
        );
    }
    if let Some(p) = spec.parallelism
        && p > HIGH_COMPLETIONS_LIMIT
    {
        causes.invalid_number(at("parallelism"), p.into(), &why);
    }
    if let Some(m) = max_failed
        && m > HIGH_COMPLETIONS_LIMIT
    {
        causes.invalid_number(at("maxFailedIndexes"), m.into(), &why);
    }
}

/// `IsDomainPrefixedPath`: `acme.io/foo`, a DNS subdomain and an HTTP path.
fn check_domain_prefixed_path(causes: &mut Causes, field: &str, value: &str) {
    if value.is_empty() {
        causes.required(field);
        return;
    }
    let Some((host, path)) = value
        .split_once('/')
        .filter(|(h, p)| !h.is_empty() && !p.is_empty())
    else {
        causes.invalid(
            field,
            value,
            "must be a domain-prefixed path (such as \"acme.io/foo\")",
        );
        return;
    };
    if host.len() > 253 {
        causes.invalid(field, host, "must be no more than 253 characters");
    }
    if !crate::validation::is_dns1123_subdomain(host) && host.len() <= 253 {
        causes.invalid(field, host, DNS1123_SUBDOMAIN_MSG);
    }
    let http_path = |c: char| c.is_ascii_alphanumeric() || "/-._~%!$&'()*+,;=:".contains(c);
    if !path.chars().all(http_path) {
        causes.invalid(
            field,
            path,
            "Invalid path (regex used for validation is '[A-Za-z0-9/\\-._~%!$&'()*+,;=:]+')",
        );
    }
}

/// The template's restart policy: a Job's pods run to completion, so `Always` (the pod
/// default) is refused as a missing value, and a pod failure policy needs `Never`.
fn check_restart_policy(causes: &mut Causes, spec: &JobSpec, field: &str) {
    let policy = spec
        .template
        .spec
        .as_ref()
        .and_then(|s| s.restart_policy.as_deref())
        .unwrap_or("");
    match policy {
        "Always" | "" => required(causes, field, "valid values: \"OnFailure\", \"Never\""),
        "OnFailure" | "Never" => {
            if spec.pod_failure_policy.is_some() && policy != "Never" {
                causes.invalid(
                    field,
                    policy,
                    "only \"Never\" is supported when podFailurePolicy is specified",
                );
            }
        }
        other => causes.unsupported(field, other, &["OnFailure", "Never"]),
    }
}

fn check_pod_failure_policy(
    causes: &mut Causes,
    spec: &JobSpec,
    policy: &PodFailurePolicy,
    path: &str,
) {
    let rules_path = format!("{path}.rules");
    if policy.rules.len() > MAX_RULES {
        too_many(causes, &rules_path, policy.rules.len(), MAX_RULES);
    }
    let pod = spec.template.spec.as_ref();
    let names: HashSet<&str> = pod
        .into_iter()
        .flat_map(|p| {
            p.containers
                .iter()
                .chain(p.init_containers.iter().flatten())
        })
        .map(|c| c.name.as_str())
        .collect();
    for (i, rule) in policy.rules.iter().enumerate() {
        check_rule(causes, spec, rule, &format!("{rules_path}[{i}]"), &names);
    }
}

fn check_rule(
    causes: &mut Causes,
    spec: &JobSpec,
    rule: &PodFailurePolicyRule,
    path: &str,
    names: &HashSet<&str>,
) {
    let action_path = format!("{path}.action");
    match rule.action.as_str() {
        "" => required(
            causes,
            &action_path,
            &format!("valid values: {}", go_quoted(&ACTIONS)),
        ),
        "FailIndex" if spec.backoff_limit_per_index.is_none() => causes.invalid(
            &action_path,
            "FailIndex",
            "requires the backoffLimitPerIndex to be set",
        ),
        a if !ACTIONS.contains(&a) => causes.unsupported(&action_path, a, &ACTIONS),
        _ => {}
    }
    if let Some(codes) = &rule.on_exit_codes {
        check_exit_codes(causes, codes, &format!("{path}.onExitCodes"), names);
    }
    let conditions = rule.on_pod_conditions.as_deref().unwrap_or_default();
    if !conditions.is_empty() {
        check_pod_conditions(causes, conditions, &format!("{path}.onPodConditions"));
    }
    match (rule.on_exit_codes.is_some(), !conditions.is_empty()) {
        (true, true) => invalid_omit(
            causes,
            path,
            "specifying both OnExitCodes and OnPodConditions is not supported",
        ),
        (false, false) => invalid_omit(
            causes,
            path,
            "specifying one of OnExitCodes and OnPodConditions is required",
        ),
        _ => {}
    }
}

fn check_exit_codes(
    causes: &mut Causes,
    codes: &PodFailurePolicyOnExitCodesRequirement,
    path: &str,
    names: &HashSet<&str>,
) {
    let operator_path = format!("{path}.operator");
    match codes.operator.as_str() {
        "" => required(
            causes,
            &operator_path,
            &format!("valid values: {}", go_quoted(&OPERATORS)),
        ),
        op if !OPERATORS.contains(&op) => causes.unsupported(&operator_path, op, &OPERATORS),
        _ => {}
    }
    if let Some(name) = codes.container_name.as_deref()
        && !names.contains(name)
    {
        causes.invalid(
            format!("{path}.containerName"),
            name,
            "must be one of the container or initContainer names in the pod template",
        );
    }
    let values_path = format!("{path}.values");
    if codes.values.is_empty() {
        causes.push(
            CauseKind::Invalid,
            &values_path,
            "Invalid value: []int32{}: at least one value is required",
        );
    } else if codes.values.len() > MAX_EXIT_CODES {
        too_many(causes, &values_path, codes.values.len(), MAX_EXIT_CODES);
    }
    let mut seen = BTreeSet::new();
    for (j, v) in codes.values.iter().enumerate() {
        let value_path = format!("{values_path}[{j}]");
        if codes.operator == "In" && *v == 0 {
            causes.invalid_number(&value_path, 0, "must not be 0 for the In operator");
        }
        if !seen.insert(*v) {
            causes.push(
                CauseKind::Duplicate,
                &value_path,
                format!("Duplicate value: {v}"),
            );
        }
    }
    if codes.values.windows(2).any(|w| w[0] > w[1]) {
        let shown: Vec<String> = codes.values.iter().map(i32::to_string).collect();
        causes.push(
            CauseKind::Invalid,
            values_path,
            format!(
                "Invalid value: []int32{{{}}}: must be ordered",
                shown.join(", ")
            ),
        );
    }
}

fn check_pod_conditions(
    causes: &mut Causes,
    patterns: &[PodFailurePolicyOnPodConditionsPattern],
    path: &str,
) {
    if patterns.len() > MAX_POD_CONDITIONS {
        too_many(causes, path, patterns.len(), MAX_POD_CONDITIONS);
    }
    for (j, pattern) in patterns.iter().enumerate() {
        let at = format!("{path}[{j}]");
        if !is_qualified_name(&pattern.type_) {
            causes.invalid(format!("{at}.type"), &pattern.type_, QUALIFIED_NAME_MSG);
        }
        let status_path = format!("{at}.status");
        match pattern.status.as_str() {
            "" => required(
                causes,
                &status_path,
                &format!("valid values: {}", go_quoted(&CONDITION_STATUSES)),
            ),
            s if !CONDITION_STATUSES.contains(&s) => {
                causes.unsupported(&status_path, s, &CONDITION_STATUSES);
            }
            _ => {}
        }
    }
}

/// `successPolicy` of an Indexed Job (`completions`, when unset, is already refused).
fn check_success_policy(
    causes: &mut Causes,
    completions: Option<i32>,
    policy: &SuccessPolicy,
    path: &str,
) {
    let rules_path = format!("{path}.rules");
    if policy.rules.is_empty() {
        required(
            causes,
            &rules_path,
            "at least one rules must be specified when the successPolicy is specified",
        );
    }
    if policy.rules.len() > MAX_RULES {
        too_many(causes, &rules_path, policy.rules.len(), MAX_RULES);
    }
    for (i, rule) in policy.rules.iter().enumerate() {
        check_success_rule(causes, completions, rule, &format!("{rules_path}[{i}]"));
    }
}

fn check_success_rule(
    causes: &mut Causes,
    completions: Option<i32>,
    rule: &SuccessPolicyRule,
    path: &str,
) {
    if rule.succeeded_count.is_none() && rule.succeeded_indexes.is_none() {
        required(
            causes,
            path,
            "at least one of succeededCount or succeededIndexes must be specified",
        );
    }
    let mut total = 0;
    if let Some(indexes) = &rule.succeeded_indexes {
        let field = format!("{path}.succeededIndexes");
        if indexes.len() > MAX_SUCCEEDED_INDEXES {
            causes.push(
                CauseKind::TooLong,
                &field,
                format!("Too long: may not be more than {MAX_SUCCEEDED_INDEXES} bytes"),
            );
        }
        if let Some(c) = completions {
            match count_indexes(indexes, c) {
                Ok(n) => total = n,
                Err(e) => causes.invalid(
                    &field,
                    indexes,
                    &format!("error parsing succeededIndexes: {e}"),
                ),
            }
        }
    }
    let Some(count) = rule.succeeded_count else {
        return;
    };
    let field = format!("{path}.succeededCount");
    non_negative(causes, &field, Some(count));
    if let Some(c) = completions
        && count > c
    {
        causes.invalid_number(
            &field,
            count.into(),
            &format!("must be less than or equal to {c} (the number of specified completions)"),
        );
    }
    if rule.succeeded_indexes.is_some() && count > total {
        causes.invalid_number(
            &field,
            count.into(),
            &format!(
                "must be less than or equal to {total} (the number of indexes in the specified succeededIndexes field)"
            ),
        );
    }
}

/// A list of values as Go's `%q` prints a string slice: `["a" "b"]`.
fn go_quoted(values: &[&str]) -> String {
    let quoted: Vec<String> = values.iter().map(|v| format!("{v:?}")).collect();
    format!("[{}]", quoted.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_prints_string_slices_space_separated() {
        assert_eq!(go_quoted(&OPERATORS), "[\"In\" \"NotIn\"]");
    }
}
