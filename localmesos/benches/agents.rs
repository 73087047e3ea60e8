//! Scale of simulated agents: memory per agent (printed once), the time to
//! start a 5,000-agent cluster, and the time from SUBSCRIBE to the first
//! OFFERS event covering all 5,000 agents.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use localmesos::{AgentConfig, Config, LocalMesos, Timing};
use mesos::codec::Codec;
use mesos::proto::FrameworkInfo;
use mesos::proto::scheduler::{Call, Event, call, event};

const AGENTS: usize = 5_000;
const RESOURCES: &str = "cpus:4;mem:8192;disk:20480;ports:[31000-32000]";

fn config(n: usize) -> Config {
    let agents = (0..n)
        .map(|i| {
            AgentConfig::from_flags(RESOURCES, "rack:r{i}", i)
                .unwrap()
                .simulated(Some(Duration::from_secs(60)))
        })
        .collect();
    Config {
        agents,
        timing: Timing {
            allocation_interval: Duration::from_millis(20),
            ..Timing::default()
        },
        ..Config::default()
    }
}

/// Resident set size from /proc (Linux).
fn rss_bytes() -> u64 {
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    statm
        .split_whitespace()
        .nth(1)
        .and_then(|p| p.parse::<u64>().ok())
        .map_or(0, |pages| pages * 4096)
}

async fn first_offers(url: &str) -> usize {
    let sub = Call {
        r#type: Some(call::Type::Subscribe as i32),
        subscribe: Some(call::Subscribe {
            framework_info: Some(FrameworkInfo {
                user: "bench".into(),
                name: "bench".into(),
                ..Default::default()
            }),
            ..Default::default()
        }),
        ..Default::default()
    };
    let mut resp = reqwest::Client::new()
        .post(format!("{url}/api/v1/scheduler"))
        .header("Content-Type", "application/x-protobuf")
        .header("Accept", "application/x-protobuf")
        .body(Codec::Protobuf.encode(&sub))
        .send()
        .await
        .unwrap();
    let mut dec = mesos::recordio::Decoder::new(1 << 28);
    let mut offered = 0;
    while offered < AGENTS {
        while let Some(rec) = dec.next_record().unwrap() {
            let ev: Event = Codec::Protobuf.decode(&rec).unwrap();
            if ev.kind() == Some(event::Type::Offers) {
                offered += ev.offers.map_or(0, |o| o.offers.len());
            }
        }
        if offered >= AGENTS {
            break;
        }
        let chunk = resp.chunk().await.unwrap().expect("stream ended");
        dec.push(&chunk);
    }
    offered
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();

    // Memory per simulated agent, measured once.
    let before = rss_bytes();
    let cluster = rt.block_on(LocalMesos::start(config(AGENTS))).unwrap();
    let after = rss_bytes();
    println!(
        "memory: {AGENTS} simulated agents take {} KiB resident, {} bytes per agent",
        after.saturating_sub(before) / 1024,
        after.saturating_sub(before) / AGENTS as u64
    );
    rt.block_on(cluster.shutdown());

    let mut group = c.benchmark_group("simulated_agents");
    group.sample_size(10);
    group.bench_function("start_and_shutdown_5000", |b| {
        b.iter(|| {
            rt.block_on(async {
                let cluster = LocalMesos::start(config(AGENTS)).await.unwrap();
                cluster.shutdown().await;
            })
        })
    });
    let cluster = rt.block_on(LocalMesos::start(config(AGENTS))).unwrap();
    let url = cluster.master_url().to_owned();
    group.bench_function("subscribe_to_offers_of_5000_agents", |b| {
        b.iter(|| rt.block_on(first_offers(&url)))
    });
    group.finish();
    rt.block_on(cluster.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
