//! Helpers for frameworks and URLs.

use super::framework_info::{self, capability};
use super::{FrameworkInfo, Url};

impl FrameworkInfo {
    /// Whether the framework declares the capability.
    pub fn has_capability(&self, cap: capability::Type) -> bool {
        self.capabilities
            .iter()
            .any(|c| c.r#type == Some(cap as i32))
    }

    /// The roles the framework subscribes with: `roles` under MULTI_ROLE,
    /// otherwise the single `role`, otherwise `*`.
    pub fn effective_roles(&self) -> Vec<String> {
        if self.has_capability(capability::Type::MultiRole) {
            return self.roles.clone();
        }
        vec![self.role.clone().unwrap_or_else(|| "*".to_owned())]
    }
}

impl framework_info::Capability {
    /// A capability of this type.
    pub fn of(t: capability::Type) -> Self {
        Self {
            r#type: Some(t as i32),
        }
    }
}

impl Url {
    /// `scheme://host:port` of the address, preferring the IP.
    pub fn base(&self) -> Option<String> {
        let addr = self.address.as_ref()?;
        let host = addr.ip.as_deref().or(addr.hostname.as_deref())?;
        Some(format!("{}://{}:{}", self.scheme, host, addr.port))
    }
}
