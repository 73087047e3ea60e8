//! Executor procurement rules.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use common::*;
use mesos::proto::{CommandInfo, ExecutorInfo};
use procurement::{
    ExecutorProcurement, NodeView, OfferView, PipelineConfig, ProcureError, ProcureState,
    Procurement, default_pipeline, executor_id_for,
};

fn prototype() -> ExecutorInfo {
    ExecutorInfo {
        name: Some("mesopod executor".into()),
        command: Some(CommandInfo {
            value: Some("/usr/bin/mesopod executor".into()),
            ..Default::default()
        }),
        resources: vec![scalar("cpus", 0.25, None), scalar("mem", 128.0, None)],
        ..Default::default()
    }
}

fn config() -> PipelineConfig {
    PipelineConfig {
        executor: prototype(),
        ..Default::default()
    }
}

#[test]
fn the_executor_id_is_a_stable_function_of_its_configuration() {
    let a = executor_id_for(&prototype());
    assert_eq!(a, executor_id_for(&prototype()));
    // Pinned: a framework restarted with the same configuration, from any
    // release, must recognise the executors it launched before.
    assert_eq!(a.value, "mesopod-88a023efb772b6b8");
    let mut other = prototype();
    other.resources[0] = scalar("cpus", 0.5, None);
    assert_ne!(a, executor_id_for(&other));
    let mut with_id = prototype();
    with_id.executor_id = Some("whatever".into());
    assert_eq!(
        a,
        executor_id_for(&with_id),
        "the id field itself does not count"
    );
}

#[test]
fn a_new_agent_gets_the_executor_once_then_pods_share_it() {
    let o = typical_offer("h1");
    let view = OfferView::new(&o).unwrap();
    let pl = default_pipeline(&config()).unwrap();
    let mut state = view.state();
    let mut t1 = typical_task();
    let s1 = place(&mut state, &pl, &mut t1, view.node()).unwrap();
    let exec = s1.executor.clone().unwrap();
    assert_eq!(exec.executor_id, Some(executor_id_for(&prototype())));
    assert_eq!(exec.framework_id, Some("fw".into()));
    assert_eq!(amount(&exec.resources, "cpus"), 0.25);
    assert_eq!(amount(&exec.resources, "mem"), 128.0);
    assert_eq!(
        amount(&s1.resources, "cpus"),
        0.6,
        "the task's own resources do not include the executor's"
    );

    let left = amount(state.remaining().iter(), "cpus");
    let mut t2 = typical_task();
    // Another pod object.
    let mut p2: k8s_openapi::api::core::v1::Pod = (**t2.pod().unwrap()).clone();
    p2.spec.as_mut().unwrap().containers[0].ports = None;
    t2.set_pod(Arc::new(p2)).unwrap();
    let s2 = place(&mut state, &pl, &mut t2, view.node()).unwrap();
    assert_eq!(
        s2.executor, s1.executor,
        "the second pod runs under the same executor"
    );
    assert!(
        (left - amount(state.remaining().iter(), "cpus") - 0.6).abs() < 1e-9,
        "and pays only for itself"
    );
}

#[test]
fn an_agent_running_our_executor_reuses_it_at_no_cost() {
    let id = executor_id_for(&prototype());
    let o = with_executors(typical_offer("h1"), &[&id.value]);
    let pl = default_pipeline(&config()).unwrap();
    let (node, mut state) = node_and_state(&o);
    let mut t = typical_task();
    let spec = place(&mut state, &pl, &mut t, &node).unwrap();
    assert_eq!(spec.executor_id(), Some(&id));
    assert_eq!(amount(&spec.resources, "cpus"), 0.6);
    assert_eq!(
        amount(state.remaining().iter(), "cpus"),
        3.4,
        "nothing procured for the executor"
    );

    // With the launch info known, exactly that info is attached.
    let mut launched = prototype();
    launched.executor_id = Some(id.clone());
    launched.resources = vec![
        scalar("cpus", 0.25, Some("prod")),
        scalar("mem", 128.0, Some("prod")),
    ];
    let node = NodeView::from_offer(&o)
        .unwrap()
        .with_running_executor(Arc::new(launched.clone()));
    let mut state = ProcureState::new(&o).unwrap();
    let spec = place(&mut state, &pl, &mut t, &node).unwrap();
    assert_eq!(spec.executor.as_deref(), Some(&launched));
}

#[test]
fn other_or_several_executors_are_errors() {
    let id = executor_id_for(&prototype());
    let ex = ExecutorProcurement::new(prototype(), &["*".into()]).unwrap();
    let cases = [
        (
            vec!["mesopod-old"],
            ProcureError::ExecutorMismatch {
                running: "mesopod-old".into(),
                expected: id.value.clone(),
            },
        ),
        (
            vec![id.value.as_str(), "mesopod-old"],
            ProcureError::ExecutorConflict {
                running: vec![id.value.clone(), "mesopod-old".into()],
            },
        ),
    ];
    for (ids, want) in cases {
        let o = with_executors(typical_offer("h1"), &ids);
        let (node, mut state) = node_and_state(&o);
        let mut t = typical_task();
        assert_eq!(ex.procure(&mut t, &node, &mut state).unwrap_err(), want);
        assert!(state.spec().executor.is_none());
    }
}

#[test]
fn an_executor_that_does_not_fit_fails_with_its_own_reason() {
    let o = offer(
        "h1",
        vec![
            scalar("cpus", 0.7, None),
            scalar("mem", 1000.0, None),
            ports(&[(31000, 31010)], None),
        ],
        vec![],
    );
    let pl = default_pipeline(&config()).unwrap();
    let (node, mut state) = node_and_state(&o);
    let before = state.remaining();
    let mut t = typical_task();
    let e = place(&mut state, &pl, &mut t, &node).unwrap_err();
    assert_eq!(e.stage(), procurement::Stage::Executor);
    assert_eq!(
        e.to_string(),
        "insufficient cpus for the executor: asked 0.25, available 0.1"
    );
    assert_eq!(state.remaining(), before);
}

#[test]
fn executor_configuration_is_checked() {
    let mut p = prototype();
    p.resources.push(ports(&[(1, 2)], None));
    assert!(ExecutorProcurement::new(p, &["*".into()]).is_err());
}

#[test]
fn the_executor_procurement_alone_gives_back_what_it_took_when_it_fails_halfway() {
    // cpus fit, mem does not.
    let o = offer(
        "h1",
        vec![scalar("cpus", 1.0, None), scalar("mem", 100.0, None)],
        vec![],
    );
    let (node, mut state) = node_and_state(&o);
    let before = state.result();
    let ex = ExecutorProcurement::new(prototype(), &["*".into()]).unwrap();
    let e = ex
        .procure(&mut typical_task(), &node, &mut state)
        .unwrap_err();
    assert_eq!(
        e.to_string(),
        "insufficient mem for the executor: asked 128, available 100"
    );
    assert_eq!(state.result(), before);
}
