//! KCM's limits on how a recommendation becomes a scale (`horizontal.go`): the
//! stabilization window over the recommendation history, then the scale rate, either
//! the legacy rules of an autoscaler without `behavior` (up to twice the replicas or
//! 4, no faster down than the 5 min window allows) or its `behavior`'s policies over
//! the scale events of their periods.
//!
//! The history is [`Memory`]: the runner keeps one per autoscaler for its term, as
//! KCM keeps it in memory; a new leader starts from the current replicas.

use k8s_openapi::api::autoscaling::v2::HPAScalingRules;
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How far back scale-down recommendations are remembered when the autoscaler sets no
/// window of its own (`--horizontal-pod-autoscaler-downscale-stabilization`, 5 min).
pub const DOWNSCALE_STABILIZATION: SignedDuration = SignedDuration::from_secs(300);

/// One recommendation, when it was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Recommendation {
    replicas: i32,
    at: Timestamp,
}

/// One scale, by how much and when; `outdated` once a scale the other way followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ScaleEvent {
    change: i32,
    at: Timestamp,
    outdated: bool,
}

/// One autoscaler's recent recommendations and scales.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Memory {
    recommendations: Vec<Recommendation>,
    ups: Vec<ScaleEvent>,
    downs: Vec<ScaleEvent>,
}

/// A limit's outcome: the replicas, and the reason and message of the condition it
/// sets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limited {
    /// The replicas after the limit.
    pub replicas: i32,
    /// The condition's reason (`ScaleUpLimit`, `DesiredWithinRange`, …).
    pub reason: &'static str,
    /// The condition's message, as KCM words it.
    pub message: &'static str,
}

fn before(now: Timestamp, d: SignedDuration) -> Timestamp {
    now.checked_sub(d).unwrap_or(Timestamp::MIN)
}

fn window(rules: &HPAScalingRules, default: SignedDuration) -> SignedDuration {
    rules
        .stabilization_window_seconds
        .map_or(default, |s| SignedDuration::from_secs(i64::from(s)))
}

impl Memory {
    /// The first sync's record: the current replicas (`recordInitialRecommendation`).
    pub fn start(&mut self, current: i32, now: Timestamp) {
        if self.recommendations.is_empty() {
            self.recommendations.push(Recommendation {
                replicas: current,
                at: now,
            });
        }
    }

    /// Records `r`, taking the place of one older than `oldest` if there is one.
    fn record(&mut self, r: Recommendation, oldest: Timestamp) {
        match self.recommendations.iter_mut().find(|x| x.at < oldest) {
            Some(slot) => *slot = r,
            None => self.recommendations.push(r),
        }
    }

    /// `stabilizeRecommendation`: without `behavior`, the highest recommendation of
    /// the downscale window.
    pub fn stabilize_legacy(&mut self, desired: i32, now: Timestamp) -> i32 {
        let cutoff = before(now, DOWNSCALE_STABILIZATION);
        let out = self
            .recommendations
            .iter()
            .filter(|r| r.at > cutoff)
            .map(|r| r.replicas)
            .fold(desired, i32::max);
        self.record(
            Recommendation {
                replicas: desired,
                at: now,
            },
            cutoff,
        );
        out
    }

    /// `stabilizeRecommendationWithBehaviors`: the current replicas brought within
    /// the lowest recommendation of the scale-up window and the highest of the
    /// scale-down window; the reason and message of the AbleToScale condition if that
    /// changed the recommendation.
    pub fn stabilize(
        &mut self,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        current: i32,
        desired: i32,
        now: Timestamp,
    ) -> Limited {
        let up_cutoff = before(now, window(up, SignedDuration::ZERO));
        let down_cutoff = before(now, window(down, DOWNSCALE_STABILIZATION));
        let (mut up_rec, mut down_rec) = (desired, desired);
        for r in &self.recommendations {
            if r.at > up_cutoff {
                up_rec = up_rec.min(r.replicas);
            }
            if r.at > down_cutoff {
                down_rec = down_rec.max(r.replicas);
            }
        }
        let replicas = current.max(up_rec).min(down_rec);
        self.record(
            Recommendation {
                replicas: desired,
                at: now,
            },
            up_cutoff.min(down_cutoff),
        );
        if desired >= current {
            Limited {
                replicas,
                reason: "ScaleUpStabilized",
                message: "recent recommendations were lower than current one, applying the lowest recent recommendation",
            }
        } else {
            Limited {
                replicas,
                reason: "ScaleDownStabilized",
                message: "recent recommendations were higher than current one, applying the highest recent recommendation",
            }
        }
    }

    /// Records a scale from `from` to `to` (`storeScaleEvent`): only with `behavior`,
    /// replacing an event older than the longest policy period of its direction, and
    /// outdating the other direction's events.
    pub fn scaled(
        &mut self,
        rules: Option<(&HPAScalingRules, &HPAScalingRules)>,
        from: i32,
        to: i32,
        now: Timestamp,
    ) {
        let Some((up, down)) = rules else {
            return;
        };
        let longest = |r: &HPAScalingRules| {
            let s = r
                .policies
                .iter()
                .flatten()
                .map(|p| p.period_seconds)
                .max()
                .unwrap_or(0);
            before(now, SignedDuration::from_secs(i64::from(s)))
        };
        let (events, others, cutoff) = if to > from {
            (&mut self.ups, &mut self.downs, longest(up))
        } else {
            (&mut self.downs, &mut self.ups, longest(down))
        };
        let e = ScaleEvent {
            change: (to - from).abs(),
            at: now,
            outdated: false,
        };
        match events.iter_mut().find(|x| x.outdated || x.at < cutoff) {
            Some(slot) => *slot = e,
            None => events.push(e),
        }
        others.iter_mut().for_each(|x| x.outdated = true);
    }

