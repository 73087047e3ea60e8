//! Levels, versions and a namespace's policy, read from its
//! `pod-security.kubernetes.io/*` labels as k8s.io/pod-security-admission's `api`
//! package reads them (`ParseLevel`, `ParseVersion`, `PolicyToEvaluate`).

use std::collections::BTreeMap;
use std::fmt;

/// The label prefix, and the prefix of every audit annotation the admission adds.
pub const PREFIX: &str = "pod-security.kubernetes.io/";
/// `pod-security.kubernetes.io/enforce`: pods that violate it are refused.
pub const ENFORCE_LEVEL_LABEL: &str = "pod-security.kubernetes.io/enforce";
/// `pod-security.kubernetes.io/enforce-version`.
pub const ENFORCE_VERSION_LABEL: &str = "pod-security.kubernetes.io/enforce-version";
/// `pod-security.kubernetes.io/audit`: violations are annotated on the audit event.
pub const AUDIT_LEVEL_LABEL: &str = "pod-security.kubernetes.io/audit";
/// `pod-security.kubernetes.io/audit-version`.
pub const AUDIT_VERSION_LABEL: &str = "pod-security.kubernetes.io/audit-version";
/// `pod-security.kubernetes.io/warn`: violations are answered as warnings.
pub const WARN_LEVEL_LABEL: &str = "pod-security.kubernetes.io/warn";
/// `pod-security.kubernetes.io/warn-version`.
pub const WARN_VERSION_LABEL: &str = "pod-security.kubernetes.io/warn-version";

/// A Pod Security Standard, from the least to the most strict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Level {
    /// Everything is allowed.
    Privileged,
    /// Known privilege escalations are refused.
    Baseline,
    /// Current pod hardening best practice.
    Restricted,
}

impl Level {
    /// The level's name, as labels spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Privileged => "privileged",
            Self::Baseline => "baseline",
            Self::Restricted => "restricted",
        }
    }

    /// `ParseLevel`: the error text is Kubernetes' field error detail.
    ///
    /// # Errors
    /// Anything but the three level names.
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        match s {
            "privileged" => Ok(Self::Privileged),
            "baseline" => Ok(Self::Baseline),
            "restricted" => Ok(Self::Restricted),
            _ => Err("must be one of privileged, baseline, restricted"),
        }
    }
}

impl fmt::Display for Level {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A policy version: `latest` or `v1.<minor>` (Kubernetes' only major is 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// `v1.<minor>`.
    Minor(u32),
    /// `latest`: the newest checks this server knows, whatever comes later.
    Latest,
}

impl Version {
    /// `ParseVersion`: `latest`, or `v1.` and a number without leading zeros.
    ///
    /// # Errors
    /// Anything else, with Kubernetes' field error detail.
    pub fn parse(s: &str) -> Result<Self, &'static str> {
        const BAD: &str = "must be \"latest\" or \"v1.x\"";
        if s == "latest" {
            return Ok(Self::Latest);
        }
        let digits = s.strip_prefix("v1.").ok_or(BAD)?;
        let canonical = !digits.is_empty()
            && digits.bytes().all(|b| b.is_ascii_digit())
            && (digits == "0" || !digits.starts_with('0'));
        if !canonical {
            return Err(BAD);
        }
        digits.parse().map(Self::Minor).map_err(|_| BAD)
    }

    /// The minor version the checks are picked for; `latest` is `newest`.
    pub(crate) fn minor_or(self, newest: u32) -> u32 {
        match self {
            Self::Minor(m) => m.min(newest),
            Self::Latest => newest,
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Minor(m) => write!(f, "v1.{m}"),
            Self::Latest => f.write_str("latest"),
        }
    }
}

/// A level at a version, written `baseline:latest` in every message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LevelVersion {
    /// The standard.
    pub level: Level,
    /// Which revision of its checks.
    pub version: Version,
}

impl LevelVersion {
    /// `privileged:latest`, what every mode is when nothing says otherwise.
    pub const PRIVILEGED: Self = Self {
        level: Level::Privileged,
        version: Version::Latest,
    };

