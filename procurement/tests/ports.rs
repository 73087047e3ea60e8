//! Ports procurement rules, table-driven.
#![allow(clippy::unwrap_used)]

mod common;

use common::*;
use procurement::{
    AllOrNothing, PortStrategy, PortsProcurement, ProcureError, Procurement, RolesProcurement,
    Stage,
};
use serde_json::{Value, json};

fn pod(ports: Value, strategy: Option<&str>) -> registry::PodTask {
    let ann = strategy
        .map(|s| json!({"mesopod.io/port-mapping": s}))
        .unwrap_or(Value::Null);
    task(
        json!({"containers": [container("c", Value::Null, Value::Null, ports)]}),
        ann,
    )
}

fn pipeline(default: PortStrategy) -> AllOrNothing {
    AllOrNothing::new()
        .then(
            RolesProcurement::new(&["prod".into(), "*".into()], &["prod".into(), "*".into()])
                .unwrap(),
        )
        .then(PortsProcurement::new(default))
}

fn offered() -> mesos::proto::Offer {
    offer(
        "h1",
        vec![
            ports(&[(31000, 31001), (31005, 31005)], None),
            ports(&[(40000, 40000)], Some("prod")),
        ],
        vec![],
    )
}

/// (container port, host port, protocol) of the mappings, sorted.
fn mapped(spec: &registry::Spec) -> Vec<(u16, u16, String)> {
    let mut v: Vec<_> = spec
        .port_mappings
        .iter()
        .map(|m| (m.container_port, m.host_port, m.protocol.clone()))
        .collect();
    v.sort();
    v
}

#[test]
fn host_ports_are_mapped_by_strategy() {
    let p = |cp: u16, hp: Option<u16>| match hp {
        Some(h) => json!({"containerPort": cp, "hostPort": h}),
        None => json!({"containerPort": cp}),
    };
    let tcp = |a: u16, b: u16| (a, b, "TCP".to_owned());
    #[derive(Debug)]
    enum Want {
        Map(Vec<(u16, u16, String)>),
        NotOffered(u16),
        Duplicate(u16),
        NoFree,
        Invalid,
    }
    let cases = [
        (
            "fixed: port in a range",
            json!([p(80, Some(31001))]),
            None,
            PortStrategy::Fixed,
            Want::Map(vec![tcp(80, 31001)]),
        ),
        (
            "fixed: second disjoint range",
            json!([p(80, Some(31005))]),
            None,
            PortStrategy::Fixed,
            Want::Map(vec![tcp(80, 31005)]),
        ),
        (
            "fixed: reserved range of a pod role",
            json!([p(80, Some(40000))]),
            None,
            PortStrategy::Fixed,
            Want::Map(vec![tcp(80, 40000)]),
        ),
        (
            "fixed: port in the gap",
            json!([p(80, Some(31003))]),
            None,
            PortStrategy::Fixed,
            Want::NotOffered(31003),
        ),
        (
            "fixed: hostPort 0 is not mapped",
            json!([p(80, None), p(81, Some(0))]),
            None,
            PortStrategy::Fixed,
            Want::Map(vec![]),
        ),
        (
            "wildcard: hostPort 0 gets the lowest free port, reserved role first",
            json!([p(80, None), p(81, Some(0))]),
            None,
            PortStrategy::Wildcard,
            Want::Map(vec![tcp(80, 40000), tcp(81, 31000)]),
        ),
        (
            "wildcard: fixed ports are honoured first",
            json!([p(80, None), p(81, Some(40000))]),
            None,
            PortStrategy::Wildcard,
            Want::Map(vec![tcp(80, 31000), tcp(81, 40000)]),
        ),
        (
            "annotation overrides the default",
            json!([p(80, None)]),
            Some("wildcard"),
            PortStrategy::Fixed,
            Want::Map(vec![tcp(80, 40000)]),
        ),
        (
            "annotation fixed overrides wildcard",
            json!([p(80, None)]),
            Some("fixed"),
            PortStrategy::Wildcard,
            Want::Map(vec![]),
        ),
        (
            "bad annotation",
            json!([p(80, None)]),
            Some("random"),
            PortStrategy::Fixed,
            Want::Invalid,
        ),
        (
            "wildcard: more ports than offered",
            json!([
                p(80, None),
                p(81, None),
                p(82, None),
                p(83, None),
                p(84, None)
            ]),
            None,
            PortStrategy::Wildcard,
            Want::NoFree,
        ),
        (
            "duplicate host port and protocol",
            json!([p(80, Some(31000)), p(81, Some(31000))]),
            None,
            PortStrategy::Fixed,
            Want::Duplicate(31000),
        ),
        (
            "same host port for TCP and UDP takes it once",
            json!([{"containerPort": 53, "hostPort": 31000, "protocol": "TCP"}, {"containerPort": 53, "hostPort": 31000, "protocol": "UDP"}]),
            None,
            PortStrategy::Fixed,
            Want::Map(vec![tcp(53, 31000), (53, 31000, "UDP".to_owned())]),
        ),
    ];
    for (name, ports_json, ann, default, want) in cases {
        let o = offered();
        let (node, mut state) = node_and_state(&o);
        let before = state.remaining();
        let mut t = pod(ports_json, ann);
        let r = pipeline(default).procure(&mut t, &node, &mut state);
        match (&r, &want) {
            (Ok(()), Want::Map(m)) => {
                let spec = state.spec();
                assert_eq!(&mapped(&spec), m, "{name}");
                let mut host: Vec<u64> = m.iter().map(|x| u64::from(x.1)).collect();
                host.sort();
                host.dedup();
                let taken = canon(&spec.resources);
                let got: Vec<u64> = taken
                    .values()
                    .flat_map(|v| v.1.clone())
                    .collect::<std::collections::BTreeSet<_>>()
                    .into_iter()
                    .collect();
                assert_eq!(
                    got, host,
                    "{name}: each mapped host port is taken exactly once"
                );
            }
            (Err(ProcureError::PortNotOffered { port }), Want::NotOffered(w)) if port == w => {}
            (Err(ProcureError::DuplicateHostPort { port, .. }), Want::Duplicate(w))
                if port == w => {}
            (
                Err(ProcureError::NoFreePorts {
                    asked: 5,
                    available: 4,
                }),
                Want::NoFree,
            ) => {}
            (
                Err(ProcureError::InvalidPod {
                    stage: Stage::Ports,
                    ..
                }),
                Want::Invalid,
            ) => {}
            _ => panic!("{name}: got {r:?}, want {want:?}"),
        }
        if r.is_err() {
            assert_eq!(
                state.remaining(),
                before,
                "{name}: nothing taken on failure"
            );
        }
    }
}

