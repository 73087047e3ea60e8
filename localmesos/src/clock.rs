//! Wall-clock timestamps, as Mesos writes them in statuses and `/state`.

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the epoch, as Mesos timestamps are.
pub(crate) fn now_secs() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64())
        .unwrap_or_default()
}
