//! kube-apiserver's `--admission-control-config-file`: an `AdmissionConfiguration`
//! whose `PodSecurity` plugin entry holds a `PodSecurityConfiguration` inline
//! (`configuration:`) or in a file of its own (`path:`, relative to the config file).
//! Unset defaults are `privileged` and `latest` (`SetDefaults_PodSecurityDefaults`).

use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::admission::{Exemptions, PodSecurity};
use super::level::{Level, LevelVersion, Policy, Version};
use crate::validation::{is_dns1123_label, is_dns1123_subdomain};

/// Why the admission configuration cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file cannot be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file is not the expected YAML or JSON.
    #[error("cannot decode {path}: {message}")]
    Decode {
        /// The file.
        path: PathBuf,
        /// The decoder's message.
        message: String,
    },
    /// The configuration decodes but is invalid (Kubernetes' field errors).
    #[error("PodSecurity invalid: {0}")]
    Invalid(String),
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct AdmissionConfiguration {
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    plugins: Vec<Plugin>,
}

#[derive(Deserialize)]
struct Plugin {
    name: String,
    path: Option<PathBuf>,
    configuration: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct PodSecurityConfiguration {
    #[serde(rename = "apiVersion")]
    api_version: Option<String>,
    kind: Option<String>,
    #[serde(default)]
    defaults: Defaults,
    #[serde(default)]
    exemptions: ExemptionsFile,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct Defaults {
    enforce: Option<String>,
    #[serde(rename = "enforce-version")]
    enforce_version: Option<String>,
    audit: Option<String>,
    #[serde(rename = "audit-version")]
    audit_version: Option<String>,
    warn: Option<String>,
    #[serde(rename = "warn-version")]
    warn_version: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
struct ExemptionsFile {
    #[serde(default)]
    usernames: Vec<String>,
    #[serde(default)]
    namespaces: Vec<String>,
    #[serde(default)]
    runtime_classes: Vec<String>,
}

const ADMISSION_VERSIONS: [&str; 2] = ["apiserver.config.k8s.io/v1", "apiserver.k8s.io/v1alpha1"];
const POD_SECURITY_VERSIONS: [&str; 3] = [
    "pod-security.admission.config.k8s.io/v1",
    "pod-security.admission.config.k8s.io/v1beta1",
    "pod-security.admission.config.k8s.io/v1alpha1",
];

fn read(path: &Path) -> Result<String, ConfigError> {
    std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })
}

fn decode<T: serde::de::DeserializeOwned>(
    path: &Path,
    value: serde_json::Value,
) -> Result<T, ConfigError> {
    serde_json::from_value(value).map_err(|e| ConfigError::Decode {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

fn parse_yaml(path: &Path, text: &str) -> Result<serde_json::Value, ConfigError> {
    serde_yaml_ng::from_str(text).map_err(|e| ConfigError::Decode {
        path: path.to_owned(),
        message: e.to_string(),
    })
}

/// The PodSecurity configuration of the admission configuration file at `path`; the
/// defaults when it has no `PodSecurity` entry.
///
/// # Errors
/// [`ConfigError`] for an unreadable, undecodable or invalid file.
pub fn load(path: &Path) -> Result<PodSecurity, ConfigError> {
    let value = parse_yaml(path, &read(path)?)?;
    let file: AdmissionConfiguration = decode(path, value)?;
    let kind_ok = file.kind.as_deref() == Some("AdmissionConfiguration");
    let version_ok = file
        .api_version
        .as_deref()
        .is_some_and(|v| ADMISSION_VERSIONS.contains(&v));
    if !kind_ok || !version_ok {
        return Err(ConfigError::Decode {
            path: path.to_owned(),
            message: format!(
                "expected kind AdmissionConfiguration of {}",
                ADMISSION_VERSIONS.join(" or ")
            ),
        });
    }
    let Some(plugin) = file.plugins.into_iter().find(|p| p.name == "PodSecurity") else {
        return Ok(PodSecurity::default());
    };
    let (source, value) = match (plugin.configuration, plugin.path) {
        (Some(v), _) => (path.to_owned(), v),
        (None, Some(p)) => {
            let p = if p.is_relative() {
                path.parent().unwrap_or(Path::new(".")).join(p)
            } else {
                p
            };
            let text = read(&p)?;
            let v = parse_yaml(&p, &text)?;
            (p, v)
        }
        (None, None) => return Ok(PodSecurity::default()),
    };
    let config: PodSecurityConfiguration = decode(&source, value)?;
    let kind_ok = config.kind.as_deref() == Some("PodSecurityConfiguration");
    let version_ok = config
        .api_version
        .as_deref()
        .is_some_and(|v| POD_SECURITY_VERSIONS.contains(&v));
    if !kind_ok || !version_ok {
        return Err(ConfigError::Decode {
            path: source,
            message: format!(
                "expected kind PodSecurityConfiguration of {}",
                POD_SECURITY_VERSIONS.join(", ")
            ),
        });
    }
    validate(config)
}

/// `ValidatePodSecurityConfiguration`, building the configuration as it goes.
fn validate(c: PodSecurityConfiguration) -> Result<PodSecurity, ConfigError> {
    let mut errs = Vec::new();
    let mut level = |field: &str, v: Option<String>| {
        let v = v
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "privileged".into());
        Level::parse(&v).unwrap_or_else(|e| {
            errs.push(format!("defaults.{field}: Invalid value: \"{v}\": {e}"));
            Level::Privileged
        })
    };
    let (enforce, warn, audit) = (
        level("enforce", c.defaults.enforce),
        level("warn", c.defaults.warn),
        level("audit", c.defaults.audit),
    );
    let mut version = |field: &str, v: Option<String>| {
        let v = v
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| "latest".into());
        Version::parse(&v).unwrap_or_else(|e| {
            errs.push(format!("defaults.{field}: Invalid value: \"{v}\": {e}"));
            Version::Latest
        })
    };
    let (enforce_v, warn_v, audit_v) = (
        version("enforce-version", c.defaults.enforce_version),
        version("warn-version", c.defaults.warn_version),
        version("audit-version", c.defaults.audit_version),
    );
    let e = c.exemptions;
    unique(&mut errs, "namespaces", &e.namespaces, |s| {
        is_dns1123_label(s).then_some(()).ok_or(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
        )
    });
    unique(&mut errs, "runtimeClasses", &e.runtime_classes, |s| {
        is_dns1123_subdomain(s).then_some(()).ok_or(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
        )
    });
    unique(&mut errs, "usernames", &e.usernames, |s| {
        (!s.is_empty())
            .then_some(())
            .ok_or("username must not be empty")
    });
    if !errs.is_empty() {
        let text = match errs.as_slice() {
            [one] => one.clone(),
            many => format!("[{}]", many.join(", ")),
        };
        return Err(ConfigError::Invalid(text));
    }
    Ok(PodSecurity {
        defaults: Policy {
            enforce: LevelVersion {
                level: enforce,
                version: enforce_v,
            },
            audit: LevelVersion {
                level: audit,
                version: audit_v,
            },
            warn: LevelVersion {
                level: warn,
                version: warn_v,
            },
        },
        exemptions: Exemptions {
            usernames: e.usernames,
            namespaces: e.namespaces,
            runtime_classes: e.runtime_classes,
        },
    })
}

/// Each entry of `exemptions.<field>` valid and not given twice.
fn unique(
    errs: &mut Vec<String>,
    field: &str,
    items: &[String],
    valid: impl Fn(&str) -> Result<(), &'static str>,
) {
    let mut seen = std::collections::HashSet::new();
    for (i, item) in items.iter().enumerate() {
        if let Err(why) = valid(item) {
            errs.push(format!(
                "exemptions.{field}[{i}]: Invalid value: \"{item}\": {why}"
            ));
        } else if !seen.insert(item) {
            errs.push(format!(
                "exemptions.{field}[{i}]: Duplicate value: \"{item}\""
            ));
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
        let p = dir.join(name);
        std::fs::write(&p, text).unwrap();
        p
    }

    #[test]
    fn inline_configuration_with_defaults_filled_in() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "admission.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults:\n      enforce: baseline\n      warn-version: v1.30\n    exemptions:\n      namespaces: [kube-system]\n      usernames: [admin]\n",
        );
        let c = load(&p).unwrap();
        assert_eq!(c.defaults.enforce.to_string(), "baseline:latest");
        assert_eq!(c.defaults.warn.to_string(), "privileged:v1.30");
        assert_eq!(c.defaults.audit.to_string(), "privileged:latest");
        assert_eq!(c.exemptions.namespaces, ["kube-system"]);
        assert_eq!(c.exemptions.usernames, ["admin"]);
    }

    #[test]
    fn configuration_in_a_file_of_its_own() {
        let dir = tempfile::tempdir().unwrap();
        write(
            dir.path(),
            "psa.yaml",
            "apiVersion: pod-security.admission.config.k8s.io/v1beta1\nkind: PodSecurityConfiguration\ndefaults:\n  audit: restricted\n",
        );
        let p = write(
            dir.path(),
            "admission.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  path: psa.yaml\n",
        );
        assert_eq!(
            load(&p).unwrap().defaults.audit.to_string(),
            "restricted:latest"
        );
    }

    #[test]
    fn invalid_values_are_refused_with_kubernetes_field_errors() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "admission.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defaults:\n      enforce: strict\n    exemptions:\n      namespaces: [a, a]\n",
        );
        let e = load(&p).unwrap_err().to_string();
        assert_eq!(
            e,
            "PodSecurity invalid: [defaults.enforce: Invalid value: \"strict\": must be one of privileged, baseline, restricted, exemptions.namespaces[1]: Duplicate value: \"a\"]"
        );
        let p = write(
            dir.path(),
            "typo.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n- name: PodSecurity\n  configuration:\n    apiVersion: pod-security.admission.config.k8s.io/v1\n    kind: PodSecurityConfiguration\n    defualts: {}\n",
        );
        assert!(load(&p).unwrap_err().to_string().contains("defualts"));
    }

    #[test]
    fn no_pod_security_entry_is_the_default() {
        let dir = tempfile::tempdir().unwrap();
        let p = write(
            dir.path(),
            "admission.yaml",
            "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins: []\n",
        );
        assert_eq!(load(&p).unwrap(), PodSecurity::default());
    }
}
