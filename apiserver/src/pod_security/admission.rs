//! The admission step (k8s.io/pod-security-admission's `admission/admission.go`):
//! what a pod create or update, and a namespace create or update, is answered, given
//! the namespace's labels and the configuration's defaults and exemptions.
//!
//! Pure: the caller reads the namespace and its pods and turns a [`PodDecision`] into
//! its answer (a 403, `Warning` headers, audit annotations).

use std::collections::{BTreeMap, HashSet};

use k8s_openapi::api::core::v1::Pod;

use super::checks::{self, Violations};
use super::level::{LabelError, Level, LevelVersion, PREFIX, Policy, policy_from_labels};

#[cfg(test)]
#[path = "admission_tests.rs"]
mod tests;

/// How many existing pods a namespace's new enforce level is checked against.
const NAMESPACE_MAX_PODS_TO_CHECK: usize = 3000;

/// Who and what is never evaluated (`exemptions` of PodSecurityConfiguration).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Exemptions {
    /// Requests by these users (authenticated names).
    pub usernames: Vec<String>,
    /// Pods in these namespaces.
    pub namespaces: Vec<String>,
    /// Pods with these `runtimeClassName`s.
    pub runtime_classes: Vec<String>,
}

/// The admission's configuration: Kubernetes' default is privileged everywhere, no
/// exemptions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodSecurity {
    /// The policy of a namespace without labels (and of each mode it does not label).
    pub defaults: Policy,
    /// What is never evaluated.
    pub exemptions: Exemptions,
}

/// What a pod write is answered.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PodDecision {
    /// Refused: what follows `pods "<name>" is forbidden: `.
    pub refusal: Option<String>,
    /// `Warning` headers (only when not refused).
    pub warnings: Vec<String>,
    /// Audit annotations, keys under `pod-security.kubernetes.io/`.
    pub audit: Vec<(String, String)>,
}

impl PodDecision {
    fn annotated(key: &str, value: impl Into<String>) -> Self {
        Self {
            audit: vec![(format!("{PREFIX}{key}"), value.into())],
            ..Self::default()
        }
    }
}

/// The text of label errors as Kubernetes aggregates field errors: one alone, or
/// several in brackets.
fn aggregate(errors: &[LabelError]) -> String {
    let each: Vec<String> = errors
        .iter()
        .map(|e| {
            format!(
                "{}: Invalid value: \"{}\": {}",
                e.field(),
                e.value,
                e.detail
            )
        })
        .collect();
    match each.as_slice() {
        [one] => one.clone(),
        many => format!("[{}]", many.join(", ")),
    }
}

impl PodSecurity {
    /// The namespace's policy from its labels over the defaults, and the labels that
    /// do not parse.
    pub fn policy(&self, labels: &BTreeMap<String, String>) -> (Policy, Vec<LabelError>) {
        policy_from_labels(labels, &self.defaults)
    }

    fn exempt_namespace(&self, ns: &str) -> bool {
        !ns.is_empty() && self.exemptions.namespaces.iter().any(|n| n == ns)
    }

    fn exempt_user(&self, user: Option<&str>) -> bool {
        user.is_some_and(|u| !u.is_empty() && self.exemptions.usernames.iter().any(|n| n == u))
    }

    fn exempt_runtime_class(&self, pod: &Pod) -> bool {
        pod.spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
            .is_some_and(|rc| {
                !rc.is_empty() && self.exemptions.runtime_classes.iter().any(|n| n == rc)
            })
    }

