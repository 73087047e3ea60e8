//! Scenario tests of the core: steps in, effects out. No runtime, no
//! sockets, no clock: time is a number of seconds, the store is a fixed
//! [`Lookup`], and every effect the core asks for is written as one short
//! line, so each scenario asserts exactly what the core would do.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod adoption;
mod images;
mod launching;
mod leadership;
mod liveness;
mod maintenance;
mod node_images;
mod preemption;
mod relaunch;
mod scheduling;
mod updates;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::Pod;
use mesos::proto::json::WireEnum;
use mesos::proto::scheduler::{Event, call, event};
use mesos::proto::{AgentId, FrameworkId, Offer, OfferId, TaskId, TaskState, TaskStatus};
use procurement::{PipelineConfig, Placer, ResourceDefaults, Scoring, default_pipeline};
use registry::InMemoryRegistry;

use super::{
    AcceptOutcome, Bind, BoundPod, Core, CoreConfig, Effect, Input, Launch, Lookup, Step, Write,
    Written,
};
use crate::admission::{Admission, AdmissionConfig, Decision, HookFn};
use crate::config::SchedulingConfig;
use crate::driver::DriverEvent;

/// A store with nothing in it.
struct Empty;

impl Lookup for Empty {
    fn meta(&self, _key: &str) -> Option<Vec<u8>> {
        None
    }
    fn pods(&self) -> Vec<Pod> {
        Vec::new()
    }
}

/// Second `s` of the test's time.
fn at(s: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + s)
}

fn core_with(admission: Admission) -> Core {
    core_reading(admission, Box::new(Empty))
}

/// A core whose store holds what `lookup` gives.
fn core_reading(admission: Admission, lookup: Box<dyn Lookup>) -> Core {
    core_configured(admission, lookup, SchedulingConfig::default())
}

/// A core with its own scheduling settings.
fn core_configured(
    admission: Admission,
    lookup: Box<dyn Lookup>,
    config: SchedulingConfig,
) -> Core {
    Core::new(CoreConfig {
        registry: InMemoryRegistry::new(),
        placer: Placer::new(
            default_pipeline(&PipelineConfig::default()).unwrap(),
            Scoring::default(),
        ),
        admission,
        needs: procurement::PodResourcesProcurement::new(ResourceDefaults::default()).unwrap(),
        config,
        lookup,
        directory: Arc::default(),
        observed: Arc::default(),
    })
}

/// A core without admission hooks.
fn core() -> Core {
    core_with(Admission::none())
}

/// A core with one admission hook (what it answers is up to the test,
/// which steps [`Step::Admitted`] itself).
fn core_admitting() -> Core {
    let hook = HookFn::new(|_: &crate::admission::Request| Ok(Decision::Admit));
    core_with(Admission::new(
        vec![Arc::new(hook)],
        AdmissionConfig::default(),
    ))
}

/// An unbound pod of ours asking for `cpu`.
fn pod(name: &str, cpu: &str) -> Arc<Pod> {
    Arc::new(
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "default", "uid": format!("uid-{name}"),
                         "creationTimestamp": "2023-11-14T22:13:20Z"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"requests": {"cpu": cpu, "memory": "64Mi"}}}]},
        }))
        .unwrap(),
    )
}

fn offer(host: &str, cpus: f64) -> Offer {
    Offer {
        id: Some(OfferId::new(format!("offer-{host}"))),
        framework_id: Some(FrameworkId::new("fw")),
        agent_id: Some(AgentId::new(format!("agent-{host}"))),
        hostname: host.into(),
        resources: vec![
            mesos::resources::scalar("cpus", cpus, None),
            mesos::resources::scalar("mem", 4096.0, None),
        ],
        ..Default::default()
    }
}

fn driver(ev: DriverEvent) -> Step {
    Step::Input(Input::Driver(ev))
}

fn subscribed() -> Step {
    driver(DriverEvent::Subscribed {
        framework_id: FrameworkId::new("fw"),
        heartbeat: Duration::from_secs(15),
        master: "master".into(),
    })
}

fn mesos_event(e: Event) -> Step {
    driver(DriverEvent::Event(Box::new(e)))
}

fn offers(offers: Vec<Offer>) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::Offers as i32),
        offers: Some(event::Offers { offers }),
        ..Default::default()
    })
}

