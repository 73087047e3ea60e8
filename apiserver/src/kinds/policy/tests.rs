#![allow(clippy::unwrap_used)]
use super::*;
use crate::ApiError;
use crate::kinds::validate;

fn budget(v: Value) -> PodDisruptionBudget {
    serde_json::from_value(v).unwrap()
}

fn refused(b: &PodDisruptionBudget) -> Vec<(String, String)> {
    let Err(ApiError::Invalid { kind, causes, .. }) = validate(b, None) else {
        panic!("accepted: {b:?}");
    };
    assert_eq!(kind, "PodDisruptionBudget.policy");
    causes.into_iter().map(|c| (c.field, c.message)).collect()
}

#[test]
fn min_available_and_max_unavailable_exclude_each_other_and_stay_within_bounds() {
    let ok = budget(
        json!({"metadata": {"name": "web"}, "spec": {"minAvailable": "50%", "selector": {"matchLabels": {"app": "web"}}}}),
    );
    assert!(validate(&ok, None).is_ok());
    let both = budget(
        json!({"metadata": {"name": "web"}, "spec": {"minAvailable": 1, "maxUnavailable": 1}}),
    );
    let causes = refused(&both);
    assert_eq!(causes[0].0, "spec");
    assert!(
        causes[0]
            .1
            .ends_with(": minAvailable and maxUnavailable cannot be both set"),
        "{causes:?}"
    );
    let bad = budget(
        json!({"metadata": {"name": "web"}, "spec": {"minAvailable": -1, "maxUnavailable": "120%"}}),
    );
    let causes = refused(&bad);
    assert!(
        causes.contains(&(
            "spec.minAvailable".into(),
            "Invalid value: -1: must be greater than or equal to 0".into()
        )),
        "{causes:?}"
    );
    assert!(
        causes.contains(&(
            "spec.maxUnavailable".into(),
            "Invalid value: \"120%\": must not be greater than 100%".into()
        )),
        "{causes:?}"
    );
    let word = budget(json!({"metadata": {"name": "web"}, "spec": {"maxUnavailable": "half"}}));
    assert!(
        refused(&word)[0]
            .1
            .contains("a valid percent string must be a numeric string followed by an ending '%'")
    );
}

#[test]
fn the_selector_the_eviction_policy_and_the_status_counts_are_checked() {
    let selector = budget(
        json!({"metadata": {"name": "web"}, "spec": {"selector": {"matchExpressions": [{"key": "app", "operator": "In"}]}}}),
    );
    assert_eq!(refused(&selector)[0].0, "spec.selector");
    let policy = budget(
        json!({"metadata": {"name": "web"}, "spec": {"unhealthyPodEvictionPolicy": "Never"}}),
    );
    assert_eq!(
        refused(&policy),
        [(
            "spec.unhealthyPodEvictionPolicy".into(),
            "Unsupported value: \"Never\": supported values: \"AlwaysAllow\", \"IfHealthyBudget\""
                .into()
        )]
    );
    let status = budget(
        json!({"metadata": {"name": "web"}, "spec": {}, "status": {"disruptionsAllowed": -1, "currentHealthy": 0, "desiredHealthy": 0, "expectedPods": 0}}),
    );
    assert_eq!(refused(&status)[0].0, "status.disruptionsAllowed");
}

#[test]
fn the_table_shows_either_bound_or_n_a_and_the_disruptions_allowed() {
    let b = json!({"spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}});
    assert_eq!(
        cells(&b, "5s".into()),
        [json!("2"), json!("N/A"), json!(1), json!("5s")]
    );
    let b = json!({"spec": {"maxUnavailable": "25%"}});
    assert_eq!(
        cells(&b, "1m".into()),
        [json!("N/A"), json!("25%"), json!(0), json!("1m")]
    );
    let columns = columns();
    let names: Vec<&str> = columns
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "Name",
            "Min Available",
            "Max Unavailable",
            "Allowed Disruptions",
            "Age"
        ]
    );
}

#[test]
fn the_condition_moves_its_time_only_when_its_status_changes() {
    let t0 = SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_000);
    let t1 = t0 + std::time::Duration::from_secs(60);
    let mut s = PodDisruptionBudgetStatus {
        disruptions_allowed: 1,
        observed_generation: Some(3),
        ..Default::default()
    };
    set_disruption_allowed(&mut s, t0);
    let c = &s.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str(), c.observed_generation),
        ("True", "SufficientPods", Some(3))
    );
    set_disruption_allowed(&mut s, t1);
    assert_eq!(
        s.conditions.as_ref().unwrap()[0].last_transition_time,
        crate::k8s_time(t0)
    );
    s.disruptions_allowed = 0;
    set_disruption_allowed(&mut s, t1);
    let c = &s.conditions.as_ref().unwrap()[0];
    assert_eq!(
        (c.status.as_str(), c.reason.as_str()),
        ("False", "InsufficientPods")
    );
    assert_eq!(c.last_transition_time, crate::k8s_time(t1));
}
