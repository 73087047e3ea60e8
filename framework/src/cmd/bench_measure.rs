//! What the benchmark measures of its own process: peak memory, CPU time,
//! percentiles of the latencies it recorded, and when a watched object is first done.

use std::time::{Duration, Instant};

use futures::StreamExt as _;

/// The `p` quantile (0 to 1) of `sorted`, the nearest rank; 0 for none.
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

/// Peak resident set size of this process (VmHWM), in MiB.
pub(super) fn peak_rss_mib() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map_or(0.0, |kb| kb / 1024.0)
}

/// User + system CPU time of this process, in seconds.
pub(super) fn cpu_seconds() -> f64 {
    // Fields 14 and 15 of /proc/self/stat, in clock ticks (100 per second on Linux).
    std::fs::read_to_string("/proc/self/stat")
        .ok()
        .and_then(|s| {
            let after = s.rsplit_once(')')?.1;
            let f: Vec<&str> = after.split_whitespace().collect();
            let utime: f64 = f.get(11)?.parse().ok()?;
            let stime: f64 = f.get(12)?.parse().ok()?;
            Some((utime + stime) / 100.0)
        })
        .unwrap_or(0.0)
}

/// When `done` first says so of an object: its `current` state, then each change on
/// `watch`; `done` may also fail the run. `what` names it in the errors.
pub(super) async fn first_watched<K>(
    what: &str,
    current: &K,
    mut watch: apiserver::ObjectStream<K>,
    timeout: Duration,
    done: impl Fn(&K) -> anyhow::Result<bool>,
) -> anyhow::Result<Instant> {
    if done(current)? {
        return Ok(Instant::now());
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        match tokio::time::timeout_at(deadline, watch.next()).await {
            Err(_) => anyhow::bail!("{what}: not done within {timeout:?}"),
            Ok(None) => anyhow::bail!("{what}: the watch ended"),
            Ok(Some(ev)) => {
                if done(&ev?.object)? {
                    return Ok(Instant::now());
                }
            }
        }
    }
}
