//! The latest two samples of every container the executors push, in memory
//! only: metrics are a view of now, never stored, and a restarted shim (or a
//! new leader) has none until the executors have pushed twice.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use super::push::{NodeSummary, unix_nanos};
use super::rate::{Sample, Usage, usage};
use crate::error::ApiError;

/// How many resolutions a push stays fresh: one late push does not blank a node.
const STALE_AFTER_RESOLUTIONS: u32 = 3;

/// A container's last two samples (`earlier` is of the same run, or none).
#[derive(Debug, Clone)]
struct ContainerSamples {
    id: String,
    earlier: Option<Sample>,
    later: Sample,
}

/// A pod as its executor last reported it.
#[derive(Debug, Clone)]
struct PodSamples {
    namespace: String,
    name: String,
    containers: BTreeMap<String, ContainerSamples>,
}

/// One executor's last push.
#[derive(Debug, Clone)]
struct Report {
    /// By the API's clock, for staleness.
    received: SystemTime,
    stale_after: Duration,
    resolution: Duration,
    /// The executor's sampling time (Unix nanoseconds).
    at_unix_nanos: i128,
    /// Whether this executor pushed before: a node's usage needs two samples.
    second: bool,
    pods: HashMap<String, PodSamples>,
}

/// A pod's usage: per container, and when and over which window.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodUsage {
    /// Namespace and name the executor gave (the caller matches them to the uid).
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// Each container's usage, by name.
    pub containers: Vec<(String, Usage)>,
    /// The latest sample's time (Unix nanoseconds).
    pub at_unix_nanos: i128,
    /// The longest window of its containers.
    pub window: Duration,
}

/// A node's usage: the sum of its pods'.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeUsage {
    /// CPU, nanocores.
    pub nanocores: u64,
    /// Working set, bytes.
    pub memory_bytes: u64,
    /// The latest sample's time (Unix nanoseconds).
    pub at_unix_nanos: i128,
    /// The window of the rates.
    pub window: Duration,
}

/// Every node's executors' last pushes. See the module doc.
#[derive(Debug, Default)]
pub struct MetricsStore {
    nodes: Mutex<HashMap<String, HashMap<String, Report>>>,
}

impl PodSamples {
    /// Its usage once every container has two samples of one run; `None`
    /// before (metrics-server's rule: no pod with a container it cannot rate).
    fn usage(&self) -> Option<PodUsage> {
        let mut containers = Vec::with_capacity(self.containers.len());
        for (name, c) in &self.containers {
            containers.push((name.clone(), usage(c.earlier.as_ref()?, &c.later)?));
        }
        let at = containers.iter().map(|(_, u)| u.at_unix_nanos).max()?;
        let window = containers.iter().map(|(_, u)| u.window).max()?;
        Some(PodUsage {
            namespace: self.namespace.clone(),
            name: self.name.clone(),
            containers,
            at_unix_nanos: at,
            window,
        })
    }
}

impl MetricsStore {
    /// Takes `summary` from `node`'s executor at `now`; `keep` says which of
    /// its pods are still the node's (the caller checked them against the
    /// stored pods). The executor's earlier push is replaced: its pods not
    /// in this one are dropped.
    ///
    /// # Errors
    /// A time in the summary that is not RFC 3339 (400).
    pub fn record(
        &self,
        node: &str,
        summary: &NodeSummary,
        keep: impl Fn(&str) -> bool,
        now: SystemTime,
    ) -> Result<(), ApiError> {
        let at = unix_nanos("timestamp", &summary.timestamp)?;
        let mut fresh = HashMap::new();
        for p in summary.pods.iter().filter(|p| keep(&p.uid)) {
            let mut containers = BTreeMap::new();
            for c in &p.containers {
                containers.insert(
                    c.name.clone(),
                    ContainerSamples {
                        id: c.id.clone(),
                        earlier: None,
                        later: c.sample()?,
                    },
                );
            }
            let pod = PodSamples {
                namespace: p.namespace.clone(),
                name: p.name.clone(),
                containers,
            };
            fresh.insert(p.uid.clone(), pod);
        }
        let resolution = Duration::from_secs(summary.resolution_seconds);
        let Ok(mut nodes) = self.nodes.lock() else {
            return Err(ApiError::Internal("the metrics store is poisoned".into()));
        };
        let reports = nodes.entry(node.to_owned()).or_default();
        let before = reports.remove(&summary.executor);
        for (uid, pod) in &mut fresh {
            let Some(old) = before.as_ref().and_then(|r| r.pods.get(uid)) else {
                continue;
            };
            for (name, c) in &mut pod.containers {
                let Some(prev) = old.containers.get(name).filter(|o| o.id == c.id) else {
                    continue;
                };
                c.earlier = match prev.later.at_unix_nanos.cmp(&c.later.at_unix_nanos) {
                    std::cmp::Ordering::Less => Some(prev.later),
                    // The same push again (a retry): it changes nothing.
                    std::cmp::Ordering::Equal => prev.earlier,
                    std::cmp::Ordering::Greater => None,
                };
            }
        }
        reports.insert(
            summary.executor.clone(),
            Report {
                received: now,
                stale_after: resolution * STALE_AFTER_RESOLUTIONS,
                resolution,
                at_unix_nanos: at,
                second: before.is_some(),
                pods: fresh,
            },
        );
        // Executors that stopped pushing (ended, or moved to another replica).
        for reports in nodes.values_mut() {
            reports.retain(|_, r| r.fresh(now));
        }
        nodes.retain(|_, r| !r.is_empty());
        Ok(())
    }

