//! The arithmetic of the resource metrics, pure: CPU as a rate between two
//! cumulative samples, and usage written as kube writes quantities.
//!
//! metrics-server's rules: a container's CPU is `(usage₂ − usage₁) / (t₂ − t₁)`
//! over the window between its last two samples, and needs both to be of the
//! same container run (a restart resets the counter); memory is the latest
//! working set (which the node computes: usage minus inactive file pages),
//! not a rate.

use std::time::Duration;

use quantity::{Amount, Format, Quantity};

/// One sample of a container: its cumulative CPU time and its working set, at
/// `at` by the node's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// When the node read it (Unix time, nanoseconds).
    pub at_unix_nanos: i128,
    /// CPU time used since the container started, in nanoseconds
    /// (cgroup v2 `cpu.stat` `usage_usec` × 1000, v1 `cpuacct.usage`).
    pub cpu_usage_nanos: u64,
    /// Memory usage minus inactive file pages (kubelet's working set).
    pub working_set_bytes: u64,
}

/// A container's usage over a window, as the metrics API reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Usage {
    /// CPU in nanocores (10⁻⁹ of a core).
    pub nanocores: u64,
    /// Working set in bytes.
    pub memory_bytes: u64,
    /// The window the CPU rate is over.
    pub window: Duration,
    /// The later sample's time (Unix nanoseconds).
    pub at_unix_nanos: i128,
}

/// The usage between `earlier` and `later`; `None` when no rate can be told:
/// `later` is not after `earlier`, or the counter went back (the cgroup is a
/// new one: kube's rate would be negative, and metrics-server skips it too).
pub fn usage(earlier: &Sample, later: &Sample) -> Option<Usage> {
    let dt = later.at_unix_nanos.checked_sub(earlier.at_unix_nanos)?;
    if dt <= 0 {
        return None;
    }
    let used = later.cpu_usage_nanos.checked_sub(earlier.cpu_usage_nanos)?;
    // nanoseconds of CPU per second of wall time = nanocores.
    let nanocores = i128::from(used).checked_mul(1_000_000_000)? / dt;
    Some(Usage {
        nanocores: u64::try_from(nanocores).ok()?,
        memory_bytes: later.working_set_bytes,
        window: Duration::from_nanos(u64::try_from(dt).ok()?),
        at_unix_nanos: later.at_unix_nanos,
    })
}

/// CPU as the metrics API writes it: kube's canonical form of nanocores
/// (`1234567n`, or `5m` for a round 5 000 000n), as `resource.NewScaledQuantity(n, -9)`.
pub fn cpu_quantity(nanocores: u64) -> String {
    Quantity::parse(&format!("{nanocores}n"))
        .ok()
        .and_then(|q| q.amount())
        .map(|a| a.to_string())
        .unwrap_or_else(|| format!("{nanocores}n"))
}

/// Memory as the metrics API writes it: kube's canonical binary SI of the bytes
/// (`123456Ki`; bytes when not a whole number of KiB), as
/// `resource.NewQuantity(n, BinarySI)`.
pub fn memory_quantity(bytes: u64) -> String {
    match i64::try_from(bytes) {
        Ok(b) => Amount::from_units(b, Format::BinarySi).to_string(),
        Err(_) => bytes.to_string(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn sample(secs: i128, cpu: u64, mem: u64) -> Sample {
        Sample {
            at_unix_nanos: secs * 1_000_000_000,
            cpu_usage_nanos: cpu,
            working_set_bytes: mem,
        }
    }

    #[test]
    fn cpu_is_the_rate_between_two_cumulative_samples() {
        // 1.5 s of CPU over 15 s: a tenth of a core.
        let u = usage(
            &sample(100, 2_000_000_000, 1),
            &sample(115, 3_500_000_000, 4096),
        )
        .unwrap();
        assert_eq!(u.nanocores, 100_000_000);
        assert_eq!(u.window, Duration::from_secs(15));
        assert_eq!(u.memory_bytes, 4096, "memory is the later working set");
        assert_eq!(cpu_quantity(u.nanocores), "100m");
        assert_eq!(cpu_quantity(1_234_567), "1234567n");
        assert_eq!(cpu_quantity(0), "0");
    }

    #[test]
    fn no_rate_without_time_passing_or_when_the_counter_restarted() {
        let a = sample(100, 5_000, 0);
        assert_eq!(usage(&a, &a), None, "the same sample twice");
        assert_eq!(usage(&sample(101, 5_000, 0), &a), None, "out of order");
        assert_eq!(
            usage(&a, &sample(110, 4_000, 0)),
            None,
            "a counter that went back is a new cgroup"
        );
    }

    #[test]
    fn memory_is_written_in_binary_si() {
        assert_eq!(memory_quantity(6 << 20), "6Mi");
        assert_eq!(memory_quantity(123 * 1024), "123Ki");
        assert_eq!(memory_quantity(1536 + 1), "1537");
        assert_eq!(memory_quantity(0), "0");
    }
}
