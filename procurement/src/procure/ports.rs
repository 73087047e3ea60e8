//! Ports: host ports from the offer's `ports` ranges.

use registry::PodTask;

use crate::demand::PortStrategy;
use crate::failure::{Owner, ProcureError};
use crate::node::NodeView;
use crate::pipeline::Procurement;
use crate::state::ProcureState;

/// Maps the pod's container ports to host ports taken from the offer.
///
/// - The strategy is the pod's `mesopod.io/port-mapping` annotation, else
///   the framework's default.
/// - `fixed`: each non-zero `hostPort` must lie in an offered range of the
///   pod's roles; container ports without a host port are not mapped.
/// - `wildcard`: as fixed, and each container port whose `hostPort` is 0 or
///   unset gets the lowest free offered port (roles in order).
/// - The same host port with two protocols (DNS on 53/TCP and 53/UDP) takes
///   the port once: Mesos' `ports` are not per protocol. The same port and
///   protocol twice is an error, as is a port another pod already took from
///   this offer.
#[derive(Debug, Clone, Copy)]
pub struct PortsProcurement {
    default: PortStrategy,
}

impl PortsProcurement {
    /// Uses `default` for pods without the annotation.
    pub fn new(default: PortStrategy) -> Self {
        PortsProcurement { default }
    }
}

impl Procurement for PortsProcurement {
    fn modifies_task(&self) -> bool {
        false
    }

    fn procure(
        &self,
        task: &mut PodTask,
        _node: &NodeView,
        state: &mut ProcureState,
    ) -> Result<(), ProcureError> {
        match &state.ensure_demand(task).ports {
            Err(e) => return Err(e.clone()),
            Ok(d) if d.wants.is_empty() => return Ok(()),
            Ok(_) => {}
        }
        let demand = state.demand_for(task);
        let d = demand.ports.as_ref().map_err(Clone::clone)?;
        let strategy = d.strategy.unwrap_or(self.default);
        let wants = &d.wants;
        for (i, w) in wants.iter().enumerate() {
            if w.host_port != 0
                && wants[..i]
                    .iter()
                    .any(|o| o.host_port == w.host_port && o.protocol == w.protocol)
            {
                return Err(ProcureError::DuplicateHostPort {
                    port: w.host_port,
                    protocol: w.protocol.clone(),
                });
            }
        }
        let roles = state.role_ids(&state.roles_for(task));
        let mark = state.log_mark();
        let result = (|| {
            for (i, w) in wants.iter().enumerate() {
                if w.host_port == 0 {
                    continue;
                }
                // A port this pod already took (another protocol) is shared.
                if !wants[..i].iter().any(|o| o.host_port == w.host_port) {
                    if state.port_taken(w.host_port) {
                        return Err(ProcureError::PortTaken { port: w.host_port });
                    }
                    let entry = state
                        .port_entry(w.host_port, &roles)
                        .ok_or(ProcureError::PortNotOffered { port: w.host_port })?;
                    state.take_port(entry, w.host_port, Owner::Pod);
                }
                state.map_port(i, w.host_port);
            }
            if strategy == PortStrategy::Wildcard {
                let asked = wants.iter().filter(|w| w.host_port == 0).count();
                let mut got = 0;
                for (i, w) in wants.iter().enumerate() {
                    if w.host_port != 0 {
                        continue;
                    }
                    // When none is free, the ones this pod got so far were
                    // all that was available to its wildcard ports.
                    let Some((entry, port)) = state.free_port(&roles) else {
                        return Err(ProcureError::NoFreePorts {
                            asked,
                            available: got,
                        });
                    };
                    state.take_port(entry, port, Owner::Pod);
                    state.map_port(i, port);
                    got += 1;
                }
            }
            Ok(())
        })();
        if let Err(e) = result {
            state.undo_to(mark);
            return Err(e);
        }
        Ok(())
    }
}
