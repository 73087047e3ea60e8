//! The environment a Mesos agent gives the executor it launches.
//!
//! Required: `MESOS_AGENT_ENDPOINT`, `MESOS_FRAMEWORK_ID`, `MESOS_EXECUTOR_ID`
//! and a sandbox (`MESOS_SANDBOX`, or `MESOS_DIRECTORY` when the sandbox is
//! not mapped elsewhere). Optional, with Mesos' own defaults:
//! `MESOS_CHECKPOINT` (`1`/`0`, default off), `MESOS_SUBSCRIPTION_BACKOFF_MAX`
//! (2 s), `MESOS_RECOVERY_TIMEOUT` (15 min) and
//! `MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD` (5 s).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use mesos::duration::DurationError;
use mesos::proto::{ExecutorId, FrameworkId};

/// Mesos' default `--executor_shutdown_grace_period`.
pub const DEFAULT_SHUTDOWN_GRACE_PERIOD: Duration = Duration::from_secs(5);
/// Mesos' default `--recovery_timeout`: how long an agent waits for its
/// executors to re-subscribe after it restarts, so waiting longer is useless.
pub const DEFAULT_RECOVERY_TIMEOUT: Duration = Duration::from_secs(15 * 60);
/// Mesos' default `--executor_reregistration_retry_interval` cap for
/// subscription backoff.
pub const DEFAULT_SUBSCRIPTION_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// The executor's view of its agent, parsed from the environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecutorEnv {
    /// `ip:port` (or a URL) of the agent's HTTP endpoint.
    pub agent_endpoint: String,
    /// The framework this executor belongs to.
    pub framework_id: FrameworkId,
    /// This executor's id.
    pub executor_id: ExecutorId,
    /// The sandbox directory: pods and their logs live under it.
    pub sandbox: PathBuf,
    /// Whether the framework checkpoints: if so, survive agent restarts.
    pub checkpoint: bool,
    /// Upper bound of the wait between subscription attempts.
    pub subscription_backoff_max: Duration,
    /// How long to keep trying to reconnect after the agent went away.
    pub recovery_timeout: Duration,
    /// How long the agent waits after SHUTDOWN before it kills us.
    pub shutdown_grace_period: Duration,
}

/// Why the environment does not describe an executor launch.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvError {
    /// A required variable is missing or empty.
    #[error("{0} is not set: `mesopod executor` must be started by a Mesos agent")]
    Missing(&'static str),
    /// A duration variable is not in Mesos' syntax.
    #[error("{name}: {source}")]
    BadDuration {
        /// The variable.
        name: &'static str,
        /// What is wrong with it.
        source: DurationError,
    },
    /// A boolean variable is neither `1`/`true` nor `0`/`false`.
    #[error("{name}: expected 1, 0, true or false, got '{value}'")]
    BadBool {
        /// The variable.
        name: &'static str,
        /// Its value.
        value: String,
    },
}

impl ExecutorEnv {
    /// Reads the process environment.
    pub fn from_process_env() -> Result<Self, EnvError> {
        Self::from_vars(std::env::vars())
    }

