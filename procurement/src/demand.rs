//! What a pod asks for, worked out once per pod and reused on every offer.
//!
//! Parsing quantities, annotations and selectors costs more than matching
//! them, so it happens here, once; a procurement attempt only compares
//! numbers. The demand is independent of the pipeline's configuration
//! (defaults, roles, strategies are applied per attempt, cheaply), so one
//! [`PodDemand`] serves every pipeline. Each part keeps its own result: a
//! bad port declaration fails the ports procurement, not the node one.

use std::sync::Arc;

use k8s_openapi::api::core::v1::{Container, NodeSelectorRequirement, Pod};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use registry::PodTask;
use std::collections::BTreeMap;

use crate::failure::{ProcureError, Stage};
use crate::node::TaintEffect;
use crate::pool::ResourceKind;
use crate::quantity::{QuantityError, Unit, parse_millis};

/// Annotation listing the pod's roles, comma-separated, in preference order.
pub const ROLES_ANNOTATION: &str = "mesopod.io/roles";
/// Annotation choosing the port-mapping strategy: `fixed` or `wildcard`.
pub const PORT_MAPPING_ANNOTATION: &str = "mesopod.io/port-mapping";
/// The extended resource Kubernetes uses for NVIDIA GPUs.
pub const GPU_RESOURCE: &str = "nvidia.com/gpu";

/// Per scalar kind (indexed by `ResourceKind::index`): millis, if set.
pub(crate) type Amounts = [Option<i64>; 4];

/// The amount of a quantity too large for Mesos' scalars: more than any
/// offer holds, so it is insufficient everywhere (sums saturate).
pub(crate) const UNPLACEABLE: i64 = i64::MAX;

/// How host ports are chosen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortStrategy {
    /// Only non-zero host ports are mapped, each to itself.
    Fixed,
    /// As fixed, and container ports with host port 0 get a free offered port.
    Wildcard,
}

impl PortStrategy {
    /// Parses the annotation's value.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "fixed" => Some(PortStrategy::Fixed),
            "wildcard" => Some(PortStrategy::Wildcard),
            _ => None,
        }
    }
}

/// The container resources, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ResourceDemand {
    /// App containers: request, else limit, per kind.
    pub(crate) app: Vec<Amounts>,
    /// Init containers in order, and whether each is a sidecar
    /// (`restartPolicy: Always`), which keeps running beside the app.
    pub(crate) init: Vec<(Amounts, bool)>,
    /// `spec.overhead`.
    pub(crate) overhead: [i64; 4],
    /// Pod-level `spec.resources`, which replaces the containers' sum when set.
    pub(crate) pod_level: Amounts,
}

/// One host port the pod asks for.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct HostPortWant {
    pub(crate) container: String,
    pub(crate) container_port: u16,
    /// 0: any free port (wildcard strategy only).
    pub(crate) host_port: u16,
    pub(crate) protocol: String,
    pub(crate) name: Option<String>,
}

/// The pod's ports, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PortDemand {
    pub(crate) wants: Vec<HostPortWant>,
    /// From the annotation; `None` means the framework's default.
    pub(crate) strategy: Option<PortStrategy>,
}

/// The roles annotation, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum RolesAnnotation {
    Absent,
    /// The listed roles, trimmed, without blanks; empty if it listed none.
    Listed(Vec<String>),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Op {
    In(Vec<String>),
    NotIn(Vec<String>),
    Exists,
    DoesNotExist,
    Gt(i64),
    Lt(i64),
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Requirement {
    pub(crate) key: String,
    pub(crate) op: Op,
}

/// One `nodeSelectorTerm`: its expressions and its field requirements
/// (`metadata.name` only, as in Kubernetes), all ANDed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Term {
    pub(crate) labels: Vec<Requirement>,
    pub(crate) name: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Toleration {
    /// `None`: every key (only with `exists`).
    pub(crate) key: Option<String>,
    pub(crate) exists: bool,
    pub(crate) value: String,
    /// `None`: every effect.
    pub(crate) effect: Option<TaintEffect>,
}

/// The node constraints, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct NodeDemand {
    pub(crate) node_name: Option<String>,
    pub(crate) selector: Vec<(String, String)>,
    /// `None`: no required node affinity. `Some`: ORed terms.
    pub(crate) affinity: Option<Vec<Term>>,
    pub(crate) tolerations: Vec<Toleration>,
}

