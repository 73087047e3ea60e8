//! Scale of simulated agents: memory per agent (printed once), the time to
//! start a 5,000-agent cluster, and one allocation round over 5,000 agents
//! (DECLINE every offer without a filter, receive all 5,000 again).
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

/// A subscribed framework reading its event stream.
struct Framework {
    url: String,
    framework_id: mesos::proto::FrameworkId,
    stream_id: String,
    resp: reqwest::Response,
    dec: mesos::recordio::Decoder,
    client: reqwest::Client,
}

impl Framework {
    async fn subscribe(url: &str) -> Framework {
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
        testkit::init_crypto();
        let client = reqwest::Client::new();
        let resp = client
            .post(format!("{url}/api/v1/scheduler"))
            .header("Content-Type", "application/x-protobuf")
            .header("Accept", "application/x-protobuf")
            .body(Codec::Protobuf.encode(&sub))
            .send()
            .await
            .unwrap();
        let stream_id = resp.headers()["Mesos-Stream-Id"]
            .to_str()
            .unwrap()
            .to_owned();
        let mut fw = Framework {
            url: url.to_owned(),
            framework_id: Default::default(),
            stream_id,
            resp,
            dec: mesos::recordio::Decoder::new(1 << 28),
            client,
        };
        let ev = fw.next().await;
        fw.framework_id = ev.subscribed.unwrap().framework_id.unwrap();
        fw
    }

    async fn next(&mut self) -> Event {
        loop {
            if let Some(rec) = self.dec.next_record().unwrap() {
                return Codec::Protobuf.decode(&rec).unwrap();
            }
            let chunk = self.resp.chunk().await.unwrap().expect("stream ended");
            self.dec.push(&chunk);
        }
    }

    /// Reads OFFERS events until `n` offers arrived; returns their ids.
    async fn offers(&mut self, n: usize) -> Vec<mesos::proto::OfferId> {
        let mut ids = Vec::with_capacity(n);
        while ids.len() < n {
            let ev = self.next().await;
            if ev.kind() == Some(event::Type::Offers) {
                ids.extend(ev.offers.unwrap().offers.into_iter().filter_map(|o| o.id));
            }
        }
        ids
    }

    /// Declines offers without a refusal filter: they come back next round.
    async fn decline(&self, ids: Vec<mesos::proto::OfferId>) {
        let c = Call {
            framework_id: Some(self.framework_id.clone()),
            r#type: Some(call::Type::Decline as i32),
            decline: Some(call::Decline {
                offer_ids: ids,
                filters: Some(mesos::proto::Filters {
                    refuse_seconds: Some(0.0),
                }),
            }),
            ..Default::default()
        };
        let resp = self
            .client
            .post(format!("{}/api/v1/scheduler", self.url))
            .header("Content-Type", "application/x-protobuf")
            .header("Mesos-Stream-Id", &self.stream_id)
            .body(Codec::Protobuf.encode(&c))
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status(), 202);
    }
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
    let mut fw = rt.block_on(Framework::subscribe(cluster.master_url()));
    let mut held = rt.block_on(fw.offers(AGENTS));
    // One allocation round over every agent: decline all, get all back.
    group.bench_function("decline_and_reoffer_5000_agents", |b| {
        b.iter(|| {
            rt.block_on(async {
                fw.decline(std::mem::take(&mut held)).await;
                held = fw.offers(AGENTS).await;
            })
        })
    });
    group.finish();
    rt.block_on(cluster.shutdown());
}

criterion_group!(benches, bench);
criterion_main!(benches);
