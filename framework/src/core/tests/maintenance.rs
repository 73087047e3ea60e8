//! Mesos maintenance: a machine the master drains is marked, emptied
//! through evictions, and given back with an accepted inverse offer; an
//! offer without `unavailability` ends it.

use super::*;
use mesos::proto::{DurationInfo, InverseOffer, TimeInfo, Unavailability};

/// A window starting at `at(start)`, one hour long.
fn unavailability(start: u64) -> Unavailability {
    let since_epoch = at(start).duration_since(SystemTime::UNIX_EPOCH).unwrap();
    Unavailability {
        start: Some(TimeInfo {
            nanoseconds: i64::try_from(since_epoch.as_nanos()).unwrap(),
        }),
        duration: Some(DurationInfo {
            nanoseconds: 3_600_000_000_000,
        }),
    }
}

fn inverse_offer(id: &str, host: &str, start: u64) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::InverseOffers as i32),
        inverse_offers: Some(event::InverseOffers {
            inverse_offers: vec![InverseOffer {
                id: Some(OfferId::new(id)),
                framework_id: Some(FrameworkId::new("fw")),
                agent_id: Some(AgentId::new(format!("agent-{host}"))),
                unavailability: Some(unavailability(start)),
                ..Default::default()
            }],
        }),
        ..Default::default()
    })
}

fn rescind_inverse(id: &str) -> Step {
    mesos_event(Event {
        r#type: Some(event::Type::RescindInverseOffer as i32),
        rescind_inverse_offer: Some(event::RescindInverseOffer {
            inverse_offer_id: Some(OfferId::new(id)),
        }),
        ..Default::default()
    })
}

/// An offer from `host` with `id`, carrying the window when `draining`.
fn offer_from(host: &str, id: &str, draining: Option<u64>) -> Step {
    let mut o = offer(host, 4.0);
    o.id = Some(OfferId::new(id));
    o.unavailability = draining.map(unavailability);
    offers(vec![o])
}

/// The pods the step evicted, by name.
fn evicted(effects: &[Effect]) -> Vec<String> {
    let mut names: Vec<String> = writes(effects)
        .filter_map(|w| match w {
            Write::Evict { key, .. } => Some(key.name.clone()),
            _ => None,
        })
        .collect();
    names.sort();
    names
}

/// The inverse offers the step accepted.
fn accepted_inverse(effects: &[Effect]) -> Vec<String> {
    effects
        .iter()
        .filter_map(|e| match e {
            Effect::Call(c, _) => c.accept_inverse_offers.as_ref(),
            _ => None,
        })
        .flat_map(|a| a.inverse_offer_ids.iter().map(|i| i.value.clone()))
        .collect()
}

/// The Node marks the step wrote: `(node, marked)`.
fn marks(effects: &[Effect]) -> Vec<(String, bool)> {
    writes(effects)
        .filter_map(|w| match w {
            Write::NodeMaintenance { node, window } => Some((node.clone(), window.is_some())),
            _ => None,
        })
        .collect()
}

fn reasons(effects: &[Effect]) -> Vec<String> {
    writes(effects)
        .filter_map(|w| match w {
            Write::Event(e) => e.reason.clone(),
            _ => None,
        })
        .collect()
}

/// A core whose h1 runs `web-0` and `web-1`, both RUNNING.
fn busy_h1() -> (Core, Vec<(String, TaskId)>) {
    let mut core = cluster(&["h1"]);
    let tasks = run(&mut core, vec![pod("web-0", "1"), pod("web-1", "1")], at(1));
    for (_, id) in &tasks {
        let _ = core.step(update(status(id, TaskState::TaskRunning, false)), at(2));
    }
    (core, tasks)
}

#[test]
fn an_inverse_offer_marks_the_node_evicts_its_pods_and_is_accepted_once_they_are_gone() {
    let (mut core, tasks) = busy_h1();
    let effects = core.step(inverse_offer("inv-1", "h1", 10_000), at(10));
    assert_eq!(marks(&effects), [("h1".to_owned(), true)]);
    assert!(reasons(&effects).contains(&"MaintenanceScheduled".to_owned()));
    assert_eq!(evicted(&effects), ["web-0", "web-1"]);
    assert!(
        accepted_inverse(&effects).is_empty(),
        "pods still run there"
    );
    let window = writes(&effects).find_map(|w| match w {
        Write::NodeMaintenance { window, .. } => *window,
        _ => None,
    });
    assert_eq!(
        window,
        Some(apiserver::MaintenanceWindow {
            start: at(10_000),
            end: Some(at(13_600)),
        })
    );

    // A budget held them: the next try waits kubectl drain's 5 s.
    assert!(evicted(&core.step(Step::Tick, at(12))).is_empty());
    assert_eq!(evicted(&core.step(Step::Tick, at(15))), ["web-0", "web-1"]);

    // One goes; the other is still there: nothing is accepted yet.
    let _ = core.step(
        update(status(&tasks[0].1, TaskState::TaskKilled, false)),
        at(16),
    );
    assert!(accepted_inverse(&core.step(Step::Tick, at(17))).is_empty());
    let _ = core.step(
        update(status(&tasks[1].1, TaskState::TaskKilled, false)),
        at(18),
    );
    let effects = core.step(Step::Tick, at(19));
    assert_eq!(accepted_inverse(&effects), ["inv-1"]);
    assert!(reasons(&effects).contains(&"InverseOfferAccepted".to_owned()));
    // Accepted once: the next sweep has nothing to answer.
    assert!(accepted_inverse(&core.step(Step::Tick, at(20))).is_empty());
}

