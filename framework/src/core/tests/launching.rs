//! A round on its way to Mesos: bindings, ACCEPTs within the master's
//! limit, what each answer of the master means, held KILLs, drops.

use std::sync::Mutex;

use mesos::proto::task_status::{Reason, Source};

use super::*;
use crate::config::SchedulingConfig;
use crate::core::Launch;

/// A store whose pods the test changes as the runner's writes would.
#[derive(Clone, Default)]
struct Store(Arc<Mutex<Vec<Pod>>>);

impl Store {
    /// `name` as the store has it once bound to `host`.
    fn bind(&self, name: &str, host: &str) {
        let mut p = (*pod(name, "1")).clone();
        p.spec.as_mut().unwrap().node_name = Some(host.into());
        let mut pods = self.0.lock().unwrap();
        pods.retain(|q| q.metadata.name.as_deref() != Some(name));
        pods.push(p);
    }
}

impl Lookup for Store {
    fn meta(&self, _key: &str) -> Option<Vec<u8>> {
        None
    }
    fn pods(&self) -> Vec<Pod> {
        self.0.lock().unwrap().clone()
    }
}

/// A subscribed core over `store`, sending ACCEPTs of at most `limit`
/// bytes, with offers from `hosts` (16 cpus each).
fn limited(store: &Store, limit: usize, hosts: &[&str]) -> Core {
    let config = SchedulingConfig {
        max_accept_bytes: limit,
        ..SchedulingConfig::default()
    };
    let mut core = core_configured(Admission::none(), Box::new(store.clone()), config);
    let _ = core.step(subscribed(), at(0));
    let _ = core.step(
        offers(hosts.iter().map(|h| offer(h, 16.0)).collect()),
        at(0),
    );
    core
}

/// The bindings of `ids` came back with pods of `bytes` bytes of JSON.
fn bound_with(ids: &[TaskId], bytes: usize) -> Step {
    let json = format!(
        r#"{{"metadata":{{"name":"p","annotations":{{"pad":"{}"}}}}}}"#,
        "x".repeat(bytes)
    );
    let pod = BoundPod {
        json: json.into_bytes(),
        rv: Some(7),
    };
    let results = ids.iter().map(|id| (id.clone(), Ok(pod.clone())));
    Step::Input(Input::Launch(Launch::Bound(results.collect())))
}

/// Queues pods `names` (1 cpu each) and places one round.
fn round(core: &mut Core, names: &[&str], now: SystemTime) -> Vec<Effect> {
    for n in names {
        let _ = core.step(Step::Input(Input::PodUpsert(pod(n, "1"))), now);
    }
    core.step(Step::Schedule, now)
}

/// A core whose pod `a` is bound to h1 and its ACCEPT sent (offers from
/// `hosts`): the task's id.
fn accepting_a(hosts: &[&str]) -> (Core, TaskId) {
    let store = Store::default();
    let mut core = limited(&store, 1 << 20, hosts);
    let effects = round(&mut core, &["a"], at(1));
    let id = ids(&effects)[0].clone();
    store.bind("a", "h1");
    let _ = core.step(bound(std::slice::from_ref(&id)), at(1));
    (core, id)
}

fn ids(effects: &[Effect]) -> Vec<TaskId> {
    rounds(effects)
        .iter()
        .flat_map(|r| r.iter().map(|b| b.task.clone()))
        .collect()
}

#[test]
fn a_bound_round_is_launched_and_reconciled_only_once_its_accept_is_answered() {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    // Only a durable binding makes an ACCEPT.
    assert_eq!(
        describe(&core.step(bound(std::slice::from_ref(&id)), at(1))),
        ["ACCEPT offer-h1: web"]
    );
    // Mesos has not heard of the task yet: an explicit reconciliation
    // leaves it out.
    let _ = core.step(Step::Input(Input::Reconcile { explicit: true }), at(1));
    assert_eq!(
        describe(&core.step(Step::Tick, at(1))),
        ["RECONCILE 0 tasks"]
    );
    assert!(core.step(accepted(&[id]), at(2)).is_empty());
    let _ = core.step(Step::Input(Input::Reconcile { explicit: true }), at(2));
    assert_eq!(
        describe(&core.step(Step::Tick, at(2))),
        ["RECONCILE 1 tasks"]
    );
}

#[test]
fn a_pod_deleted_while_launching_is_killed_once_its_accept_is_answered() {
    let mut core = cluster(&["h1"]);
    let web = pod("web", "1");
    let (id, _) = launched(&mut core, web.clone(), at(1));
    let _ = core.step(bound(std::slice::from_ref(&id)), at(1));
    // The KILL would reach Mesos before the LAUNCH and be lost: held.
    let deleted = Step::Input(Input::PodDeleted(web));
    assert!(core.step(deleted, at(1)).is_empty());
    assert_eq!(
        describe(&core.step(accepted(std::slice::from_ref(&id)), at(2))),
        [format!("KILL {id}")]
    );
}

