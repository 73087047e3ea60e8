//! Composition, several pods per offer, scoring and the best offer for a pod.
#![allow(clippy::unwrap_used)]

mod common;

use std::borrow::Cow;
use std::sync::Arc;

use common::*;
use procurement::{
    AggregateFailure, AllOrNothing, Cursor, OfferView, PipelineConfig, Placement, Placer,
    ProcureError, Procurement, Scoring, Strategy, default_pipeline, procurement_fn,
};
use serde_json::{Value, json};

fn custom_failure() -> ProcureError {
    ProcureError::Custom {
        procurement: Cow::Borrowed("quota"),
        reason: "over quota".into(),
    }
}

#[test]
fn all_or_nothing_restores_state_and_task_exactly_on_the_first_failure() {
    let o = typical_offer("h1");
    let (node, mut state) = node_and_state(&o);
    let cfg = PipelineConfig::default();
    let failing = AllOrNothing::new()
        .then(default_pipeline(&cfg).unwrap())
        .then(procurement_fn(
            |task: &mut registry::PodTask,
             _: &procurement::NodeView,
             _: &mut procurement::ProcureState| {
                task.roles = vec!["changed".to_owned()].into();
                task.offer_id = Some("o".into());
                Ok(())
            },
        ))
        .then(procurement_fn(
            |_: &mut registry::PodTask,
             _: &procurement::NodeView,
             _: &mut procurement::ProcureState| Err(custom_failure()),
        ))
        .then(procurement_fn(
            |_: &mut registry::PodTask,
             _: &procurement::NodeView,
             _: &mut procurement::ProcureState|
             -> Result<(), ProcureError> {
                panic!("steps after the failure do not run")
            },
        ));
    let mut t = typical_task();
    let task_before = t.clone();
    let (spec_before, left_before) = state.result();
    assert_eq!(
        failing.procure(&mut t, &node, &mut state).unwrap_err(),
        custom_failure()
    );
    assert_eq!(t, task_before);
    assert_eq!(state.result(), (spec_before, left_before));
    // And the state is still usable: the same pod now fits.
    default_pipeline(&cfg)
        .unwrap()
        .procure(&mut t, &node, &mut state)
        .unwrap();
    assert_eq!(amount(&state.spec().resources, "cpus"), 0.6);
}

#[test]
fn several_pods_share_one_offer_each_taking_from_what_is_left() {
    let o = offer(
        "h1",
        vec![
            scalar("cpus", 2.0, None),
            scalar("mem", 1000.0, None),
            ports(&[(31000, 31010)], None),
        ],
        vec![],
    );
    let view = OfferView::new(&o).unwrap();
    let pl = default_pipeline(&PipelineConfig::default()).unwrap();
    let mut state = view.state();
    let pod = |cpu: &str| {
        task(
            json!({"containers": [container("c", json!({"cpu": cpu, "memory": "100Mi"}), Value::Null, Value::Null)]}),
            Value::Null,
        )
    };
    let mut placed = Vec::new();
    for _ in 0..3 {
        placed.push(place(&mut state, &pl, &mut pod("600m"), view.node()).unwrap());
    }
    let e = place(&mut state, &pl, &mut pod("600m"), view.node()).unwrap_err();
    assert_eq!(
        e.to_string(),
        "insufficient cpus for the pod: asked 0.6, available 0.2"
    );
    assert_eq!(amount(state.remaining().iter(), "cpus"), 0.2);
    assert_eq!(amount(state.remaining().iter(), "mem"), 700.0);
    // Procured plus remaining is the offer.
    let procured = state.procured();
    assert_eq!(
        &procured + &state.remaining(),
        mesos::resources::Resources::from_protos(o.resources.clone()).unwrap()
    );
    let mut all = procured.to_protos();
    all.extend(state.remaining_protos());
    assert_eq!(canon(&all), canon(&o.resources));
    // Each spec holds only its own pod's resources.
    for s in &placed {
        assert_eq!(amount(&s.resources, "cpus"), 0.6);
    }
}

/// The best offer for one pod: a round of one.
fn best_fit(
    placer: &Placer,
    t: &registry::PodTask,
    views: &[OfferView],
) -> Result<Placement, AggregateFailure> {
    let mut round = placer.place_round([t], views, &mut Cursor::default());
    assert_eq!(round.len(), 1);
    round.remove(0)
}

fn sized_offer(host: &str, cpus: f64, mem: f64) -> mesos::proto::Offer {
    offer(
        host,
        vec![scalar("cpus", cpus, None), scalar("mem", mem, None)],
        vec![],
    )
}

