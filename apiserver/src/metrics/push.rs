//! What an executor pushes: its pods' latest cgroup samples, as JSON on
//! `POST /api/v1/nodes/{node}/metrics` (this shim's own endpoint, not a
//! Kubernetes API: kubelet is scraped by metrics-server instead, which mesopod
//! has no need of since its executors already hold a credential to the API).
//!
//! ```json
//! {"executor": "mesopod-3f2a…", "timestamp": "2026-12-07T20:00:00.123456789Z",
//!  "resolutionSeconds": 15,
//!  "pods": [{"namespace": "default", "name": "web-1", "uid": "…",
//!            "containers": [{"name": "app", "id": "<uid>-app-1",
//!                            "time": "2026-12-07T20:00:00.1Z",
//!                            "cpuUsageNanoseconds": 1234567890,
//!                            "workingSetBytes": 10485760}]}]}
//! ```
//!
//! A push replaces everything the same executor said before: a pod it no
//! longer names is gone from the metrics.

use serde::Deserialize;

use super::rate::Sample;
use crate::error::ApiError;

/// The body of a push, as sent.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeSummary {
    /// The pushing executor's id: an agent may run several, each with its pods.
    pub executor: String,
    /// When the executor sampled (RFC 3339).
    pub timestamp: String,
    /// How often the executor pushes; a push older than three of these is stale.
    pub resolution_seconds: u64,
    /// Every pod the executor runs now, with the containers it could sample.
    #[serde(default)]
    pub pods: Vec<PodSummary>,
}

/// One pod of a push.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PodSummary {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// Its uid: a pod of the same name made again is another pod.
    pub uid: String,
    /// Its running containers.
    #[serde(default)]
    pub containers: Vec<ContainerSummary>,
}

/// One container's sample.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ContainerSummary {
    /// The container's name in the pod.
    pub name: String,
    /// This run's id: a restarted container's counter starts again at 0.
    pub id: String,
    /// When it was read (RFC 3339).
    pub time: String,
    /// Cumulative CPU time, nanoseconds.
    pub cpu_usage_nanoseconds: u64,
    /// Memory usage minus inactive file pages, bytes.
    pub working_set_bytes: u64,
}

/// Unix nanoseconds of an RFC 3339 time, or kube's 400.
pub(crate) fn unix_nanos(field: &str, text: &str) -> Result<i128, ApiError> {
    text.parse::<jiff::Timestamp>()
        .map(|t| t.as_nanosecond())
        .map_err(|e| ApiError::BadRequest(format!("{field}: invalid time {text:?}: {e}")))
}

impl ContainerSummary {
    /// The sample it carries.
    pub(crate) fn sample(&self) -> Result<Sample, ApiError> {
        Ok(Sample {
            at_unix_nanos: unix_nanos("containers[].time", &self.time)?,
            cpu_usage_nanos: self.cpu_usage_nanoseconds,
            working_set_bytes: self.working_set_bytes,
        })
    }
}

/// Decodes a push, with kube's 400 for a body that is not one.
pub(crate) fn decode(body: &[u8]) -> Result<NodeSummary, ApiError> {
    let summary: NodeSummary = serde_json::from_slice(body)
        .map_err(|e| ApiError::BadRequest(format!("the node metrics summary is invalid: {e}")))?;
    if summary.resolution_seconds == 0 {
        return Err(ApiError::BadRequest(
            "resolutionSeconds: must be greater than 0".into(),
        ));
    }
    unix_nanos("timestamp", &summary.timestamp)?;
    Ok(summary)
}
