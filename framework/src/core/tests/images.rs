//! A running pod's container image changed: its executor is told, once per
//! change, again while it does not show the new image, and again by a new
//! leader that finds it running the old one.

use executor::{ContainerImage, ImageUpdate};
use mesos::proto::scheduler::Call;

use super::relaunch::{OLD, bound_web, recovered};
use super::*;

/// The image orders among `effects`: agent, executor, and the order.
fn orders(effects: &[Effect]) -> Vec<(String, String, ImageUpdate)> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Call(
                Call {
                    message: Some(m), ..
                },
                _,
            ) => Some((
                m.agent_id.as_ref()?.value.clone(),
                m.executor_id.as_ref()?.value.clone(),
                ImageUpdate::decode(&m.data)?,
            )),
            _ => None,
        })
        .collect()
}

/// `web` bound to h1 whose container `c` runs `running` (as its executor
/// reports it) while its spec says `spec`.
fn web(spec: &str, running: &str) -> Pod {
    let mut pod = bound_web("Running");
    pod.spec.as_mut().unwrap().containers[0].image = Some(spec.into());
    pod.status = Some(
        serde_json::from_value(serde_json::json!({
            "phase": "Running",
            "containerStatuses": [{"name": "c", "image": running, "imageID": "", "ready": true,
                                   "restartCount": 0, "state": {"running": {}}}],
        }))
        .unwrap(),
    );
    pod
}

fn upsert(pod: Pod) -> Step {
    Step::Input(Input::PodUpsert(Arc::new(pod)))
}

fn order_for(image: &str) -> ImageUpdate {
    ImageUpdate {
        task_id: OLD.into(),
        containers: vec![ContainerImage {
            name: "c".into(),
            image: image.into(),
        }],
        init_containers: Vec::new(),
    }
}

#[test]
fn a_changed_image_is_sent_to_the_pods_executor_once_then_again_while_it_does_not_run_it() {
    let mut core = recovered(web("busybox", "busybox"), &["h1"]);
    let effects = core.step(upsert(web("busybox:1.37", "busybox")), at(1));
    assert_eq!(
        orders(&effects),
        [(
            "agent-h1".into(),
            "mesopod-executor".into(),
            order_for("busybox:1.37")
        )]
    );
    // More events of the same pod (status writes) do not repeat it...
    assert!(
        core.step(upsert(web("busybox:1.37", "busybox")), at(2))
            .is_empty()
    );
    assert!(orders(&core.step(Step::Tick, at(20))).is_empty());
    // ...until the executor has had its time to take it.
    let again = core.step(Step::Tick, at(31));
    assert_eq!(orders(&again).len(), 1, "{:?}", describe(&again));
    // Running the new image, the pod is settled: nothing more goes.
    let key = registry::PodKey::of(&web("busybox:1.37", "busybox:1.37")).unwrap();
    let _ = core.step(Step::Input(Input::PodSettled(key)), at(32));
    assert!(orders(&core.step(Step::Tick, at(100))).is_empty());
    // A second change is a new order at once.
    let effects = core.step(upsert(web("busybox:1.36", "busybox:1.37")), at(101));
    assert_eq!(orders(&effects)[0].2, order_for("busybox:1.36"));
}

#[test]
fn a_pod_running_its_images_gets_no_order() {
    let mut core = recovered(web("busybox", "busybox"), &["h1"]);
    assert!(
        core.step(upsert(web("busybox", "busybox")), at(1))
            .is_empty()
    );
    assert!(orders(&core.step(Step::Tick, at(60))).is_empty());
}

#[test]
fn a_container_that_ended_for_good_is_not_stale() {
    let mut core = recovered(web("busybox", "busybox"), &["h1"]);
    let mut pod = web("busybox:1.37", "busybox");
    let status = pod.status.as_mut().unwrap();
    status.container_statuses.as_mut().unwrap()[0].state =
        Some(serde_json::from_value(serde_json::json!({"terminated": {"exitCode": 0}})).unwrap());
    assert!(orders(&core.step(upsert(pod), at(1))).is_empty());
}

#[test]
fn a_new_leader_that_recovers_a_pod_running_an_old_image_sends_the_new_one_once_subscribed() {
    let pod = web("busybox:1.37", "busybox");
    let mut core = core_reading(
        Admission::none(),
        Box::new(super::relaunch::Pods(vec![pod.clone()])),
    );
    // Not subscribed yet: nothing can go.
    assert!(orders(&core.step(Step::Recovered(vec![Arc::new(pod)]), at(0))).is_empty());
    let effects = core.step(subscribed(), at(1));
    assert_eq!(
        orders(&effects),
        [(
            "agent-h1".into(),
            "mesopod-executor".into(),
            order_for("busybox:1.37")
        )]
    );
}

#[test]
fn a_deleted_pod_gets_no_order() {
    let mut core = recovered(web("busybox", "busybox"), &["h1"]);
    let mut pod = web("busybox:1.37", "busybox");
    pod.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        k8s_openapi::jiff::Timestamp::UNIX_EPOCH,
    ));
    pod.metadata.deletion_grace_period_seconds = Some(30);
    let effects = core.step(upsert(pod), at(1));
    assert!(orders(&effects).is_empty(), "{:?}", describe(&effects));
}

#[test]
fn a_pod_launched_again_for_adoption_gets_its_order_for_its_new_task_only() {
    use mesos::proto::task_status::Source;

    use super::adoption::{executor_died, relaunched, running};

    // Recovered running the old image: the order for OLD goes at SUBSCRIBED.
    let mut core = running(web("busybox:1.37", "busybox"));
    let _ = core.step(executor_died(&TaskId::new(OLD), Source::SourceAgent), at(2));
    let (new, _) = relaunched(&mut core, at(2));
    let _ = core.step(accepted(std::slice::from_ref(&new)), at(3));
    // The order for the dead executor's task is not sent again.
    assert!(orders(&core.step(Step::Tick, at(40))).is_empty());
    // The adopting executor reports the old image: its own order goes at once.
    let effects = core.step(upsert(web("busybox:1.37", "busybox")), at(41));
    let sent = orders(&effects);
    assert_eq!(sent.len(), 1, "{:?}", describe(&effects));
    assert_eq!(sent[0].2.task_id, new.value);
}