/// Everything a pod asks of an offer, parsed once.
#[derive(Debug, Clone)]
pub struct PodDemand {
    pod: Option<Arc<Pod>>,
    pub(crate) node: Result<NodeDemand, ProcureError>,
    pub(crate) roles: Result<RolesAnnotation, ProcureError>,
    pub(crate) resources: Result<ResourceDemand, ProcureError>,
    pub(crate) ports: Result<PortDemand, ProcureError>,
}

impl PodDemand {
    /// Works out what `pod` asks for. Malformed parts are kept as errors and
    /// reported by the procurement that needs them.
    pub fn new(pod: Arc<Pod>) -> Self {
        let node = node_demand(&pod);
        let roles = roles_annotation(&pod);
        let resources = resource_demand(&pod);
        let ports = port_demand(&pod);
        PodDemand {
            pod: Some(pod),
            node,
            roles,
            resources,
            ports,
        }
    }

    /// What `task`'s pod asks for. A launched task has let go of its pod:
    /// it is not placed again, and every stage says so.
    pub fn for_task(task: &PodTask) -> Self {
        match task.pod() {
            Some(pod) => Self::new(Arc::clone(pod)),
            None => {
                let released =
                    |stage| invalid(stage, "the task is launched and no longer holds its pod");
                PodDemand {
                    pod: None,
                    node: Err(released(Stage::Node)),
                    roles: Err(released(Stage::Roles)),
                    resources: Err(released(Stage::PodResources)),
                    ports: Err(released(Stage::Ports)),
                }
            }
        }
    }

    /// The pod this demand was worked out for.
    pub fn pod(&self) -> Option<&Arc<Pod>> {
        self.pod.as_ref()
    }

    /// Whether this demand belongs to exactly this task's pod object.
    pub fn is_for(&self, task: &PodTask) -> bool {
        match (&self.pod, task.pod()) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }

    /// The pod's `nodeSelector` entries (none if the pod's node constraints
    /// are malformed: such a pod fits nowhere, which procurement reports).
    pub fn node_selector(&self) -> &[(String, String)] {
        self.node.as_ref().map_or(&[], |n| n.selector.as_slice())
    }

    /// The first problem with the pod, if any: such a pod fits no offer.
    pub fn invalid(&self) -> Option<&ProcureError> {
        [
            self.node.as_ref().err(),
            self.roles.as_ref().err(),
            self.resources.as_ref().err(),
            self.ports.as_ref().err(),
        ]
        .into_iter()
        .flatten()
        .next()
    }
}

fn invalid(stage: Stage, reason: impl Into<String>) -> ProcureError {
    ProcureError::InvalidPod {
        stage,
        reason: reason.into(),
    }
}

fn annotation<'a>(pod: &'a Pod, key: &str) -> Option<&'a str> {
    pod.metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(key))
        .map(String::as_str)
}

fn roles_annotation(pod: &Pod) -> Result<RolesAnnotation, ProcureError> {
    Ok(match annotation(pod, ROLES_ANNOTATION) {
        None => RolesAnnotation::Absent,
        Some(s) => RolesAnnotation::Listed(
            s.split(',')
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .map(str::to_owned)
                .collect(),
        ),
    })
}

fn amounts(
    stage: Stage,
    name: &str,
    map: Option<&BTreeMap<String, Quantity>>,
) -> Result<Amounts, ProcureError> {
    let mut out: Amounts = [None; 4];
    let Some(map) = map else { return Ok(out) };
    for (key, kind, unit) in [
        ("cpu", ResourceKind::Cpus, Unit::Count),
        ("memory", ResourceKind::Mem, Unit::Mebibytes),
        ("ephemeral-storage", ResourceKind::Disk, Unit::Mebibytes),
        (GPU_RESOURCE, ResourceKind::Gpus, Unit::Count),
    ] {
        if let Some(q) = map.get(key) {
            let m = match parse_millis(&q.0, unit) {
                // Devices are whole: a fraction of a GPU still takes one.
                Ok(m) if kind == ResourceKind::Gpus => (m + 999) / 1000 * 1000,
                Ok(m) => m,
                // Valid, but more than any agent has: kube-apiserver
                // accepts it (capped at 2^63-1) and kube-scheduler finds
                // it Insufficient on every node, and so does procurement.
                Err(QuantityError::TooLarge(_)) => UNPLACEABLE,
                Err(e) => return Err(invalid(stage, format!("{name}: {key}: {e}"))),
            };
            out[kind.index()] = Some(m);
        }
    }
    Ok(out)
}

