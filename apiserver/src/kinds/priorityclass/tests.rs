#![allow(clippy::unwrap_used)]
use super::*;
use crate::kinds::validate;

fn class(v: Value) -> PriorityClass {
    let mut c: PriorityClass = serde_json::from_value(v).unwrap();
    c.normalize();
    c
}

fn refused(c: &PriorityClass, old: Option<&PriorityClass>) -> Vec<(String, String)> {
    let Err(ApiError::Invalid { causes, .. }) = validate(c, old) else {
        panic!("accepted: {c:?}");
    };
    causes.into_iter().map(|c| (c.field, c.message)).collect()
}

#[test]
fn the_system_classes_pass_their_own_checks_and_no_other_system_name_does() {
    for c in system_classes() {
        assert!(validate(&c, None).is_ok(), "{c:?}");
    }
    let wrong_value = class(json!({"metadata": {"name": "system-node-critical"}, "value": 5}));
    assert_eq!(
        refused(&wrong_value, None),
        [(
            "metadata.name".into(),
            "Forbidden: priority class names with 'system-' prefix are reserved for system use only. error: value of system-node-critical PriorityClass must be 2000001000".into()
        )]
    );
    let default = class(
        json!({"metadata": {"name": "system-cluster-critical"}, "value": 2_000_000_000, "globalDefault": true}),
    );
    assert!(
        refused(&default, None)[0].1.ends_with(
            "error: globalDefault of system-cluster-critical PriorityClass must be false"
        )
    );
}

#[test]
fn a_user_class_is_at_most_a_billion_with_a_known_policy() {
    assert!(
        validate(
            &class(json!({"metadata": {"name": "top"}, "value": HIGHEST_USER_DEFINABLE})),
            None
        )
        .is_ok()
    );
    let bad = class(
        json!({"metadata": {"name": "top"}, "value": HIGHEST_USER_DEFINABLE + 1, "preemptionPolicy": "Sometimes"}),
    );
    assert_eq!(
        refused(&bad, None),
        [
            (
                "value".into(),
                "Forbidden: maximum allowed value of a user defined priority is 1000000000".into()
            ),
            (
                "preemptionPolicy".into(),
                "Unsupported value: \"Sometimes\": supported values: \"Never\", \"PreemptLowerPriority\"".into()
            ),
        ]
    );
}

#[test]
fn value_and_policy_never_change_but_the_rest_may() {
    let old = class(json!({"metadata": {"name": "a"}, "value": 1}));
    assert_eq!(
        old.preemption_policy.as_deref(),
        Some("PreemptLowerPriority")
    );
    let described = class(json!({"metadata": {"name": "a"}, "value": 1, "description": "d"}));
    assert!(validate(&described, Some(&old)).is_ok());
    let changed =
        class(json!({"metadata": {"name": "a"}, "value": 2, "preemptionPolicy": "Never"}));
    assert_eq!(
        refused(&changed, Some(&old)),
        [
            (
                "value".into(),
                "Forbidden: may not be changed in an update.".into()
            ),
            (
                "preemptionPolicy".into(),
                "Invalid value: \"Never\": field is immutable".into()
            ),
        ]
    );
}

#[test]
fn only_the_system_classes_refuse_deletion() {
    assert!(refuse_delete("system-node-critical").is_err());
    assert!(refuse_delete("system-cluster-critical").is_err());
    assert!(refuse_delete("system-other").is_ok());
    assert!(refuse_delete("high").is_ok());
}

#[test]
fn the_row_shows_value_default_age_and_policy() {
    let obj = json!({"metadata": {"name": "a"}, "value": 7, "globalDefault": true, "preemptionPolicy": "Never"});
    assert_eq!(
        cells(&obj, "5s".into()),
        [json!(7), json!(true), json!("5s"), json!("Never")]
    );
    assert_eq!(columns().len(), 5);
}
