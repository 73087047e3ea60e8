//! What a hook answers, and what it may change.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Key prefixes a hook may not set on labels or annotations: mesopod and
/// Kubernetes decide what a pod is from keys under them.
const RESERVED: [&str; 3] = ["mesopod.io/", "kubernetes.io/", "k8s.io/"];

/// The label and annotation key prefixes a hook may not set. Subdomains
/// count too (`node.kubernetes.io/…` is reserved).
pub fn reserved_prefixes() -> &'static [&'static str] {
    &RESERVED
}

/// Whether a label or annotation key falls under a reserved prefix.
pub fn is_reserved_key(key: &str) -> bool {
    let Some((domain, _)) = key.split_once('/') else {
        return false;
    };
    let domain = domain.to_ascii_lowercase();
    RESERVED.iter().any(|p| {
        let d = p.trim_end_matches('/');
        domain == d || domain.ends_with(&format!(".{d}"))
    })
}

/// A Kubernetes toleration, as hooks write them. Empty fields are left out
/// of the pod.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Toleration {
    /// The taint key.
    pub key: String,
    /// `Exists` or `Equal`; empty means Equal.
    pub operator: String,
    /// The taint value.
    pub value: String,
    /// `NoSchedule`, `PreferNoSchedule`, `NoExecute`, or empty for all.
    pub effect: String,
    /// For NoExecute: how long the pod stays on a node that gains the taint.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub toleration_seconds: Option<i64>,
}

/// What a hook may change. A zero field changes nothing: map entries merge
/// over the pod's own (the hook's keys win), tolerations are appended, and
/// a non-empty string replaces the pod's value.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default, deny_unknown_fields)]
pub struct Changes {
    /// Merged into `spec.nodeSelector`.
    pub node_selector: BTreeMap<String, String>,
    /// Appended to `spec.tolerations`.
    pub tolerations: Vec<Toleration>,
    /// Replaces `spec.priorityClassName` when non-empty (allowlisted).
    pub priority_class_name: String,
    /// Replaces `spec.serviceAccountName` when non-empty (allowlisted).
    pub service_account: String,
    /// Merged into `metadata.labels`; no reserved keys.
    pub labels: BTreeMap<String, String>,
    /// Merged into `metadata.annotations`; no reserved keys.
    pub annotations: BTreeMap<String, String>,
}

impl Changes {
    /// Whether nothing would change.
    pub fn is_empty(&self) -> bool {
        *self == Changes::default()
    }

    /// Whether the pod's spec would change (not only its labels or
    /// annotations).
    pub fn changes_spec(&self) -> bool {
        !self.node_selector.is_empty()
            || !self.tolerations.is_empty()
            || !self.priority_class_name.is_empty()
            || !self.service_account.is_empty()
    }

    /// Folds a later hook's changes over these: later keys win, tolerations
    /// append, non-empty strings replace.
    pub fn merge(&mut self, later: Changes) {
        self.node_selector.extend(later.node_selector);
        self.tolerations.extend(later.tolerations);
        if !later.priority_class_name.is_empty() {
            self.priority_class_name = later.priority_class_name;
        }
        if !later.service_account.is_empty() {
            self.service_account = later.service_account;
        }
        self.labels.extend(later.labels);
        self.annotations.extend(later.annotations);
    }
}

/// A hook's answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    /// Place the pod as it is.
    Admit,
    /// Place the pod with these changes.
    AdmitWith(Changes),
    /// Not now: offer the attempt again later, for a condition that passes.
    Hold(String),
    /// Never: the pod fails for good with this reason.
    Refuse(String),
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn reserved_keys_include_subdomains_but_not_lookalikes() {
        for k in [
            "mesopod.io/task-id",
            "kubernetes.io/hostname",
            "node.kubernetes.io/instance-type",
            "k8s.io/x",
            "Kubernetes.IO/x",
        ] {
            assert!(is_reserved_key(k), "{k}");
        }
        for k in [
            "tenant",
            "example.com/k8s.io",
            "notkubernetes.io/x",
            "team/kubernetes.io",
        ] {
            assert!(!is_reserved_key(k), "{k}");
        }
        assert_eq!(reserved_prefixes().len(), 3);
    }

    #[test]
    fn later_changes_win_and_tolerations_accumulate() {
        let mut a = Changes {
            node_selector: [("tenant".into(), "a".into())].into(),
            tolerations: vec![Toleration {
                key: "x".into(),
                ..Default::default()
            }],
            priority_class_name: "low".into(),
            ..Default::default()
        };
        a.merge(Changes {
            node_selector: [("tenant".into(), "b".into())].into(),
            tolerations: vec![Toleration {
                key: "y".into(),
                ..Default::default()
            }],
            ..Default::default()
        });
        assert_eq!(a.node_selector["tenant"], "b");
        assert_eq!(a.tolerations.len(), 2);
        assert_eq!(
            a.priority_class_name, "low",
            "an empty string changes nothing"
        );
    }
}