    /// `ValidatePod`: a pod created (`old` `None`) or updated in namespace `ns`
    /// labelled `labels`, by `user`.
    pub fn admit_pod(
        &self,
        ns: &str,
        labels: &BTreeMap<String, String>,
        user: Option<&str>,
        pod: &Pod,
        old: Option<&Pod>,
    ) -> PodDecision {
        if self.exempt_namespace(ns) {
            return PodDecision::annotated("exempt", "namespace");
        }
        if self.exempt_user(user) {
            return PodDecision::annotated("exempt", "user");
        }
        let (policy, errors) = self.policy(labels);
        if errors.is_empty() && policy.fully_privileged() {
            return PodDecision::annotated("enforce-policy", LevelVersion::PRIVILEGED.to_string());
        }
        if let Some(old) = old
            && !significant_update(pod, old)
        {
            return PodDecision::default();
        }
        if self.exempt_runtime_class(pod) {
            return PodDecision::annotated("exempt", "runtimeClass");
        }
        let mut d = PodDecision::default();
        if !errors.is_empty() {
            d.audit.push((
                format!("{PREFIX}error"),
                format!("Failed to parse policy: {}", aggregate(&errors)),
            ));
        }
        let mut results: Vec<(LevelVersion, Violations)> = Vec::new();
        let mut evaluate = |lv: LevelVersion| -> Violations {
            if let Some((_, v)) = results.iter().find(|(l, _)| *l == lv) {
                return v.clone();
            }
            let v = evaluate_pod(lv, pod);
            results.push((lv, v.clone()));
            v
        };
        d.audit.push((
            format!("{PREFIX}enforce-policy"),
            policy.enforce.to_string(),
        ));
        let enforced = evaluate(policy.enforce);
        if !enforced.allowed() {
            d.refusal = Some(format!(
                "violates PodSecurity \"{}\": {}",
                policy.enforce,
                enforced.details()
            ));
        }
        let audited = evaluate(policy.audit);
        if !audited.allowed() {
            d.audit.push((
                format!("{PREFIX}audit-violations"),
                format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.audit,
                    audited.details()
                ),
            ));
        }
        // A request refused with an error gets no warnings on top.
        if d.refusal.is_none() {
            let warned = evaluate(policy.warn);
            if !warned.allowed() {
                d.warnings.push(format!(
                    "would violate PodSecurity \"{}\": {}",
                    policy.warn,
                    warned.details()
                ));
            }
        }
        d
    }

    /// `ValidateNamespace` on create: labels that do not parse are a 422 (the causes);
    /// an exempt namespace that sets a policy is warned it is ignored.
    ///
    /// # Errors
    /// The labels that do not parse.
    pub fn admit_namespace_create(
        &self,
        name: &str,
        labels: &BTreeMap<String, String>,
    ) -> Result<Vec<String>, Vec<LabelError>> {
        let (policy, errors) = self.policy(labels);
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(self
            .exempt_warning(name, &policy, labels)
            .into_iter()
            .collect())
    }

    /// `ValidateNamespace` on update: labels that newly fail to parse are a 422; a
    /// stricter (or differently versioned) enforce level is checked against the
    /// namespace's existing pods (read by `pods` only then), answered as warnings.
    ///
    /// # Errors
    /// The new labels that do not parse, unless the old ones failed alike.
    pub fn admit_namespace_update(
        &self,
        name: &str,
        old_labels: &BTreeMap<String, String>,
        labels: &BTreeMap<String, String>,
        pods: impl FnOnce() -> Vec<Pod>,
    ) -> Result<Vec<String>, Vec<LabelError>> {
        let (policy, errors) = self.policy(labels);
        let (old_policy, old_errors) = self.policy(old_labels);
        if !errors.is_empty() && (old_errors.is_empty() || errors != old_errors) {
            return Err(errors);
        }
        let (new, old) = (policy.enforce, old_policy.enforce);
        if new == old
            || new.level == Level::Privileged
            || (new.version == old.version && new.level <= old.level)
        {
            return Ok(Vec::new());
        }
        if self.exempt_namespace(name) {
            return Ok(self
                .exempt_warning(name, &policy, labels)
                .into_iter()
                .collect());
        }
        Ok(self.check_existing_pods(name, new, &pods()))
    }

    /// `EvaluatePodsInNamespace`: one warning per distinct set of reasons, naming the
    /// first pod (by name) and how many others share it.
    fn check_existing_pods(&self, ns: &str, enforce: LevelVersion, pods: &[Pod]) -> Vec<String> {
        let pods = self.prioritize(pods);
        let total = pods.len();
        let checked = &pods[..total.min(NAMESPACE_MAX_PODS_TO_CHECK)];
        // reasons -> (lexically first pod name, count), in first-seen order
        let mut seen: Vec<(String, String, usize)> = Vec::new();
        for pod in checked {
            let v = evaluate_pod(enforce, pod);
            if v.allowed() {
                continue;
            }
            let reasons = v.reasons();
            let name = pod.metadata.name.clone().unwrap_or_default();
            match seen.iter_mut().find(|(r, _, _)| *r == reasons) {
                Some((_, first, count)) => {
                    if name < *first {
                        *first = name;
                    }
                    *count += 1;
                }
                None => seen.push((reasons, name, 1)),
            }
        }
        let mut warnings = Vec::new();
        if checked.len() < total {
            warnings.push(format!(
                "new PodSecurity enforce level only checked against the first {} of {total} existing pods",
                checked.len()
            ));
        }
        if !seen.is_empty() {
            warnings.push(format!(
                "existing pods in namespace \"{ns}\" violate the new PodSecurity enforce level \"{enforce}\""
            ));
        }
        let mut per_pod: Vec<String> = seen
            .into_iter()
            .map(|(reasons, first, count)| match count {
                1 => format!("{first}: {reasons}"),
                2 => format!("{first} (and 1 other pod): {reasons}"),
                n => format!("{first} (and {} other pods): {reasons}", n - 1),
            })
            .collect();
        per_pod.sort();
        warnings.extend(per_pod);
        warnings
    }

    /// `prioritizePods`: pods of exempt runtime classes are skipped; the first pod of
    /// each controller comes before the others of the same controller.
    fn prioritize<'a>(&self, pods: &'a [Pod]) -> Vec<&'a Pod> {
        let mut first = Vec::new();
        let mut rest = Vec::new();
        let mut controllers = HashSet::new();
        for pod in pods {
            if self.exempt_runtime_class(pod) {
                continue;
            }
            let controller = pod
                .metadata
                .owner_references
                .iter()
                .flatten()
                .find(|o| o.controller == Some(true));
            match controller {
                Some(c) if !controllers.insert(c.uid.clone()) => rest.push(pod),
                _ => first.push(pod),
            }
        }
        first.extend(rest);
        first
    }

    /// `exemptNamespaceWarning`: an exempt namespace labelled with a policy other than
    /// the default is told the labels do nothing.
    fn exempt_warning(
        &self,
        name: &str,
        policy: &Policy,
        labels: &BTreeMap<String, String>,
    ) -> Option<String> {
        if !self.exempt_namespace(name)
            || policy.fully_privileged()
            || policy.equivalent(&self.defaults)
        {
            return None;
        }
        let has = |mode: &str| {
            labels.contains_key(&format!("{PREFIX}{mode}"))
                || labels.contains_key(&format!("{PREFIX}{mode}-version"))
        };
        let parts: Vec<String> = [
            ("enforce", policy.enforce),
            ("audit", policy.audit),
            ("warn", policy.warn),
        ]
        .iter()
        .filter(|(mode, lv)| lv.level != Level::Privileged && has(mode))
        .map(|(mode, lv)| format!("{mode}={lv}"))
        .collect();
        Some(format!(
            "namespace \"{name}\" is exempt from Pod Security, and the policy ({}) will be ignored",
            parts.join(", ")
        ))
    }
}

