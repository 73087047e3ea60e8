#![allow(clippy::unwrap_used)]
use super::*;
use crate::ApiError;
use crate::kinds::validate;

fn range(limits: Value) -> LimitRange {
    let mut r: LimitRange =
        serde_json::from_value(json!({"metadata": {"name": "limits"}, "spec": {"limits": limits}}))
            .unwrap();
    r.normalize();
    r
}

fn refused(r: &LimitRange) -> Vec<(String, String)> {
    let Err(ApiError::Invalid { kind, causes, .. }) = validate(r, None) else {
        panic!("accepted: {r:?}");
    };
    assert_eq!(kind, "LimitRange");
    causes.into_iter().map(|c| (c.field, c.message)).collect()
}

fn item(r: &LimitRange) -> Value {
    serde_json::to_value(&r.spec.as_ref().unwrap().limits[0]).unwrap()
}

#[test]
fn a_container_items_defaults_come_from_max_then_default_then_min() {
    // SetDefaults_LimitRangeItem: default ← max; defaultRequest ← default, else min.
    let r = range(json!([{"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"}}]));
    assert_eq!(
        item(&r),
        json!({"type": "Container", "max": {"cpu": "2"}, "min": {"memory": "64Mi"},
               "default": {"cpu": "2"}, "defaultRequest": {"cpu": "2", "memory": "64Mi"}})
    );
    assert!(validate(&r, None).is_ok());
    // A Pod item gets none.
    let r = range(json!([{"type": "Pod", "max": {"cpu": "2"}}]));
    assert_eq!(item(&r), json!({"type": "Pod", "max": {"cpu": "2"}}));
}

#[test]
fn quantities_are_stored_in_kubes_canonical_form() {
    let r = range(
        json!([{"type": "Container", "default": {"cpu": "0.5", "memory": "1.5Gi"}, "defaultRequest": {"cpu": "0.25", "memory": "1073741824"}}]),
    );
    assert_eq!(
        item(&r),
        json!({"type": "Container", "default": {"cpu": "500m", "memory": "1536Mi"},
               "defaultRequest": {"cpu": "250m", "memory": "1073741824"}})
    );
}

#[test]
fn bounds_that_contradict_each_other_are_refused_with_kubes_messages() {
    let r = range(json!([{"type": "Container", "min": {"cpu": "1"}, "max": {"cpu": "500m"}}]));
    let causes = refused(&r);
    assert!(
        causes.contains(&(
            "spec.limits[0].min[cpu]".into(),
            "Invalid value: \"1\": min value 1 is greater than max value 500m".into()
        )),
        "{causes:?}"
    );
    let r = range(
        json!([{"type": "Container", "default": {"memory": "1Gi"}, "defaultRequest": {"memory": "2Gi"}}]),
    );
    assert_eq!(
        refused(&r),
        [(
            "spec.limits[0].defaultRequest[memory]".into(),
            "Invalid value: \"2Gi\": default request value 2Gi is greater than default limit value 1Gi".into()
        )]
    );
    let r = range(
        json!([{"type": "Container", "min": {"cpu": "100m"}, "max": {"cpu": "200m"}, "maxLimitRequestRatio": {"cpu": "4"}}]),
    );
    assert_eq!(
        refused(&r),
        [(
            "spec.limits[0].maxLimitRequestRatio[cpu]".into(),
            "Invalid value: \"4\": ratio 4 is greater than max/min = 2.000000".into()
        )]
    );
    let r = range(json!([{"type": "Container", "maxLimitRequestRatio": {"cpu": "500m"}}]));
    assert_eq!(
        refused(&r)[0].1,
        "Invalid value: \"500m\": ratio 500m is less than 1"
    );
}

#[test]
fn types_are_kubes_and_appear_once() {
    let r = range(json!([{"type": "Container"}, {"type": "Container"}]));
    assert_eq!(
        refused(&r),
        [(
            "spec.limits[1].type".into(),
            "Duplicate value: \"Container\"".into()
        )]
    );
    let r = range(json!([{"type": "Node"}]));
    assert_eq!(
        refused(&r)[0].1,
        "Invalid value: \"Node\": must be a standard limit type or fully qualified"
    );
    let r = range(json!([{"type": "Pod", "default": {"cpu": "1"}}]));
    assert_eq!(
        refused(&r),
        [(
            "spec.limits[0].default".into(),
            "Forbidden: may not be specified when `type` is 'Pod'".into()
        )]
    );
    // A fully qualified type is kube's extension point: accepted, as there.
    assert!(validate(&range(json!([{"type": "example.com/Gadget"}])), None).is_ok());
}

#[test]
fn what_mesopod_cannot_give_a_container_is_refused_with_its_field_path() {
    let r = range(json!([{"type": "PersistentVolumeClaim", "max": {"storage": "1Gi"}}]));
    assert_eq!(
        refused(&r),
        [(
            "spec.limits[0].type".into(),
            "Forbidden: not supported by mesopod: there are no persistent volumes".into()
        )]
    );
    let r = range(
        json!([{"type": "Container", "max": {"nvidia.com/gpu": "1"}, "defaultRequest": {"ephemeral-storage": "1Gi"}}]),
    );
    let causes = refused(&r);
    assert!(
        causes.contains(&(
            "spec.limits[0].max[nvidia.com/gpu]".into(),
            "Forbidden: not supported by mesopod: only cpu and memory limits are enforced (cgroups)"
                .into()
        )),
        "{causes:?}"
    );
    // ephemeral-storage may be requested, never limited.
    assert!(
        !causes
            .iter()
            .any(|(f, _)| f == "spec.limits[0].defaultRequest[ephemeral-storage]"),
        "{causes:?}"
    );
    let r = range(json!([{"type": "Container", "max": {"bogus": "1"}}]));
    assert_eq!(
        refused(&r)[0].1,
        "Invalid value: \"bogus\": must be a standard resource for containers"
    );
    let r = range(json!([{"type": "Container", "min": {"cpu": "lots"}}]));
    assert!(
        refused(&r)[0]
            .1
            .contains("quantities must match the regular expression")
    );
}

#[test]
fn the_table_shows_name_and_creation_time() {
    let names: Vec<_> = columns().iter().map(|c| c["name"].clone()).collect();
    assert_eq!(names, [json!("Name"), json!("Created At")]);
    let obj = json!({"metadata": {"name": "limits", "creationTimestamp": "2026-12-07T14:00:00Z"}});
    assert_eq!(created_at(&obj), json!("2026-12-07T14:00:00Z"));
}
