//! `spec.successPolicy` of an Indexed Job (KCM's `success_policy.go`): the
//! Job succeeds early once one rule's indexes, or enough of them, have
//! succeeded.

use k8s_openapi::api::batch::v1::SuccessPolicy;

use super::indexed::Intervals;

/// KCM's `matchSuccessPolicy`: the message of the `SuccessCriteriaMet`
/// condition (`"Matched rules at index N"`, N the first rule met), or
/// `None`. A rule whose `succeededIndexes` cannot be parsed is skipped.
pub(crate) fn matched_rule(
    policy: Option<&SuccessPolicy>,
    completions: i32,
    succeeded: &Intervals,
) -> Option<String> {
    let policy = policy?;
    if succeeded.is_empty() {
        return None;
    }
    for (index, rule) in policy.rules.iter().enumerate() {
        let met = match (rule.succeeded_indexes.as_deref(), rule.succeeded_count) {
            (Some(indexes), count) => {
                let required = Intervals::parse(indexes, completions);
                !required.is_empty() && indexes_rule_met(&required, succeeded, count)
            }
            (None, Some(count)) => succeeded.total() >= i64::from(count),
            (None, None) => false,
        };
        if met {
            return Some(format!("Matched rules at index {index}"));
        }
    }
    None
}

/// All of `required` succeeded, or at least `count` of them (KCM's
/// `matchSucceededIndexesRule`: one pass over both ordered lists).
fn indexes_rule_met(required: &Intervals, succeeded: &Intervals, count: Option<i32>) -> bool {
    let (rule, done) = (required.intervals(), succeeded.intervals());
    let (mut r, mut d, mut contained) = (0, 0, 0i64);
    while let (Some(&(rf, rl)), Some(&(df, dl))) = (rule.get(r), done.get(d)) {
        let overlap = rl.min(dl) - rf.max(df) + 1;
        if overlap > 0 {
            contained = contained.saturating_add(overlap);
        }
        if dl <= rl {
            d += 1;
        }
        if rl <= dl {
            r += 1;
        }
    }
    contained == required.total() || count.is_some_and(|c| contained >= i64::from(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::api::batch::v1::SuccessPolicyRule;

    fn policy(rules: &[(Option<&str>, Option<i32>)]) -> SuccessPolicy {
        SuccessPolicy {
            rules: rules
                .iter()
                .map(|(i, c)| SuccessPolicyRule {
                    succeeded_indexes: i.map(Into::into),
                    succeeded_count: *c,
                })
                .collect(),
        }
    }

    #[test]
    fn a_rule_is_met_by_its_indexes_or_by_its_count_among_them() {
        let done = Intervals::parse("1,3,5", 10);
        let p = policy(&[(Some("1-4"), Some(3)), (Some("1,3"), None)]);
        assert_eq!(
            matched_rule(Some(&p), 10, &done).as_deref(),
            Some("Matched rules at index 1")
        );
        let p = policy(&[(Some("0-5"), Some(3))]);
        assert_eq!(
            matched_rule(Some(&p), 10, &done).as_deref(),
            Some("Matched rules at index 0")
        );
        let p = policy(&[(Some("0-5"), Some(4)), (None, Some(4))]);
        assert_eq!(matched_rule(Some(&p), 10, &done), None);
        let p = policy(&[(Some("garbage"), None), (None, Some(3))]);
        assert_eq!(
            matched_rule(Some(&p), 10, &done).as_deref(),
            Some("Matched rules at index 1")
        );
    }

    #[test]
    fn nothing_is_met_before_any_index_succeeded() {
        let p = policy(&[(None, Some(0))]);
        assert_eq!(matched_rule(Some(&p), 3, &Intervals::default()), None);
        assert_eq!(matched_rule(None, 3, &Intervals::parse("0-2", 3)), None);
    }
}
