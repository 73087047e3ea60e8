//! Resource metrics for `kubectl top`: every [`Options::metric_resolution`]
//! the executor reads each running container's cgroup ([`cgroup_stats`])
//! and pushes the samples to the API shim as its node
//! ([`crate::objects::PodObjects::report_metrics`]), which keeps the last two
//! and computes the rates (`apiserver::metrics`).
//!
//! The samples are cumulative counters, not rates, so a lost or late push
//! costs nothing but freshness, and the rate's window is exactly the time
//! between two readings. Containers are known through [`Containers`], which
//! each pod's supervisor fills as its containers start and exit. A container
//! in no cgroup of its own (process mode) is not sampled: its pod has no
//! metrics rather than wrong ones.
//!
//! [`Options::metric_resolution`]: crate::executor::Options::metric_resolution

pub mod cgroup_stats;

use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use crate::objects::SharedObjects;

/// metrics-server's `--metric-resolution` default: how often containers are sampled.
pub const METRIC_RESOLUTION: Duration = Duration::from_secs(15);

/// A running container, as its supervisor registered it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Container {
    /// Its pod's namespace.
    pub namespace: String,
    /// Its pod's name.
    pub pod: String,
    /// Its pod's uid.
    pub uid: String,
    /// Its name in the pod.
    pub name: String,
    /// Its init process, whose `/proc/<pid>/cgroup` names its cgroup.
    pub pid: u32,
    /// Its `cgroupsPath` (`mesopod/<run id>`): its cgroup's path ends in it.
    pub cgroups_path: String,
}

/// The containers this executor runs, by run id. See the module doc.
#[derive(Debug, Default)]
pub struct Containers {
    runs: Mutex<HashMap<String, Container>>,
}

impl Containers {
    /// The process' registry.
    pub fn global() -> &'static Containers {
        static ALL: OnceLock<Containers> = OnceLock::new();
        ALL.get_or_init(Containers::default)
    }

    /// A run started (or was adopted).
    pub fn insert(&self, run_id: &str, container: Container) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.insert(run_id.to_owned(), container);
        }
    }

    /// A run ended.
    pub fn remove(&self, run_id: &str) {
        if let Ok(mut runs) = self.runs.lock() {
            runs.remove(run_id);
        }
    }

    fn snapshot(&self) -> Vec<(String, Container)> {
        self.runs
            .lock()
            .map(|r| r.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
            .unwrap_or_default()
    }
}

/// One container's sample, as pushed.
fn container_sample(run_id: &str, c: &Container) -> Option<Value> {
    let proc_cgroup = std::fs::read_to_string(format!("/proc/{}/cgroup", c.pid)).ok()?;
    let dirs = cgroup_stats::dirs(&proc_cgroup, &c.cgroups_path)?;
    let reading = cgroup_stats::read(&dirs)?;
    Some(json!({
        "name": c.name,
        "id": run_id,
        "time": crate::logs::cri::format_time(SystemTime::now()),
        "cpuUsageNanoseconds": reading.cpu_usage_nanos,
        "workingSetBytes": reading.working_set_bytes,
    }))
}

/// The push body (`apiserver::metrics::push`) of every registered container,
/// read now.
pub fn summary(executor: &str, resolution: Duration) -> Value {
    let mut pods: BTreeMap<(String, String, String), Vec<Value>> = BTreeMap::new();
    for (run_id, c) in Containers::global().snapshot() {
        let key = (c.namespace.clone(), c.pod.clone(), c.uid.clone());
        let entry = pods.entry(key).or_default();
        if let Some(sample) = container_sample(&run_id, &c) {
            entry.push(sample);
        }
    }
    let pods: Vec<Value> = pods
        .into_iter()
        .map(|((namespace, name, uid), containers)| {
            json!({"namespace": namespace, "name": name, "uid": uid, "containers": containers})
        })
        .collect();
    json!({
        "executor": executor,
        "timestamp": crate::logs::cri::format_time(SystemTime::now()),
        "resolutionSeconds": resolution.as_secs().max(1),
        "pods": pods,
    })
}

/// Samples and pushes every `resolution`, forever (the executor aborts it
/// when it ends). A failed push is logged and made up by the next.
pub async fn run(objects: SharedObjects, executor: String, resolution: Duration) {
    let mut tick = tokio::time::interval(resolution);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let id = executor.clone();
        let body = match tokio::task::spawn_blocking(move || summary(&id, resolution)).await {
            Ok(body) => body,
            Err(e) => {
                tracing::warn!(error = %e, "sampling the containers' cgroups failed");
                continue;
            }
        };
        if let Err(e) = objects.report_metrics(body).await {
            tracing::debug!(error = %e, "metrics not pushed; the next sample goes in time");
        }
    }
}
