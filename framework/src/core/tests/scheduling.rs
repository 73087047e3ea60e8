//! Subscription, placement, pods that fit nowhere, admission.

use super::*;
use crate::admission::{Changes, Outcome};

#[test]
fn subscribing_with_nothing_waiting_suppresses_offers() {
    let mut core = core();
    assert_eq!(describe(&core.step(subscribed(), at(0))), ["SUPPRESS"]);
}

#[test]
fn a_pod_that_fits_is_placed_and_handed_to_a_launch_task() {
    let mut core = core();
    let _ = core.step(subscribed(), at(0));
    let effects = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    assert_eq!(describe(&effects), ["node h1"], "a new agent gets its Node");
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(describe(&effects), ["launch web on offer-h1"]);
    let bind = &rounds(&effects)[0][0];
    let condition = bind.binding.condition.as_ref().unwrap();
    assert_eq!(condition.type_, "PodScheduled");
    assert_eq!(condition.status, "True");
    assert_eq!(bind.binding.node_name, "h1");
    assert_eq!(
        bind.binding.uid.as_deref(),
        Some("uid-web"),
        "only that pod"
    );
    assert!(!bind.binding.relaunch);
    // The offer is taken: nothing is placed on it twice.
    let _ = core.step(Step::Input(Input::PodUpsert(pod("db", "1"))), at(1));
    assert!(core.step(Step::Schedule, at(1)).is_empty());
}

#[test]
fn the_pod_of_higher_priority_takes_the_only_room_though_it_came_later() {
    let mut core = cluster(&["h1"]);
    let batch = pod("batch", "3");
    let mut urgent = (*pod("urgent", "3")).clone();
    // As priority admission wrote it from the pod's PriorityClass.
    urgent.spec.as_mut().unwrap().priority = Some(1000);
    let _ = core.step(Step::Input(Input::PodUpsert(batch)), at(1));
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(urgent))), at(2));
    let effects = core.step(Step::Schedule, at(2));
    // The lower one waits, told why; the higher one runs.
    assert_eq!(
        describe(&effects),
        [
            "event FailedScheduling batch, then status batch Pending",
            "launch urgent on offer-h1"
        ]
    );
}

#[test]
fn a_cordoned_agent_takes_only_pods_that_tolerate_the_cordon() {
    let mut core = cluster(&["h1"]);
    let cordon = |cordoned| {
        Step::Input(Input::NodeCordoned {
            node: "h1".into(),
            cordoned,
            maintenance: false,
        })
    };
    let _ = core.step(cordon(true), at(1));
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(
        failed_scheduling(&effects),
        "0/1 agents available: 1 unschedulable."
    );
    // A DaemonSet's pod tolerates the cordon, as kube's DaemonSet controller
    // makes it.
    let mut daemon = (*pod("daemon", "1")).clone();
    daemon.spec.as_mut().unwrap().tolerations =
        Some(vec![k8s_openapi::api::core::v1::Toleration {
            key: Some("node.kubernetes.io/unschedulable".into()),
            operator: Some("Exists".into()),
            effect: Some("NoSchedule".into()),
            ..Default::default()
        }]);
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(daemon))), at(2));
    let effects = core.step(Step::Schedule, at(40));
    assert!(
        describe(&effects).contains(&"launch daemon on offer-h1".to_owned()),
        "{:?}",
        describe(&effects)
    );
    // Uncordoned, with a new offer: web runs.
    let _ = core.step(cordon(false), at(41));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(41));
    let effects = core.step(Step::Schedule, at(80));
    assert!(
        describe(&effects).contains(&"launch web on offer-h1".to_owned()),
        "{:?}",
        describe(&effects)
    );
}

#[test]
fn subscribe_disconnect_and_subscribe_again() {
    let mut core = core();
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(0));
    // A pod waits: offers are asked for.
    assert_eq!(describe(&core.step(subscribed(), at(0))), ["REVIVE"]);
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    let lost = driver(DriverEvent::Disconnected {
        reason: "stream closed".into(),
    });
    assert!(core.step(lost, at(1)).is_empty());
    // The master took back every offer: nothing to place on, nothing sent.
    assert!(core.step(Step::Schedule, at(1)).is_empty());
    assert!(core.step(Step::Tick, at(1)).is_empty());
    // A new subscription asks for offers again, whatever the last REVIVE.
    assert_eq!(describe(&core.step(subscribed(), at(1))), ["REVIVE"]);
}

