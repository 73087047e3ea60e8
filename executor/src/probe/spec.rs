//! A container's probes, read from the pod with Kubernetes' defaults.

use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProbeKind {
    /// `livenessProbe`: failing restarts the container.
    Liveness,
    /// `readinessProbe`: the container's `ready`.
    Readiness,
    /// `startupProbe`: gates the other two; failing restarts the container.
    Startup,
}

impl ProbeKind {
    /// As kubelet's events spell it (`Liveness probe failed: …`).
    pub fn as_str(self) -> &'static str {
        match self {
            ProbeKind::Liveness => "Liveness",
            ProbeKind::Readiness => "Readiness",
            ProbeKind::Startup => "Startup",
        }
    }

    /// The result a probe of this kind has before its first verdict.
    pub fn initial(self) -> bool {
        // kubelet: readiness starts as Failure, liveness as Success; startup
        // is "not started" until it succeeds.
        matches!(self, ProbeKind::Liveness)
    }
}

/// `httpGet`'s scheme.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTPS, the server's certificate not verified (as kubelet).
    Https,
}

/// An `httpGet` handler.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpGet {
    /// HTTP or HTTPS.
    pub scheme: Scheme,
    /// `host`, when set (else the pod's IP).
    pub host: Option<String>,
    /// The port, a name already resolved.
    pub port: u16,
    /// The path, `/` when empty.
    pub path: String,
    /// `httpHeaders`, in order.
    pub headers: Vec<(String, String)>,
}

/// What a probe runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Handler {
    /// `exec.command`, run in the container.
    Exec {
        /// The command, not run through a shell.
        command: Vec<String>,
    },
    /// `httpGet`.
    Http(HttpGet),
    /// `tcpSocket`.
    Tcp {
        /// `host`, when set.
        host: Option<String>,
        /// The port, a name already resolved.
        port: u16,
    },
    /// `grpc`.
    Grpc {
        /// The port.
        port: u16,
        /// `service` (empty: the server's overall health).
        service: String,
    },
    /// A probe that cannot run (a port name the container does not
    /// declare): every attempt is a prober error, as in kubelet.
    Invalid(String),
}

/// One probe with its timing, Kubernetes' defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeSpec {
    /// Which probe.
    pub kind: ProbeKind,
    /// What it runs.
    pub handler: Handler,
    /// `initialDelaySeconds` (0).
    pub initial_delay: Duration,
    /// `periodSeconds` (10).
    pub period: Duration,
    /// `timeoutSeconds` (1).
    pub timeout: Duration,
    /// `successThreshold` (1).
    pub success_threshold: u32,
    /// `failureThreshold` (3).
    pub failure_threshold: u32,
    /// The probe's `terminationGracePeriodSeconds`, for the kill it causes.
    pub termination_grace: Option<Duration>,
}

fn secs(v: Option<i32>, default: u64, min: u64) -> Duration {
    let v = v.and_then(|v| u64::try_from(v).ok()).unwrap_or(default);
    Duration::from_secs(v.max(min))
}

fn count(v: Option<i32>, default: u32) -> u32 {
    v.and_then(|v| u32::try_from(v).ok())
        .filter(|v| *v > 0)
        .unwrap_or(default)
}

