//! Prometheus metrics: counters, labelled counters and histograms, rendered
//! in the text exposition format. Small on purpose: the handful of types
//! mesopod needs, with no registry of dynamic metrics.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use mesos::proto::TaskState;
use mesos::proto::json::WireEnum;

/// A monotonically increasing count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    /// Adds one.
    pub fn inc(&self) {
        self.add(1);
    }
    /// Adds `n`.
    pub fn add(&self, n: u64) {
        self.0.fetch_add(n, Ordering::Relaxed);
    }
    /// The count.
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// Counts by label values.
#[derive(Debug, Default)]
pub struct LabelledCounter(Mutex<BTreeMap<Vec<String>, u64>>);

impl LabelledCounter {
    /// Adds `n` to the series with these label values.
    pub fn add(&self, labels: &[&str], n: u64) {
        if let Ok(mut m) = self.0.lock() {
            *m.entry(labels.iter().map(|s| (*s).to_owned()).collect())
                .or_default() += n;
        }
    }
    /// Every series.
    pub fn series(&self) -> Vec<(Vec<String>, u64)> {
        self.0
            .lock()
            .map(|m| m.iter().map(|(k, v)| (k.clone(), *v)).collect())
            .unwrap_or_default()
    }
}

/// Latency buckets in seconds: from 5 ms to 5 minutes.
const BUCKETS: [f64; 14] = [
    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0,
];

/// A histogram of durations.
#[derive(Debug, Default)]
pub struct Histogram(Mutex<HistogramData>);

#[derive(Debug, Default, Clone)]
struct HistogramData {
    buckets: [u64; BUCKETS.len()],
    count: u64,
    sum: f64,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let secs = d.as_secs_f64();
        if let Ok(mut h) = self.0.lock() {
            for (i, b) in BUCKETS.iter().enumerate() {
                if secs <= *b {
                    h.buckets[i] += 1;
                }
            }
            h.count += 1;
            h.sum += secs;
        }
    }

    /// How many observations.
    pub fn count(&self) -> u64 {
        self.0.lock().map(|h| h.count).unwrap_or(0)
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let h = self.0.lock().map(|h| h.clone()).unwrap_or_default();
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        for (i, b) in BUCKETS.iter().enumerate() {
            let _ = writeln!(out, "{name}_bucket{{le=\"{b}\"}} {}", h.buckets[i]);
        }
        let _ = writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {}", h.count);
        let _ = writeln!(out, "{name}_sum {}", h.sum);
        let _ = writeln!(out, "{name}_count {}", h.count);
    }
}

/// Every metric mesopod exports.
#[derive(Debug, Default)]
pub struct Metrics {
    /// Offers received.
    pub offers_received: Counter,
    /// Offers declined.
    pub offers_declined: Counter,
    /// Offers rescinded by the master.
    pub offers_rescinded: Counter,
    /// Offers whose TTL ran out.
    pub offers_expired: Counter,
    /// Preemption plans made (each stops its victims).
    pub preemption_attempts: Counter,
    /// Pods stopped by preemption.
    pub preemption_victims: Counter,
    /// Pods placed and launched.
    pub pods_scheduled: Counter,
    /// Pods put in the queue.
    pub pods_queued: Counter,
    /// Scheduling attempts by result and reason.
    pub attempts: LabelledCounter,
    /// Queue to ACCEPT.
    pub scheduling_latency: Histogram,
    /// Pod creation to Running.
    pub startup_latency: Histogram,
    /// Status updates by state.
    pub status_updates: LabelledCounter,
    /// Reconciliation requests sent.
    pub reconciliations: Counter,
    /// Admission decisions by kind.
    pub admissions: LabelledCounter,
    /// Subscriptions opened.
    pub subscriptions: Counter,
    /// Subscriptions lost.
    pub reconnects: Counter,
}

impl Metrics {
    /// A pod was placed after waiting `latency` in the queue.
    pub fn scheduled(&self, latency: Duration) {
        self.pods_scheduled.inc();
        self.attempts.add(&["scheduled", ""], 1);
        self.scheduling_latency.observe(latency);
    }

