//! An offer's resources parsed once into a form the pipeline can take from
//! without touching strings or floats on every attempt.
//!
//! Every resource of the offer becomes one [`Entry`] at the same index, so
//! what is taken can always be written back as a copy of the offered
//! `Resource` (same role, reservations, allocation info) with a new quantity.
//! That is what makes "procured + remaining == offered" hold exactly.

use mesos::proto::{AgentId, FrameworkId, Offer, OfferId, Resource, value};
use mesos::resources::{Resources, resource_role};

use crate::node::OfferError;
use crate::quantity::f64_to_millis;

/// The resources the pipeline knows how to take.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// `cpus`, in cores.
    Cpus,
    /// `mem`, in MB.
    Mem,
    /// `disk`, in MB.
    Disk,
    /// `gpus`, whole devices.
    Gpus,
    /// `ports`, ranges of port numbers.
    Ports,
}

impl ResourceKind {
    /// The scalar kinds, in the order failures report them.
    pub const SCALARS: [ResourceKind; 4] = [
        ResourceKind::Cpus,
        ResourceKind::Mem,
        ResourceKind::Disk,
        ResourceKind::Gpus,
    ];

    /// The Mesos resource name.
    pub fn name(self) -> &'static str {
        match self {
            ResourceKind::Cpus => "cpus",
            ResourceKind::Mem => "mem",
            ResourceKind::Disk => "disk",
            ResourceKind::Gpus => "gpus",
            ResourceKind::Ports => "ports",
        }
    }

    /// The kind for a Mesos resource name.
    pub fn from_name(name: &str) -> Option<Self> {
        match name {
            "cpus" => Some(ResourceKind::Cpus),
            "mem" => Some(ResourceKind::Mem),
            "disk" => Some(ResourceKind::Disk),
            "gpus" => Some(ResourceKind::Gpus),
            "ports" => Some(ResourceKind::Ports),
            _ => None,
        }
    }

    pub(crate) fn index(self) -> usize {
        self as usize
    }
}

/// One offered resource.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    /// `None`: a resource the pipeline never takes (other names, volumes,
    /// revocable, shared, provider resources, malformed values). It stays in
    /// what is left, untouched.
    pub(crate) kind: Option<ResourceKind>,
    /// Index into [`OfferPool::roles`].
    pub(crate) role: u16,
    /// Scalar kinds: the offered amount in millis.
    pub(crate) scalar: i64,
    /// Ports: offered ranges, sorted and merged.
    pub(crate) ranges: Vec<(u64, u64)>,
}

/// An offer, parsed.
#[derive(Debug, Clone)]
pub(crate) struct OfferPool {
    pub(crate) offer_id: OfferId,
    pub(crate) agent_id: AgentId,
    pub(crate) hostname: String,
    pub(crate) framework_id: Option<FrameworkId>,
    /// The offered resources, exactly as the master sent them.
    pub(crate) templates: Vec<Resource>,
    pub(crate) entries: Vec<Entry>,
    /// Distinct reservation roles ("*" = unreserved), indexed by `Entry::role`.
    pub(crate) roles: Vec<String>,
    /// Per scalar kind, the total usable amount offered, over all roles.
    pub(crate) offered: [i64; 4],
    /// The index of `*` in `roles`, if the offer has unreserved resources.
    pub(crate) unreserved: Option<u16>,
}

impl OfferPool {
    pub(crate) fn from_offer(offer: &Offer) -> Result<Self, OfferError> {
        let agent_id = match &offer.agent_id {
            Some(id) if !id.value.is_empty() => id.clone(),
            _ => {
                return Err(OfferError::MissingAgentId {
                    offer: offer
                        .id
                        .as_ref()
                        .map(|i| i.value.clone())
                        .unwrap_or_default(),
                });
            }
        };
        let offer_id = match &offer.id {
            Some(id) if !id.value.is_empty() => id.clone(),
            _ => {
                return Err(OfferError::MissingOfferId {
                    agent: agent_id.value,
                });
            }
        };
        // Validated as Mesos would, so that everything written back from
        // these resources (procured, remaining) is valid too.
        Resources::from_protos(offer.resources.iter().cloned()).map_err(|e| {
            OfferError::InvalidResources {
                offer: offer_id.value.clone(),
                why: e.to_string(),
            }
        })?;
        let mut roles: Vec<String> = Vec::new();
        let mut entries = Vec::with_capacity(offer.resources.len());
        let mut offered = [0i64; 4];
        for r in &offer.resources {
            let role_name = resource_role(r);
            let role = match roles.iter().position(|x| x == role_name) {
                Some(i) => i,
                None => {
                    roles.push(role_name.to_owned());
                    roles.len() - 1
                }
            };
            let role = u16::try_from(role).unwrap_or(u16::MAX);
            let entry = parse_entry(r, role);
            if let Some(k) = entry.kind
                && k != ResourceKind::Ports
            {
                offered[k.index()] += entry.scalar;
            }
            entries.push(entry);
        }
        let unreserved = roles
            .iter()
            .position(|r| r == "*")
            .and_then(|i| u16::try_from(i).ok());
        Ok(OfferPool {
            unreserved,
            offer_id,
            agent_id,
            hostname: offer.hostname.clone(),
            framework_id: offer.framework_id.clone(),
            templates: offer.resources.clone(),
            entries,
            roles,
            offered,
        })
    }

