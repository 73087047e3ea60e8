//! The agents' image stores on their Nodes: written when they change, and
//! a malformed message changes nothing.

use mesos::proto::ExecutorId;

use super::*;

fn message(agent: &str, data: Vec<u8>) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::Message as i32),
        message: Some(event::Message {
            agent_id: Some(AgentId::new(agent)),
            executor_id: Some(ExecutorId::new("mesopod-executor")),
            data,
        }),
        ..Default::default()
    })
}

fn store(sizes: &[u64]) -> executor::NodeImages {
    executor::NodeImages {
        version: executor::node_images::NODE_IMAGES_VERSION,
        images: sizes
            .iter()
            .map(|s| executor::node_images::NodeImage {
                names: vec![format!("r/i@sha256:{s}"), format!("r/i:{s}")],
                size_bytes: *s,
            })
            .collect(),
        filesystem_bytes: None,
    }
}

fn nodes(effects: &[Effect]) -> Vec<k8s_openapi::api::core::v1::Node> {
    effects
        .iter()
        .flat_map(|e| match e {
            Effect::Store(writes) => writes
                .iter()
                .filter_map(|w| match w {
                    Write::Node(n) => Some((**n).clone()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        })
        .collect()
}

fn sizes(node: &k8s_openapi::api::core::v1::Node) -> Vec<i64> {
    let images = node.status.as_ref().and_then(|s| s.images.clone());
    images
        .unwrap_or_default()
        .iter()
        .filter_map(|i| i.size_bytes)
        .collect()
}

#[test]
fn an_executors_images_go_on_its_node_once_per_change_and_stay_across_rewrites() {
    let mut core = cluster(&["h1", "h2"]);
    let effects = core.step(message("agent-h1", store(&[5, 9]).encode()), at(1));
    let written = nodes(&effects);
    assert_eq!(written.len(), 1);
    assert_eq!(written[0].metadata.name.as_deref(), Some("h1"));
    assert_eq!(sizes(&written[0]), [9, 5], "largest first");

    // The same store again: no write.
    let effects = core.step(message("agent-h1", store(&[9, 5]).encode()), at(2));
    assert!(nodes(&effects).is_empty(), "{:?}", describe(&effects));

    // The agent offers more than ever: its Node is rebuilt with its images.
    let _ = core.step(offers(vec![offer("h1", 8.0)]), at(3));
    let effects = core.step(offers(vec![offer("h1", 16.0)]), at(4));
    let rebuilt = nodes(&effects);
    assert!(
        !rebuilt.is_empty() && rebuilt.iter().all(|n| sizes(n) == [9, 5]),
        "{:?}",
        describe(&effects)
    );

    // An image gone: written again.
    let effects = core.step(message("agent-h1", store(&[9]).encode()), at(5));
    assert_eq!(sizes(&nodes(&effects)[0]), [9]);
}

#[test]
fn a_malformed_or_unknown_message_is_ignored() {
    let mut core = cluster(&["h1"]);
    for data in [
        b"mesopod.io/node-images {".to_vec(),
        b"mesopod.io/node-images {\"version\":1,\"images\":7}".to_vec(),
        b"mesopod.io/node-images {\"version\":99,\"images\":[]}".to_vec(),
        b"mesopod.io/something-else".to_vec(),
    ] {
        let effects = core.step(message("agent-h1", data), at(1));
        assert!(nodes(&effects).is_empty(), "{:?}", describe(&effects));
    }
    // And it still takes a good one.
    let effects = core.step(message("agent-h1", store(&[1]).encode()), at(2));
    assert_eq!(sizes(&nodes(&effects)[0]), [1]);
}
