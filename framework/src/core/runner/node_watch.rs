//! The cordon watch: tells the core which Nodes are cordoned
//! (`spec.unschedulable`, set by `kubectl cordon` and `drain`) and which carry
//! a Mesos maintenance mark (an earlier leader's, after a failover). The
//! Nodes' other fields are the core's own writes, so nothing else is read
//! back.

use std::collections::HashMap;
use std::time::Duration;

use apiserver::{Api, EventKind};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Node;
use tokio::sync::mpsc;

use crate::core::Input;

/// Follows the Nodes from a fresh list until the core goes, sending a
/// [`Input::NodeCordoned`] for each Node whose cordon or maintenance mark
/// differs from what the core was last told (every fenced Node at first).
pub(crate) fn spawn_node_watch(
    api: Api,
    inputs: mpsc::UnboundedSender<Input>,
) -> tokio::task::JoinHandle<()> {
    let core = inputs.clone();
    super::watch::while_core_lives(core, follow(api, inputs))
}

/// What the core is told of a Node: its cordon and its maintenance mark.
type Fence = (bool, bool);

fn fence(node: &Node) -> Fence {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable) == Some(true);
    (cordoned, apiserver::under_maintenance(node))
}

/// Tells the core of `name`'s cordon if it changed; false once the core is gone.
fn tell(
    told: &mut HashMap<String, Fence>,
    inputs: &mpsc::UnboundedSender<Input>,
    name: String,
    now: Fence,
) -> bool {
    let before = told.insert(name.clone(), now).unwrap_or_default();
    before == now
        || inputs
            .send(Input::NodeCordoned {
                node: name,
                cordoned: now.0,
                maintenance: now.1,
            })
            .is_ok()
}

async fn follow(api: Api, inputs: mpsc::UnboundedSender<Input>) {
    // What the core was told, by Node name.
    let mut told: HashMap<String, Fence> = HashMap::new();
    loop {
        let list = match api.list_nodes("", "") {
            Ok(list) => list,
            Err(e) => {
                tracing::warn!(error = %e, "cannot list Nodes for their cordons; retrying");
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
        };
        let listed: Vec<String> = list
            .items
            .iter()
            .filter_map(|n| n.metadata.name.clone())
            .collect();
        // A Node gone while the watch was down is no longer cordoned.
        let gone: Vec<String> = told
            .keys()
            .filter(|n| !listed.contains(n))
            .cloned()
            .collect();
        for name in gone {
            if !tell(&mut told, &inputs, name, Fence::default()) {
                return;
            }
        }
        for node in &list.items {
            if let Some(name) = node.metadata.name.clone()
                && !tell(&mut told, &inputs, name, fence(node))
            {
                return;
            }
        }
        let mut stream = match api.watch_nodes(list.resource_version) {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "Node watch failed; relisting");
                tokio::time::sleep(Duration::from_millis(200)).await;
                continue;
            }
        };
        while let Some(item) = stream.next().await {
            let Ok(apiserver::ObjectEvent {
                kind, object: node, ..
            }) = item
            else {
                // Expired, or the watch broke: list again.
                break;
            };
            let Some(name) = node.metadata.name.clone() else {
                continue;
            };
            let now = if kind == EventKind::Deleted {
                Fence::default()
            } else {
                fence(&node)
            };
            if !tell(&mut told, &inputs, name, now) {
                return;
            }
        }
        // The watch ended (expired, or the API is closing): list again, not at once.
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}
