//! Property tests: random sequences of registry operations and status
//! updates, however malformed or out of order.

#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use common::{at, task};
use mesos::proto::{TaskId, TaskStatus};
use proptest::prelude::*;
use registry::{Flag, InMemoryRegistry, PodKey, Registry, Retention, State, StatusOutcome};

#[derive(Debug, Clone)]
enum Op {
    Register(usize),
    Status {
        task: usize,
        state: i32,
        source: Option<i32>,
        reason: Option<i32>,
        timestamp: Option<f64>,
        uuid: Option<u8>,
    },
    Unregister(usize),
    SetFlag(usize, usize),
    Gc(u64),
}

fn op() -> impl Strategy<Value = Op> {
    let timestamp = prop_oneof![
        4 => (0u32..40).prop_map(|t| Some(f64::from(t))),
        1 => Just(None),
        1 => prop_oneof![Just(f64::NAN), Just(f64::INFINITY), Just(-1.0)].prop_map(Some),
    ];
    prop_oneof![
        2 => (0usize..4).prop_map(Op::Register),
        8 => (
            0usize..12,
            -2i32..16,
            proptest::option::of(-1i32..4),
            proptest::option::of(-1i32..40),
            timestamp,
            proptest::option::of(0u8..4),
        )
            .prop_map(|(task, state, source, reason, timestamp, uuid)| Op::Status {
                task,
                state,
                source,
                reason,
                timestamp,
                uuid,
            }),
        1 => (0usize..12).prop_map(Op::Unregister),
        1 => (0usize..12, 0usize..3).prop_map(|(t, f)| Op::SetFlag(t, f)),
        1 => (0u64..200).prop_map(Op::Gc),
    ]
}

const PODS: [&str; 4] = ["a", "b", "c", "d"];

fn check_invariants(reg: &InMemoryRegistry, finished: &HashSet<TaskId>) {
    let live = reg.list(&|t| t.is_live());
    let mut per_pod: HashMap<PodKey, Vec<TaskId>> = HashMap::new();
    for t in &live {
        per_pod.entry(t.pod_key()).or_default().push(t.id.clone());
    }
    for (pod, ids) in &per_pod {
        assert_eq!(ids.len(), 1, "pod {pod} has live tasks {ids:?}");
        assert_eq!(reg.for_pod(pod).map(|t| t.id), Some(ids[0].clone()));
    }
    for name in PODS {
        let key = task("ns", name).pod_key();
        if !per_pod.contains_key(&key) {
            assert!(reg.for_pod(&key).is_none(), "{key} has no live task");
        }
    }
    for id in finished {
        if let Some(t) = reg.get(id) {
            assert_eq!(t.state, State::Finished, "{id} left Finished");
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn random_sequences_keep_every_invariant(ops in proptest::collection::vec(op(), 1..60)) {
        let reg = InMemoryRegistry::with_retention(Retention {
            max_finished: 3,
            max_age: Duration::from_secs(50),
        });
        let mut ids: Vec<TaskId> = Vec::new();
        let mut finished: HashSet<TaskId> = HashSet::new();
        let mut clock = 0u64;
        let pick = |ids: &Vec<TaskId>, i: usize| {
            ids.get(i).cloned().unwrap_or_else(|| TaskId::new(format!("stranger-{i}")))
        };
        for op in ops {
            clock += 1;
            match op {
                Op::Register(p) => {
                    let key = task("ns", PODS[p]).pod_key();
                    let had_live = reg.for_pod(&key).is_some();
                    match reg.register(task("ns", PODS[p])) {
                        Ok(t) => {
                            prop_assert!(!had_live, "registered a second live task for {key}");
                            ids.push(t.id);
                        }
                        Err(_) => prop_assert!(had_live),
                    }
                }
                Op::Status { task: i, state, source, reason, timestamp, uuid } => {
                    let id = pick(&ids, i);
                    let before = reg.get(&id);
                    let status = TaskStatus {
                        task_id: Some(id.clone()),
                        state,
                        source,
                        reason,
                        timestamp,
                        uuid: uuid.map(|u| vec![u; 16]),
                        ..TaskStatus::default()
                    };
                    let outcome = reg.update_status(&status, at(clock));
                    let after = reg.get(&id);
                    match (&outcome, &before) {
                        (StatusOutcome::Applied(t), Some(b)) => {
                            prop_assert_eq!(t.previous, b.state);
                            prop_assert_eq!(Some(t.current), after.as_ref().map(|a| a.state));
                            prop_assert!(!b.state.is_terminal(), "moved out of Finished");
                            if matches!(b.state, State::Running | State::Killing) {
                                prop_assert_ne!(t.current, State::Pending, "went backwards");
                            }
                            if t.current.is_terminal() {
                                finished.insert(id.clone());
                            }
                        }
                        (StatusOutcome::UnknownTask { .. }, None) => {}
                        (StatusOutcome::Invalid(_), _) => prop_assert_eq!(&before, &after),
                        (StatusOutcome::Applied(_) | StatusOutcome::Duplicate { .. }
                            | StatusOutcome::Stale { .. } | StatusOutcome::Absorbed { .. }, None)
                        | (StatusOutcome::UnknownTask { .. }, Some(_)) => {
                            prop_assert!(false, "outcome {:?} for a task that is {:?}", outcome, before);
                        }
                        (_, Some(_)) => prop_assert_eq!(&before, &after, "a refused update changed the task"),
                    }
                }
                Op::Unregister(i) => {
                    let id = pick(&ids, i);
                    let was = reg.get(&id).is_some();
                    prop_assert_eq!(reg.unregister(&id).is_some(), was);
                    prop_assert!(reg.get(&id).is_none());
                }
                Op::SetFlag(i, f) => {
                    if let Some(mut t) = reg.get(&pick(&ids, i)) {
                        let state = t.state;
                        t.set(Flag::ALL[f]);
                        let stored = reg.update(t).unwrap();
                        prop_assert!(stored.has(Flag::ALL[f]));
                        prop_assert_eq!(stored.state, state);
                    }
                }
                Op::Gc(later) => {
                    let removed = reg.gc(at(clock + later));
                    prop_assert!(removed.iter().all(|t| t.state == State::Finished));
                    prop_assert!(reg.list(&|t| !t.is_live()).len() <= 3);
                }
            }
            check_invariants(&reg, &finished);
        }
    }
}
