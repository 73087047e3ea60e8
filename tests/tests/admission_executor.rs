//! What an admission hook changes in a pod's spec is what its containers
//! run with, on a real agent with the real executor.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use common::cluster::*;
use framework::admission::{Admission, AdmissionConfig, Changes, Decision, HookFn};
use testkit::{Kubectl, ok};

const T: Duration = Duration::from_secs(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_service_account_set_by_a_hook_is_the_one_the_container_sees() {
    let hook = HookFn::new(|_req| {
        Ok(Decision::AdmitWith(Changes {
            service_account: "builder".into(),
            ..Changes::default()
        }))
    });
    let app = start(Setup {
        admission: Admission::new(
            vec![Arc::new(hook)],
            AdmissionConfig {
                allowed_service_accounts: vec!["builder".into()],
                ..AdmissionConfig::default()
            },
        ),
        ..Setup::default()
    })
    .await;
    let server = app.api_url();
    let yaml = "apiVersion: v1\nkind: Pod\nmetadata:\n  name: who\nspec:\n  restartPolicy: Never\n  containers:\n  - name: main\n    image: busybox\n    command: [\"/bin/sh\", \"-c\", \"echo account=$SA\"]\n    env:\n    - name: SA\n      valueFrom:\n        fieldRef:\n          fieldPath: spec.serviceAccountName\n    resources:\n      requests:\n        cpu: 100m\n        memory: 32Mi\n";
    Kubectl::new(&server).apply(yaml).await;
    let done = wait_pod(app.api(), "default", "who", T, |p| phase(p) == "Succeeded").await;
    // The store keeps the spec as written; the hook's change went to the
    // executor with the pod.
    assert_ne!(
        done.spec.unwrap().service_account_name.as_deref(),
        Some("builder")
    );
    let logs = Kubectl::new(&server).run(&["logs", "who"]).await;
    let text = ok(&logs);
    assert!(text.contains("account=builder"), "{text}");
    app.shutdown().await;
}
