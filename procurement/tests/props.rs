//! Properties of the default pipeline over random offers and pods:
//! failure changes nothing; procured + remaining == offered; nothing is
//! procured twice or beyond the offer; host ports never overlap.
#![allow(clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};

use common::*;
use mesos::proto::{ExecutorInfo, Offer, Resource};
use mesos::resources::Resources;
use procurement::{
    OfferView, PipelineConfig, PortStrategy, ResourceDefaults, default_pipeline, executor_id_for,
};
use proptest::prelude::*;
use serde_json::{Value, json};

const ROLES: [Option<&str>; 3] = [None, Some("prod"), Some("other")];

fn config() -> PipelineConfig {
    PipelineConfig {
        framework_roles: vec!["prod".into(), "*".into()],
        default_pod_roles: vec!["*".into()],
        default_port_strategy: PortStrategy::Fixed,
        resources: ResourceDefaults::default(),
        executor: ExecutorInfo {
            resources: vec![scalar("cpus", 0.1, None), scalar("mem", 32.0, None)],
            ..Default::default()
        },
    }
}

fn arb_offer() -> impl Strategy<Value = (Offer, bool)> {
    let scalar_res = (0usize..4, 0usize..3, 1u32..4000).prop_map(|(k, role, v)| {
        let name = ["cpus", "mem", "disk", "gpus"][k];
        let amount = match name {
            "cpus" => f64::from(v) / 500.0,
            "gpus" => f64::from(v % 3 + 1),
            _ => f64::from(v),
        };
        scalar(name, amount, ROLES[role])
    });
    let port_res = (0usize..3, 31000u64..31030, 0u64..6)
        .prop_map(|(role, b, len)| ports(&[(b, b + len)], ROLES[role]));
    // A base of unreserved cpus and mem so that a good share of pods fit.
    let base = (250u32..8000, 64u32..4000).prop_map(|(c, m)| {
        vec![
            scalar("cpus", f64::from(c) / 1000.0, None),
            scalar("mem", f64::from(m), None),
        ]
    });
    (
        base,
        prop::collection::vec(scalar_res, 0..6),
        prop::collection::vec(port_res, 0..4),
        any::<bool>(),
    )
        .prop_map(|(mut rs, extra, ps, ours)| {
            rs.extend(extra);
            rs.extend(ps);
            (offer("h1", rs, vec![text_attr("rack", "r1")]), ours)
        })
}

fn arb_pod() -> impl Strategy<Value = registry::PodTask> {
    let port = (
        1u16..100,
        prop_oneof![2 => Just(0u16), 1 => 31000u16..31036],
        prop_oneof![Just("TCP"), Just("UDP")],
    );
    let gpus = prop_oneof![6 => Just(0u32), 1 => 1u32..3];
    let c = (
        0u32..1500,
        0u32..600,
        gpus,
        prop::collection::vec(port, 0..3),
    );
    (
        prop::collection::vec(c, 1..3),
        prop_oneof![1 => Just(None), 2 => Just(Some("wildcard")), 1 => Just(Some("fixed"))],
        prop_oneof![4 => Just(None), 2 => Just(Some("prod")), 2 => Just(Some("*,prod")), 1 => Just(Some("")), 1 => Just(Some("other"))],
    )
        .prop_map(|(cs, strategy, roles)| {
            let containers: Vec<Value> = cs
                .iter()
                .enumerate()
                .map(|(i, (cpu, mem, gpu, ps))| {
                    let mut req = json!({"cpu": format!("{cpu}m"), "memory": format!("{mem}Mi")});
                    if *gpu > 0 {
                        req["nvidia.com/gpu"] = json!(gpu.to_string());
                    }
                    let ports: Vec<Value> = ps
                        .iter()
                        .map(|(cp, hp, proto)| json!({"containerPort": cp, "hostPort": hp, "protocol": proto}))
                        .collect();
                    container(&format!("c{i}"), req, Value::Null, json!(ports))
                })
                .collect();
            let mut ann = serde_json::Map::new();
            if let Some(s) = strategy {
                ann.insert("mesopod.io/port-mapping".into(), json!(s));
            }
            if let Some(r) = roles {
                ann.insert("mesopod.io/roles".into(), json!(r));
            }
            task(json!({"containers": containers}), Value::Object(ann))
        })
}

