//! A running pod's container images changed: a pod's container `image` is the
//! one container field Kubernetes lets a user change on a running pod, and
//! kubelet restarts the container with it. mesopod's executor does the
//! restart; the core tells it ([`executor::ImageUpdate`], a scheduler
//! MESSAGE to the pod's executor).
//!
//! # How the core knows
//!
//! Level-triggered, from the store: the executor reports in each container's
//! status the image of the run it has (or, for a container waiting to start,
//! the image it will start), so a pod is *stale* when a container that is not
//! done shows another image than its spec: a main container that has not
//! terminated, or an init container still waiting to run (kubelet reruns
//! neither a finished init container nor a running one). The pod watch lets a
//! stale bound pod through decoded ([`stale_json`]), the core checks it
//! ([`wanted`]) and sends the executor every container's image.
//!
//! # Guarantees
//!
//! - **Once per change.** What was sent is kept per pod, and the same images
//!   go again only after [`IMAGE_RESEND_INTERVAL`] (the sweep resends them
//!   while the pod stays stale: a MESSAGE the master dropped is made up for).
//!   A pod event that shows the pod no longer stale forgets it.
//! - **Failover.** A new leader (or a restarted mesopod) knows nothing it
//!   sent: it checks every pod it recovers, and sends on the next SUBSCRIBED
//!   what could not go before it. The executor takes an order it already has
//!   as a no-op.

use std::collections::HashMap;
use std::time::{Duration, SystemTime};

use executor::{ContainerImage, ImageUpdate};
use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod};
use mesos::proto::scheduler::{Call, call};
use mesos::proto::{AgentId, ExecutorId, TaskId};
use registry::{Flag, PodKey, PodTask, Registry};
use serde_json::Value;

use super::Core;
use super::effect::{Effect, Reply};
use super::pods::is_finished;

/// How long the core waits for a pod it sent new images to to stop being
/// stale before it sends them again (kubelet's pod resync is a minute).
pub(crate) const IMAGE_RESEND_INTERVAL: Duration = Duration::from_secs(30);

/// What was sent for one pod.
#[derive(Debug)]
struct Sent {
    /// The task it was for: a pod launched again (adopted) gets its own.
    task: TaskId,
    call: Call,
    at: Option<SystemTime>,
}

/// The image orders in flight, by pod.
#[derive(Debug, Default)]
pub(crate) struct ImageOrders {
    sent: HashMap<PodKey, Sent>,
}

/// Whether a stored pod (its JSON) is stale: cheap enough for every event of
/// a bound pod, and allocation-free.
pub(crate) fn stale_json(pod: &Value) -> bool {
    fn text<'v>(v: &'v Value, k: &str) -> &'v str {
        v.get(k).and_then(Value::as_str).unwrap_or_default()
    }
    let list = |p: &str| pod.pointer(p).and_then(Value::as_array);
    let stale_in = |specs: &str, statuses: &str, init: bool| {
        let (Some(specs), Some(statuses)) = (list(specs), list(statuses)) else {
            return false;
        };
        statuses.iter().any(|status| {
            let name = text(status, "name");
            let state = status.get("state");
            let has = |s: &str| state.and_then(|st| st.get(s)).is_some_and(|v| !v.is_null());
            let pending = if init {
                !has("running") && !has("terminated")
            } else {
                !has("terminated")
            };
            pending
                && specs.iter().any(|spec| {
                    let image = text(spec, "image");
                    text(spec, "name") == name
                        && !image.is_empty()
                        && image != text(status, "image")
                })
        })
    };
    stale_in("/spec/containers", "/status/containerStatuses", false)
        || stale_in(
            "/spec/initContainers",
            "/status/initContainerStatuses",
            true,
        )
}

/// Whether one container's status shows another image than its spec while
/// the container is not done.
fn stale(specs: &[Container], statuses: &[ContainerStatus], init: bool) -> bool {
    statuses.iter().any(|status| {
        let state = status.state.as_ref();
        let running = state.is_some_and(|s| s.running.is_some());
        let terminated = state.is_some_and(|s| s.terminated.is_some());
        let pending = !(terminated || init && running);
        pending
            && specs.iter().any(|c| {
                c.name == status.name
                    && c.image
                        .as_deref()
                        .is_some_and(|i| !i.is_empty() && i != status.image)
            })
    })
}

/// Every container's image, if the pod is stale (see the module docs).
pub(crate) fn wanted(pod: &Pod) -> Option<(Vec<ContainerImage>, Vec<ContainerImage>)> {
    let spec = pod.spec.as_ref()?;
    let status = pod.status.as_ref()?;
    let init = spec.init_containers.as_deref().unwrap_or_default();
    let main_stale = stale(
        &spec.containers,
        status.container_statuses.as_deref().unwrap_or_default(),
        false,
    );
    let init_stale = stale(
        init,
        status
            .init_container_statuses
            .as_deref()
            .unwrap_or_default(),
        true,
    );
    if !main_stale && !init_stale {
        return None;
    }
    let images = |cs: &[Container]| {
        cs.iter()
            .map(|c| ContainerImage {
                name: c.name.clone(),
                image: c.image.clone().unwrap_or_default(),
            })
            .collect()
    };
    Some((images(&spec.containers), images(init)))
}