#[test]
fn a_failed_revive_is_sent_again_at_the_next_sweep() {
    let mut core = core();
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(0));
    let _ = core.step(subscribed(), at(0));
    let failed = Step::Called {
        call: super::super::Reply::Revive,
        ok: false,
    };
    assert!(core.step(failed, at(0)).is_empty());
    // (The sweep also sends the reconciliation the subscription started.)
    assert_eq!(
        describe(&core.step(Step::Tick, at(5))),
        ["RECONCILE 0 tasks", "REVIVE"]
    );
}

#[test]
fn a_pod_that_fits_nowhere_gets_one_failed_scheduling_event_per_reason() {
    let mut core = cluster(&["h1"]);
    let _ = core.step(Step::Input(Input::PodUpsert(pod("huge", "64"))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(
        describe(&effects),
        ["event FailedScheduling huge, then status huge Pending"]
    );
    let Effect::Store(writes) = &effects[0] else {
        unreachable!()
    };
    let Write::Event(event) = &writes[0] else {
        unreachable!()
    };
    assert_eq!(
        event.message.as_deref(),
        Some("0/1 agents available: 1 insufficient cpus.")
    );
    // Tried again after its backoff, for the same reason: nothing new to say.
    assert!(core.step(Step::Schedule, at(600)).is_empty());
}

#[test]
fn a_pod_that_saw_only_part_of_the_cluster_is_deferred_quietly() {
    let mut core = cluster(&["h1", "h2"]);
    // h2's offer is in use elsewhere, and h1 offers only what is left of it.
    let _ = core.step(rescind("offer-h2"), at(0));
    let _ = core.step(rescind("offer-h1"), at(0));
    let _ = core.step(offers(vec![offer("h1", 1.0)]), at(0));
    // The pod fits neither offer, but h2 can hold it once it is free.
    let _ = core.step(Step::Input(Input::PodUpsert(pod("big", "2"))), at(1));
    assert!(core.step(Step::Schedule, at(1)).is_empty());
    // h2's offer comes back: the pod goes on it at once, though the clock has not
    // moved (a test's frozen clock, or a deferral longer than the offer took).
    let _ = core.step(offers(vec![offer("h2", 4.0)]), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(describe(&effects), ["launch big on offer-h2"]);
}

/// The message of the one FailedScheduling event among `effects`.
fn failed_scheduling(effects: &[Effect]) -> String {
    assert_eq!(describe(effects).len(), 1, "{:?}", describe(effects));
    let Effect::Store(writes) = &effects[0] else {
        unreachable!("{:?}", describe(effects))
    };
    let Write::Event(event) = &writes[0] else {
        unreachable!("{:?}", describe(effects))
    };
    assert_eq!(event.reason.as_deref(), Some("FailedScheduling"));
    assert_eq!(event.type_.as_deref(), Some("Warning"));
    event.message.clone().unwrap()
}

/// A pod larger than any agent is unschedulable at once, even while some
/// agents have no offer out: waiting for them cannot help, and they count
/// in the message as kube-scheduler counts every node.
#[test]
fn a_pod_larger_than_any_agent_fails_scheduling_while_agents_are_busy() {
    let mut core = cluster(&["h1", "h2", "h3"]);
    let _ = core.step(rescind("offer-h2"), at(0));
    let _ = core.step(rescind("offer-h3"), at(0));
    let _ = core.step(Step::Input(Input::PodUpsert(pod("huge", "64"))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(
        describe(&effects),
        ["event FailedScheduling huge, then status huge Pending"]
    );
    assert_eq!(
        failed_scheduling(&effects),
        "0/3 agents available: 3 insufficient cpus."
    );
}

/// `99999999999999999999Ei` of memory is a valid quantity (kube-apiserver
/// caps it at 2^63-1 bytes), larger than any agent: insufficient memory,
/// as kube-scheduler says, not an invalid pod.
#[test]
fn a_memory_request_past_any_agent_is_insufficient_memory() {
    let mut core = cluster(&["h1", "h2"]);
    let _ = core.step(rescind("offer-h2"), at(0));
    let mut p = (*pod("hungry", "1")).clone();
    let requests = p.spec.as_mut().unwrap().containers[0]
        .resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap();
    requests.insert(
        "memory".into(),
        k8s_openapi::apimachinery::pkg::api::resource::Quantity("99999999999999999999Ei".into()),
    );
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(p))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(
        failed_scheduling(&effects),
        "0/2 agents available: 2 insufficient mem."
    );
}

/// A pod of 10,000 containers (kube-apiserver sets no limit on their
/// number) needs each one's default share: more than any agent.
#[test]
fn a_pod_of_ten_thousand_containers_fails_scheduling() {
    let mut core = cluster(&["h1", "h2"]);
    let _ = core.step(rescind("offer-h2"), at(0));
    let containers: Vec<_> = (0..10_000)
        .map(|i| serde_json::json!({"name": format!("c{i}"), "image": "busybox"}))
        .collect();
    let p: Pod = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "many", "namespace": "default", "uid": "uid-many"},
        "spec": {"containers": containers},
    }))
    .unwrap();
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(p))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(
        failed_scheduling(&effects),
        "0/2 agents available: 2 insufficient cpus."
    );
}

