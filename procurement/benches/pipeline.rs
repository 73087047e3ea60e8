//! The default pipeline on a typical pod and offer, and one pod placed among 5,000 offers.
#![allow(missing_docs, clippy::unwrap_used)]

use std::hint::black_box;
use std::sync::Arc;
use std::time::SystemTime;

use criterion::{Criterion, criterion_group, criterion_main};
use k8s_openapi::api::core::v1::Pod;
use mesos::proto::{Attribute, ExecutorInfo, Offer, Resource, value};
use procurement::{
    Cursor, OfferView, PipelineConfig, Placer, PodDemand, Procurement, Scoring, default_pipeline,
};
use registry::PodTask;
use serde_json::json;

fn scalar(name: &str, v: f64) -> Resource {
    Resource {
        name: name.into(),
        r#type: value::Type::Scalar as i32,
        scalar: Some(value::Scalar { value: v }),
        ..Default::default()
    }
}

fn ports(ranges: &[(u64, u64)]) -> Resource {
    Resource {
        name: "ports".into(),
        r#type: value::Type::Ranges as i32,
        ranges: Some(value::Ranges {
            range: ranges
                .iter()
                .map(|&(begin, end)| value::Range { begin, end })
                .collect(),
        }),
        ..Default::default()
    }
}

fn attr(name: &str, v: &str) -> Attribute {
    Attribute {
        name: name.into(),
        r#type: value::Type::Text as i32,
        text: Some(value::Text { value: v.into() }),
        ..Default::default()
    }
}

/// cpus, mem, disk, two port ranges, four attributes.
fn typical_offer(i: usize, cpus: f64, mem: f64) -> Offer {
    Offer {
        id: Some(format!("offer-{i}").into()),
        framework_id: Some("fw".into()),
        agent_id: Some(format!("agent-{i}").into()),
        hostname: format!("host-{i:05}"),
        resources: vec![
            scalar("cpus", cpus),
            scalar("mem", mem),
            scalar("disk", 20480.0),
            ports(&[(31000, 31099), (32000, 32099)]),
        ],
        attributes: vec![
            attr("rack", &format!("r{}", i % 40)),
            attr("zone", &format!("z{}", i % 3)),
            attr("os", "linux"),
            attr("arch", "amd64"),
        ],
        ..Default::default()
    }
}

/// Two containers, one host port.
fn typical_task() -> PodTask {
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {"containers": [
            {"name": "web", "image": "nginx", "resources": {"requests": {"cpu": "500m", "memory": "128Mi"}},
             "ports": [{"containerPort": 80, "hostPort": 31080}]},
            {"name": "log", "image": "fluentbit", "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "128Mi"}}}
        ]}
    }))
    .unwrap();
    PodTask::with_id(
        "default.web.1".into(),
        Arc::new(pod),
        vec!["*".into()],
        SystemTime::UNIX_EPOCH,
    )
    .unwrap()
}

fn config() -> PipelineConfig {
    PipelineConfig {
        executor: ExecutorInfo {
            name: Some("mesopod".into()),
            resources: vec![scalar("cpus", 0.25), scalar("mem", 128.0)],
            ..Default::default()
        },
        ..Default::default()
    }
}

fn bench(c: &mut Criterion) {
    let pipeline = default_pipeline(&config()).unwrap();
    let view = OfferView::new(&typical_offer(1, 8.0, 16384.0)).unwrap();
    let mut task = typical_task();
    let demand = Arc::new(PodDemand::for_task(&task));

    // One attempt as the scheduling loop makes it: a fresh state over a
    // prepared offer, the pod's demand worked out once per task.
    c.bench_function("default_pipeline/typical_pod_typical_offer", |b| {
        b.iter(|| {
            let mut state = view.state();
            state.seed_demand(demand.clone());
            let r = pipeline.procure(&mut task, view.node(), &mut state);
            black_box((r, state))
        })
    });
    // The same, paying for parsing the pod on every attempt.
    c.bench_function(
        "default_pipeline/typical_pod_typical_offer_unprepared_pod",
        |b| {
            b.iter(|| {
                let mut state = view.state();
                let r = pipeline.procure(&mut task, view.node(), &mut state);
                black_box((r, state))
            })
        },
    );
    // The attempt plus writing out the spec and what is left.
    c.bench_function("default_pipeline/typical_attempt_with_result", |b| {
        b.iter(|| {
            let mut state = view.state();
            state.seed_demand(demand.clone());
            pipeline
                .procure(&mut task, view.node(), &mut state)
                .unwrap();
            black_box(state.result())
        })
    });

    let offers: Vec<OfferView> = (0..5000)
        .map(|i| {
            let cpus = 0.5 + (i % 16) as f64;
            let mem = 512.0 + ((i * 7919) % 32) as f64 * 1024.0;
            OfferView::new(&typical_offer(i, cpus, mem)).unwrap()
        })
        .collect();
    let placer = Placer::new(pipeline, Scoring::default());
    let mut cursor = Cursor::default();
    c.bench_function("place_round/one_pod_5000_offers", |b| {
        b.iter(|| {
            black_box(
                placer
                    .place_round([&task], &offers, &mut cursor)
                    .pop()
                    .map(|p| p.map(|p| p.offer_index)),
            )
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
