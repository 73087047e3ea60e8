//! A container's environment as kubelet builds it: `envFrom` first, then
//! `env` in order, each `value` `$(VAR)`-expanded against what came before,
//! with values from ConfigMaps, Secrets, the pod's own fields and the
//! container's resources; then `command` and `args` expanded against the
//! result.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, EnvVar, Pod};

use super::expand::{EnvBuilder, ExecLimitError, ExecLimits, expand_argv};
use super::objects_data::{Kind, fetch};
use crate::objects::PodObjects;
use crate::pod::{ContainerPlan, PodKey};

/// A pod field a container can read (`fieldRef`, downward API volumes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PodField {
    /// `metadata.name`.
    Name,
    /// `metadata.namespace`.
    Namespace,
    /// `metadata.uid`.
    Uid,
    /// `metadata.labels['key']`.
    Label(String),
    /// `metadata.annotations['key']`.
    Annotation(String),
    /// `metadata.labels` (downward API volumes only).
    Labels,
    /// `metadata.annotations` (downward API volumes only).
    Annotations,
    /// `status.podIP`.
    PodIp,
    /// `status.hostIP`.
    HostIp,
    /// `spec.nodeName`.
    NodeName,
    /// `spec.serviceAccountName`.
    ServiceAccountName,
}

impl PodField {
    /// Parses a `fieldPath`; `whole_maps` allows `metadata.labels` and
    /// `metadata.annotations` (volumes; env needs one key).
    pub fn parse(path: &str, whole_maps: bool) -> Option<PodField> {
        let subscript = |prefix: &str| {
            path.strip_prefix(prefix)?
                .strip_suffix("']")
                .map(str::to_owned)
        };
        if let Some(k) = subscript("metadata.labels['") {
            return Some(PodField::Label(k));
        }
        if let Some(k) = subscript("metadata.annotations['") {
            return Some(PodField::Annotation(k));
        }
        Some(match path {
            "metadata.name" => PodField::Name,
            "metadata.namespace" => PodField::Namespace,
            "metadata.uid" => PodField::Uid,
            "metadata.labels" if whole_maps => PodField::Labels,
            "metadata.annotations" if whole_maps => PodField::Annotations,
            "status.podIP" => PodField::PodIp,
            "status.hostIP" => PodField::HostIp,
            "spec.nodeName" => PodField::NodeName,
            "spec.serviceAccountName" => PodField::ServiceAccountName,
            _ => return None,
        })
    }
}

/// `resourceFieldRef`: a container's limit or request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourceRef {
    /// The container (the one being built when empty).
    pub container: String,
    /// `limits.cpu`, `requests.memory`, ...
    pub resource: String,
    /// `divisor` as written (`1` when unset).
    pub divisor: String,
}

impl ResourceRef {
    /// From the API's selector (`divisor` 1 when unset).
    pub fn from_selector(r: &k8s_openapi::api::core::v1::ResourceFieldSelector) -> ResourceRef {
        ResourceRef {
            container: r.container_name.clone().unwrap_or_default(),
            resource: r.resource.clone(),
            divisor: r
                .divisor
                .as_ref()
                .map_or_else(|| "1".into(), |d| d.0.clone()),
        }
    }
}

/// `configMapKeyRef` / `secretKeyRef`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRef {
    /// The object.
    pub name: String,
    /// Its key.
    pub key: String,
    /// `optional`.
    pub optional: bool,
}

/// One environment variable's source.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EnvSource {
    /// `value`, as written (expanded when the container starts).
    Value(String),
    /// `valueFrom.fieldRef`.
    Field(PodField),
    /// `valueFrom.resourceFieldRef`.
    Resource(ResourceRef),
    /// `valueFrom.configMapKeyRef`.
    ConfigMapKey(KeyRef),
    /// `valueFrom.secretKeyRef`.
    SecretKey(KeyRef),
}

/// One `envFrom` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvFrom {
    /// A Secret (else a ConfigMap).
    pub secret: bool,
    /// The object.
    pub name: String,
    /// `prefix`.
    pub prefix: String,
    /// `optional`.
    pub optional: bool,
}

impl EnvSource {
    /// Whether the value comes from the API (a ConfigMap or a Secret).
    pub fn needs_objects(&self) -> bool {
        matches!(self, EnvSource::ConfigMapKey(_) | EnvSource::SecretKey(_))
    }
}

/// A container's `env` (in order) and `envFrom`, planned.
pub(crate) type PlannedEnv = (Vec<(String, EnvSource)>, Vec<EnvFrom>);