#[test]
fn admission_holds_then_refuses() {
    let mut core = core_admitting();
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(1));
    // Admission is I/O: the core asks, and places nothing until it hears.
    assert_eq!(
        describe(&core.step(Step::Schedule, at(1))),
        ["admit 1 pods"]
    );
    assert!(
        core.step(Step::Schedule, at(1)).is_empty(),
        "one round at a time"
    );
    let held = Step::Admitted(vec![Outcome::Hold("quota".into())]);
    assert_eq!(
        describe(&core.step(held, at(1))),
        ["event AdmissionHeld web"]
    );
    // Held again: no second event.
    assert_eq!(
        describe(&core.step(Step::Schedule, at(30))),
        ["admit 1 pods"]
    );
    let held = Step::Admitted(vec![Outcome::Hold("quota".into())]);
    assert!(core.step(held, at(30)).is_empty());
    assert_eq!(
        describe(&core.step(Step::Schedule, at(90))),
        ["admit 1 pods"]
    );
    let refused = Step::Admitted(vec![Outcome::Refuse("no tenant".into())]);
    assert_eq!(
        describe(&core.step(refused, at(90))),
        ["event AdmissionRefused web, then status web Failed"]
    );
    // Failed for good: never tried again.
    assert!(core.step(Step::Schedule, at(900)).is_empty());
}

#[test]
fn an_admitted_pod_is_placed_as_the_hooks_changed_it() {
    let mut core = core_admitting();
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(1));
    let _ = core.step(Step::Schedule, at(1));
    let changes = Changes {
        labels: [("tenant".to_owned(), "a".to_owned())].into(),
        ..Changes::default()
    };
    let admitted = Step::Admitted(vec![Outcome::Admit {
        changes: changes.clone(),
        warnings: vec!["hook-b failed open".into()],
    }]);
    let effects = core.step(admitted, at(1));
    assert_eq!(
        describe(&effects),
        ["event AdmissionFailOpen web", "launch web on offer-h1"]
    );
    // The hook's labels are written with the binding, in one write.
    let bind = &rounds(&effects)[0][0];
    assert_eq!(bind.binding.labels, changes.labels);
}

#[test]
fn another_scheduler_taking_over_stops_the_core() {
    let mut core = core();
    let over = driver(DriverEvent::FailedOver {
        message: "Framework failed over".into(),
    });
    assert_eq!(
        describe(&core.step(over, at(0))),
        ["stop: Framework failed over"]
    );
}

#[test]
fn after_a_restart_the_pods_still_waiting_are_queued_again() {
    let mut core = core();
    let mut bound = (*pod("done", "1")).clone();
    bound.spec.as_mut().unwrap().node_name = Some("h1".into());
    let recovered = Step::Recovered(vec![pod("web", "1"), Arc::new(bound)]);
    assert!(core.step(recovered, at(0)).is_empty());
    // One pod waits (the bound one is not ours to place): offers wanted.
    assert_eq!(describe(&core.step(subscribed(), at(0))), ["REVIVE"]);
    let _ = core.step(offers(vec![offer("h1", 4.0)]), at(0));
    assert_eq!(
        describe(&core.step(Step::Schedule, at(1))),
        ["launch web on offer-h1"]
    );
}

/// A store holding the info of the executor agent `h1` runs, as a restarted
/// mesopod finds it.
struct RunningOnH1(Vec<u8>);

