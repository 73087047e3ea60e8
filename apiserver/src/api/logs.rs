//! Reading a pod's log: the API resolves pod and container, the log source does the rest.

use std::time::{Duration, SystemTime};

use k8s_openapi::jiff::Timestamp;

use super::Api;
use crate::error::ApiError;
use crate::logs::{LogRequest, LogStream};

/// What `kubectl logs` can ask for.
#[derive(Debug, Clone, Default)]
pub struct LogOptions {
    /// `-c`; may be omitted when the pod has one container.
    pub container: Option<String>,
    /// `-f`.
    pub follow: bool,
    /// `--tail`.
    pub tail_lines: Option<i64>,
    /// `--limit-bytes`.
    pub limit_bytes: Option<i64>,
    /// `-p`.
    pub previous: bool,
    /// `--timestamps`.
    pub timestamps: bool,
    /// `--since` (`sinceSeconds`).
    pub since_seconds: Option<i64>,
    /// `--since-time` (`sinceTime`, RFC3339).
    pub since_time: Option<String>,
}

impl Api {
    /// Opens the log of one container of a pod: 404 for a missing pod, 400 when the
    /// container is missing or ambiguous (as Kubernetes words it), otherwise whatever the
    /// log source answers.
    pub async fn pod_logs(
        &self,
        namespace: &str,
        name: &str,
        opts: LogOptions,
    ) -> Result<LogStream, ApiError> {
        let pod = self.get_pod(namespace, name)?;
        let since = self.log_since(&opts)?;
        let names: Vec<String> = pod
            .spec
            .iter()
            .flat_map(|s| {
                s.init_containers
                    .iter()
                    .flatten()
                    .chain(s.containers.iter())
            })
            .map(|c| c.name.clone())
            .collect();
        let main: Vec<&String> = pod
            .spec
            .iter()
            .flat_map(|s| s.containers.iter())
            .map(|c| &c.name)
            .collect();
        let container = match opts.container {
            Some(c) if names.contains(&c) => c,
            Some(c) => {
                return Err(ApiError::BadRequest(format!(
                    "container {c} is not valid for pod {name}"
                )));
            }
            None if main.len() == 1 => main[0].clone(),
            None => {
                let list: Vec<&str> = main.iter().map(|s| s.as_str()).collect();
                return Err(ApiError::BadRequest(format!(
                    "a container name must be specified for pod {name}, choose one of: [{}]",
                    list.join(" ")
                )));
            }
        };
        if opts.tail_lines.is_some_and(|n| n < 0) {
            return Err(ApiError::BadRequest(
                "tailLines must be greater than or equal to 0".into(),
            ));
        }
        if opts.limit_bytes.is_some_and(|n| n < 1) {
            return Err(ApiError::BadRequest(
                "limitBytes must be greater than 0".into(),
            ));
        }
        let req = LogRequest {
            pod,
            namespace: namespace.to_string(),
            name: name.to_string(),
            container,
            follow: opts.follow,
            tail_lines: opts.tail_lines,
            limit_bytes: opts.limit_bytes,
            previous: opts.previous,
            timestamps: opts.timestamps,
            since,
        };
        Ok(self.log_source().logs(req).await?)
    }

    /// `sinceSeconds` or `sinceTime` as a time, validated as Kubernetes does.
    fn log_since(&self, opts: &LogOptions) -> Result<Option<SystemTime>, ApiError> {
        match (opts.since_seconds, opts.since_time.as_deref()) {
            (Some(_), Some(_)) => Err(ApiError::BadRequest(
                "at most one of `sinceTime` or `sinceSeconds` may be specified".into(),
            )),
            (Some(s), None) if s < 1 => Err(ApiError::BadRequest(
                "sinceSeconds: Invalid value: must be greater than 0".into(),
            )),
            (Some(s), None) => Ok(self
                .now()
                .checked_sub(Duration::from_secs(s.unsigned_abs()))
                .or(Some(SystemTime::UNIX_EPOCH))),
            (None, Some(t)) => {
                let ts: Timestamp = t.parse().map_err(|_| {
                    ApiError::BadRequest(format!(
                        "sinceTime: Invalid value: {t:?}: must be an RFC3339 time"
                    ))
                })?;
                let d = Duration::new(
                    ts.as_second().max(0).unsigned_abs(),
                    if ts.as_second() < 0 {
                        0
                    } else {
                        ts.subsec_nanosecond().unsigned_abs()
                    },
                );
                Ok(Some(SystemTime::UNIX_EPOCH + d))
            }
            (None, None) => Ok(None),
        }
    }
}