/// Plans `env` and `envFrom`; an error names the field.
pub(crate) fn plan_env(c: &Container, field: &str) -> Result<PlannedEnv, String> {
    let mut env = Vec::new();
    for (i, var) in c.env.iter().flatten().enumerate() {
        env.push((
            var.name.clone(),
            plan_var(var, &format!("{field}.env[{i}]"))?,
        ));
    }
    let mut from = Vec::new();
    for (i, e) in c.env_from.iter().flatten().enumerate() {
        let at = format!("{field}.envFrom[{i}]");
        let prefix = e.prefix.clone().unwrap_or_default();
        let entry = match (&e.config_map_ref, &e.secret_ref) {
            (Some(cm), None) => EnvFrom {
                secret: false,
                name: cm.name.clone(),
                prefix,
                optional: cm.optional.unwrap_or(false),
            },
            (None, Some(s)) => EnvFrom {
                secret: true,
                name: s.name.clone(),
                prefix,
                optional: s.optional.unwrap_or(false),
            },
            _ => {
                return Err(format!(
                    "{at}: exactly one of configMapRef and secretRef must be set"
                ));
            }
        };
        if entry.name.is_empty() {
            return Err(format!("{at}: name is required"));
        }
        from.push(entry);
    }
    Ok((env, from))
}

fn plan_var(var: &EnvVar, at: &str) -> Result<EnvSource, String> {
    let Some(from) = &var.value_from else {
        return Ok(EnvSource::Value(var.value.clone().unwrap_or_default()));
    };
    let key_ref = |name: &str, key: &str, optional: Option<bool>| KeyRef {
        name: name.to_owned(),
        key: key.to_owned(),
        optional: optional.unwrap_or(false),
    };
    Ok(
        match (
            &from.field_ref,
            &from.resource_field_ref,
            &from.config_map_key_ref,
            &from.secret_key_ref,
        ) {
            (Some(f), None, None, None) => {
                let path = f.field_path.as_str();
                EnvSource::Field(PodField::parse(path, false).ok_or_else(|| {
                    format!("{at}.valueFrom.fieldRef.fieldPath: Unsupported value: {path:?}")
                })?)
            }
            (None, Some(r), None, None) => EnvSource::Resource(ResourceRef::from_selector(r)),
            (None, None, Some(r), None) => {
                EnvSource::ConfigMapKey(key_ref(&r.name, &r.key, r.optional))
            }
            (None, None, None, Some(r)) => {
                EnvSource::SecretKey(key_ref(&r.name, &r.key, r.optional))
            }
            _ => {
                return Err(format!(
                    "{at}.valueFrom: exactly one of fieldRef, resourceFieldRef, configMapKeyRef and secretKeyRef must be set"
                ));
            }
        },
    )
}

/// What a container's values are read from.
#[derive(Debug, Clone, Copy)]
pub struct PodContext<'a> {
    /// The pod as sent.
    pub pod: &'a Pod,
    /// Its identity.
    pub key: &'a PodKey,
    /// Its node.
    pub node_name: &'a str,
    /// The agent's IP.
    pub host_ip: &'a str,
    /// The pod's IP.
    pub pod_ip: &'a str,
    /// Every container of the pod (for `resourceFieldRef.containerName`).
    pub containers: &'a [ContainerPlan],
}

impl PodContext<'_> {
    /// A pod field's value, as kubelet renders it.
    pub fn field(&self, f: &PodField) -> String {
        let meta = &self.pod.metadata;
        let map_value = |m: &Option<BTreeMap<String, String>>, k: &str| {
            m.as_ref()
                .and_then(|m| m.get(k).cloned())
                .unwrap_or_default()
        };
        match f {
            PodField::Name => self.key.name.clone(),
            PodField::Namespace => self.key.namespace.clone(),
            PodField::Uid => meta.uid.clone().unwrap_or_default(),
            PodField::Label(k) => map_value(&meta.labels, k),
            PodField::Annotation(k) => map_value(&meta.annotations, k),
            PodField::Labels => format_map(meta.labels.as_ref()),
            PodField::Annotations => format_map(meta.annotations.as_ref()),
            PodField::PodIp => self.pod_ip.to_owned(),
            PodField::HostIp => self.host_ip.to_owned(),
            PodField::NodeName => self.node_name.to_owned(),
            PodField::ServiceAccountName => self
                .pod
                .spec
                .as_ref()
                .and_then(|s| s.service_account_name.clone())
                .filter(|s| !s.is_empty())
                .unwrap_or_else(|| "default".into()),
        }
    }

    /// A `resourceFieldRef`'s value for container `own`.
    pub fn resource(&self, r: &ResourceRef, own: &str) -> Result<String, String> {
        let name = if r.container.is_empty() {
            own
        } else {
            &r.container
        };
        let c = self
            .containers
            .iter()
            .find(|c| c.name == name)
            .ok_or_else(|| format!("resourceFieldRef: no container {name:?} in the pod"))?;
        super::resources::value(&c.raw_resources, &r.resource, &r.divisor)
    }
}

/// Kubelet's `k="v"` lines, sorted by key, for labels and annotations.
fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={v:?}\n"))
        .collect()
}