    /// Every pod with usage, by uid, from fresh pushes.
    pub fn pods(&self, now: SystemTime) -> HashMap<String, PodUsage> {
        let Ok(nodes) = self.nodes.lock() else {
            return HashMap::new();
        };
        nodes
            .values()
            .flat_map(|r| r.values())
            .filter(|r| r.fresh(now))
            .flat_map(|r| r.pods.iter())
            .filter_map(|(uid, p)| Some((uid.clone(), p.usage()?)))
            .collect()
    }

    /// `node`'s usage: the sum of its pods' that have usage, once one of its
    /// executors pushed twice; `None` before, or when its pushes are stale.
    pub fn node(&self, node: &str, now: SystemTime) -> Option<NodeUsage> {
        let nodes = self.nodes.lock().ok()?;
        let reports: Vec<&Report> = nodes.get(node)?.values().filter(|r| r.fresh(now)).collect();
        if !reports.iter().any(|r| r.second) {
            return None;
        }
        let mut out = NodeUsage {
            nanocores: 0,
            memory_bytes: 0,
            at_unix_nanos: reports.iter().map(|r| r.at_unix_nanos).max()?,
            window: reports.iter().map(|r| r.resolution).max()?,
        };
        let pods = reports.iter().flat_map(|r| r.pods.values());
        let mut windows = Vec::new();
        for u in pods.filter_map(PodSamples::usage) {
            for (_, c) in &u.containers {
                out.nanocores = out.nanocores.saturating_add(c.nanocores);
                out.memory_bytes = out.memory_bytes.saturating_add(c.memory_bytes);
            }
            windows.push(u.window);
        }
        if let Some(w) = windows.into_iter().max() {
            out.window = w;
        }
        Some(out)
    }
}

impl Report {
    fn fresh(&self, now: SystemTime) -> bool {
        now.duration_since(self.received)
            .map_or(true, |age| age <= self.stale_after)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::metrics::push::{ContainerSummary, PodSummary};

    fn push(executor: &str, secs: u64, cpu_ns: u64, run: &str) -> NodeSummary {
        let time = format!("2026-01-01T00:00:{secs:02}Z");
        NodeSummary {
            executor: executor.into(),
            timestamp: time.clone(),
            resolution_seconds: 15,
            pods: vec![PodSummary {
                namespace: "default".into(),
                name: "p".into(),
                uid: "u1".into(),
                containers: vec![ContainerSummary {
                    name: "c".into(),
                    id: run.into(),
                    time,
                    cpu_usage_nanoseconds: cpu_ns,
                    working_set_bytes: 1 << 20,
                }],
            }],
        }
    }

    #[test]
    fn a_pod_has_usage_from_its_second_sample_of_one_run() {
        let store = MetricsStore::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        store
            .record("n1", &push("e", 0, 0, "r1"), |_| true, now)
            .unwrap();
        assert!(store.pods(now).is_empty(), "one sample is no rate");
        assert_eq!(store.node("n1", now), None, "nor is a node's first push");
        store
            .record("n1", &push("e", 10, 5_000_000_000, "r1"), |_| true, now)
            .unwrap();
        let u = &store.pods(now)["u1"];
        assert_eq!(u.containers[0].1.nanocores, 500_000_000, "half a core");
        assert_eq!(u.window, Duration::from_secs(10));
        let n = store.node("n1", now).unwrap();
        assert_eq!((n.nanocores, n.memory_bytes), (500_000_000, 1 << 20));
        // A retry of the same push keeps the rate.
        store
            .record("n1", &push("e", 10, 5_000_000_000, "r1"), |_| true, now)
            .unwrap();
        assert_eq!(store.pods(now).len(), 1);
        // A restarted container: no rate until its run's second sample.
        store
            .record("n1", &push("e", 20, 1_000, "r2"), |_| true, now)
            .unwrap();
        assert!(store.pods(now).is_empty());
        assert_eq!(store.node("n1", now).unwrap().nanocores, 0);
    }

    #[test]
    fn pods_gone_from_a_push_or_refused_or_stale_are_dropped() {
        let store = MetricsStore::default();
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000);
        store
            .record("n1", &push("e", 0, 0, "r"), |_| true, now)
            .unwrap();
        store
            .record("n1", &push("e", 5, 10, "r"), |_| true, now)
            .unwrap();
        assert_eq!(store.pods(now).len(), 1);
        let mut empty = push("e", 9, 0, "r");
        empty.pods.clear();
        store.record("n1", &empty, |_| true, now).unwrap();
        assert!(store.pods(now).is_empty(), "the executor no longer runs it");
        store
            .record("n1", &push("e", 10, 0, "r"), |_| false, now)
            .unwrap();
        store
            .record("n1", &push("e", 15, 9, "r"), |_| false, now)
            .unwrap();
        assert!(store.pods(now).is_empty(), "not the node's pod");
        store
            .record("n1", &push("e", 20, 0, "r"), |_| true, now)
            .unwrap();
        store
            .record("n1", &push("e", 25, 9, "r"), |_| true, now)
            .unwrap();
        let later = now + Duration::from_secs(46);
        assert!(
            store.pods(later).is_empty(),
            "three resolutions without a push"
        );
        assert_eq!(store.node("n1", later), None);
    }
}