impl Core {
    /// A bound pod with a task changed: tells its executor of new images.
    pub(super) fn check_images(&mut self, task: &PodTask, pod: &Pod, now: SystemTime) {
        let key = task.pod_key();
        let live = task.is_live() && task.has(Flag::Launched) && !task.has(Flag::Deleted);
        let target = task
            .spec
            .as_ref()
            .and_then(|s| Some((s.agent_id.clone(), s.executor_id()?.clone())));
        let wanted = wanted(pod).filter(|_| live && !is_finished(pod));
        let (Some((containers, init_containers)), Some((agent, executor))) = (wanted, target)
        else {
            self.images.sent.remove(&key);
            return;
        };
        let update = ImageUpdate {
            task_id: task.id.value.clone(),
            containers,
            init_containers,
        };
        let call = image_call(agent, executor, update.encode());
        if let Some(sent) = self.images.sent.get(&key)
            && sent.call == call
            && sent
                .at
                .is_some_and(|at| waited(at, now) < IMAGE_RESEND_INTERVAL)
        {
            return;
        }
        tracing::info!(task = %task.id, pod = %key.name, "the pod's images changed: telling its executor");
        self.send_images(key, task.id.clone(), call, now);
    }

    /// A pod event showed the pod not stale (the pod watch did not decode it).
    pub(super) fn images_settled(&mut self, key: &PodKey) {
        if !self.images.sent.is_empty() {
            self.images.sent.remove(key);
        }
    }

    /// The pod left the store.
    pub(super) fn images_forget(&mut self, key: &PodKey) {
        self.images.sent.remove(key);
    }

    /// The sweep's part: orders to pods still stale go again once
    /// [`IMAGE_RESEND_INTERVAL`] has passed (or at once, if they could not go:
    /// no subscription), and orders of tasks that ended are dropped.
    pub(super) fn resend_images(&mut self, now: SystemTime) {
        if self.images.sent.is_empty() {
            return;
        }
        let registry = &self.registry;
        (self.images.sent).retain(|key, sent| {
            registry
                .for_pod(key)
                .is_some_and(|t| t.id == sent.task && t.is_live() && !t.has(Flag::Deleted))
        });
        let due: Vec<PodKey> = (self.images.sent.iter())
            .filter(|(_, s)| {
                s.at.is_none_or(|at| waited(at, now) >= IMAGE_RESEND_INTERVAL)
            })
            .map(|(k, _)| k.clone())
            .collect();
        for key in due {
            if let Some(sent) = self.images.sent.remove(&key) {
                self.send_images(key, sent.task, sent.call, now);
            }
        }
    }

    fn send_images(&mut self, key: PodKey, task: TaskId, call: Call, now: SystemTime) {
        // Without a subscription the call cannot go: it waits for the sweep.
        let at = self.subscription.subscribed.then_some(now);
        if at.is_some() {
            self.emit(Effect::Call(call.clone(), Reply::None));
        }
        self.images.sent.insert(key, Sent { task, call, at });
    }
}

fn waited(at: SystemTime, now: SystemTime) -> Duration {
    now.duration_since(at).unwrap_or_default()
}

fn image_call(agent: AgentId, executor: ExecutorId, data: Vec<u8>) -> Call {
    Call {
        r#type: Some(call::Type::Message as i32),
        message: Some(call::Message {
            agent_id: Some(agent),
            executor_id: Some(executor),
            data,
        }),
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn pod(v: &Value) -> Pod {
        serde_json::from_value(v.clone()).unwrap()
    }

    /// The watch's quick look and the core's check agree.
    fn check(v: &Value, expected: bool) {
        assert_eq!(stale_json(v), expected, "stale_json of {v}");
        assert_eq!(wanted(&pod(v)).is_some(), expected, "wanted of {v}");
    }

    fn running_pod(spec_image: &str, state: Value) -> Value {
        json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": spec_image}],
                     "initContainers": [{"name": "i", "image": "init:2"}]},
            "status": {"containerStatuses": [{"name": "c", "image": "app:1", "imageID": "",
                                              "ready": true, "restartCount": 0, "state": state}],
                       "initContainerStatuses": [{"name": "i", "image": "init:1", "imageID": "",
                                                  "ready": false, "restartCount": 0,
                                                  "state": {"terminated": {"exitCode": 0}}}]},
        })
    }

    #[test]
    fn a_container_not_done_whose_status_shows_another_image_is_stale() {
        check(&running_pod("app:1", json!({"running": {}})), false);
        check(&running_pod("app:2", json!({"running": {}})), true);
        check(
            &running_pod("app:2", json!({"waiting": {"reason": "CrashLoopBackOff"}})),
            true,
        );
        // Ended for good, and a finished init container (init:1 vs init:2): never rerun.
        check(
            &running_pod("app:2", json!({"terminated": {"exitCode": 0}})),
            false,
        );
    }

    #[test]
    fn an_init_container_is_stale_only_while_it_waits_to_run() {
        let mut v = running_pod("app:1", json!({"waiting": {"reason": "PodInitializing"}}));
        v["status"]["initContainerStatuses"][0]["state"] = json!({"running": {}});
        check(&v, false);
        v["status"]["initContainerStatuses"][0]["state"] = json!({"waiting": {}});
        check(&v, true);
    }

    #[test]
    fn a_pod_without_container_statuses_is_not_stale() {
        check(
            &json!({"metadata": {"name": "p"},
                    "spec": {"containers": [{"name": "c", "image": "app:2"}]}}),
            false,
        );
    }
}