fn container_amounts(c: &Container) -> Result<Amounts, ProcureError> {
    let what = format!("container {:?}", c.name);
    let res = c.resources.as_ref();
    let requests = amounts(
        Stage::PodResources,
        &what,
        res.and_then(|r| r.requests.as_ref()),
    )?;
    let limits = amounts(
        Stage::PodResources,
        &what,
        res.and_then(|r| r.limits.as_ref()),
    )?;
    // Kubernetes defaults a missing request to the limit.
    let mut out = requests;
    for (o, l) in out.iter_mut().zip(limits) {
        if o.is_none() {
            *o = l;
        }
    }
    Ok(out)
}

fn resource_demand(pod: &Pod) -> Result<ResourceDemand, ProcureError> {
    let spec = pod
        .spec
        .as_ref()
        .ok_or_else(|| invalid(Stage::PodResources, "the pod has no spec"))?;
    if spec.containers.is_empty() {
        return Err(invalid(Stage::PodResources, "the pod has no containers"));
    }
    let app = spec
        .containers
        .iter()
        .map(container_amounts)
        .collect::<Result<Vec<_>, _>>()?;
    let init = spec
        .init_containers
        .iter()
        .flatten()
        .map(|c| {
            Ok((
                container_amounts(c)?,
                c.restart_policy.as_deref() == Some("Always"),
            ))
        })
        .collect::<Result<Vec<_>, ProcureError>>()?;
    let overhead = amounts(Stage::PodResources, "spec.overhead", spec.overhead.as_ref())?
        .map(|v| v.unwrap_or(0));
    let pod_level = match &spec.resources {
        Some(r) => {
            let req = amounts(Stage::PodResources, "spec.resources", r.requests.as_ref())?;
            let lim = amounts(Stage::PodResources, "spec.resources", r.limits.as_ref())?;
            let mut out = req;
            for (o, l) in out.iter_mut().zip(lim) {
                if o.is_none() {
                    *o = l;
                }
            }
            out
        }
        None => [None; 4],
    };
    Ok(ResourceDemand {
        app,
        init,
        overhead,
        pod_level,
    })
}

fn port_demand(pod: &Pod) -> Result<PortDemand, ProcureError> {
    let strategy = match annotation(pod, PORT_MAPPING_ANNOTATION) {
        None => None,
        Some(s) => Some(PortStrategy::parse(s).ok_or_else(|| {
            invalid(
                Stage::Ports,
                format!(
                    "annotation {PORT_MAPPING_ANNOTATION}={s:?}: want \"fixed\" or \"wildcard\""
                ),
            )
        })?),
    };
    let mut wants = Vec::new();
    for c in pod.spec.iter().flat_map(|s| s.containers.iter()) {
        for p in c.ports.iter().flatten() {
            let bad = |what: &str, v: i32| {
                invalid(
                    Stage::Ports,
                    format!("container {:?}: {what} {v} is not a port number", c.name),
                )
            };
            let container_port = u16::try_from(p.container_port)
                .ok()
                .filter(|&x| x != 0)
                .ok_or_else(|| bad("containerPort", p.container_port))?;
            let host = p.host_port.unwrap_or(0);
            let host_port = u16::try_from(host).map_err(|_| bad("hostPort", host))?;
            let protocol = p.protocol.clone().unwrap_or_else(|| "TCP".to_owned());
            if !matches!(protocol.as_str(), "TCP" | "UDP" | "SCTP") {
                return Err(invalid(
                    Stage::Ports,
                    format!("container {:?}: protocol {protocol:?}", c.name),
                ));
            }
            wants.push(HostPortWant {
                container: c.name.clone(),
                container_port,
                host_port,
                protocol,
                name: p.name.clone(),
            });
        }
    }
    Ok(PortDemand { wants, strategy })
}