#[test]
fn a_port_taken_by_one_pod_conflicts_for_the_next_on_the_same_offer() {
    let o = offered();
    let (node, mut state) = node_and_state(&o);
    let pl = pipeline(PortStrategy::Wildcard);
    let mut a = pod(json!([{"containerPort": 80, "hostPort": 31000}]), None);
    let spec_a = place(&mut state, &pl, &mut a, &node).unwrap();
    assert_eq!(spec_a.port_mappings[0].host_port, 31000);

    let mut b = pod(json!([{"containerPort": 80, "hostPort": 31000}]), None);
    let before = state.remaining();
    assert_eq!(
        place(&mut state, &pl, &mut b, &node).unwrap_err(),
        ProcureError::PortTaken { port: 31000 }
    );
    assert_eq!(state.remaining(), before);

    // Wildcard pods keep getting distinct ports until none is left.
    let mut seen = vec![31000u16];
    for _ in 0..3 {
        let mut c = pod(json!([{"containerPort": 80}]), None);
        let s = place(&mut state, &pl, &mut c, &node).unwrap();
        let hp = s.port_mappings[0].host_port;
        assert!(!seen.contains(&hp), "port {hp} given twice");
        seen.push(hp);
    }
    let mut d = pod(json!([{"containerPort": 80}]), None);
    assert_eq!(
        place(&mut state, &pl, &mut d, &node).unwrap_err(),
        ProcureError::NoFreePorts {
            asked: 1,
            available: 0
        }
    );
    assert!(
        state.remaining().iter().all(|r| r.name != "ports"),
        "all four ports are taken"
    );
}

#[test]
fn the_ports_procurement_alone_gives_back_what_it_took_when_it_fails_halfway() {
    // The fixed port is taken first, then the wildcard ports run out.
    let o = offer("h1", vec![ports(&[(31000, 31001)], None)], vec![]);
    let (node, mut state) = node_and_state(&o);
    let before = state.result();
    let mut t = pod(
        json!([{"containerPort": 80, "hostPort": 31000}, {"containerPort": 81}, {"containerPort": 82}]),
        Some("wildcard"),
    );
    let e = PortsProcurement::new(PortStrategy::Fixed)
        .procure(&mut t, &node, &mut state)
        .unwrap_err();
    assert_eq!(
        e,
        ProcureError::NoFreePorts {
            asked: 2,
            available: 1
        }
    );
    assert_eq!(state.result(), before);
}