impl Lookup for RunningOnH1 {
    fn meta(&self, key: &str) -> Option<Vec<u8>> {
        (key == crate::core::agents::executor_key("agent-h1")).then(|| self.0.clone())
    }
    fn pods(&self) -> Vec<Pod> {
        Vec::new()
    }
}

/// An offer that lists our executor puts its pods into that executor, as it
/// was launched, in whichever round the offer is used: the view with the
/// executor is worked out once and kept with the offer.
#[test]
fn pods_on_an_agent_join_the_executor_it_runs_in_a_later_round_too() {
    // The executor our pipeline launches, learnt from a first launch.
    let mut first = core();
    let _ = first.step(subscribed(), at(0));
    let _ = first.step(offers(vec![offer("h1", 4.0)]), at(0));
    let _ = first.step(Step::Input(Input::PodUpsert(pod("a", "1"))), at(1));
    let effects = first.step(Step::Schedule, at(1));
    let id = rounds(&effects)[0][0].task.clone();
    let configured = executor_launched(&first.step(bound(&[id]), at(1)));
    let mut running = configured.unwrap();
    // Launched by an earlier mesopod: the same id, another name.
    running.name = Some("launched before the restart".into());

    let store = RunningOnH1(serde_json::to_vec(&running).unwrap());
    let mut core = core_reading(Admission::none(), Box::new(store));
    let _ = core.step(subscribed(), at(0));
    let mut h1 = offer("h1", 1.0);
    h1.executor_ids = vec![running.executor_id.clone().unwrap()];
    let _ = core.step(offers(vec![h1, offer("h2", 4.0)]), at(0));
    // Round one: the pod fits only h2, though h1's view was built too.
    let _ = core.step(Step::Input(Input::PodUpsert(pod("big", "2"))), at(1));
    let effects = core.step(Step::Schedule, at(1));
    assert_eq!(describe(&effects), ["launch big on offer-h2"]);
    // Round two uses h1's offer: its pod joins the running executor, and
    // nothing new is stored for the agent.
    let _ = core.step(Step::Input(Input::PodUpsert(pod("small", "0.5"))), at(2));
    let effects = core.step(Step::Schedule, at(2));
    assert_eq!(describe(&effects), ["launch small on offer-h1"]);
    let bind = &rounds(&effects)[0][0];
    assert!(bind.binding.meta.is_empty(), "{:?}", bind.binding.meta);
    let effects = core.step(bound(std::slice::from_ref(&bind.task)), at(2));
    assert_eq!(executor_launched(&effects).as_ref(), Some(&running));
}

/// The executor info the first task of a step's first ACCEPT names.
fn executor_launched(effects: &[Effect]) -> Option<mesos::proto::ExecutorInfo> {
    let accept = accepts(effects)[0].call.accept.as_ref()?;
    let launch = accept.operations[0].launch.as_ref()?;
    launch.task_infos[0].executor.clone()
}

#[test]
fn an_idle_core_revives_offers_now_and_then_so_agents_that_join_become_nodes() {
    let mut core = core();
    assert_eq!(describe(&core.step(subscribed(), at(0))), ["SUPPRESS"]);
    // (The first sweep sends the reconciliation the subscription started.)
    let _ = core.step(Step::Tick, at(1));
    assert!(core.step(Step::Tick, at(20)).is_empty(), "not yet due");
    // Thirty seconds suppressed: a discovery.
    assert_eq!(describe(&core.step(Step::Tick, at(30))), ["REVIVE"]);
    // An agent that joined while offers were suppressed offers, and is a Node.
    let effects = core.step(offers(vec![offer("late", 4.0)]), at(31));
    assert_eq!(describe(&effects), ["node late"]);
    // Offers keep coming for the discovery's window, then stop again.
    assert!(core.step(Step::Tick, at(32)).is_empty());
    assert_eq!(describe(&core.step(Step::Tick, at(34))), ["SUPPRESS"]);
    let later = describe(&core.step(Step::Tick, at(40)));
    assert!(!later.iter().any(|e| e == "REVIVE"), "{later:?}");
    // And the next discovery is thirty seconds after that suppression.
    let due = describe(&core.step(Step::Tick, at(64)));
    assert!(due.iter().any(|e| e == "REVIVE"), "{due:?}");
}