#[test]
fn a_pod_that_could_not_be_bound_loses_its_task_and_its_offer_goes_back() {
    let mut core = cluster(&["h1"]);
    let web = pod("web", "1");
    let (id, _) = launched(&mut core, web.clone(), at(1));
    let failed = Step::Input(Input::Launch(Launch::Bound(vec![(
        id.clone(),
        Err("the pod was deleted".into()),
    )])));
    // Nothing to launch on the offer: declined at once, not held.
    assert_eq!(describe(&core.step(failed, at(1))), ["DECLINE offer-h1"]);
    // No task any more: a deletion has nothing to kill, and an update for
    // the task is for a task mesopod does not know.
    assert!(
        core.step(Step::Input(Input::PodDeleted(web)), at(1))
            .is_empty()
    );
    let running = update(status(&id, TaskState::TaskRunning, true));
    assert_eq!(
        describe(&core.step(running, at(2))),
        [format!("KILL {id}"), format!("ACK {id}")]
    );
}

#[test]
fn placement_puts_on_one_offer_no_more_than_one_accept_carries() {
    let store = Store::default();
    // About two small pods' worth per ACCEPT.
    let mut core = limited(&store, 6 * 1024, &["h1"]);
    let effects = round(&mut core, &["a", "b", "c", "d"], at(1));
    assert_eq!(
        describe(&effects),
        ["launch a on offer-h1, b on offer-h1"],
        "the others wait for the offer's leftovers"
    );
    // Not unschedulable: no event, no condition.
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(1));
    let effects = core.step(Step::Schedule, at(2));
    assert_eq!(describe(&effects), ["launch c on offer-h1, d on offer-h1"]);
}

#[test]
fn what_outgrows_an_accept_goes_back_to_its_node_and_launches_from_the_next_offer() {
    let store = Store::default();
    let mut core = limited(&store, 16 * 1024, &["h1", "h2"]);
    let effects = round(&mut core, &["a", "b"], at(1));
    let placed = ids(&effects);
    assert_eq!(describe(&effects), ["launch a on offer-h1, b on offer-h1"]);
    store.bind("a", "h1");
    store.bind("b", "h1");
    // Bound larger than placement estimated: one fits, the other is not
    // sent, and waits for h1 again, bound.
    let effects = core.step(bound_with(&placed, 9 * 1024), at(1));
    assert_eq!(describe(&effects), ["ACCEPT offer-h1: a"]);
    let call = &accepts(&effects)[0].call;
    assert!(prost::Message::encoded_len(call) <= 16 * 1024);
    let _ = core.step(accepted(&placed[..1]), at(1));
    // h2 has room, but b is bound to h1: it goes nowhere else.
    assert!(rounds(&core.step(Step::Schedule, at(60))).is_empty());
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(60));
    let effects = core.step(Step::Schedule, at(200));
    let again = rounds(&effects);
    assert_eq!(describe(&effects), ["launch b on offer-h1"]);
    assert!(again[0][0].binding.relaunch, "no second Binding");
    assert_ne!(again[0][0].task, placed[1], "a new task");
}

#[test]
fn a_pod_too_large_for_any_accept_fails_with_the_sizes() {
    let store = Store::default();
    let mut core = limited(&store, 8 * 1024, &["h1"]);
    let effects = round(&mut core, &["a"], at(1));
    let effects = core.step(bound_with(&ids(&effects), 9 * 1024), at(1));
    assert_eq!(
        describe(&effects),
        ["write status a TASK_ERROR", "DECLINE offer-h1"]
    );
    let Effect::WriteStatus(w) = &effects[0] else {
        unreachable!()
    };
    let message = w.status.message.as_deref().unwrap();
    assert!(
        message.contains("more than one ACCEPT may carry (8192 bytes"),
        "{message}"
    );
}

#[test]
fn a_refused_accept_sends_its_pods_back_to_their_node_and_declines_the_offer() {
    let (mut core, id) = accepting_a(&["h1", "h2"]);
    let why = AcceptOutcome::Refused("413 Payload Too Large".into());
    assert_eq!(
        describe(&core.step(answered("offer-h1", std::slice::from_ref(&id), why), at(1))),
        ["DECLINE offer-h1"],
        "no status: the pod is not failed"
    );
    // Its task is forgotten: a late update for it is for no task of ours.
    // It goes back to h1 only, after a backoff.
    assert!(rounds(&core.step(Step::Schedule, at(60))).is_empty());
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(60));
    let effects = core.step(Step::Schedule, at(200));
    assert_eq!(describe(&effects), ["launch a on offer-h1"]);
    assert!(rounds(&effects)[0][0].binding.relaunch);
}