/// Per (name, role): offered amount >= procured amount; ports subset.
fn within(procured: &[Resource], offered: &[Resource]) -> bool {
    let (p, o) = (canon(procured), canon(offered));
    p.iter().all(|(k, (m, ports))| {
        o.get(k).is_some_and(|(om, oports)| {
            m <= om && ports.iter().all(|x| oports.binary_search(x).is_ok())
        })
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 500, ..ProptestConfig::default() })]

    #[test]
    fn placing_pods_one_after_another_keeps_the_books_exact(
        (offer, ours) in arb_offer(),
        pods in prop::collection::vec(arb_pod(), 1..6),
    ) {
        let cfg = config();
        let offer = if ours { with_executors(offer, &[&executor_id_for(&cfg.executor).value]) } else { offer };
        let pl = default_pipeline(&cfg).unwrap();
        let view = OfferView::new(&offer).unwrap();
        let mut state = view.state();
        let mut specs = Vec::new();
        for mut t in pods {
            let task_before = t.clone();
            let result_before = state.result();
            let procured_before = state.procured();
            match place(&mut state, &pl, &mut t, view.node()) {
                Err(_) => {
                    // On failure, the offer and the task are unchanged.
                    prop_assert_eq!(&t, &task_before);
                    prop_assert_eq!(state.remaining(), result_before.1);
                    prop_assert_eq!(state.procured(), procured_before);
                }
                Ok(spec) => specs.push(spec),
            }
            // Procured + remaining == the offer, exactly.
            let procured = state.procured();
            prop_assert_eq!(&procured + &state.remaining(), Resources::from_protos(offer.resources.clone()).unwrap());
            let mut all = procured.to_protos();
            all.extend(state.remaining_protos());
            prop_assert_eq!(canon(&all), canon(&offer.resources));
            prop_assert!(within(&procured.to_protos(), &offer.resources));
            prop_assert!(Resources::from_protos(offer.resources.clone()).unwrap().contains(&procured));
        }
        // Nothing procured twice: the pods' own resources plus the executor's
        // (counted once) are exactly what the state procured.
        let mut summed: Vec<Resource> = specs.iter().flat_map(|s| s.resources.iter().cloned()).collect();
        if let Some(e) = specs.iter().find_map(|s| s.executor.as_ref()).filter(|_| !ours) {
            summed.extend(e.resources.iter().cloned());
        }
        prop_assert_eq!(Resources::from_protos(summed.clone()).unwrap(), state.procured());
        prop_assert_eq!(canon(&summed), canon(&state.procured().to_protos()));
        // Host ports never overlap between pods, nor within a pod for one protocol.
        let mut owner: BTreeMap<u16, usize> = BTreeMap::new();
        for (i, s) in specs.iter().enumerate() {
            let mut seen = BTreeSet::new();
            for m in &s.port_mappings {
                prop_assert!(seen.insert((m.host_port, m.protocol.clone())), "port {} twice in one pod", m.host_port);
                let o = *owner.entry(m.host_port).or_insert(i);
                prop_assert_eq!(o, i, "port {} given to two pods", m.host_port);
            }
            let mapped: BTreeSet<u64> = s.port_mappings.iter().map(|m| u64::from(m.host_port)).collect();
            let taken: BTreeSet<u64> = canon(&s.resources).values().flat_map(|v| v.1.iter().copied()).collect();
            prop_assert_eq!(mapped, taken, "the ports taken are exactly the ports mapped");
        }
    }
}