    /// Reads the given variables (the process environment, or a test's map).
    pub fn from_vars<I, K, V>(vars: I) -> Result<Self, EnvError>
    where
        I: IntoIterator<Item = (K, V)>,
        K: Into<String>,
        V: Into<String>,
    {
        let vars: HashMap<String, String> = vars
            .into_iter()
            .map(|(k, v)| (k.into(), v.into()))
            .filter(|(_, v)| !v.trim().is_empty())
            .collect();
        let required = |name: &'static str| -> Result<String, EnvError> {
            vars.get(name).cloned().ok_or(EnvError::Missing(name))
        };
        let duration = |name: &'static str, default: Duration| -> Result<Duration, EnvError> {
            match vars.get(name) {
                None => Ok(default),
                Some(v) => mesos::duration::parse(v)
                    .map_err(|source| EnvError::BadDuration { name, source }),
            }
        };
        let sandbox = vars
            .get("MESOS_SANDBOX")
            .or_else(|| vars.get("MESOS_DIRECTORY"))
            .cloned()
            .ok_or(EnvError::Missing("MESOS_SANDBOX (or MESOS_DIRECTORY)"))?;
        let checkpoint = match vars.get("MESOS_CHECKPOINT").map(|v| v.trim()) {
            None | Some("0") | Some("false") => false,
            Some("1") | Some("true") => true,
            Some(other) => {
                return Err(EnvError::BadBool {
                    name: "MESOS_CHECKPOINT",
                    value: other.to_owned(),
                });
            }
        };
        Ok(ExecutorEnv {
            agent_endpoint: required("MESOS_AGENT_ENDPOINT")?,
            framework_id: FrameworkId::new(required("MESOS_FRAMEWORK_ID")?),
            executor_id: ExecutorId::new(required("MESOS_EXECUTOR_ID")?),
            sandbox: PathBuf::from(sandbox),
            checkpoint,
            subscription_backoff_max: duration(
                "MESOS_SUBSCRIPTION_BACKOFF_MAX",
                DEFAULT_SUBSCRIPTION_BACKOFF_MAX,
            )?,
            recovery_timeout: duration("MESOS_RECOVERY_TIMEOUT", DEFAULT_RECOVERY_TIMEOUT)?,
            shutdown_grace_period: duration(
                "MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD",
                DEFAULT_SHUTDOWN_GRACE_PERIOD,
            )?,
        })
    }

    /// The agent's IP address: processes run on the host network, so it is
    /// both the pod's and the host's IP. `None` when the endpoint is a name.
    pub fn agent_ip(&self) -> Option<std::net::IpAddr> {
        let endpoint = self
            .agent_endpoint
            .trim_start_matches("http://")
            .trim_start_matches("https://");
        let host_port = endpoint.split('/').next().unwrap_or_default();
        if let Ok(addr) = host_port.parse::<std::net::SocketAddr>() {
            return Some(addr.ip());
        }
        host_port.parse().ok()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn base() -> Vec<(&'static str, &'static str)> {
        vec![
            ("MESOS_AGENT_ENDPOINT", "127.0.0.1:5051"),
            ("MESOS_FRAMEWORK_ID", "fw-1"),
            ("MESOS_EXECUTOR_ID", "ex-1"),
            ("MESOS_DIRECTORY", "/tmp/dir"),
        ]
    }

    #[test]
    fn defaults_follow_mesos() {
        let env = ExecutorEnv::from_vars(base()).unwrap();
        assert_eq!(env.agent_endpoint, "127.0.0.1:5051");
        assert_eq!(env.framework_id.value, "fw-1");
        assert_eq!(env.executor_id.value, "ex-1");
        assert_eq!(env.sandbox, PathBuf::from("/tmp/dir"));
        assert!(!env.checkpoint);
        assert_eq!(env.shutdown_grace_period, Duration::from_secs(5));
        assert_eq!(env.recovery_timeout, Duration::from_secs(900));
        assert_eq!(env.subscription_backoff_max, Duration::from_secs(2));
        assert_eq!(env.agent_ip(), Some("127.0.0.1".parse().unwrap()));
    }

    #[test]
    fn sandbox_wins_over_directory_and_durations_parse() {
        let mut vars = base();
        vars.extend([
            ("MESOS_SANDBOX", "/mnt/mesos/sandbox"),
            ("MESOS_CHECKPOINT", "1"),
            ("MESOS_RECOVERY_TIMEOUT", "15mins"),
            ("MESOS_SUBSCRIPTION_BACKOFF_MAX", "500ms"),
            ("MESOS_EXECUTOR_SHUTDOWN_GRACE_PERIOD", "2.5secs"),
        ]);
        let env = ExecutorEnv::from_vars(vars).unwrap();
        assert_eq!(env.sandbox, PathBuf::from("/mnt/mesos/sandbox"));
        assert!(env.checkpoint);
        assert_eq!(env.subscription_backoff_max, Duration::from_millis(500));
        assert_eq!(env.shutdown_grace_period, Duration::from_millis(2500));
    }

    #[test]
    fn missing_and_malformed_variables_are_named() {
        let vars: Vec<_> = base()
            .into_iter()
            .filter(|(k, _)| *k != "MESOS_EXECUTOR_ID")
            .collect();
        assert_eq!(
            ExecutorEnv::from_vars(vars),
            Err(EnvError::Missing("MESOS_EXECUTOR_ID"))
        );

        let vars: Vec<_> = base()
            .into_iter()
            .filter(|(k, _)| *k != "MESOS_DIRECTORY")
            .collect();
        assert!(matches!(
            ExecutorEnv::from_vars(vars),
            Err(EnvError::Missing(_))
        ));

        let mut vars = base();
        vars.push(("MESOS_RECOVERY_TIMEOUT", "15minutes"));
        let err = ExecutorEnv::from_vars(vars).unwrap_err();
        assert!(err.to_string().contains("MESOS_RECOVERY_TIMEOUT"), "{err}");

        let mut vars = base();
        vars.push(("MESOS_CHECKPOINT", "yes"));
        assert!(matches!(
            ExecutorEnv::from_vars(vars),
            Err(EnvError::BadBool { .. })
        ));
    }
}
