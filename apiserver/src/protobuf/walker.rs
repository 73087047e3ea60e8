//! A decoded message as Kubernetes JSON.
//!
//! Written here rather than with prost-reflect's serde support, whose proto3 JSON mapping
//! is not Kubernetes': it writes 64-bit integers as strings and knows none of the types
//! whose JSON differs from their message ([`super::special`]).
//!
//! Field names are the schemas' (Kubernetes names its protobuf fields as its JSON
//! fields); only fields present on the wire are written (proto2 presence), numbers as
//! numbers, bytes as base64, repeated fields as arrays and maps as objects.

use std::fmt;

use base64::Engine as _;
use prost_reflect::{DynamicMessage, FieldDescriptor, MapKey, ReflectMessage as _, Value as Proto};
use serde_json::{Map, Value};

use super::{schema, special};

/// String fields where `""` is not "unset": kept even when empty. Everywhere else Go
/// treats an empty string as unset and its JSON leaves it out (`omitempty`), while its
/// protobuf writes every non-pointer string, empty or not.
const KEEP_EMPTY: &[&str] = &[
    // "" asks for no storage class, unset for the default one.
    "k8s.io.api.core.v1.PersistentVolumeClaimSpec.storageClassName",
    "k8s.io.api.core.v1.PersistentVolumeClaimSpec.volumeAttributesClassName",
];

/// Number and boolean fields that are plain (non-pointer) Go fields, whose zero is
/// "unset": left out when zero, as Go's JSON leaves them out, so that the shim's
/// defaulting sees them unset (a probe's `periodSeconds: 0` would otherwise probe every
/// second instead of every ten). Other zeros are kept (see the module doc of
/// `protobuf`): where a field is a pointer, zero is a choice.
const DROP_ZERO: &[&str] = &[
    "k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta.generation",
    "k8s.io.api.core.v1.PodSpec.hostNetwork",
    "k8s.io.api.core.v1.PodSpec.hostPID",
    "k8s.io.api.core.v1.PodSpec.hostIPC",
    "k8s.io.api.core.v1.Container.stdin",
    "k8s.io.api.core.v1.Container.stdinOnce",
    "k8s.io.api.core.v1.Container.tty",
    "k8s.io.api.core.v1.EphemeralContainerCommon.stdin",
    "k8s.io.api.core.v1.EphemeralContainerCommon.stdinOnce",
    "k8s.io.api.core.v1.EphemeralContainerCommon.tty",
    "k8s.io.api.core.v1.ContainerPort.hostPort",
    "k8s.io.api.core.v1.Probe.initialDelaySeconds",
    "k8s.io.api.core.v1.Probe.timeoutSeconds",
    "k8s.io.api.core.v1.Probe.periodSeconds",
    "k8s.io.api.core.v1.Probe.successThreshold",
    "k8s.io.api.core.v1.Probe.failureThreshold",
    "k8s.io.api.apps.v1.DeploymentSpec.minReadySeconds",
    "k8s.io.api.apps.v1.DeploymentSpec.paused",
    "k8s.io.api.apps.v1.ReplicaSetSpec.minReadySeconds",
    "k8s.io.api.apps.v1.StatefulSetSpec.minReadySeconds",
    "k8s.io.api.apps.v1.DaemonSetSpec.minReadySeconds",
    "k8s.io.api.core.v1.ReplicationControllerSpec.minReadySeconds",
];

/// What was wrong, and where: a field path (`spec.template.metadata.creationTimestamp`)
/// and a description that never quotes the value.
#[derive(Debug)]
pub(super) struct Problem {
    at: String,
    what: String,
}

impl Problem {
    pub(super) fn new(what: impl Into<String>) -> Self {
        Self {
            at: String::new(),
            what: what.into(),
        }
    }

    /// The same problem, inside field `name`.
    fn within(mut self, name: &str) -> Self {
        self.at = match (self.at.is_empty(), self.at.starts_with('[')) {
            (true, _) => name.to_owned(),
            (false, true) => format!("{name}{}", self.at),
            (false, false) => format!("{name}.{}", self.at),
        };
        self
    }