/// The aggregated text of label errors, for a 422's message.
pub fn label_errors_message(errors: &[LabelError]) -> String {
    aggregate(errors)
}

fn evaluate_pod(lv: LevelVersion, pod: &Pod) -> Violations {
    match &pod.spec {
        Some(spec) => checks::evaluate(lv, &pod.metadata, spec),
        None => checks::evaluate(lv, &pod.metadata, &Default::default()),
    }
}

/// `isSignificantPodUpdate`: only a change of containers (their number or images) can
/// change a pod's standing, as those are all a pod update may change that the checks
/// read (the rest of the spec is immutable).
pub fn significant_update(pod: &Pod, old: &Pod) -> bool {
    let (Some(new), Some(old)) = (&pod.spec, &old.spec) else {
        return pod.spec.is_some() != old.spec.is_some();
    };
    let empty = Vec::new();
    let (ni, oi) = (
        new.init_containers.as_ref().unwrap_or(&empty),
        old.init_containers.as_ref().unwrap_or(&empty),
    );
    if new.containers.len() != old.containers.len() || ni.len() != oi.len() {
        return true;
    }
    let images_differ = |a: &[k8s_openapi::api::core::v1::Container],
                         b: &[k8s_openapi::api::core::v1::Container]| {
        a.iter().zip(b).any(|(x, y)| x.image != y.image)
    };
    if images_differ(&new.containers, &old.containers) || images_differ(ni, oi) {
        return true;
    }
    let old_eph = old.ephemeral_containers.as_deref().unwrap_or_default();
    new.ephemeral_containers.iter().flatten().any(|e| {
        old_eph
            .iter()
            .find(|o| o.name == e.name)
            .is_none_or(|o| o.image != e.image)
    })
}