/// Gives the pod a `nodeSelector` on the rack (racks r0, r1; r9 is on no offer).
fn with_rack(t: &registry::PodTask, rack: Option<&str>) -> registry::PodTask {
    let Some(rack) = rack else { return t.clone() };
    let mut pod: k8s_openapi::api::core::v1::Pod = (**t.pod().unwrap()).clone();
    let spec = pod.spec.get_or_insert_with(Default::default);
    spec.node_selector = Some([("rack".to_owned(), rack.to_owned())].into());
    let mut t = t.clone();
    t.set_pod(std::sync::Arc::new(pod)).unwrap();
    t
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// A round places each pod where trying every offer by hand, on what
    /// the earlier pods left, and taking the highest score (ties: lowest
    /// hostname, then offer id) places it, whatever the offers' order and
    /// the cursor; narrowing by node selector changes nothing.
    #[test]
    fn a_round_agrees_with_trying_every_offer_by_hand(
        offers in prop::collection::vec(arb_offer(), 1..8),
        pods in prop::collection::vec((arb_pod(), prop_oneof![2 => Just(None), 1 => Just(Some("r0")), 1 => Just(Some("r1")), 1 => Just(Some("r9"))]), 1..5),
        spread in any::<bool>(),
        rotate in 0usize..8,
        start in 0usize..100,
    ) {
        let cfg = config();
        let pl = default_pipeline(&cfg).unwrap();
        let scoring = procurement::Scoring {
            strategy: if spread { procurement::Strategy::Spread } else { procurement::Strategy::BinPack },
            cpus_weight: 1.0,
            mem_weight: 2.0,
        };
        let mut views: Vec<OfferView> = offers
            .iter()
            .enumerate()
            .map(|(i, (o, _))| {
                let mut o = o.clone();
                o.hostname = format!("h{}", i % 3); // force hostname ties too
                o.id = Some(format!("o{i}").into());
                o.attributes = vec![text_attr("rack", &format!("r{}", i % 2))];
                OfferView::new(&o).unwrap()
            })
            .collect();
        let n = views.len();
        views.rotate_left(rotate % n);
        let tasks: Vec<registry::PodTask> = pods.iter().map(|(t, rack)| with_rack(t, *rack)).collect();
        let placer = procurement::Placer::new(default_pipeline(&cfg).unwrap(), scoring);
        let mut cursor = procurement::Cursor(start);
        let round = placer.place_round(&tasks, &views, &mut cursor);
        prop_assert_eq!(round.len(), tasks.len());
        let mut left: Vec<procurement::ProcureState> = views.iter().map(OfferView::state).collect();
        for (t, got) in tasks.iter().zip(round) {
            let mut expected: Option<(f64, String, String, usize, procurement::ProcureState)> = None;
            for (i, v) in views.iter().enumerate() {
                let mut st = left[i].clone();
                let mut tt = t.clone();
                if place(&mut st, &pl, &mut tt, v.node()).is_ok() {
                    let key = (scoring.score(&st), v.node().hostname().to_owned(), v.id().value.clone());
                    let better = match &expected {
                        None => true,
                        Some(e) => key.0 > e.0 || (key.0 == e.0 && (&key.1, &key.2) < (&e.1, &e.2)),
                    };
                    if better {
                        expected = Some((key.0, key.1, key.2, i, st));
                    }
                }
            }
            match (got, expected) {
                (Ok(p), Some((score, _, id, i, st))) => {
                    prop_assert_eq!(&p.offer_id.value, &id);
                    prop_assert_eq!(p.offer_index, i);
                    prop_assert_eq!(p.score, score);
                    prop_assert_eq!(p.task.spec.as_deref(), Some(&st.spec()));
                    prop_assert_eq!(p.task.offer_id.as_ref(), Some(&p.offer_id));
                    left[i] = st;
                }
                (Err(e), None) => {
                    prop_assert_eq!(e.agents, n);
                    prop_assert_eq!(e.failures.len(), n);
                }
                (got, want) => prop_assert!(false, "round {:?}, by hand {:?}", got.map(|p| p.offer_id), want.map(|w| w.2)),
            }
        }
    }
}