fn rescind(id: &str) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::Rescind as i32),
        rescind: Some(event::Rescind {
            offer_id: Some(OfferId::new(id)),
        }),
        ..Default::default()
    })
}

/// A status update; with a uuid when `acked` (an agent's update), without
/// one otherwise (the master's, e.g. a reconciliation answer).
fn status(id: &TaskId, state: TaskState, acked: bool) -> TaskStatus {
    TaskStatus {
        task_id: Some(id.clone()),
        agent_id: Some(AgentId::new("agent-h1")),
        state: state as i32,
        uuid: acked.then(|| vec![7; 16]),
        ..Default::default()
    }
}

fn update(s: TaskStatus) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::Update as i32),
        update: Some(event::Update { status: Some(s) }),
        ..Default::default()
    })
}

/// What the runner reports once a status write is durable (or not).
fn written(effects: &[Effect], durable: bool) -> Vec<Step> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::WriteStatus(w) => Some(Step::StatusWritten {
                task: w.task.clone(),
                written: durable.then_some(Written {
                    finalize: false,
                    running_since: None,
                }),
                ack: w.ack.clone(),
            }),
            _ => None,
        })
        .collect()
}

/// Each effect as one line: what a reader of the scenario checks.
fn describe(effects: &[Effect]) -> Vec<String> {
    effects.iter().map(line).collect()
}

fn line(effect: &Effect) -> String {
    match effect {
        Effect::Store(writes) => {
            let parts: Vec<String> = writes
                .iter()
                .map(|w| match w {
                    Write::Event(e) => format!(
                        "event {} {}",
                        e.reason.as_deref().unwrap_or(""),
                        e.involved_object.name.as_deref().unwrap_or("")
                    ),
                    Write::PodStatus { key, status } => format!(
                        "status {} {}",
                        key.name,
                        status.phase.as_deref().unwrap_or("")
                    ),
                    Write::Finalize(key) => format!("finalize {}", key.name),
                    Write::Node(n) => format!("node {}", n.metadata.name.as_deref().unwrap_or("")),
                    Write::PodNotReady(key, _) => format!("not ready {}", key.name),
                    Write::Preempt { key, .. } => format!("preempt {}", key.name),
                    Write::Evict { key, .. } => format!("evict {}", key.name),
                    Write::NodeMaintenance { node, window } => format!(
                        "{} {node}",
                        if window.is_some() { "mark" } else { "unmark" }
                    ),
                })
                .collect();
            parts.join(", then ")
        }
        Effect::WriteStatus(w) => format!(
            "write status {} {}",
            w.task.pod_key().name,
            TaskState::try_from(w.status.state)
                .map(|s| s.wire_name())
                .unwrap_or("?")
        ),
        Effect::Call(c, _) => call_line(c),
        Effect::Acknowledge(c) => format!(
            "ACK {}",
            c.acknowledge
                .as_ref()
                .and_then(|a| a.task_id.as_ref())
                .map_or("", |t| t.value.as_str())
        ),
        Effect::Admit(requests) => format!("admit {} pods", requests.len()),
        Effect::Bind(binds) => {
            let pods: Vec<String> = binds
                .iter()
                .map(|b| format!("{} on {}", b.key.name, b.offer.value))
                .collect();
            format!("launch {}", pods.join(", "))
        }
        Effect::Accept(accepts) => {
            let calls: Vec<String> = accepts
                .iter()
                .map(|a| {
                    let pods: Vec<&str> = a
                        .call
                        .accept
                        .iter()
                        .flat_map(|c| &c.operations)
                        .flat_map(|o| &o.launch)
                        .flat_map(|l| &l.task_infos)
                        .map(|t| t.name.rsplit('/').next().unwrap_or(""))
                        .collect();
                    format!("{}: {}", a.offer.value, pods.join(" "))
                })
                .collect();
            format!("ACCEPT {}", calls.join(", "))
        }
        Effect::Stop(why) => format!("stop: {why}"),
        Effect::StepDown => "step down".into(),
    }
}

