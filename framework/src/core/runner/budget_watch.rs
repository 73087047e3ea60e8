//! The budget watch: tells the core of every PodDisruptionBudget, so that
//! preemption spares the pods a budget protects where it can (see
//! `core::preempt`). Only the disruption controller and evictions write
//! budgets; the core reads them.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use apiserver::{Api, EventKind};
use futures::StreamExt;
use k8s_openapi::api::policy::v1::PodDisruptionBudget;
use tokio::sync::mpsc;

use crate::core::Input;

/// Follows the budgets from a fresh list until the core goes.
pub(crate) fn spawn_budget_watch(
    api: Api,
    inputs: mpsc::UnboundedSender<Input>,
) -> tokio::task::JoinHandle<()> {
    let core = inputs.clone();
    super::watch::while_core_lives(core, follow(api, inputs))
}

fn key(budget: &PodDisruptionBudget) -> (String, String) {
    (
        budget.metadata.namespace.clone().unwrap_or_default(),
        budget.metadata.name.clone().unwrap_or_default(),
    )
}

/// Tells the core; false once the core is gone.
fn tell(inputs: &mpsc::UnboundedSender<Input>, budget: PodDisruptionBudget, deleted: bool) -> bool {
    inputs
        .send(Input::DisruptionBudget {
            budget: Arc::new(budget),
            deleted,
        })
        .is_ok()
}

async fn follow(api: Api, inputs: mpsc::UnboundedSender<Input>) {
    // The budgets the core was told of, by namespace and name.
    let mut told: HashSet<(String, String)> = HashSet::new();
    loop {
        let list = match api.list_poddisruptionbudgets(None, "") {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list PodDisruptionBudgets; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let listed: HashSet<(String, String)> = list.items.iter().map(key).collect();
        // A budget deleted while the watch was down is gone for the core too.
        for (namespace, name) in told.difference(&listed) {
            let mut gone = PodDisruptionBudget::default();
            gone.metadata.namespace = Some(namespace.clone());
            gone.metadata.name = Some(name.clone());
            if !tell(&inputs, gone, true) {
                return;
            }
        }
        told = listed;
        for budget in list.items {
            if !tell(&inputs, budget, false) {
                return;
            }
        }
        let mut stream = match api.watch_poddisruptionbudgets(None, list.resource_version) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "PodDisruptionBudget watch failed; relisting");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        while let Some(item) = stream.next().await {
            let Ok(apiserver::ObjectEvent { kind, object, .. }) = item else {
                // Expired, or the watch broke: list again.
                break;
            };
            let deleted = kind == EventKind::Deleted;
            if deleted {
                told.remove(&key(&object));
            } else {
                told.insert(key(&object));
            }
            if !tell(&inputs, object, deleted) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
