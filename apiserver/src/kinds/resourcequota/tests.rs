#![allow(clippy::unwrap_used)]
use super::*;
use crate::ApiError;
use crate::kinds::validate;

fn quota(spec: Value) -> ResourceQuota {
    let mut q: ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": spec})).unwrap();
    q.normalize();
    q
}

fn refused(q: &ResourceQuota) -> Vec<(String, String)> {
    let Err(ApiError::Invalid { kind, causes, .. }) = validate(q, None) else {
        panic!("accepted: {q:?}");
    };
    assert_eq!(kind, "ResourceQuota");
    causes.into_iter().map(|c| (c.field, c.message)).collect()
}

#[test]
fn hard_holds_standard_or_qualified_names_with_amounts_kube_accepts() {
    let q = quota(
        json!({"hard": {"pods": "10", "requests.cpu": "0.5", "limits.memory": "1.5Gi", "count/deployments.apps": "3"}}),
    );
    assert!(validate(&q, None).is_ok());
    let hard = serde_json::to_value(&q.spec.unwrap().hard).unwrap();
    assert_eq!(hard["requests.cpu"], "500m");
    assert_eq!(hard["limits.memory"], "1536Mi");
    let causes = refused(&quota(
        json!({"hard": {"gpus": "1", "pods": "1.5", "cpu": "-1"}}),
    ));
    assert!(
        causes.contains(&(
            "spec.hard[gpus]".into(),
            "Invalid value: \"gpus\": must be a standard resource for quota".into()
        )),
        "{causes:?}"
    );
    assert!(
        causes.contains(&(
            "spec.hard[pods]".into(),
            "Invalid value: \"1500m\": must be an integer".into()
        )),
        "{causes:?}"
    );
    assert!(
        causes.contains(&(
            "spec.hard[cpu]".into(),
            "Invalid value: \"-1\": must be greater than or equal to 0".into()
        )),
        "{causes:?}"
    );
    let causes = refused(&quota(json!({"hard": {"count/events": "10"}})));
    assert_eq!(causes[0].0, "spec.hard[count/events]");
    assert!(
        causes[0]
            .1
            .starts_with("Forbidden: not supported by mesopod")
    );
}

#[test]
fn scopes_are_kubes_apply_to_pod_resources_and_do_not_contradict() {
    assert!(validate(&quota(json!({"hard": {"pods": "1", "cpu": "1"}, "scopes": ["NotBestEffort", "Terminating"]})), None).is_ok());
    assert_eq!(
        refused(&quota(json!({"hard": {"pods": "1"}, "scopes": ["BestEffort", "NotBestEffort"]}))),
        [("spec.scopes".into(), "Invalid value: []core.ResourceQuotaScope{\"BestEffort\", \"NotBestEffort\"}: conflicting scopes".into())]
    );
    assert_eq!(
        refused(&quota(
            json!({"hard": {"cpu": "1"}, "scopes": ["BestEffort"]})
        ))[0]
            .1,
        "Invalid value: []core.ResourceQuotaScope{\"BestEffort\"}: unsupported scope applied to resource"
    );
    assert_eq!(
        refused(&quota(
            json!({"hard": {"configmaps": "1"}, "scopes": ["Terminating"]})
        ))[0]
            .1,
        "Invalid value: []core.ResourceQuotaScope{\"Terminating\"}: unsupported scope applied to resource"
    );
    let bad = quota(
        json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In"}]}}),
    );
    assert_eq!(
        refused(&bad)[0].0,
        "spec.scopeSelector.matchExpressions[0].values"
    );
}

#[test]
fn the_table_shows_used_over_hard_with_limits_apart() {
    let obj = json!({
        "metadata": {"name": "q"},
        "spec": {"hard": {"pods": "10", "requests.cpu": "2", "limits.cpu": "4"}},
        "status": {"hard": {"pods": "10", "requests.cpu": "2", "limits.cpu": "4"}, "used": {"pods": "3", "requests.cpu": "1500m", "limits.cpu": "3"}},
    });
    assert_eq!(
        cells(&obj, "5s".into()),
        [
            json!("5s"),
            json!("pods: 3/10, requests.cpu: 1500m/2"),
            json!("limits.cpu: 3/4")
        ]
    );
    let names: Vec<_> = columns().iter().map(|c| c["name"].clone()).collect();
    assert_eq!(
        names,
        [
            json!("Name"),
            json!("Age"),
            json!("Request"),
            json!("Limit")
        ]
    );
}