    /// Both privileged, or the same level at the same version.
    fn equivalent(&self, other: &Self) -> bool {
        (self.level == Level::Privileged && other.level == Level::Privileged) || self == other
    }
}

impl fmt::Display for LevelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.level, self.version)
    }
}

/// What a namespace enforces, audits and warns about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Violations are refused.
    pub enforce: LevelVersion,
    /// Violations are annotated on the request's audit event.
    pub audit: LevelVersion,
    /// Violations are answered as warnings.
    pub warn: LevelVersion,
}

impl Default for Policy {
    /// Kubernetes' default with no configuration: privileged in every mode.
    fn default() -> Self {
        Self {
            enforce: LevelVersion::PRIVILEGED,
            audit: LevelVersion::PRIVILEGED,
            warn: LevelVersion::PRIVILEGED,
        }
    }
}

impl Policy {
    /// All three modes privileged: nothing to evaluate.
    pub fn fully_privileged(&self) -> bool {
        [self.enforce, self.audit, self.warn]
            .iter()
            .all(|lv| lv.level == Level::Privileged)
    }

    /// Every mode equivalent (`Policy.Equivalent`).
    pub fn equivalent(&self, other: &Self) -> bool {
        self.enforce.equivalent(&other.enforce)
            && self.audit.equivalent(&other.audit)
            && self.warn.equivalent(&other.warn)
    }
}

/// A label that does not parse: its key, its value and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabelError {
    /// The label key.
    pub label: &'static str,
    /// The value given.
    pub value: String,
    /// Kubernetes' detail (`must be one of privileged, baseline, restricted`).
    pub detail: &'static str,
}

impl LabelError {
    /// The field path of the error: `metadata.labels[<key>]`.
    pub fn field(&self) -> String {
        format!("metadata.labels[{}]", self.label)
    }
}