fn small_pod() -> registry::PodTask {
    task(
        json!({"containers": [container("c", json!({"cpu": "1", "memory": "1000Mi"}), Value::Null, Value::Null)]}),
        Value::Null,
    )
}

fn pick(scoring: Scoring, offers: &[mesos::proto::Offer]) -> String {
    let views: Vec<OfferView> = offers.iter().map(|o| OfferView::new(o).unwrap()).collect();
    let placer = Placer::new(
        default_pipeline(&PipelineConfig::default()).unwrap(),
        scoring,
    );
    let t = small_pod();
    let p = best_fit(&placer, &t, &views).unwrap();
    assert_eq!(p.offer_id, *views[p.offer_index].id());
    assert_eq!(p.task.offer_id.as_ref(), Some(&p.offer_id));
    p.task.spec.as_ref().unwrap().hostname.clone()
}

#[test]
fn bin_packing_prefers_the_tightest_fit_spreading_the_roomiest() {
    let offers = [
        sized_offer("big", 16.0, 16000.0),
        sized_offer("tight", 1.5, 1200.0),
        sized_offer("mid", 4.0, 4000.0),
        sized_offer("tiny", 0.5, 500.0),
    ];
    let binpack = Scoring {
        strategy: Strategy::BinPack,
        cpus_weight: 1.0,
        mem_weight: 1.0,
    };
    let spread = Scoring {
        strategy: Strategy::Spread,
        ..binpack
    };
    assert_eq!(pick(binpack, &offers), "tight");
    assert_eq!(pick(spread, &offers), "big");
}

#[test]
fn weights_decide_which_resource_counts() {
    // "a" is tight on cpus, "b" tight on mem.
    let offers = [
        sized_offer("a", 1.25, 10000.0),
        sized_offer("b", 10.0, 1100.0),
    ];
    let cpu_only = Scoring {
        strategy: Strategy::BinPack,
        cpus_weight: 1.0,
        mem_weight: 0.0,
    };
    let mem_only = Scoring {
        strategy: Strategy::BinPack,
        cpus_weight: 0.0,
        mem_weight: 1.0,
    };
    assert_eq!(pick(cpu_only, &offers), "a");
    assert_eq!(pick(mem_only, &offers), "b");
}

#[test]
fn ties_go_to_the_lowest_hostname_whatever_the_offer_order() {
    let mut offers = vec![
        sized_offer("c", 4.0, 4000.0),
        sized_offer("a", 4.0, 4000.0),
        sized_offer("b", 4.0, 4000.0),
    ];
    for _ in 0..3 {
        assert_eq!(pick(Scoring::default(), &offers), "a");
        offers.rotate_left(1);
    }
}

#[test]
fn best_fit_explains_kubernetes_style_when_nothing_fits_and_leaves_the_task_alone() {
    let mut offers = [
        sized_offer("c1", 0.5, 4000.0),
        sized_offer("c2", 0.5, 4000.0),
        sized_offer("c3", 0.5, 4000.0),
        offer(
            "s1",
            vec![scalar("cpus", 4.0, None), scalar("mem", 4000.0, None)],
            vec![text_attr("zone", "z2")],
        ),
        offer(
            "s2",
            vec![scalar("cpus", 4.0, None), scalar("mem", 4000.0, None)],
            vec![],
        ),
    ];
    offers.rotate_left(2);
    let views: Vec<OfferView> = offers.iter().map(|o| OfferView::new(o).unwrap()).collect();
    let placer = Placer::new(
        default_pipeline(&PipelineConfig::default()).unwrap(),
        Scoring::default(),
    );
    let t = task(
        json!({"nodeSelector": {"zone": "z1"}, "containers": [container("c", json!({"cpu": "1", "memory": "100Mi"}), Value::Null, Value::Null)]}),
        Value::Null,
    );
    let before = t.clone();
    let e = best_fit(&placer, &t, &views).unwrap_err();
    assert_eq!(t, before);
    // Node checks come first, so the short-on-cpu agents also fail the selector.
    assert_eq!(
        e.to_string(),
        "0/5 agents available: 5 node selector mismatch."
    );
    assert_eq!(e.failures.len(), 5);

    let t = task(
        json!({"containers": [container("c", json!({"cpu": "1", "memory": "100Mi"}), Value::Null, Value::Null)]}),
        json!({"mesopod.io/roles": ""}),
    );
    let e = best_fit(&placer, &t, &views).unwrap_err();
    assert_eq!(
        e.to_string(),
        "0/5 agents available: 5 empty roles annotation."
    );

    let t = task(
        json!({"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": ["z2"]}]}]}}},
               "containers": [container("c", json!({"cpu": "2", "memory": "5000Mi"}), Value::Null, Value::Null)]}),
        Value::Null,
    );
    let e = best_fit(&placer, &t, &views).unwrap_err();
    assert_eq!(
        e.to_string(),
        "0/5 agents available: 3 insufficient cpus, 1 insufficient mem, 1 node affinity mismatch."
    );
}

