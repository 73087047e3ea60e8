//! The Pod Security Standards' checks, as k8s.io/pod-security-admission 1.33 registers
//! them (`policy/check_*.go`, `policy/registry.go`): each check has an id, a level and
//! revisions by policy version; a restricted revision may override a baseline check it
//! supersedes. A pod is evaluated against every check of its level at its version, in
//! Kubernetes' order (baseline ids sorted, then restricted ids sorted), so the message
//! lists the violations as kube-apiserver does.
//!
//! Every check is here, also those on fields mesopod's pod validation refuses
//! (seccomp, SELinux and AppArmor profiles, sysctls, `procMount`, ephemeral containers):
//! they can never fire on a pod mesopod stored, but the restricted seccomp check fires
//! on their *absence*, which is why no pod meets `restricted` on mesopod.

mod baseline;
mod restricted;
#[cfg(test)]
mod tests;

use std::borrow::Cow;

use k8s_openapi::api::core::v1::{Container, PodSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::level::{Level, LevelVersion};

/// Why a check refuses a pod: a short reason (`host namespaces`) and, optionally, the
/// details (`hostNetwork=true`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Always shown.
    pub reason: String,
    /// Shown in parentheses after the reason when checking one pod; may be empty.
    pub detail: String,
}

impl Violation {
    fn new(reason: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            detail: detail.into(),
        }
    }
}

/// One check at one policy version.
type CheckFn = fn(&ObjectMeta, &PodSpec) -> Option<Violation>;

/// A check's revision that applies from policy version `v1.<since>` on.
struct Revision {
    since: u32,
    check: CheckFn,
    /// Baseline checks this (restricted) revision replaces at the restricted level.
    overrides: &'static [&'static str],
}

struct Check {
    id: &'static str,
    level: Level,
    /// Ordered by `since`, strictly increasing.
    revisions: &'static [Revision],
}

impl Check {
    /// The revision in force at minor version `v`, if the check exists there.
    fn at(&self, v: u32) -> Option<&Revision> {
        self.revisions.iter().rev().find(|r| r.since <= v)
    }
}

const fn rev(since: u32, check: CheckFn) -> Revision {
    Revision {
        since,
        check,
        overrides: &[],
    }
}

const fn rev_over(since: u32, check: CheckFn, overrides: &'static [&'static str]) -> Revision {
    Revision {
        since,
        check,
        overrides,
    }
}

/// Every check, baseline ids sorted then restricted ids sorted (byte order, as Go's
/// `sort`): the order their violations are listed in.
const CHECKS: &[Check] = &[
    Check {
        id: "appArmorProfile",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::app_armor_profile)],
    },
    Check {
        id: "capabilities_baseline",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::capabilities)],
    },
    Check {
        id: "hostNamespaces",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::host_namespaces)],
    },
    Check {
        id: "hostPathVolumes",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::host_path_volumes)],
    },
    Check {
        id: "hostPorts",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::host_ports)],
    },
    Check {
        id: "privileged",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::privileged)],
    },
    Check {
        id: "procMount",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::proc_mount)],
    },
    Check {
        id: "seLinuxOptions",
        level: Level::Baseline,
        revisions: &[
            rev(0, baseline::se_linux_options_1_0),
            rev(31, baseline::se_linux_options_1_31),
        ],
    },
    Check {
        id: "seccompProfile_baseline",
        level: Level::Baseline,
        revisions: &[
            rev(0, baseline::seccomp_annotations),
            rev(19, baseline::seccomp_profile),
        ],
    },
    Check {
        id: "sysctls",
        level: Level::Baseline,
        revisions: &[
            rev(0, baseline::sysctls_1_0),
            rev(27, baseline::sysctls_1_27),
            rev(29, baseline::sysctls_1_29),
            rev(32, baseline::sysctls_1_32),
        ],
    },
    Check {
        id: "windowsHostProcess",
        level: Level::Baseline,
        revisions: &[rev(0, baseline::windows_host_process)],
    },
    Check {
        id: "allowPrivilegeEscalation",
        level: Level::Restricted,
        revisions: &[
            rev(8, restricted::allow_privilege_escalation),
            rev(25, restricted::allow_privilege_escalation_1_25),
        ],
    },
    Check {
        id: "capabilities_restricted",
        level: Level::Restricted,
        revisions: &[
            rev_over(22, restricted::capabilities, &["capabilities_baseline"]),
            rev_over(
                25,
                restricted::capabilities_1_25,
                &["capabilities_baseline"],
            ),
        ],
    },
    Check {
        id: "restrictedVolumes",
        level: Level::Restricted,
        revisions: &[rev_over(0, restricted::volumes, &["hostPathVolumes"])],
    },
    Check {
        id: "runAsNonRoot",
        level: Level::Restricted,
        revisions: &[rev(0, restricted::run_as_non_root)],
    },
    Check {
        id: "runAsUser",
        level: Level::Restricted,
        revisions: &[rev(23, restricted::run_as_user)],
    },
    Check {
        id: "seccompProfile_restricted",
        level: Level::Restricted,
        revisions: &[
            rev_over(
                19,
                restricted::seccomp_profile,
                &["seccompProfile_baseline"],
            ),
            rev_over(
                25,
                restricted::seccomp_profile_1_25,
                &["seccompProfile_baseline"],
            ),
        ],
    },
];