fn call_line(c: &mesos::proto::scheduler::Call) -> String {
    let kind = c.r#type.and_then(|t| call::Type::try_from(t).ok());
    match kind {
        Some(call::Type::Kill) => format!(
            "KILL {}",
            c.kill
                .as_ref()
                .and_then(|k| k.task_id.as_ref())
                .map_or("", |t| t.value.as_str())
        ),
        Some(call::Type::Decline) => {
            let ids: Vec<&str> = c
                .decline
                .iter()
                .flat_map(|d| d.offer_ids.iter().map(|o| o.value.as_str()))
                .collect();
            format!("DECLINE {}", ids.join(" "))
        }
        Some(call::Type::Reconcile) => format!(
            "RECONCILE {} tasks",
            c.reconcile.as_ref().map_or(0, |r| r.tasks.len())
        ),
        Some(other) => format!("{other:?}").to_uppercase(),
        None => "?".into(),
    }
}

/// A subscribed core with offers from `hosts` (4 cpus each): the Nodes it
/// writes and its SUPPRESS are already stepped.
fn cluster(hosts: &[&str]) -> Core {
    let mut core = core();
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(offers(hosts.iter().map(|h| offer(h, 4.0)).collect()), at(0));
    core
}

/// Queues `p` and places a round: the task launched for it.
fn launched(core: &mut Core, p: Arc<Pod>, now: SystemTime) -> (TaskId, Vec<Effect>) {
    let _ = core.step(Step::Input(Input::PodUpsert(p)), now);
    let effects = core.step(Step::Schedule, now);
    let id = effects
        .iter()
        .find_map(|e| match e {
            Effect::Bind(b) => Some(b[0].task.clone()),
            _ => None,
        })
        .expect("a round");
    (id, effects)
}

/// What the runner reports once the bindings of `ids` are durable.
fn bound(ids: &[TaskId]) -> Step {
    let pod = BoundPod {
        json: br#"{"metadata":{"name":"bound"}}"#.to_vec(),
        rv: Some(7),
    };
    let results = ids.iter().map(|id| (id.clone(), Ok(pod.clone())));
    Step::Input(Input::Launch(Launch::Bound(results.collect())))
}

/// The master's answer to the ACCEPT of `ids` on `offer`.
fn answered(offer: &str, ids: &[TaskId], outcome: AcceptOutcome) -> Step {
    let results = vec![(OfferId::new(offer), ids.to_vec(), outcome)];
    Step::Input(Input::Launch(Launch::Accepted(results)))
}

/// The master took the ACCEPT of `ids` on h1's offer.
fn accepted(ids: &[TaskId]) -> Step {
    answered("offer-h1", ids, AcceptOutcome::Taken)
}

/// The bindings a step asked for, per round.
fn rounds(effects: &[Effect]) -> Vec<&[Bind]> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Bind(b) => Some(b.as_slice()),
            _ => None,
        })
        .collect()
}

/// The ACCEPTs a step asked for.
fn accepts(effects: &[Effect]) -> Vec<&crate::core::Accept> {
    effects
        .iter()
        .flat_map(|e| match e {
            Effect::Accept(a) => a.iter().collect(),
            _ => Vec::new(),
        })
        .collect()
}

/// Places `pods` in one round on the offers out, and has their launches
/// taken by the master: the tasks, by pod name.
fn run(core: &mut Core, pods: Vec<Arc<Pod>>, now: SystemTime) -> Vec<(String, TaskId)> {
    for p in pods {
        let _ = core.step(Step::Input(Input::PodUpsert(p)), now);
    }
    let effects = core.step(Step::Schedule, now);
    let binds: Vec<&Bind> = rounds(&effects).into_iter().flatten().collect();
    let ids: Vec<TaskId> = binds.iter().map(|b| b.task.clone()).collect();
    let tasks = binds
        .iter()
        .map(|b| (b.key.name.clone(), b.task.clone()))
        .collect();
    let effects = core.step(bound(&ids), now);
    for a in accepts(&effects) {
        let _ = core.step(
            answered(&a.offer.value, &a.tasks, AcceptOutcome::Taken),
            now,
        );
    }
    tasks
}

/// Every store write the step asked for.
fn writes(effects: &[Effect]) -> impl Iterator<Item = &Write> {
    effects.iter().flat_map(|e| match e {
        Effect::Store(writes) => writes.as_slice(),
        _ => &[],
    })
}
