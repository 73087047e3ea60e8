//! Writing a state out as Mesos resources and a registry spec: done only
//! for results, never inside an attempt.

use std::sync::Arc;

use mesos::proto::{ExecutorInfo, Resource, value};
use mesos::resources::Resources;
use registry::{PortMapping, Spec};

use super::{PodExecutor, ProcureState, Take};
use crate::failure::Owner;
use crate::pool::{ResourceKind, ports_to_ranges, subtract_ports};
use crate::quantity::millis_to_f64;

impl ProcureState {
    /// Millis of `kind` taken for the current pod (its task and, if this pod
    /// procured it, its executor).
    pub(crate) fn pod_taken_millis(&self, kind: ResourceKind) -> i64 {
        self.log[self.pod_start..]
            .iter()
            .map(|t| match t {
                Take::Scalar { entry, millis, .. }
                    if self.pool.entries[usize::from(*entry)].kind == Some(kind) =>
                {
                    *millis
                }
                _ => 0,
            })
            .sum()
    }

    /// The usable amount of `kind` the offer held, over all roles.
    pub(crate) fn offered_millis(&self, kind: ResourceKind) -> i64 {
        if kind == ResourceKind::Ports {
            return 0;
        }
        self.pool.offered[kind.index()]
    }

    /// The spec procured so far for the current pod.
    pub fn spec(&self) -> Spec {
        let pod_log = &self.log[self.pod_start..];
        let resources = self.resources_of(pod_log, Owner::Pod);
        let port_mappings = match &self.demand {
            Some(d) => match &d.ports {
                Ok(ports) => pod_log
                    .iter()
                    .filter_map(|t| match t {
                        Take::Map { want, host_port } => {
                            ports.wants.get(usize::from(*want)).map(|w| PortMapping {
                                container: w.container.clone(),
                                container_port: w.container_port,
                                host_port: *host_port,
                                protocol: w.protocol.clone(),
                                name: w.name.clone(),
                            })
                        }
                        _ => None,
                    })
                    .collect(),
                Err(_) => Vec::new(),
            },
            None => Vec::new(),
        };
        let with_framework = |mut e: ExecutorInfo| {
            if e.framework_id.is_none() {
                e.framework_id = self.pool.framework_id.clone();
            }
            e
        };
        let executor = match &self.pod_executor {
            PodExecutor::None => None,
            PodExecutor::Running(info) => Some(Arc::clone(info)),
            PodExecutor::Configured(info) if info.framework_id.is_some() => Some(Arc::clone(info)),
            PodExecutor::Configured(info) => Some(Arc::new(with_framework((**info).clone()))),
            PodExecutor::Procured => self.procured_executor.as_ref().map(|info| {
                let mut e = (**info).clone();
                e.resources = self.resources_of(&self.log, Owner::Executor);
                Arc::new(with_framework(e))
            }),
        };
        Spec {
            agent_id: self.pool.agent_id.clone(),
            hostname: self.pool.hostname.clone(),
            resources,
            port_mappings,
            executor,
        }
    }

    /// What is left of the offer.
    pub fn remaining(&self) -> Resources {
        to_resources(self.remaining_protos())
    }

    /// What is left of the offer, item for item as offered (emptied items dropped).
    pub fn remaining_protos(&self) -> Vec<Resource> {
        let mut out = Vec::with_capacity(self.pool.templates.len());
        for (i, (tpl, e)) in self
            .pool
            .templates
            .iter()
            .zip(&self.pool.entries)
            .enumerate()
        {
            match e.kind {
                None => out.push(tpl.clone()),
                Some(ResourceKind::Ports) => {
                    let mut taken: Vec<u64> = self
                        .log
                        .iter()
                        .filter_map(|t| match t {
                            Take::Port { entry, port, .. } if usize::from(*entry) == i => {
                                Some(u64::from(*port))
                            }
                            _ => None,
                        })
                        .collect();
                    taken.sort_unstable();
                    let ranges = subtract_ports(&e.ranges, &taken);
                    if !ranges.is_empty() {
                        out.push(with_ranges(tpl, &ranges));
                    }
                }
                Some(_) => {
                    if self.left[i] > 0 {
                        out.push(with_scalar(tpl, self.left[i]));
                    }
                }
            }
        }
        out
    }

    /// The spec procured so far for the current pod, and what is left of the offer.
    pub fn result(&self) -> (Spec, Resources) {
        (self.spec(), self.remaining())
    }

    /// Everything taken by every pod of this state (tasks and executor).
    pub fn procured(&self) -> Resources {
        let mut v = self.resources_of(&self.log, Owner::Pod);
        v.extend(self.resources_of(&self.log, Owner::Executor));
        to_resources(v)
    }

    fn resources_of(&self, log: &[Take], owner: Owner) -> Vec<Resource> {
        let mut out = Vec::new();
        for (i, tpl) in self.pool.templates.iter().enumerate() {
            let mut millis = 0;
            let mut ports = Vec::new();
            for t in log {
                match *t {
                    Take::Scalar {
                        entry,
                        millis: m,
                        owner: o,
                    } if usize::from(entry) == i && o == owner => millis += m,
                    Take::Port {
                        entry,
                        port,
                        owner: o,
                    } if usize::from(entry) == i && o == owner => ports.push(u64::from(port)),
                    _ => {}
                }
            }
            if millis > 0 {
                out.push(with_scalar(tpl, millis));
            }
            if !ports.is_empty() {
                out.push(with_ranges(tpl, &ports_to_ranges(&mut ports)));
            }
        }
        // Kept per task for its whole life: a `Resource` is 320 bytes, and the
        // growth slack of two pushes (room for four) doubled a task's share.
        out.shrink_to_fit();
        out
    }
}

/// The offer was validated as `Resources` when parsed, and every item
/// written back keeps an offered item's identity with an amount within it,
/// so validation cannot fail here; if it ever did, each valid item is still
/// kept rather than losing them all.
fn to_resources(protos: Vec<Resource>) -> Resources {
    match Resources::from_protos(protos.iter().cloned()) {
        Ok(r) => r,
        Err(_) => {
            let mut out = Resources::new();
            for p in protos {
                if let Ok(one) = Resources::from_protos([p]) {
                    out.add(&one);
                }
            }
            out
        }
    }
}

fn with_scalar(tpl: &Resource, millis: i64) -> Resource {
    let mut r = tpl.clone();
    r.r#type = value::Type::Scalar as i32;
    r.scalar = Some(value::Scalar {
        value: millis_to_f64(millis),
    });
    r
}

fn with_ranges(tpl: &Resource, ranges: &[(u64, u64)]) -> Resource {
    let mut r = tpl.clone();
    r.r#type = value::Type::Ranges as i32;
    r.ranges = Some(value::Ranges {
        range: ranges
            .iter()
            .map(|&(begin, end)| value::Range { begin, end })
            .collect(),
    });
    r
}