    fn changed_within(events: &[ScaleEvent], period_seconds: i32, now: Timestamp) -> i32 {
        let cutoff = before(now, SignedDuration::from_secs(i64::from(period_seconds)));
        events
            .iter()
            .filter(|e| !e.outdated && e.at > cutoff)
            .map(|e| e.change)
            .sum()
    }

    /// `calculateScaleUpLimitWithScalingRules`.
    fn up_limit(&self, current: i32, rules: &HPAScalingRules, now: Timestamp) -> i32 {
        let policies = rules.policies.as_deref().unwrap_or_default();
        let proposals = policies.iter().map(|p| {
            let start = current - Self::changed_within(&self.ups, p.period_seconds, now);
            match p.type_.as_str() {
                "Pods" => start.saturating_add(p.value),
                _ => ceil(f64::from(start) * (1.0 + f64::from(p.value) / 100.0)),
            }
        });
        match rules.select_policy.as_deref() {
            Some("Disabled") => current,
            Some("Min") => proposals.min().unwrap_or(current),
            _ => proposals.max().unwrap_or(current),
        }
    }

    /// `calculateScaleDownLimitWithBehaviors`.
    fn down_limit(&self, current: i32, rules: &HPAScalingRules, now: Timestamp) -> i32 {
        let policies = rules.policies.as_deref().unwrap_or_default();
        let proposals = policies.iter().map(|p| {
            let start = current + Self::changed_within(&self.downs, p.period_seconds, now);
            match p.type_.as_str() {
                "Pods" => start - p.value,
                _ => floor(f64::from(start) * (1.0 - f64::from(p.value) / 100.0)),
            }
        });
        match rules.select_policy.as_deref() {
            Some("Disabled") => current,
            // The smallest change down is the largest count.
            Some("Min") => proposals.max().unwrap_or(current),
            _ => proposals.min().unwrap_or(current),
        }
    }

    /// `convertDesiredReplicasWithBehaviorRate`: `desired` within the policies' rate
    /// and `min`..`max`.
    pub fn rate_limit(
        &self,
        up: &HPAScalingRules,
        down: &HPAScalingRules,
        (min, max): (i32, i32),
        current: i32,
        desired: i32,
        now: Timestamp,
    ) -> Limited {
        if desired > current {
            let limit = self.up_limit(current, up, now).max(current);
            let (allowed, reason, message) = if max > limit {
                (
                    limit,
                    "ScaleUpLimit",
                    "the desired replica count is increasing faster than the maximum scale rate",
                )
            } else {
                (
                    max,
                    "TooManyReplicas",
                    "the desired replica count is more than the maximum replica count",
                )
            };
            if desired > allowed {
                return Limited {
                    replicas: allowed,
                    reason,
                    message,
                };
            }
        } else if desired < current {
            let limit = self.down_limit(current, down, now).min(current);
            let (allowed, reason, message) = if min < limit {
                (
                    limit,
                    "ScaleDownLimit",
                    "the desired replica count is decreasing faster than the maximum scale rate",
                )
            } else {
                (
                    min,
                    "TooFewReplicas",
                    "the desired replica count is less than the minimum replica count",
                )
            };
            if desired < allowed {
                return Limited {
                    replicas: allowed,
                    reason,
                    message,
                };
            }
        }
        within_range(desired)
    }
}

fn within_range(replicas: i32) -> Limited {
    Limited {
        replicas,
        reason: "DesiredWithinRange",
        message: "the desired count is within the acceptable range",
    }
}

/// `convertDesiredReplicasWithRules`, without `behavior`: up to twice the current
/// replicas or 4, whichever is more, and within `min`..`max`.
pub fn legacy_limit((min, max): (i32, i32), current: i32, desired: i32) -> Limited {
    let up_limit = current.saturating_mul(2).max(4);
    let (allowed, reason, message) = if max > up_limit {
        (
            up_limit,
            "ScaleUpLimit",
            "the desired replica count is increasing faster than the maximum scale rate",
        )
    } else {
        (
            max,
            "TooManyReplicas",
            "the desired replica count is more than the maximum replica count",
        )
    };
    if desired < min {
        return Limited {
            replicas: min,
            reason: "TooFewReplicas",
            message: "the desired replica count is less than the minimum replica count",
        };
    }
    if desired > allowed {
        return Limited {
            replicas: allowed,
            reason,
            message,
        };
    }
    within_range(desired)
}

#[allow(clippy::cast_possible_truncation)]
fn ceil(x: f64) -> i32 {
    x.ceil().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}

#[allow(clippy::cast_possible_truncation)]
fn floor(x: f64) -> i32 {
    x.trunc().clamp(f64::from(i32::MIN), f64::from(i32::MAX)) as i32
}
