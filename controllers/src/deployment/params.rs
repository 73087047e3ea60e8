//! A Deployment's spec with the API defaults applied and the rolling-update
//! fenceposts resolved (`MaxSurge`, `MaxUnavailable`, `ResolveFenceposts`).

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::error::ReconcileError;
use crate::intstr::scaled_value;

/// Default `maxSurge` and `maxUnavailable` of a RollingUpdate.
const DEFAULT_FENCEPOST: &str = "25%";
/// Default `revisionHistoryLimit`: old ReplicaSets kept for `rollout undo`.
const DEFAULT_REVISION_HISTORY_LIMIT: i32 = 10;
/// Default `progressDeadlineSeconds`: ten minutes without progress and the
/// rollout is reported failed (`kubectl rollout status` exits non-zero).
const DEFAULT_PROGRESS_DEADLINE_SECONDS: i32 = 600;

/// How old pods are replaced.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Strategy {
    /// Surge new pods and retire old ones within the fenceposts.
    RollingUpdate,
    /// All old pods gone before any new one starts.
    Recreate,
}

/// The resolved spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Params {
    pub(crate) replicas: i32,
    pub(crate) strategy: Strategy,
    /// Pods allowed above `replicas` (0 for Recreate).
    pub(crate) max_surge: i32,
    /// Pods allowed below `replicas` (0 for Recreate or 0 replicas; never
    /// more than `replicas`).
    pub(crate) max_unavailable: i32,
    pub(crate) min_ready_seconds: i32,
    pub(crate) paused: bool,
    /// `None`: no deadline (`progressDeadlineSeconds` = MaxInt32).
    pub(crate) progress_deadline_seconds: Option<i32>,
    /// `None`: keep every old ReplicaSet (`revisionHistoryLimit` = MaxInt32).
    pub(crate) revision_history_limit: Option<i32>,
}

impl Params {
    /// Resolve `d`'s spec.
    ///
    /// # Errors
    /// An unknown strategy type, or a fencepost that is not a usable int or
    /// percentage (only read for RollingUpdate, as KCM does).
    pub(crate) fn of(d: &Deployment) -> Result<Self, ReconcileError> {
        let default_spec = DeploymentSpec::default();
        let spec = d.spec.as_ref().unwrap_or(&default_spec);
        let replicas = spec.replicas.unwrap_or(1).max(0);
        let strategy_type = spec.strategy.as_ref().and_then(|s| s.type_.as_deref());
        let strategy = match strategy_type {
            None | Some("RollingUpdate") => Strategy::RollingUpdate,
            Some("Recreate") => Strategy::Recreate,
            Some(other) => return Err(ReconcileError::UnknownStrategy(other.to_owned())),
        };
        let (max_surge, max_unavailable) = match strategy {
            Strategy::Recreate => (0, 0),
            Strategy::RollingUpdate => {
                let ru = spec
                    .strategy
                    .as_ref()
                    .and_then(|s| s.rolling_update.as_ref());
                let (surge, unavailable) = resolve_fenceposts(
                    ru.and_then(|r| r.max_surge.as_ref()),
                    ru.and_then(|r| r.max_unavailable.as_ref()),
                    replicas,
                )?;
                let unavailable = if replicas == 0 {
                    0
                } else {
                    unavailable.min(replicas)
                };
                (surge, unavailable)
            }
        };
        Ok(Params {
            replicas,
            strategy,
            max_surge,
            max_unavailable,
            min_ready_seconds: spec.min_ready_seconds.unwrap_or(0).max(0),
            paused: spec.paused.unwrap_or(false),
            progress_deadline_seconds: match spec.progress_deadline_seconds {
                None => Some(DEFAULT_PROGRESS_DEADLINE_SECONDS),
                Some(i32::MAX) => None,
                Some(s) => Some(s),
            },
            revision_history_limit: match spec.revision_history_limit {
                None => Some(DEFAULT_REVISION_HISTORY_LIMIT),
                Some(i32::MAX) => None,
                Some(n) => Some(n.max(0)),
            },
        })
    }

    /// `replicas + maxSurge`: the most pods a rollout may run at once (the
    /// `max-replicas` annotation).
    pub(crate) fn max_total(&self) -> i32 {
        self.replicas.saturating_add(self.max_surge)
    }

    /// `replicas - maxUnavailable`: the fewest available pods a rollout
    /// keeps.
    pub(crate) fn min_available(&self) -> i32 {
        self.replicas - self.max_unavailable
    }
}

