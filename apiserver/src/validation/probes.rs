//! Kubernetes' rules for a container's probes (`validateProbe`,
//! `validateHandler` in `pkg/apis/core/validation`), with its messages.

use k8s_openapi::api::core::v1::{Container, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use super::{Causes, is_dns1123_label};
use crate::error::CauseKind;

/// Checks `c`'s probes; `init` for an init container, which may have none.
pub(super) fn check_probes(causes: &mut Causes, path: &str, c: &Container, init: bool) {
    let probes = [
        ("livenessProbe", &c.liveness_probe),
        ("readinessProbe", &c.readiness_probe),
        ("startupProbe", &c.startup_probe),
    ];
    for (name, probe) in probes {
        let Some(probe) = probe else { continue };
        let field = format!("{path}.{name}");
        if init {
            causes.push(
                CauseKind::Forbidden,
                field,
                "Forbidden: may not be set for init containers without restartPolicy=Always",
            );
            continue;
        }
        check_probe(causes, &field, probe);
        if name != "readinessProbe" && probe.success_threshold.is_some_and(|n| n != 1) {
            let n = probe.success_threshold.unwrap_or_default();
            causes.push(
                CauseKind::Invalid,
                format!("{field}.successThreshold"),
                format!("Invalid value: {n}: must be 1"),
            );
        }
        if name == "readinessProbe" && probe.termination_grace_period_seconds.is_some() {
            let n = probe.termination_grace_period_seconds.unwrap_or_default();
            causes.push(
                CauseKind::Invalid,
                format!("{field}.terminationGracePeriodSeconds"),
                format!("Invalid value: {n}: must not be set for readinessProbes"),
            );
        }
    }
}

fn check_probe(causes: &mut Causes, field: &str, p: &Probe) {
    let handlers = [
        ("exec", p.exec.is_some()),
        ("httpGet", p.http_get.is_some()),
        ("tcpSocket", p.tcp_socket.is_some()),
        ("grpc", p.grpc.is_some()),
    ];
    let set: Vec<&str> = handlers
        .iter()
        .filter(|(_, s)| *s)
        .map(|(n, _)| *n)
        .collect();
    match set.as_slice() {
        [] => causes.push(
            CauseKind::Required,
            field.to_owned(),
            "Required value: must specify a handler type",
        ),
        [_] => {}
        [_, more @ ..] => {
            for name in more {
                causes.push(
                    CauseKind::Forbidden,
                    format!("{field}.{name}"),
                    "Forbidden: may not specify more than 1 handler type",
                );
            }
        }
    }
    let counts = [
        ("initialDelaySeconds", p.initial_delay_seconds),
        ("timeoutSeconds", p.timeout_seconds),
        ("periodSeconds", p.period_seconds),
        ("successThreshold", p.success_threshold),
        ("failureThreshold", p.failure_threshold),
    ];
    for (name, v) in counts {
        if let Some(v) = v.filter(|v| *v < 0) {
            causes.push(
                CauseKind::Invalid,
                format!("{field}.{name}"),
                format!("Invalid value: {v}: must be greater than or equal to 0"),
            );
        }
    }
    if let Some(g) = p.termination_grace_period_seconds.filter(|g| *g <= 0) {
        causes.push(
            CauseKind::Invalid,
            format!("{field}.terminationGracePeriodSeconds"),
            format!("Invalid value: {g}: must be greater than 0"),
        );
    }
    if let Some(e) = &p.exec
        && e.command.as_ref().is_none_or(Vec::is_empty)
    {
        causes.required(format!("{field}.exec.command"));
    }
    if let Some(h) = &p.http_get {
        check_port(causes, &format!("{field}.httpGet.port"), &h.port);
        if let Some(s) = h.scheme.as_deref()
            && !matches!(s, "HTTP" | "HTTPS")
        {
            causes.unsupported(format!("{field}.httpGet.scheme"), s, &["HTTP", "HTTPS"]);
        }
        for (i, header) in h.http_headers.iter().flatten().enumerate() {
            if http::HeaderName::try_from(header.name.as_str()).is_err() {
                causes.invalid(
                    format!("{field}.httpGet.httpHeaders[{i}].name"),
                    &header.name,
                    "a valid HTTP header must consist of alphanumeric characters or '-'",
                );
            }
        }
    }
    if let Some(t) = &p.tcp_socket {
        check_port(causes, &format!("{field}.tcpSocket.port"), &t.port);
    }
    if let Some(g) = &p.grpc
        && !(1..=65535).contains(&g.port)
    {
        causes.push(
            CauseKind::Invalid,
            format!("{field}.grpc.port"),
            format!(
                "Invalid value: {}: must be between 1 and 65535, inclusive",
                g.port
            ),
        );
    }
}

/// A port number, or an IANA service name (at most 15 characters, a DNS
/// label with a letter).
fn check_port(causes: &mut Causes, field: &str, port: &IntOrString) {
    match port {
        IntOrString::Int(n) if !(1..=65535).contains(n) => causes.push(
            CauseKind::Invalid,
            field.to_owned(),
            format!("Invalid value: {n}: must be between 1 and 65535, inclusive"),
        ),
        IntOrString::Int(_) => {}
        IntOrString::String(name) => {
            let ok = name.len() <= 15
                && is_dns1123_label(name)
                && name.chars().any(|c| c.is_ascii_lowercase())
                && !name.contains("--");
            if !ok {
                causes.invalid(
                    field.to_owned(),
                    name,
                    "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn fields(c: serde_json::Value, init: bool) -> Vec<String> {
        let c: Container = serde_json::from_value(c).unwrap();
        let mut causes = Causes::default();
        check_probes(&mut causes, "spec.containers[0]", &c, init);
        causes.0.iter().map(|c| c.field.clone()).collect()
    }

    #[test]
    fn each_broken_probe_rule_names_its_field() {
        let c = serde_json::json!({
            "name": "c",
            "livenessProbe": {"exec": {"command": ["true"]}, "tcpSocket": {"port": 80}, "successThreshold": 2},
            "readinessProbe": {"httpGet": {"port": 0, "scheme": "FTP"}, "terminationGracePeriodSeconds": 3},
            "startupProbe": {"periodSeconds": -1},
        });
        assert_eq!(
            fields(c.clone(), false),
            [
                "spec.containers[0].livenessProbe.tcpSocket",
                "spec.containers[0].livenessProbe.successThreshold",
                "spec.containers[0].readinessProbe.httpGet.port",
                "spec.containers[0].readinessProbe.httpGet.scheme",
                "spec.containers[0].readinessProbe.terminationGracePeriodSeconds",
                "spec.containers[0].startupProbe",
                "spec.containers[0].startupProbe.periodSeconds",
            ]
        );
        assert_eq!(
            fields(c, true).len(),
            3,
            "init containers may have no probes"
        );
        let good = serde_json::json!({"name": "c", "readinessProbe": {"httpGet": {"port": "web", "path": "/"}}});
        assert!(fields(good, false).is_empty());
    }
}