    /// The pool's index of `role`, if any resource has that role.
    pub(crate) fn role_index(&self, role: &str) -> Option<u16> {
        if role == "*" {
            // The common case, answered without touching the role strings.
            return self.unreserved;
        }
        self.roles
            .iter()
            .position(|r| r == role)
            .and_then(|i| u16::try_from(i).ok())
    }
}

fn parse_entry(r: &Resource, role: u16) -> Entry {
    let unusable = Entry {
        kind: None,
        role,
        scalar: 0,
        ranges: Vec::new(),
    };
    if r.disk.is_some() || r.revocable.is_some() || r.shared.is_some() || r.provider_id.is_some() {
        // Volumes, mounts, revocable and shared resources have rules of their
        // own; taking a slice of them would build an invalid task.
        return unusable;
    }
    let Some(kind) = ResourceKind::from_name(&r.name) else {
        return unusable;
    };
    let ty = value::Type::try_from(r.r#type).ok();
    match (kind, ty) {
        (ResourceKind::Ports, Some(value::Type::Ranges)) => {
            let mut ranges: Vec<(u64, u64)> = r
                .ranges
                .iter()
                .flat_map(|rs| rs.range.iter())
                .filter(|x| x.begin <= x.end && x.end <= u64::from(u16::MAX))
                .map(|x| (x.begin, x.end))
                .collect();
            normalise(&mut ranges);
            Entry {
                kind: Some(kind),
                role,
                scalar: 0,
                ranges,
            }
        }
        (ResourceKind::Ports, _) => unusable,
        (_, Some(value::Type::Scalar)) => match r.scalar {
            // Below Mesos' resolution of 0.001 there is nothing to take.
            Some(s) if s.value.is_finite() && f64_to_millis(s.value) > 0 => Entry {
                kind: Some(kind),
                role,
                scalar: f64_to_millis(s.value),
                ranges: Vec::new(),
            },
            _ => unusable,
        },
        _ => unusable,
    }
}

/// Sorts and merges overlapping or adjacent ranges, as Mesos does.
pub(crate) fn normalise(ranges: &mut Vec<(u64, u64)>) {
    ranges.sort_unstable();
    let mut out: Vec<(u64, u64)> = Vec::with_capacity(ranges.len());
    for &(b, e) in ranges.iter() {
        match out.last_mut() {
            Some(last) if b <= last.1.saturating_add(1) => last.1 = last.1.max(e),
            _ => out.push((b, e)),
        }
    }
    *ranges = out;
}

/// Ranges covering exactly `ports` (sorted or not; duplicates ignored).
pub(crate) fn ports_to_ranges(ports: &mut Vec<u64>) -> Vec<(u64, u64)> {
    ports.sort_unstable();
    ports.dedup();
    let mut out: Vec<(u64, u64)> = Vec::new();
    for &p in ports.iter() {
        match out.last_mut() {
            Some(last) if last.1 + 1 == p => last.1 = p,
            _ => out.push((p, p)),
        }
    }
    out
}

/// `ranges` minus the ports in `taken` (sorted, unique).
pub(crate) fn subtract_ports(ranges: &[(u64, u64)], taken: &[u64]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(ranges.len() + taken.len());
    for &(b, e) in ranges {
        let mut start = b;
        for &p in taken.iter().filter(|&&p| p >= b && p <= e) {
            if p > start {
                out.push((start, p - 1));
            }
            start = p + 1;
        }
        if start <= e {
            out.push((start, e));
        }
    }
    out
}