/// `PolicyToEvaluate`: a namespace's policy from its labels over `defaults`. A policy
/// is always returned; labels that do not parse are reported, and then an unparsable
/// enforce level is `restricted` (fail closed) while audit and warn are `privileged`
/// (fail open), and an unparsable version is `latest`.
pub fn policy_from_labels(
    labels: &BTreeMap<String, String>,
    defaults: &Policy,
) -> (Policy, Vec<LabelError>) {
    let mut p = *defaults;
    let mut errors = Vec::new();
    let mut error = |label: &'static str, value: &str, detail: &'static str| {
        errors.push(LabelError {
            label,
            value: value.to_string(),
            detail,
        });
    };
    let mut has_enforce_level = false;
    if let Some(v) = labels.get(ENFORCE_LEVEL_LABEL) {
        p.enforce.level = Level::parse(v).unwrap_or_else(|e| {
            error(ENFORCE_LEVEL_LABEL, v, e);
            Level::Restricted
        });
        // An invalid enforce level does not raise warn to it.
        has_enforce_level = Level::parse(v).is_ok();
    }
    if let Some(v) = labels.get(ENFORCE_VERSION_LABEL) {
        p.enforce.version = Version::parse(v).unwrap_or_else(|e| {
            error(ENFORCE_VERSION_LABEL, v, e);
            Version::Latest
        });
    }
    if let Some(v) = labels.get(AUDIT_LEVEL_LABEL) {
        p.audit.level = Level::parse(v).unwrap_or_else(|e| {
            error(AUDIT_LEVEL_LABEL, v, e);
            Level::Privileged
        });
    }
    if let Some(v) = labels.get(AUDIT_VERSION_LABEL) {
        p.audit.version = Version::parse(v).unwrap_or_else(|e| {
            error(AUDIT_VERSION_LABEL, v, e);
            Version::Latest
        });
    }
    let has_warn_level = labels.contains_key(WARN_LEVEL_LABEL);
    if let Some(v) = labels.get(WARN_LEVEL_LABEL) {
        p.warn.level = Level::parse(v).unwrap_or_else(|e| {
            error(WARN_LEVEL_LABEL, v, e);
            Level::Privileged
        });
    }
    let has_warn_version = labels.contains_key(WARN_VERSION_LABEL);
    if let Some(v) = labels.get(WARN_VERSION_LABEL) {
        p.warn.version = Version::parse(v).unwrap_or_else(|e| {
            error(WARN_VERSION_LABEL, v, e);
            Version::Latest
        });
    }
    // A namespace that enforces more than it warns about warns at its enforce level,
    // so a refusal is announced by the warnings of the level below it.
    if !has_warn_level && has_enforce_level && p.enforce.level > p.warn.level {
        p.warn.level = p.enforce.level;
        if !has_warn_version {
            p.warn.version = p.enforce.version;
        }
    }
    (p, errors)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_string(), (*v).to_string()))
            .collect()
    }

    #[test]
    fn versions_are_latest_or_v1_minor_without_leading_zeros() {
        assert_eq!(Version::parse("latest"), Ok(Version::Latest));
        assert_eq!(Version::parse("v1.0"), Ok(Version::Minor(0)));
        assert_eq!(Version::parse("v1.33"), Ok(Version::Minor(33)));
        assert_eq!(Version::parse("v1.99"), Ok(Version::Minor(99)));
        for bad in [
            "", "v1.", "v1.01", "1.25", "v2.0", "v1.x", "Latest", "v1.-1",
        ] {
            assert_eq!(
                Version::parse(bad),
                Err("must be \"latest\" or \"v1.x\""),
                "{bad}"
            );
        }
        assert_eq!(Version::Minor(25).to_string(), "v1.25");
        assert_eq!(Version::Minor(40).minor_or(32), 32);
        assert_eq!(Version::Latest.minor_or(32), 32);
    }

    #[test]
    fn levels_parse_by_name_only() {
        assert_eq!(Level::parse("baseline"), Ok(Level::Baseline));
        assert_eq!(
            Level::parse("Baseline"),
            Err("must be one of privileged, baseline, restricted")
        );
    }

    #[test]
    fn no_labels_is_the_default_policy() {
        let (p, errs) = policy_from_labels(&BTreeMap::new(), &Policy::default());
        assert!(errs.is_empty());
        assert!(p.fully_privileged());
        assert_eq!(p.enforce.to_string(), "privileged:latest");
    }

    #[test]
    fn warn_follows_a_stricter_enforce_unless_set() {
        let (p, _) = policy_from_labels(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "baseline"),
                (ENFORCE_VERSION_LABEL, "v1.25"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.warn.to_string(), "baseline:v1.25");
        assert_eq!(p.audit.to_string(), "privileged:latest");
        let (p, _) = policy_from_labels(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (WARN_LEVEL_LABEL, "privileged"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.warn.level, Level::Privileged);
        let (p, _) = policy_from_labels(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "restricted"),
                (WARN_VERSION_LABEL, "v1.30"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.warn.to_string(), "restricted:v1.30");
    }

    #[test]
    fn bad_labels_fail_closed_for_enforce_and_open_for_the_others() {
        let (p, errs) = policy_from_labels(
            &labels(&[
                (ENFORCE_LEVEL_LABEL, "strict"),
                (AUDIT_LEVEL_LABEL, "loud"),
                (WARN_LEVEL_LABEL, "nope"),
                (WARN_VERSION_LABEL, "1.2"),
            ]),
            &Policy::default(),
        );
        assert_eq!(p.enforce.level, Level::Restricted);
        assert_eq!(p.audit.level, Level::Privileged);
        assert_eq!(p.warn.level, Level::Privileged);
        let fields: Vec<String> = errs.iter().map(LabelError::field).collect();
        assert_eq!(
            fields,
            [
                "metadata.labels[pod-security.kubernetes.io/enforce]",
                "metadata.labels[pod-security.kubernetes.io/audit]",
                "metadata.labels[pod-security.kubernetes.io/warn]",
                "metadata.labels[pod-security.kubernetes.io/warn-version]",
            ]
        );
        assert_eq!(errs[0].value, "strict");
    }
}
