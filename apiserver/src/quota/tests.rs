#![allow(clippy::unwrap_used)]
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

fn pod(spec: Value) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": "p", "namespace": "ns"}, "spec": spec}))
        .unwrap()
}

fn app(resources: Value) -> Pod {
    pod(json!({"containers": [{"name": "app", "image": "x", "resources": resources}]}))
}

fn quota(spec: Value, status: Option<Value>) -> ResourceQuota {
    let mut q = json!({"metadata": {"name": "q", "namespace": "ns"}, "spec": spec});
    if let Some(s) = status {
        q["status"] = s;
    }
    serde_json::from_value(q).unwrap()
}

fn text(u: &Usage) -> BTreeMap<String, String> {
    u.iter().map(|(k, v)| (k.clone(), v.to_string())).collect()
}

const NOW: SystemTime = SystemTime::UNIX_EPOCH;

#[test]
fn a_pod_uses_its_count_and_its_requests_and_limits() {
    let p = app(json!({"requests": {"cpu": "250m", "memory": "64Mi"}, "limits": {"cpu": "1"}}));
    let u = usage(Subject::Pod(&p), NOW);
    assert_eq!(
        text(&u),
        BTreeMap::from(
            [
                ("count/pods", "1"),
                ("pods", "1"),
                ("cpu", "250m"),
                ("requests.cpu", "250m"),
                ("limits.cpu", "1"),
                ("memory", "64Mi"),
                ("requests.memory", "64Mi"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        )
    );
    // Finished: only the object count stays.
    let mut done = p.clone();
    done.status = Some(serde_json::from_value(json!({"phase": "Succeeded"})).unwrap());
    assert_eq!(usage(Subject::Pod(&done), NOW).len(), 1);
    // Deleting: charged until its grace has run out.
    let mut going = p;
    going.metadata.deletion_timestamp =
        Some(serde_json::from_value(json!("1970-01-01T00:01:00Z")).unwrap());
    going.metadata.deletion_grace_period_seconds = Some(30);
    assert!(usage(Subject::Pod(&going), NOW + Duration::from_secs(90)).contains_key("pods"));
    assert!(!usage(Subject::Pod(&going), NOW + Duration::from_secs(91)).contains_key("pods"));
}

#[test]
fn other_objects_count_under_their_count_name_and_old_name() {
    assert_eq!(
        count_names(Resource::Deployments),
        ["count/deployments.apps"]
    );
    assert_eq!(
        count_names(Resource::ConfigMaps),
        ["count/configmaps", "configmaps"]
    );
    assert_eq!(counted_resource("count/jobs.batch"), Some(Resource::Jobs));
    assert_eq!(counted_resource("secrets"), Some(Resource::Secrets));
    assert_eq!(counted_resource("count/widgets.example.com"), None);
}

#[test]
fn scopes_select_pods_and_never_other_objects() {
    let hard = |q: &ResourceQuota| hard_and_used(q).0;
    let best_effort = quota(
        json!({"hard": {"pods": "2"}, "scopes": ["BestEffort"]}),
        Some(json!({"hard": {"pods": "2"}})),
    );
    let bare = app(json!({}));
    let sized = app(json!({"requests": {"cpu": "1"}}));
    assert!(covers(
        &best_effort,
        &hard(&best_effort),
        Subject::Pod(&bare)
    ));
    assert!(!covers(
        &best_effort,
        &hard(&best_effort),
        Subject::Pod(&sized)
    ));
    let terminating = quota(
        json!({"hard": {"pods": "1"}, "scopes": ["Terminating"]}),
        Some(json!({"hard": {"pods": "1"}})),
    );
    let mut job_pod = bare.clone();
    job_pod.spec.as_mut().unwrap().active_deadline_seconds = Some(60);
    assert!(covers(
        &terminating,
        &hard(&terminating),
        Subject::Pod(&job_pod)
    ));
    assert!(!covers(
        &terminating,
        &hard(&terminating),
        Subject::Pod(&bare)
    ));
    let high = quota(
        json!({"hard": {"pods": "1"}, "scopeSelector": {"matchExpressions": [{"scopeName": "PriorityClass", "operator": "In", "values": ["high"]}]}}),
        Some(json!({"hard": {"pods": "1"}})),
    );
    let mut urgent = bare.clone();
    urgent.spec.as_mut().unwrap().priority_class_name = Some("high".into());
    assert!(covers(&high, &hard(&high), Subject::Pod(&urgent)));
    assert!(!covers(&high, &hard(&high), Subject::Pod(&bare)));
    let counts = quota(
        json!({"hard": {"configmaps": "1"}, "scopes": ["NotTerminating"]}),
        Some(json!({"hard": {"configmaps": "1"}})),
    );
    assert!(!covers(
        &counts,
        &hard(&counts),
        Subject::Object(Resource::ConfigMaps)
    ));
}

#[test]
fn a_charge_past_hard_is_refused_in_kubes_words() {
    let q = quota(
        json!({"hard": {"pods": "2", "requests.cpu": "1"}}),
        Some(
            json!({"hard": {"pods": "2", "requests.cpu": "1"}, "used": {"pods": "1", "requests.cpu": "800m"}}),
        ),
    );
    let p = app(
        json!({"requests": {"cpu": "500m", "memory": "1Mi"}, "limits": {"cpu": "500m", "memory": "1Mi"}}),
    );
    assert_eq!(
        charge(std::slice::from_ref(&q), Subject::Pod(&p), NOW).unwrap_err(),
        "exceeded quota: q, requested: requests.cpu=500m, used: requests.cpu=800m, limited: requests.cpu=1"
    );
    let small = app(json!({"requests": {"cpu": "200m"}}));
    let charged = charge(std::slice::from_ref(&q), Subject::Pod(&small), NOW).unwrap();
    assert_eq!(charged.len(), 1);
    assert_eq!(
        text(&charged[0].1),
        BTreeMap::from([
            ("pods".to_owned(), "2".to_owned()),
            ("requests.cpu".to_owned(), "1".to_owned())
        ])
    );
}

#[test]
fn a_quota_on_cpu_or_memory_needs_every_container_to_ask() {
    let q = quota(
        json!({"hard": {"limits.memory": "1Gi", "requests.cpu": "1"}}),
        Some(
            json!({"hard": {"limits.memory": "1Gi", "requests.cpu": "1"}, "used": {"limits.memory": "0", "requests.cpu": "0"}}),
        ),
    );
    let p = pod(json!({"containers": [
        {"name": "web", "image": "x", "resources": {"requests": {"cpu": "100m"}}},
        {"name": "log", "image": "x"},
    ]}));
    assert_eq!(
        charge(std::slice::from_ref(&q), Subject::Pod(&p), NOW).unwrap_err(),
        "failed quota: q: must specify limits.memory for: log,web; requests.cpu for: log"
    );
}

#[test]
fn a_quota_without_a_recount_yet_is_unknown_and_one_without_status_charges_nothing() {
    let counted = quota(
        json!({"hard": {"pods": "2"}}),
        Some(json!({"hard": {"pods": "2"}})),
    );
    let p = app(json!({}));
    assert_eq!(
        charge(std::slice::from_ref(&counted), Subject::Pod(&p), NOW).unwrap_err(),
        "status unknown for quota: q, resources: pods"
    );
    let fresh = quota(json!({"hard": {"pods": "2"}}), None);
    assert_eq!(charge(&[fresh], Subject::Pod(&p), NOW).unwrap(), []);
}

#[test]
fn a_recount_sums_the_selected_pods_and_counts_the_objects() {
    let q = quota(
        json!({"hard": {"pods": "10", "requests.memory": "1Gi", "count/deployments.apps": "5", "services": "2"}}),
        None,
    );
    let a = app(json!({"requests": {"memory": "256Mi"}}));
    let b = app(json!({"requests": {"memory": "512Mi"}}));
    let mut done = app(json!({"requests": {"memory": "512Mi"}}));
    done.status = Some(serde_json::from_value(json!({"phase": "Failed"})).unwrap());
    let count_of = |name: &str| (name == "count/deployments.apps").then_some(3);
    let (hard, used) = recount(&q, &[&a, &b, &done], &count_of, NOW);
    assert_eq!(hard.len(), 4);
    assert_eq!(
        text(&used),
        BTreeMap::from(
            [
                ("pods", "2"),
                ("requests.memory", "768Mi"),
                ("count/deployments.apps", "3"),
                ("services", "0"),
            ]
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
        )
    );
}