    /// An attempt ended with `result`, for these reasons and agent counts.
    pub fn attempt(&self, result: &str, reasons: &[(std::borrow::Cow<'static, str>, usize)]) {
        if reasons.is_empty() {
            self.attempts.add(&[result, ""], 1);
        }
        for (reason, _) in reasons {
            self.attempts.add(&[result, reason], 1);
        }
    }

    /// A pod reached Running `latency` after it was created.
    pub fn pod_started(&self, latency: Duration) {
        self.startup_latency.observe(latency);
    }

    /// A status update arrived.
    pub fn status_update(&self, state: TaskState) {
        self.status_updates.add(&[state.wire_name()], 1);
    }

    /// An admission decision was made.
    pub fn admission(&self, kind: &str) {
        self.admissions.add(&[kind], 1);
    }

    /// The text exposition, with the registry's tasks by state appended.
    pub fn render(&self, tasks_by_state: &BTreeMap<String, u64>) -> String {
        let mut out = String::new();
        let counters: [(&str, &str, &Counter); 12] = [
            (
                "mesopod_offers_received_total",
                "Offers received from Mesos.",
                &self.offers_received,
            ),
            (
                "mesopod_offers_declined_total",
                "Offers declined.",
                &self.offers_declined,
            ),
            (
                "mesopod_offers_rescinded_total",
                "Offers rescinded by the master.",
                &self.offers_rescinded,
            ),
            (
                "mesopod_offers_expired_total",
                "Offers whose time to live ran out.",
                &self.offers_expired,
            ),
            (
                "mesopod_preemption_attempts_total",
                "Preemption plans made for pods that fit no agent.",
                &self.preemption_attempts,
            ),
            (
                "mesopod_preemption_victims_total",
                "Lower-priority pods stopped by preemption.",
                &self.preemption_victims,
            ),
            (
                "mesopod_pods_scheduled_total",
                "Pods placed and launched.",
                &self.pods_scheduled,
            ),
            (
                "mesopod_pods_queued_total",
                "Pods put in the scheduling queue.",
                &self.pods_queued,
            ),
            (
                "mesopod_reconciliations_total",
                "Reconciliation requests sent.",
                &self.reconciliations,
            ),
            (
                "mesopod_subscriptions_total",
                "Mesos subscriptions opened.",
                &self.subscriptions,
            ),
            (
                "mesopod_mesos_reconnects_total",
                "Mesos subscriptions lost and re-established.",
                &self.reconnects,
            ),
            (
                "mesopod_up",
                "Always 1 while mesopod serves.",
                &Counter(AtomicU64::new(1)),
            ),
        ];
        for (name, help, c) in counters {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {}",
                c.get()
            );
        }
        render_labelled(
            &mut out,
            "mesopod_scheduling_attempts_total",
            "Scheduling attempts by result and reason.",
            &["result", "reason"],
            &self.attempts,
        );
        render_labelled(
            &mut out,
            "mesopod_status_updates_total",
            "Task status updates by state.",
            &["state"],
            &self.status_updates,
        );
        render_labelled(
            &mut out,
            "mesopod_admission_decisions_total",
            "Admission decisions by kind.",
            &["decision"],
            &self.admissions,
        );
        self.scheduling_latency.render(
            &mut out,
            "mesopod_scheduling_latency_seconds",
            "Time from queue to ACCEPT.",
        );
        self.startup_latency.render(
            &mut out,
            "mesopod_pod_startup_latency_seconds",
            "Time from pod creation to Running.",
        );
        let _ = writeln!(
            out,
            "# HELP mesopod_registry_tasks Tasks in the registry by state.\n# TYPE mesopod_registry_tasks gauge"
        );
        for (state, n) in tasks_by_state {
            let _ = writeln!(out, "mesopod_registry_tasks{{state=\"{state}\"}} {n}");
        }
        out
    }
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn render_labelled(out: &mut String, name: &str, help: &str, labels: &[&str], c: &LabelledCounter) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
    for (values, n) in c.series() {
        let pairs: Vec<String> = labels
            .iter()
            .zip(values.iter())
            .map(|(l, v)| format!("{l}=\"{}\"", escape(v)))
            .collect();
        let _ = writeln!(out, "{name}{{{}}} {n}", pairs.join(","));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_are_cumulative_and_labels_escaped() {
        let m = Metrics::default();
        m.scheduled(Duration::from_millis(3));
        m.scheduled(Duration::from_secs(2));
        m.attempt("unschedulable", &[("insufficient \"cpus\"".into(), 3)]);
        let text = m.render(&BTreeMap::from([("running".to_owned(), 2)]));
        assert!(
            text.contains("mesopod_scheduling_latency_seconds_bucket{le=\"0.005\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("mesopod_scheduling_latency_seconds_bucket{le=\"2.5\"} 2"),
            "{text}"
        );
        assert!(
            text.contains("mesopod_scheduling_latency_seconds_count 2"),
            "{text}"
        );
        assert!(text.contains(r#"reason="insufficient \"cpus\"""#), "{text}");
        assert!(
            text.contains("mesopod_registry_tasks{state=\"running\"} 2"),
            "{text}"
        );
        assert!(text.contains("mesopod_pods_scheduled_total 2"), "{text}");
    }
}
