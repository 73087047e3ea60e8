#![allow(clippy::unwrap_used)]
use k8s_openapi::api::core::v1::{ConfigMap, Pod, ResourceQuotaStatus};
use serde_json::json;

use super::*;

/// A quota as the controller leaves it once it has counted an empty namespace.
async fn counted_quota(api: &Api, hard: serde_json::Value) -> ResourceQuota {
    let q: ResourceQuota =
        serde_json::from_value(json!({"metadata": {"name": "q"}, "spec": {"hard": hard.clone()}}))
            .unwrap();
    let mut q = api.create_resourcequota("default", q).await.unwrap();
    let zero: std::collections::BTreeMap<String, serde_json::Value> = hard
        .as_object()
        .unwrap()
        .keys()
        .map(|k| (k.clone(), json!("0")))
        .collect();
    q.status = Some(
        serde_json::from_value::<ResourceQuotaStatus>(json!({"hard": hard, "used": zero})).unwrap(),
    );
    api.replace_resourcequota_status("default", "q", q)
        .await
        .unwrap()
}

fn pod(name: &str) -> Pod {
    serde_json::from_value(json!({"metadata": {"name": name}, "spec": {"containers": [
        {"name": "app", "image": "busybox", "resources": {"requests": {"cpu": "300m", "memory": "16Mi"}, "limits": {"cpu": "300m", "memory": "16Mi"}}}]}}))
    .unwrap()
}

fn used(api: &Api) -> serde_json::Value {
    let q = api.get_resourcequota("default", "q").unwrap();
    serde_json::to_value(q.status.unwrap().used).unwrap()
}

#[tokio::test]
async fn creates_are_charged_until_the_quota_is_spent_then_refused() {
    let api = Api::in_memory().await.unwrap();
    counted_quota(
        &api,
        json!({"pods": "2", "requests.cpu": "500m", "count/configmaps": "1"}),
    )
    .await;
    api.create_pod("default", pod("a")).await.unwrap();
    assert_eq!(
        used(&api),
        json!({"count/configmaps": "0", "pods": "1", "requests.cpu": "300m"})
    );
    let err = api.create_pod("default", pod("b")).await.unwrap_err();
    assert_eq!(
        err.to_string(),
        "pods \"b\" is forbidden: exceeded quota: q, requested: requests.cpu=300m, used: requests.cpu=300m, limited: requests.cpu=500m"
    );
    assert!(api.get_pod("default", "b").is_err(), "nothing stored");
    assert_eq!(used(&api)["pods"], "1", "a refusal charges nothing");
    // A name that is taken: the 409 (though the quota is spent), and no charge for a
    // pod that never came.
    let err = api.create_pod("default", pod("a")).await.unwrap_err();
    assert!(matches!(err, ApiError::AlreadyExists { .. }), "{err}");
    assert_eq!(used(&api)["pods"], "1");
    // Any other kind counts under count/<resource>.
    let cm = |name: &str| -> ConfigMap {
        serde_json::from_value(json!({"metadata": {"name": name}})).unwrap()
    };
    api.create_object("default", cm("one"), WriteOptions::default(), None)
        .await
        .unwrap();
    let err = api
        .create_object("default", cm("two"), WriteOptions::default(), None)
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "configmaps \"two\" is forbidden: exceeded quota: q, requested: count/configmaps=1, used: count/configmaps=1, limited: count/configmaps=1"
    );
}

#[tokio::test]
async fn a_dry_run_is_checked_and_charges_nothing() {
    let api = Api::in_memory().await.unwrap();
    counted_quota(&api, json!({"pods": "1"})).await;
    let dry = WriteOptions {
        dry_run: true,
        ..WriteOptions::default()
    };
    api.create_pod_with("default", pod("a"), dry).await.unwrap();
    assert_eq!(used(&api), json!({"pods": "0"}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_burst_of_creates_takes_exactly_what_the_quota_allows() {
    let api = Api::in_memory().await.unwrap();
    counted_quota(&api, json!({"pods": "10"})).await;
    let creates = (0..40).map(|i| {
        let api = api.clone();
        tokio::spawn(async move { api.create_pod("default", pod(&format!("p{i}"))).await })
    });
    let results = futures::future::join_all(creates).await;
    let (ok, refused): (Vec<_>, Vec<_>) = results
        .into_iter()
        .map(|r| r.unwrap())
        .partition(Result::is_ok);
    assert_eq!(ok.len(), 10, "{refused:?}");
    assert!(
        refused.iter().all(|r| matches!(r, Err(ApiError::Forbidden(m)) if m.contains("exceeded quota: q, requested: pods=1, used: pods=10, limited: pods=10"))),
        "{refused:?}"
    );
    assert_eq!(used(&api), json!({"pods": "10"}));
    assert_eq!(
        api.list_pods(Some("default"), "", "").unwrap().items.len(),
        10
    );
}

#[tokio::test]
async fn a_pod_is_stored_with_its_charge_and_a_batch_that_cannot_be_falls_back_to_two_steps() {
    let api = Api::in_memory().await.unwrap();
    counted_quota(&api, json!({"pods": "5"})).await;
    // The ordinary create: the pod and its charge, one commit.
    let stored = api.create_pod("default", pod("a")).await.unwrap();
    assert_eq!(used(&api)["pods"], "1");
    let quota_rv: u64 = api
        .get_resourcequota("default", "q")
        .unwrap()
        .metadata
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    let pod_rv: u64 = stored.metadata.resource_version.unwrap().parse().unwrap();
    assert_eq!(
        pod_rv,
        quota_rv + 1,
        "written in the same commit, one after the other"
    );

    // Writes that cannot be committed (the key is taken) make the one commit fail:
    // the quota is charged alone, and the create is told to write its own.
    let taken = crate::resource::Resource::Pods.key("default", "a");
    let mut ride = || -> Result<Vec<WriteOp>, ApiError> {
        Ok(vec![WriteOp::Put {
            key: taken.clone(),
            object: json!({"metadata": {"name": "a", "namespace": "default"}}),
            precondition: Precondition::Absent,
        }])
    };
    let other = pod("b");
    let charge = api
        .admit_quota(
            "default",
            (Resource::Pods, "b", None),
            Subject::Pod(&other),
            false,
            Some(&mut ride),
        )
        .await
        .unwrap();
    assert!(matches!(charge, Charge::Admitted), "{charge:?}");
    assert_eq!(used(&api)["pods"], "2");
    let a = api.get_pod("default", "a").unwrap();
    assert_eq!(
        a.metadata.uid, stored.metadata.uid,
        "the stored pod is untouched"
    );
}