/// The newest version any check has a revision for: `latest`, and every version
/// after it, evaluate as this one.
pub const NEWEST_MINOR: u32 = 32;

/// The violations of `lv` by a pod (`EvaluatePod` and `AggregateCheckResults`), in
/// Kubernetes' order; empty when it is allowed (always, at `privileged`).
pub fn evaluate(lv: LevelVersion, meta: &ObjectMeta, spec: &PodSpec) -> Violations {
    let v = lv.version.minor_or(NEWEST_MINOR);
    let found = match lv.level {
        Level::Privileged => Vec::new(),
        Level::Baseline => CHECKS
            .iter()
            .filter(|c| c.level == Level::Baseline)
            .filter_map(|c| c.at(v))
            .filter_map(|r| (r.check)(meta, spec))
            .collect(),
        Level::Restricted => {
            let overridden: Vec<&str> = CHECKS
                .iter()
                .filter(|c| c.level == Level::Restricted)
                .filter_map(|c| c.at(v))
                .flat_map(|r| r.overrides.iter().copied())
                .collect();
            CHECKS
                .iter()
                .filter(|c| !overridden.contains(&c.id))
                .filter_map(|c| c.at(v))
                .filter_map(|r| (r.check)(meta, spec))
                .collect()
        }
    };
    Violations(found)
}

/// The violations of one evaluation (`AggregateCheckResult`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Violations(pub Vec<Violation>);

impl Violations {
    /// No check refused the pod.
    pub fn allowed(&self) -> bool {
        self.0.is_empty()
    }

    /// The reasons, comma-separated: `host namespaces, privileged` (what a namespace's
    /// existing pods are summarised by).
    pub fn reasons(&self) -> String {
        let reasons: Vec<&str> = self.0.iter().map(|v| v.reason.as_str()).collect();
        reasons.join(", ")
    }

    /// The reasons with their details in parentheses: `host namespaces
    /// (hostNetwork=true), privileged (container "c" must not set ...)`.
    pub fn details(&self) -> String {
        let parts: Vec<String> = self
            .0
            .iter()
            .map(|v| {
                if v.detail.is_empty() {
                    v.reason.clone()
                } else {
                    format!("{} ({})", v.reason, v.detail)
                }
            })
            .collect();
        parts.join(", ")
    }
}

/// The pod's containers as the checks visit them: init containers, containers, then
/// ephemeral containers (read as containers: they share every field a check reads).
fn containers(spec: &PodSpec) -> Vec<Cow<'_, Container>> {
    let mut all: Vec<Cow<'_, Container>> = spec
        .init_containers
        .iter()
        .flatten()
        .chain(&spec.containers)
        .map(Cow::Borrowed)
        .collect();
    for e in spec.ephemeral_containers.iter().flatten() {
        let as_container = serde_json::to_value(e)
            .ok()
            .and_then(|v| serde_json::from_value::<Container>(v).ok());
        if let Some(c) = as_container {
            all.push(Cow::Owned(c));
        }
    }
    all
}

/// `joinQuote`: `"a", "b"`.
fn join_quote<S: AsRef<str>>(items: &[S]) -> String {
    if items.is_empty() {
        return String::new();
    }
    let inner: Vec<&str> = items.iter().map(AsRef::as_ref).collect();
    format!("\"{}\"", inner.join("\", \""))
}

/// `pluralize`.
fn plural<'a>(one: &'a str, many: &'a str, n: usize) -> &'a str {
    if n == 1 { one } else { many }
}

/// `container "a"` / `containers "a", "b"`.
fn containers_named(names: &[String]) -> String {
    format!(
        "{} {}",
        plural("container", "containers", names.len()),
        join_quote(names)
    )
}

/// Go's `%q` of a string: double-quoted with Go's escapes.
fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            '\u{07}' => out.push_str("\\a"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\u{0b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A sorted set of strings, as `sets.String.List()` gives them.
fn sorted(mut v: Vec<String>) -> Vec<String> {
    v.sort();
    v.dedup();
    v
}