    /// The same problem, at item `i` of a list.
    fn at_index(mut self, i: usize) -> Self {
        self.at = match self.at.is_empty() {
            true => format!("[{i}]"),
            false if self.at.starts_with('[') => format!("[{i}]{}", self.at),
            false => format!("[{i}].{}", self.at),
        };
        self
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.at.is_empty() {
            true => f.write_str(&self.what),
            false => write!(f, "{}: {}", self.at, self.what),
        }
    }
}

/// `msg` as JSON: an object, or what a [`special`] type is written as.
pub(super) fn message(msg: &DynamicMessage) -> Result<Value, Problem> {
    if let Some(v) = special::json(msg)? {
        return Ok(v);
    }
    let mut out = Map::new();
    for (field, value) in msg.fields() {
        let name = field.name();
        let inline = schema::is_inline(field.full_name());
        // An inlined struct's fields are the parent's in paths too.
        let named = |p: Problem| if inline { p } else { p.within(name) };
        let Some(v) = field_value(&field, value).map_err(named)? else {
            continue;
        };
        if inline {
            if let Value::Object(inner) = v {
                out.extend(inner);
            }
        } else {
            out.insert(name.to_owned(), v);
        }
    }
    let unknown: Vec<u32> = msg.unknown_fields().map(|f| f.number()).collect();
    if !unknown.is_empty() {
        // A newer client's fields: kube-apiserver skips them too.
        tracing::debug!(
            message = msg.descriptor().full_name(),
            ?unknown,
            "protobuf body has fields this server's schemas lack; skipped"
        );
    }
    Ok(Value::Object(out))
}

/// A present field's JSON, `None` for an empty string or a dropped zero.
fn field_value(field: &FieldDescriptor, value: &Proto) -> Result<Option<Value>, Problem> {
    match value {
        Proto::List(items) => items
            .iter()
            .enumerate()
            .map(|(i, v)| single(v).map_err(|p| p.at_index(i)))
            .collect::<Result<Vec<_>, _>>()
            .map(|a| Some(Value::Array(a))),
        Proto::Map(entries) => {
            let mut out = Map::new();
            for (k, v) in entries {
                let key = map_key(k);
                let v = single(v).map_err(|p| p.within(&format!("[{key}]")))?;
                out.insert(key, v);
            }
            Ok(Some(Value::Object(out)))
        }
        Proto::String(s) if s.is_empty() && !KEEP_EMPTY.contains(&field.full_name()) => Ok(None),
        Proto::I64(0) | Proto::I32(0) | Proto::Bool(false)
            if DROP_ZERO.contains(&field.full_name()) =>
        {
            Ok(None)
        }
        v => single(v).map(Some),
    }
}

/// One value (not a list or map) as JSON.
fn single(value: &Proto) -> Result<Value, Problem> {
    Ok(match value {
        Proto::Bool(b) => Value::Bool(*b),
        Proto::I32(n) | Proto::EnumNumber(n) => Value::from(*n),
        Proto::I64(n) => Value::from(*n),
        Proto::U32(n) => Value::from(*n),
        Proto::U64(n) => Value::from(*n),
        Proto::F32(n) => number(f64::from(*n))?,
        Proto::F64(n) => number(*n)?,
        Proto::String(s) => Value::String(s.clone()),
        // As `k8s_openapi::ByteString` and Go's []byte: standard base64, padded.
        Proto::Bytes(b) => Value::String(base64::engine::general_purpose::STANDARD.encode(b)),
        Proto::Message(m) => message(m)?,
        Proto::List(_) | Proto::Map(_) => return Err(Problem::new("a list inside a list")),
    })
}

fn number(n: f64) -> Result<Value, Problem> {
    serde_json::Number::from_f64(n)
        .map(Value::Number)
        .ok_or_else(|| Problem::new("not a finite number"))
}

fn map_key(k: &MapKey) -> String {
    match k {
        MapKey::String(s) => s.clone(),
        MapKey::Bool(b) => b.to_string(),
        MapKey::I32(n) => n.to_string(),
        MapKey::I64(n) => n.to_string(),
        MapKey::U32(n) => n.to_string(),
        MapKey::U64(n) => n.to_string(),
    }
}