fn node_demand(pod: &Pod) -> Result<NodeDemand, ProcureError> {
    let Some(spec) = pod.spec.as_ref() else {
        return Ok(NodeDemand {
            node_name: None,
            selector: Vec::new(),
            affinity: None,
            tolerations: Vec::new(),
        });
    };
    let selector = spec
        .node_selector
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let required = spec
        .affinity
        .as_ref()
        .and_then(|a| a.node_affinity.as_ref())
        .and_then(|n| {
            n.required_during_scheduling_ignored_during_execution
                .as_ref()
        });
    let affinity = match required {
        None => None,
        Some(sel) => Some(
            sel.node_selector_terms
                .iter()
                .map(|t| {
                    Ok(Term {
                        labels: t
                            .match_expressions
                            .iter()
                            .flatten()
                            .map(requirement)
                            .collect::<Result<_, _>>()?,
                        name: t
                            .match_fields
                            .iter()
                            .flatten()
                            .map(|r| {
                                if r.key != "metadata.name" {
                                    return Err(invalid(
                                        Stage::Node,
                                        format!(
                                            "matchFields key {:?}: only metadata.name is supported",
                                            r.key
                                        ),
                                    ));
                                }
                                let req = requirement(r)?;
                                match req.op {
                                    Op::In(_) | Op::NotIn(_) => Ok(req),
                                    _ => Err(invalid(
                                        Stage::Node,
                                        "matchFields supports only In and NotIn",
                                    )),
                                }
                            })
                            .collect::<Result<_, _>>()?,
                    })
                })
                .collect::<Result<Vec<_>, ProcureError>>()?,
        ),
    };
    let tolerations = spec
        .tolerations
        .iter()
        .flatten()
        .map(|t| {
            let exists = match t.operator.as_deref() {
                None | Some("") | Some("Equal") => false,
                Some("Exists") => true,
                Some(op) => {
                    return Err(invalid(Stage::Node, format!("toleration operator {op:?}")));
                }
            };
            let effect = match t.effect.as_deref() {
                None | Some("") => None,
                Some(e) => Some(match e {
                    "NoSchedule" => TaintEffect::NoSchedule,
                    "PreferNoSchedule" => TaintEffect::PreferNoSchedule,
                    "NoExecute" => TaintEffect::NoExecute,
                    _ => return Err(invalid(Stage::Node, format!("toleration effect {e:?}"))),
                }),
            };
            Ok(Toleration {
                key: t.key.clone().filter(|k| !k.is_empty()),
                exists,
                value: t.value.clone().unwrap_or_default(),
                effect,
            })
        })
        .collect::<Result<_, _>>()?;
    Ok(NodeDemand {
        node_name: spec.node_name.clone().filter(|n| !n.is_empty()),
        selector,
        affinity,
        tolerations,
    })
}

fn requirement(r: &NodeSelectorRequirement) -> Result<Requirement, ProcureError> {
    let values = r.values.clone().unwrap_or_default();
    let bad = |why: &str| {
        invalid(
            Stage::Node,
            format!(
                "node selector requirement {:?} {}: {why}",
                r.key, r.operator
            ),
        )
    };
    let int = |values: &[String]| -> Result<i64, ProcureError> {
        match values {
            [v] => v
                .trim()
                .parse::<i64>()
                .map_err(|_| bad("the value must be an integer")),
            _ => Err(bad("needs exactly one value")),
        }
    };
    let op = match r.operator.as_str() {
        "In" | "NotIn" if values.is_empty() => return Err(bad("needs at least one value")),
        "In" => Op::In(values),
        "NotIn" => Op::NotIn(values),
        "Exists" | "DoesNotExist" if !values.is_empty() => return Err(bad("takes no values")),
        "Exists" => Op::Exists,
        "DoesNotExist" => Op::DoesNotExist,
        "Gt" => Op::Gt(int(&values)?),
        "Lt" => Op::Lt(int(&values)?),
        _ => return Err(bad("unknown operator")),
    };
    Ok(Requirement {
        key: r.key.clone(),
        op,
    })
}