#[test]
fn best_fit_succeeds_where_only_one_agent_fits_and_reports_that_agent() {
    let offers = [
        sized_offer("c1", 0.5, 4000.0),
        sized_offer("ok", 4.0, 4000.0),
        sized_offer("c2", 0.5, 100.0),
    ];
    assert_eq!(pick(Scoring::default(), &offers), "ok");
}

#[test]
fn an_invalid_pod_is_reported_as_such_on_every_agent() {
    let offers = [sized_offer("a", 4.0, 4000.0), sized_offer("b", 4.0, 4000.0)];
    let views: Vec<OfferView> = offers.iter().map(|o| OfferView::new(o).unwrap()).collect();
    let placer = Placer::new(
        default_pipeline(&PipelineConfig::default()).unwrap(),
        Scoring::default(),
    );
    let t = task(
        json!({"containers": [container("c", json!({"cpu": "-1"}), Value::Null, Value::Null)]}),
        Value::Null,
    );
    let e = best_fit(&placer, &t, &views).unwrap_err();
    assert!(e.is_invalid_pod(), "{e}");
    assert!(
        e.to_string().starts_with(
            "0/2 agents available: 2 invalid pod (container \"c\": cpu: \"-1\" is negative)"
        ),
        "{e}"
    );
}

#[test]
fn a_launched_task_that_let_go_of_its_pod_is_never_placed_again() {
    let offers = [sized_offer("a", 4.0, 4000.0)];
    let views: Vec<OfferView> = offers.iter().map(|o| OfferView::new(o).unwrap()).collect();
    let placer = Placer::new(
        default_pipeline(&PipelineConfig::default()).unwrap(),
        Scoring::default(),
    );
    let mut t = small_pod();
    t.release_pod();
    let e = best_fit(&placer, &t, &views).unwrap_err();
    assert!(e.is_invalid_pod(), "{e}");
    assert!(e.to_string().contains("no longer holds its pod"), "{e}");
}

#[test]
fn a_pod_object_replaced_in_the_task_is_worked_out_again() {
    let o = sized_offer("h", 4.0, 4000.0);
    let (node, mut state) = node_and_state(&o);
    let pl = default_pipeline(&PipelineConfig::default()).unwrap();
    let mut t = small_pod();
    place(&mut state, &pl, &mut t, &node).unwrap();
    let mut bigger: k8s_openapi::api::core::v1::Pod = (**t.pod().unwrap()).clone();
    let c = &mut bigger.spec.as_mut().unwrap().containers[0];
    c.resources
        .as_mut()
        .unwrap()
        .requests
        .as_mut()
        .unwrap()
        .insert(
            "cpu".into(),
            k8s_openapi::apimachinery::pkg::api::resource::Quantity("2".into()),
        );
    t.set_pod(Arc::new(bigger)).unwrap();
    let s = place(&mut state, &pl, &mut t, &node).unwrap();
    assert_eq!(amount(&s.resources, "cpus"), 2.0);
}

#[test]
fn what_a_pipeline_promises_survives_boxing_and_sharing() {
    let pl = default_pipeline(&PipelineConfig::default()).unwrap();
    assert!(!pl.modifies_task() && pl.enforces_node_selector());
    // As the scheduler holds it: behind an Arc of a trait object.
    let shared: std::sync::Arc<dyn Procurement + Send + Sync> = std::sync::Arc::new(pl);
    assert!(!shared.modifies_task() && shared.enforces_node_selector());
    let boxed: Box<dyn Procurement + Send + Sync> = Box::new(shared);
    assert!(!boxed.modifies_task() && boxed.enforces_node_selector());
    // A pipeline without the node step promises nothing about selectors.
    let resources = AllOrNothing::new().then(
        procurement::PodResourcesProcurement::new(procurement::ResourceDefaults::default())
            .unwrap(),
    );
    assert!(!resources.enforces_node_selector());
}
