//! `imagePullPolicy` and its Kubernetes default.

use std::fmt;
use std::str::FromStr;

use crate::Reference;

/// When an image is pulled, as `imagePullPolicy` says.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PullPolicy {
    /// Resolve the reference at the registry on every start.
    Always,
    /// Pull only when the store has no image for the reference.
    IfNotPresent,
    /// Never pull; an absent image is `ErrImageNeverPull`.
    Never,
}

impl PullPolicy {
    /// Kubernetes' default: `Always` for the tag `latest` (which a
    /// reference with neither tag nor digest has), else `IfNotPresent`.
    pub fn default_for(reference: &Reference) -> Self {
        if reference.tag() == Some("latest") {
            Self::Always
        } else {
            Self::IfNotPresent
        }
    }
}

impl fmt::Display for PullPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Always => "Always",
            Self::IfNotPresent => "IfNotPresent",
            Self::Never => "Never",
        })
    }
}

/// A word other than Kubernetes' three.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unsupported value: \"{0}\": supported values: \"Always\", \"IfNotPresent\", \"Never\"")]
pub struct PullPolicyError(pub String);

impl FromStr for PullPolicy {
    type Err = PullPolicyError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "Always" => Ok(Self::Always),
            "IfNotPresent" => Ok(Self::IfNotPresent),
            "Never" => Ok(Self::Never),
            other => Err(PullPolicyError(other.to_string())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn default_of(image: &str) -> PullPolicy {
        PullPolicy::default_for(&Reference::parse(image).expect("parses"))
    }

    #[test]
    fn latest_or_no_tag_is_always_else_if_not_present() {
        let digest = format!("sha256:{}", "0".repeat(64));
        assert_eq!(default_of("busybox"), PullPolicy::Always);
        assert_eq!(default_of("busybox:latest"), PullPolicy::Always);
        assert_eq!(default_of("busybox:1.36"), PullPolicy::IfNotPresent);
        assert_eq!(
            default_of(&format!("busybox@{digest}")),
            PullPolicy::IfNotPresent
        );
        assert_eq!(
            default_of(&format!("busybox:latest@{digest}")),
            PullPolicy::Always
        );
    }

    #[test]
    fn kubernetes_words_parse() {
        assert_eq!("Never".parse(), Ok(PullPolicy::Never));
        assert_eq!("IfNotPresent".parse(), Ok(PullPolicy::IfNotPresent));
        assert!("always".parse::<PullPolicy>().is_err());
    }
}