impl ProbeSpec {
    /// Reads `probe` of `container` as `kind`.
    pub fn new(kind: ProbeKind, probe: &Probe, container: &Container) -> ProbeSpec {
        let port = |p: &IntOrString| resolve_port(p, container);
        let handler = if let Some(e) = &probe.exec {
            Handler::Exec {
                command: e.command.clone().unwrap_or_default(),
            }
        } else if let Some(h) = &probe.http_get {
            match port(&h.port) {
                Ok(port) => Handler::Http(HttpGet {
                    scheme: if h.scheme.as_deref() == Some("HTTPS") {
                        Scheme::Https
                    } else {
                        Scheme::Http
                    },
                    host: h.host.clone().filter(|h| !h.is_empty()),
                    port,
                    path: h
                        .path
                        .clone()
                        .filter(|p| !p.is_empty())
                        .unwrap_or_else(|| "/".into()),
                    headers: h
                        .http_headers
                        .iter()
                        .flatten()
                        .map(|h| (h.name.clone(), h.value.clone()))
                        .collect(),
                }),
                Err(why) => Handler::Invalid(why),
            }
        } else if let Some(t) = &probe.tcp_socket {
            match port(&t.port) {
                Ok(port) => Handler::Tcp {
                    host: t.host.clone().filter(|h| !h.is_empty()),
                    port,
                },
                Err(why) => Handler::Invalid(why),
            }
        } else if let Some(g) = &probe.grpc {
            match u16::try_from(g.port).ok().filter(|p| *p > 0) {
                Some(port) => Handler::Grpc {
                    port,
                    service: g.service.clone().unwrap_or_default(),
                },
                None => Handler::Invalid(format!("invalid port number: {}", g.port)),
            }
        } else {
            Handler::Invalid("missing probe handler".into())
        };
        ProbeSpec {
            kind,
            handler,
            initial_delay: secs(probe.initial_delay_seconds, 0, 0),
            period: secs(probe.period_seconds, 10, 1),
            timeout: secs(probe.timeout_seconds, 1, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
            termination_grace: probe
                .termination_grace_period_seconds
                .and_then(|s| u64::try_from(s).ok())
                .map(Duration::from_secs),
        }
    }

    /// Every probe `container` declares.
    pub fn all(container: &Container) -> Vec<ProbeSpec> {
        [
            (ProbeKind::Startup, &container.startup_probe),
            (ProbeKind::Liveness, &container.liveness_probe),
            (ProbeKind::Readiness, &container.readiness_probe),
        ]
        .into_iter()
        .filter_map(|(kind, p)| p.as_ref().map(|p| ProbeSpec::new(kind, p, container)))
        .collect()
    }
}

/// A port by number, or by the name of one of the container's ports
/// (kubelet's `findPortByName`).
fn resolve_port(port: &IntOrString, container: &Container) -> Result<u16, String> {
    match port {
        IntOrString::Int(n) => u16::try_from(*n)
            .ok()
            .filter(|p| *p > 0)
            .ok_or_else(|| format!("invalid port number: {n}")),
        IntOrString::String(name) => {
            if let Ok(n) = name.parse::<u16>() {
                return Ok(n);
            }
            container
                .ports
                .iter()
                .flatten()
                .find(|p| p.name.as_deref() == Some(name.as_str()))
                .and_then(|p| u16::try_from(p.container_port).ok())
                .ok_or_else(|| format!("port {name} not found"))
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn container(v: serde_json::Value) -> Container {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn defaults_are_kubernetes_and_named_ports_resolve() {
        let c = container(serde_json::json!({
            "name": "c",
            "ports": [{"name": "web", "containerPort": 8080}],
            "readinessProbe": {"httpGet": {"port": "web"}},
            "livenessProbe": {"tcpSocket": {"port": "nope"}, "periodSeconds": 1, "failureThreshold": 1},
        }));
        let probes = ProbeSpec::all(&c);
        let ready = probes
            .iter()
            .find(|p| p.kind == ProbeKind::Readiness)
            .unwrap();
        assert_eq!(ready.period, Duration::from_secs(10));
        assert_eq!(ready.timeout, Duration::from_secs(1));
        assert_eq!((ready.success_threshold, ready.failure_threshold), (1, 3));
        let Handler::Http(get) = &ready.handler else {
            panic!("{:?}", ready.handler)
        };
        assert_eq!(
            (get.port, get.path.as_str(), get.scheme),
            (8080, "/", Scheme::Http)
        );
        let live = probes
            .iter()
            .find(|p| p.kind == ProbeKind::Liveness)
            .unwrap();
        assert_eq!(live.handler, Handler::Invalid("port nope not found".into()));
        assert_eq!(
            (live.period, live.failure_threshold),
            (Duration::from_secs(1), 1)
        );
    }
}
