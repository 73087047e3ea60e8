//! Why a reconcile could not run.

use crate::intstr::IntOrPercentError;
use crate::selector::SelectorError;
use crate::template::TemplateError;

/// The owner's spec cannot be acted on. API validation refuses all of these
/// at create, so they mean a stored object validation never saw; the
/// runner reports the error (a Warning event and a log line) and waits for
/// the next change of the object rather than retrying fast: retrying the
/// same spec gives the same error.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// The owner's selector cannot be evaluated.
    #[error("invalid selector: {0}")]
    Selector(#[from] SelectorError),
    /// `maxSurge` or `maxUnavailable` is not a usable int or percentage.
    #[error("invalid {field}: {source}")]
    IntOrPercent {
        /// `spec.strategy.rollingUpdate.maxSurge` or `…maxUnavailable`.
        field: &'static str,
        /// What is wrong with it.
        source: IntOrPercentError,
    },
    /// A strategy type other than RollingUpdate or Recreate.
    #[error("unexpected deployment strategy type: {0}")]
    UnknownStrategy(String),
    /// The pod template cannot make a pod (no labels).
    #[error(transparent)]
    Template(#[from] TemplateError),
    /// A spec that cannot be acted on, e.g. an Indexed Job without
    /// `spec.completions` (the field path and what is wrong).
    #[error("invalid spec: {0}")]
    InvalidSpec(&'static str),
}
