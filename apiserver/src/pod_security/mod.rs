//! Pod Security Admission, as kube-apiserver's built-in `PodSecurity` plugin serves it
//! (k8s.io/pod-security-admission at Kubernetes 1.33, the version the shim implements).
//!
//! # Contract
//!
//! - A namespace chooses a level (`privileged`, `baseline`, `restricted`) and a version
//!   (`latest`, `v1.<minor>`) per mode with its `pod-security.kubernetes.io/{enforce,
//!   audit,warn}[-version]` labels; what it does not label comes from the
//!   configuration's defaults ([`config::load`], `--admission-control-config-file`),
//!   themselves `privileged:latest` unless configured, so an unlabelled namespace
//!   admits everything, as in Kubernetes.
//! - A pod create, or an update that changes its containers' number or images, is
//!   evaluated ([`PodSecurity::admit_pod`]): a violation of `enforce` is refused (403
//!   `pods "x" is forbidden: violates PodSecurity "baseline:latest": ...`), one of
//!   `warn` is a warning (`would violate PodSecurity ...`), one of `audit` an audit
//!   annotation (`pod-security.kubernetes.io/audit-violations`).
//! - A namespace whose labels do not parse is refused at create, and at an update that
//!   changes what fails; an update to a stricter enforce level is answered with
//!   warnings naming the existing pods that violate it.
//! - Exempt users, namespaces and runtime classes are never evaluated.
//!
//! Pure: it reads typed objects and returns decisions. It knows nothing of Mesos, of
//! the store or of HTTP.

mod admission;
pub mod checks;
pub mod config;
pub mod level;

pub use admission::{
    Exemptions, PodDecision, PodSecurity, label_errors_message, significant_update,
};
pub use level::{LabelError, Level, LevelVersion, Policy, Version};