#[test]
fn an_empty_agent_accepts_its_inverse_offer_at_once_refusing_more_until_the_window() {
    let mut core = cluster(&["h1"]);
    let effects = core.step(inverse_offer("inv-1", "h1", 1_000), at(10));
    assert_eq!(accepted_inverse(&effects), ["inv-1"]);
    let refuse = effects.iter().find_map(|e| match e {
        Effect::Call(c, _) => c
            .accept_inverse_offers
            .as_ref()
            .and_then(|a| a.filters.as_ref())
            .and_then(|f| f.refuse_seconds),
        _ => None,
    });
    assert_eq!(refuse, Some(990.0));
}

#[test]
fn a_rescinded_inverse_offer_is_not_answered() {
    let (mut core, tasks) = busy_h1();
    let _ = core.step(inverse_offer("inv-1", "h1", 10_000), at(10));
    let _ = core.step(rescind_inverse("inv-1"), at(11));
    for (_, id) in &tasks {
        let _ = core.step(update(status(id, TaskState::TaskKilled, false)), at(12));
    }
    assert!(accepted_inverse(&core.step(Step::Tick, at(13))).is_empty());
}

#[test]
fn a_draining_agent_takes_no_pod_even_one_that_tolerates_every_taint() {
    let mut core = cluster(&["h1"]);
    let effects = core.step(offer_from("h1", "offer-h1-b", Some(10_000)), at(1));
    assert_eq!(marks(&effects), [("h1".to_owned(), true)]);
    let mut tolerant = (*pod("agent-logs", "1")).clone();
    tolerant.spec.as_mut().unwrap().tolerations =
        Some(vec![k8s_openapi::api::core::v1::Toleration {
            operator: Some("Exists".into()),
            ..Default::default()
        }]);
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(tolerant))), at(2));
    let effects = core.step(Step::Schedule, at(2));
    assert!(rounds(&effects).is_empty(), "{:?}", describe(&effects));

    // Another agent takes it.
    let _ = core.step(offers(vec![offer("h2", 4.0)]), at(3));
    let effects = core.step(Step::Schedule, at(3));
    let placed: Vec<String> = rounds(&effects)
        .into_iter()
        .flatten()
        .map(|b| b.offer.value.clone())
        .collect();
    assert_eq!(placed, ["offer-h2"]);
}

#[test]
fn an_offer_without_unavailability_ends_the_maintenance() {
    let mut core = cluster(&["h1"]);
    let _ = core.step(offer_from("h1", "offer-h1-b", Some(10_000)), at(1));
    // Still scheduled: marked once, not again.
    let effects = core.step(offer_from("h1", "offer-h1-c", Some(10_000)), at(2));
    assert!(marks(&effects).is_empty(), "{:?}", describe(&effects));
    // The schedule no longer names the machine.
    let effects = core.step(offer_from("h1", "offer-h1-d", None), at(3));
    assert_eq!(marks(&effects), [("h1".to_owned(), false)]);
    assert!(reasons(&effects).contains(&"MaintenanceEnded".to_owned()));
    let (_, effects) = launched(&mut core, pod("web", "1"), at(4));
    assert!(!rounds(&effects).is_empty(), "{:?}", describe(&effects));
}

#[test]
fn a_mark_an_earlier_leader_wrote_fences_the_node_until_the_master_says_otherwise() {
    let mut core = cluster(&["h1"]);
    let _ = core.step(
        Step::Input(Input::NodeCordoned {
            node: "h1".into(),
            cordoned: true,
            maintenance: true,
        }),
        at(1),
    );
    let _ = core.step(Step::Input(Input::PodUpsert(pod("web", "1"))), at(1));
    assert!(rounds(&core.step(Step::Schedule, at(1))).is_empty());
    let effects = core.step(offer_from("h1", "offer-h1-b", None), at(2));
    assert_eq!(marks(&effects), [("h1".to_owned(), false)]);
}

#[test]
fn a_moved_window_is_written_again() {
    let mut core = cluster(&["h1"]);
    let _ = core.step(offer_from("h1", "offer-h1-b", Some(10_000)), at(1));
    let effects = core.step(inverse_offer("inv-1", "h1", 20_000), at(2));
    assert_eq!(marks(&effects), [("h1".to_owned(), true)]);
}

#[test]
fn an_agent_drained_by_the_operator_marks_its_node_once_and_its_first_offer_after_lifts_it() {
    let (mut core, tasks) = busy_h1();
    let killed = |id: &TaskId, state| {
        let mut s = status(id, state, true);
        s.reason = Some(mesos::proto::task_status::Reason::ReasonAgentDraining as i32);
        update(s)
    };
    let effects = core.step(killed(&tasks[0].1, TaskState::TaskKilling), at(10));
    assert_eq!(marks(&effects), [("h1".to_owned(), true)]);
    assert_eq!(reasons(&effects), ["AgentDraining"]);
    assert!(evicted(&effects).is_empty(), "Mesos kills them itself");
    // Every other kill of the drain leaves the mark as it is.
    for (_, id) in &tasks {
        let effects = core.step(killed(id, TaskState::TaskKilled), at(11));
        assert!(marks(&effects).is_empty());
    }
    // The agent is fenced while marked; reactivated, its offer lifts the mark.
    let effects = core.step(offer_from("h1", "o-1", None), at(20));
    assert_eq!(marks(&effects), [("h1".to_owned(), false)]);
    assert!(reasons(&effects).contains(&"MaintenanceEnded".to_owned()));
}