/// Surge (rounded up) and unavailability (rounded down) against `desired`;
/// when both come to 0, unavailability is 1, or a rollout could never
/// start. Unset fenceposts are the API default, 25%.
///
/// # Errors
/// A value that is not an int or a percentage, or is negative.
pub fn resolve_fenceposts(
    max_surge: Option<&IntOrString>,
    max_unavailable: Option<&IntOrString>,
    desired: i32,
) -> Result<(i32, i32), ReconcileError> {
    let default = IntOrString::String(DEFAULT_FENCEPOST.to_owned());
    let surge = scaled_value(max_surge.unwrap_or(&default), desired, true).map_err(|source| {
        ReconcileError::IntOrPercent {
            field: "spec.strategy.rollingUpdate.maxSurge",
            source,
        }
    })?;
    let unavailable =
        scaled_value(max_unavailable.unwrap_or(&default), desired, false).map_err(|source| {
            ReconcileError::IntOrPercent {
                field: "spec.strategy.rollingUpdate.maxUnavailable",
                source,
            }
        })?;
    if surge == 0 && unavailable == 0 {
        return Ok((0, 1));
    }
    Ok((surge, unavailable))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::apps::v1::{DeploymentStrategy, RollingUpdateDeployment};

    fn d(replicas: i32, ru: Option<(IntOrString, IntOrString)>, type_: Option<&str>) -> Deployment {
        Deployment {
            spec: Some(DeploymentSpec {
                replicas: Some(replicas),
                strategy: Some(DeploymentStrategy {
                    type_: type_.map(Into::into),
                    rolling_update: ru.map(|(s, u)| RollingUpdateDeployment {
                        max_surge: Some(s),
                        max_unavailable: Some(u),
                    }),
                }),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    fn pct(s: &str) -> IntOrString {
        IntOrString::String(s.into())
    }

    #[test]
    fn defaults_are_25_percent_10_revisions_600_seconds() {
        let p = Params::of(&d(10, None, None)).expect("params");
        assert_eq!(p.strategy, Strategy::RollingUpdate);
        assert_eq!((p.max_surge, p.max_unavailable), (3, 2));
        assert_eq!(p.revision_history_limit, Some(10));
        assert_eq!(p.progress_deadline_seconds, Some(600));
        let one = Params::of(&d(1, None, None)).expect("params");
        assert_eq!((one.max_surge, one.max_unavailable), (1, 0));
        let unset = Params::of(&Deployment::default()).expect("params");
        assert_eq!(unset.replicas, 1);
    }

    #[test]
    fn both_fenceposts_zero_makes_unavailable_one() {
        assert_eq!(
            resolve_fenceposts(Some(&pct("0%")), Some(&pct("10%")), 5),
            Ok((0, 1))
        );
        assert_eq!(
            resolve_fenceposts(Some(&IntOrString::Int(0)), Some(&IntOrString::Int(0)), 5),
            Ok((0, 1))
        );
    }

    #[test]
    fn unavailable_is_capped_at_replicas_and_zero_for_zero_replicas() {
        let p = Params::of(&d(
            2,
            Some((IntOrString::Int(1), IntOrString::Int(5))),
            None,
        ))
        .expect("params");
        assert_eq!(p.max_unavailable, 2);
        let z = Params::of(&d(0, None, None)).expect("params");
        assert_eq!((z.max_surge, z.max_unavailable), (0, 0));
    }

    #[test]
    fn recreate_has_no_fenceposts_and_ignores_rolling_update() {
        let p =
            Params::of(&d(10, Some((pct("abc%"), pct("x"))), Some("Recreate"))).expect("params");
        assert_eq!(p.strategy, Strategy::Recreate);
        assert_eq!((p.max_surge, p.max_unavailable), (0, 0));
    }

    #[test]
    fn malformed_fenceposts_and_strategies_are_errors() {
        let e = Params::of(&d(10, Some((pct("abc%"), pct("25%"))), None)).expect_err("bad");
        assert_eq!(
            e.to_string(),
            "invalid spec.strategy.rollingUpdate.maxSurge: invalid value for IntOrString: invalid value \"abc%\""
        );
        let e = Params::of(&d(10, None, Some("BlueGreen"))).expect_err("bad");
        assert_eq!(
            e.to_string(),
            "unexpected deployment strategy type: BlueGreen"
        );
    }

    #[test]
    fn max_int32_means_no_deadline_and_no_history_limit() {
        let mut dep = d(1, None, None);
        if let Some(s) = dep.spec.as_mut() {
            s.progress_deadline_seconds = Some(i32::MAX);
            s.revision_history_limit = Some(i32::MAX);
        }
        let p = Params::of(&dep).expect("params");
        assert_eq!(p.progress_deadline_seconds, None);
        assert_eq!(p.revision_history_limit, None);
    }
}