/// The container's environment and the events building it raised.
#[derive(Debug, Default)]
pub struct Resolved {
    /// Name and value, in kubelet's order (later entries win).
    pub env: Vec<(String, String)>,
    /// `(reason, message)` Warning events (keys skipped from `envFrom`).
    pub warnings: Vec<(String, String)>,
}

/// Resolves the container's environment within what `execve` takes
/// (`limits`); an error is a `CreateContainerConfigError` message, in
/// kubelet's words where kubelet has them.
pub async fn resolve(
    plan: &ContainerPlan,
    cx: &PodContext<'_>,
    objects: &dyn PodObjects,
    limits: ExecLimits,
) -> Result<Resolved, String> {
    let ns = cx.key.namespace.as_str();
    let mut env = EnvBuilder::new(limits);
    let mut warnings = Vec::new();
    let err = |e: ExecLimitError| e.to_string();
    // kubelet's service variables for the API (`KUBERNETES_SERVICE_HOST`…)
    // come first, so the container's own env overrides them.
    if let Some(server) = objects.api_server() {
        for (k, v) in crate::apiclient::kubernetes_service_env(&server) {
            env.set(k, v).map_err(err)?;
        }
    }
    for from in &plan.env_from {
        let kind = if from.secret {
            Kind::Secret
        } else {
            Kind::ConfigMap
        };
        let data = fetch(objects, kind, ns, &from.name).await?;
        let Some(data) = data else {
            if from.optional {
                continue;
            }
            return Err(format!("{} {:?} not found", kind.lower(), from.name));
        };
        let mut invalid = Vec::new();
        for (k, v) in data {
            let name = format!("{}{k}", from.prefix);
            if !is_env_var_name(&name) {
                invalid.push(name);
                continue;
            }
            env.set(name, String::from_utf8_lossy(&v).into_owned())
                .map_err(err)?;
        }
        if !invalid.is_empty() {
            let what = if from.secret { "secret" } else { "configMap" };
            warnings.push((
                "InvalidEnvironmentVariableNames".into(),
                format!(
                    "Keys [{}] from the EnvFrom {what} {ns}/{} were skipped since they are considered invalid environment variable names.",
                    invalid.join(", "),
                    from.name
                ),
            ));
        }
    }
    for (name, source) in &plan.env {
        let value = match source {
            EnvSource::Value(v) => {
                // Expanded within what is left: a chain of variables that
                // double each other stops here, before it is allocated.
                env.set_expanded(name, v).map_err(err)?;
                continue;
            }
            EnvSource::Field(f) => Some(cx.field(f)),
            EnvSource::Resource(r) => Some(cx.resource(r, &plan.name)?),
            EnvSource::ConfigMapKey(r) => key_value(objects, Kind::ConfigMap, ns, r).await?,
            EnvSource::SecretKey(r) => key_value(objects, Kind::Secret, ns, r).await?,
        };
        if let Some(v) = value {
            env.set(name.clone(), v).map_err(err)?;
        }
    }
    Ok(Resolved {
        env: env.into_vars(),
        warnings,
    })
}

/// A `configMapKeyRef` or `secretKeyRef` value; `None` when optional and
/// missing.
async fn key_value(
    objects: &dyn PodObjects,
    kind: Kind,
    ns: &str,
    r: &KeyRef,
) -> Result<Option<String>, String> {
    let Some(mut data) = fetch(objects, kind, ns, &r.name).await? else {
        return if r.optional {
            Ok(None)
        } else {
            Err(format!("{} {:?} not found", kind.lower(), r.name))
        };
    };
    let upper = match kind {
        Kind::ConfigMap => "ConfigMap",
        Kind::Secret => "Secret",
    };
    match data.remove(&r.key) {
        Some(v) => Ok(Some(String::from_utf8_lossy(&v).into_owned())),
        None if r.optional => Ok(None),
        None => Err(format!(
            "couldn't find key {} in {upper} {ns}/{}",
            r.key, r.name
        )),
    }
}

/// The plan with `command` and `args` expanded against `env`, as the
/// container will run them, within what `env` leaves of `limits`; an error
/// is a `CreateContainerConfigError` message.
pub fn expanded(
    plan: &ContainerPlan,
    env: &[(String, String)],
    limits: ExecLimits,
) -> Result<ContainerPlan, String> {
    let (command, args) = expand_argv(plan.command.as_deref(), plan.args.as_deref(), env, limits)
        .map_err(|e| e.to_string())?;
    let mut p = plan.clone();
    p.command = command;
    p.args = args;
    p.argv = match &p.command {
        Some(cmd) => cmd.iter().chain(p.args.iter().flatten()).cloned().collect(),
        None => Vec::new(),
    };
    Ok(p)
}

/// Kubernetes' `IsEnvVarName`: `[-._a-zA-Z][-._a-zA-Z0-9]*`.
fn is_env_var_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || matches!(c, '-' | '.' | '_'))
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'))
}

#[cfg(test)]
#[path = "envsrc_tests.rs"]
mod tests;