#[test]
fn an_accept_with_no_answer_launches_nothing_again_until_the_master_says() {
    let (mut core, id) = accepting_a(&["h1", "h2"]);
    let why = AcceptOutcome::Unknown("connection reset".into());
    assert_eq!(
        describe(&core.step(answered("offer-h1", std::slice::from_ref(&id), why), at(1))),
        ["DECLINE offer-h1"]
    );
    // The master is asked; meanwhile nothing is queued, and h1 is held.
    let asked = describe(&core.step(Step::Tick, at(1)));
    assert!(asked.contains(&"RECONCILE 1 tasks".to_owned()), "{asked:?}");
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(1));
    let effects = round(&mut core, &["other"], at(2));
    assert_eq!(describe(&effects), ["launch other on offer-h2"]);
    // The master never got it: a, and only a, goes back to h1.
    let mut gone = status(&id, TaskState::TaskGone, false);
    gone.source = Some(Source::SourceMaster as i32);
    gone.reason = Some(Reason::ReasonReconciliation as i32);
    assert!(core.step(update(gone), at(3)).is_empty());
    let effects = core.step(Step::Schedule, at(3));
    assert_eq!(describe(&effects), ["launch a on offer-h1"]);
    assert!(rounds(&effects)[0][0].binding.relaunch);
}

#[test]
fn an_accept_that_landed_after_all_is_reconciled_as_running() {
    let (mut core, id) = accepting_a(&["h1"]);
    let why = AcceptOutcome::Unknown("connection reset".into());
    let _ = core.step(answered("offer-h1", std::slice::from_ref(&id), why), at(1));
    let running = update(status(&id, TaskState::TaskRunning, true));
    assert_eq!(
        describe(&core.step(running, at(2))),
        ["write status a TASK_RUNNING"]
    );
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(2));
    assert!(rounds(&core.step(Step::Schedule, at(60))).is_empty());
}

#[test]
fn a_task_the_master_drops_goes_back_to_its_node_even_before_its_accept_returns() {
    let (mut core, id) = accepting_a(&["h1", "h2"]);
    // The rescinded offer's drop overtakes the ACCEPT's 202.
    let mut drop = status(&id, TaskState::TaskDropped, false);
    drop.source = Some(Source::SourceMaster as i32);
    drop.reason = Some(Reason::ReasonInvalidOffers as i32);
    assert!(
        core.step(update(drop), at(1)).is_empty(),
        "no Failed status: the pod did nothing wrong"
    );
    assert!(
        core.step(accepted(std::slice::from_ref(&id)), at(1))
            .is_empty()
    );
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(60));
    let effects = core.step(Step::Schedule, at(60));
    assert_eq!(describe(&effects), ["launch a on offer-h1"]);
    assert!(rounds(&effects)[0][0].binding.relaunch);
}

#[test]
fn a_pod_deleted_while_its_accept_was_refused_is_finalized_not_relaunched() {
    let (mut core, id) = accepting_a(&["h1"]);
    let mut deleting = (*pod("a", "1")).clone();
    deleting.metadata.deletion_timestamp = Some(
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(crate::podstatus::timestamp(at(1))),
    );
    deleting.spec.as_mut().unwrap().node_name = Some("h1".into());
    let _ = core.step(Step::Input(Input::PodUpsert(Arc::new(deleting))), at(1));
    let why = AcceptOutcome::Refused("503 Service Unavailable".into());
    let effects = core.step(answered("offer-h1", std::slice::from_ref(&id), why), at(1));
    assert_eq!(
        describe(&effects),
        ["write status a TASK_DROPPED", "DECLINE offer-h1"]
    );
    let _ = core.step(offers(vec![offer("h1", 16.0)]), at(60));
    assert!(rounds(&core.step(Step::Schedule, at(60))).is_empty());
}

#[test]
fn a_task_not_running_by_its_deadline_is_killed_and_the_kill_retried() {
    let mut core = cluster(&["h1"]);
    let (id, _) = launched(&mut core, pod("web", "1"), at(1));
    let _ = core.step(bound(std::slice::from_ref(&id)), at(1));
    let _ = core.step(accepted(std::slice::from_ref(&id)), at(1));
    let late = at(1) + crate::config::DEFAULT_START_DEADLINE;
    let kill = format!("KILL {id}");
    let effects = describe(&core.step(Step::Tick, late));
    assert!(effects.contains(&kill), "{effects:?}");
    // Sent once; again only after the retry interval.
    let effects = describe(&core.step(Step::Tick, late + Duration::from_secs(1)));
    assert!(!effects.contains(&kill), "{effects:?}");
    let retry = late + crate::core::sweep::KILL_RETRY;
    let effects = describe(&core.step(Step::Tick, retry));
    assert!(effects.contains(&kill), "{effects:?}");
}
