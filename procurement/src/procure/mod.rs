//! The procurements of the default pipeline, one type each.

mod executor;
mod node;
mod ports;
mod resources;
mod roles;

pub use executor::{EXECUTOR_ID_PREFIX, ExecutorProcurement, executor_id_for};
pub use node::NodeProcurement;
pub use ports::PortsProcurement;
pub use resources::{PodResourcesProcurement, ResourceDefaults};
pub use roles::RolesProcurement;

/// Orders roles as resources are taken: the reserved roles in the order
/// given, then `*` (unreserved) if listed; duplicates dropped.
pub(crate) fn take_order<'a>(roles: impl IntoIterator<Item = &'a String>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut star = false;
    for r in roles {
        if r == "*" {
            star = true;
        } else if !out.contains(r) {
            out.push(r.clone());
        }
    }
    if star {
        out.push("*".to_owned());
    }
    out
}
