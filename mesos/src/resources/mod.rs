//! [`Resources`]: a bag of Mesos resources with Mesos' arithmetic.
//!
//! # Semantics
//!
//! - A resource's identity is everything but its amount: name, type, role
//!   and reservations, allocation, disk, revocable, shared, provider. Two
//!   resources with the same identity merge; different identities never do.
//!   A `role` of `"*"` and an absent `role` are the same identity.
//! - A resource's role ([`resource_role`]) is the role of the last entry of
//!   `reservations` (reservation refinement), else the deprecated `role`
//!   field, else `"*"` (unreserved).
//! - Scalars are fixed point with three decimals, as Mesos computes them:
//!   `0.1` added ten times is exactly `1`.
//! - Ranges are inclusive, always sorted, disjoint and coalesced. Adding is
//!   union, subtracting is set difference; so are sets.
//! - A `Resources` never holds an empty item (a zero scalar, no ranges, an
//!   empty set): subtraction drops what reaches zero, and equality ignores
//!   item order and the two spellings of "unreserved".
//!
//! # Example
//!
//! ```
//! use mesos::resources::Resources;
//!
//! let offer = Resources::parse("cpus:4;mem:8192;ports:[31000-32000];cpus(prod):2")?;
//! let task = Resources::parse("cpus:0.5;mem:512;ports:[31000-31000]")?;
//! assert!(offer.contains(&task));
//! let left = offer.checked_sub(&task)?;
//! assert_eq!(left.to_string(), "cpus:3.5;cpus(prod):2;mem:7680;ports:[31001-32000]");
//! // unreserved cpus cannot pay for reserved ones, nor the other way round
//! assert!(!offer.contains(&Resources::parse("cpus(prod):3")?));
//! # Ok::<(), mesos::resources::ResourceError>(())
//! ```
//!
//! # Caveats
//!
//! Shared resources are counted like any other (Mesos counts their copies);
//! mesopod does not use them.

mod error;
mod item;
mod parse;
mod quantity;
mod ranges;
mod vecmap;

use std::collections::BTreeSet;
use std::fmt;
use std::ops::{Add, AddAssign, Sub, SubAssign};

pub use error::ResourceError;
pub use item::{ranges, resource_role, scalar, set};
pub use parse::{attribute_text, parse_attributes};

use crate::proto::{Resource, resource};
use item::{describe, key_of, set_value, validate};
use quantity::{Quantity, milli_to_scalar};
use vecmap::VecMap;

/// The unreserved role.
pub const UNRESERVED: &str = "*";

/// What makes two resources the same resource; orders by name, then role.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Key {
    name: String,
    role: String,
    /// Protobuf encoding of the resource without its amount. prost encodes
    /// fields in tag order and maps sorted, so equal identities give equal
    /// bytes.
    identity: Vec<u8>,
}

#[derive(Clone)]
struct Entry {
    /// The resource as it goes back on the wire; its value fields always
    /// mirror `qty`.
    proto: Resource,
    qty: Quantity,
}

/// A normalised bag of resources. See the [module docs](self) for the rules.
#[derive(Clone, Default)]
pub struct Resources {
    entries: VecMap<Key, Entry>,
}

/// The wire resources, so that test failures read like offers.
impl fmt::Debug for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl PartialEq for Resources {
    fn eq(&self, other: &Self) -> bool {
        self.entries.len() == other.entries.len()
            && self
                .entries
                .iter()
                .zip(other.entries.iter())
                .all(|((ka, a), (kb, b))| ka == kb && a.qty == b.qty)
    }
}

impl Resources {
    /// No resources.
    pub fn new() -> Self {
        Self::default()
    }

    /// Validates and merges wire resources. Zero amounts are dropped.
    ///
    /// # Errors
    /// A nameless resource, a negative/non-finite scalar, a range with
    /// `begin > end`, a set with a duplicate item, a missing value for the
    /// declared type, a TEXT or unknown type, or an invalid role.
    pub fn from_protos(items: impl IntoIterator<Item = Resource>) -> Result<Self, ResourceError> {
        let mut out = Resources::new();
        for item in items {
            let (key, entry) = validate(item)?;
            out.insert(key, entry);
        }
        Ok(out)
    }

    /// The resources as wire messages, in a stable order (name, then role).
    pub fn to_protos(&self) -> Vec<Resource> {
        self.iter().cloned().collect()
    }

    /// Parses Mesos' `--resources` flag syntax, e.g.
    /// `cpus:4;mem:8192;disk:20480;ports:[31000-32000];cpus(prod):2;gpus:1`,
    /// or the JSON array form (`[{"name":"cpus","type":"SCALAR",...}]`).
    ///
    /// # Errors
    /// [`ResourceError::Syntax`] for text that is not `name(role):value`,
    /// and everything [`Resources::from_protos`] rejects.
    pub fn parse(spec: &str) -> Result<Self, ResourceError> {
        Self::from_protos(parse::parse_resources(spec)?)
    }

    /// True when there is nothing.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Adds `other` (scalars sum; ranges and sets unite).
    pub fn add(&mut self, other: &Resources) {
        for (key, entry) in &other.entries {
            self.insert(key.clone(), entry.clone());
        }
    }

    /// `self - other`, or an error naming the first resource of `other`
    /// that `self` does not contain. `self` is unchanged either way.
    ///
    /// # Errors
    /// [`ResourceError::NotContained`].
    pub fn checked_sub(&self, other: &Resources) -> Result<Resources, ResourceError> {
        for (key, want) in &other.entries {
            let have = self.entries.get(key);
            if !have.is_some_and(|have| have.qty.contains(&want.qty)) {
                return Err(ResourceError::NotContained {
                    name: key.name.clone(),
                    role: key.role.clone(),
                    wanted: describe(&want.qty),
                    available: have.map_or_else(|| "nothing".to_owned(), |h| describe(&h.qty)),
                });
            }
        }
        Ok(self.saturating_sub(other))
    }

    /// Whether every resource of `other` is in `self` (same identity, at
    /// least the amount).
    pub fn contains(&self, other: &Resources) -> bool {
        other.entries.iter().all(|(key, want)| {
            self.entries
                .get(key)
                .is_some_and(|have| have.qty.contains(&want.qty))
        })
    }

    /// The resources whose role ([`resource_role`]) is exactly `role`.
    pub fn filter_role(&self, role: &str) -> Resources {
        Resources {
            entries: self
                .entries
                .iter()
                .filter(|(k, _)| k.role == role)
                .map(|(k, e)| (k.clone(), e.clone()))
                .collect(),
        }
    }

    /// The unreserved resources (role `"*"`).
    pub fn unreserved(&self) -> Resources {
        self.filter_role(UNRESERVED)
    }

    /// The roles present, sorted, without duplicates.
    pub fn roles(&self) -> Vec<String> {
        let roles: BTreeSet<&str> = self.entries.keys().map(|k| k.role.as_str()).collect();
        roles.into_iter().map(str::to_owned).collect()
    }

    /// The total of scalar resource `name` over every role; 0 if absent.
    pub fn scalar(&self, name: &str) -> f64 {
        milli_to_scalar(self.scalar_milli(name))
    }

    /// The total of scalar resource `name` in milli-units (exact).
    pub fn scalar_milli(&self, name: &str) -> i64 {
        self.entries
            .iter()
            .filter(|(k, _)| k.name == name)
            .fold(0i64, |sum, (_, e)| match e.qty {
                Quantity::Scalar(m) => sum.saturating_add(m),
                _ => sum,
            })
    }

    /// The ranges of resource `name`, merged over every role.
    pub fn ranges(&self, name: &str) -> Vec<(u64, u64)> {
        let all: Vec<(u64, u64)> = self
            .entries
            .iter()
            .filter(|(k, _)| k.name == name)
            .flat_map(|(_, e)| match &e.qty {
                Quantity::Ranges(r) => r.clone(),
                _ => Vec::new(),
            })
            .collect();
        ranges::normalise(all)
    }

    /// The items of set resource `name`, over every role.
    pub fn set(&self, name: &str) -> BTreeSet<String> {
        self.entries
            .iter()
            .filter(|(k, _)| k.name == name)
            .flat_map(|(_, e)| match &e.qty {
                Quantity::Set(s) => s.iter().cloned().collect(),
                _ => Vec::new(),
            })
            .collect()
    }

    /// The same resources with `allocation_info.role` set to `role`, as a
    /// master marks what it offers to a MULTI_ROLE framework.
    pub fn allocate(&self, role: &str) -> Resources {
        let mut out = Resources::new();
        for entry in self.entries.values() {
            let mut proto = entry.proto.clone();
            proto.allocation_info = Some(resource::AllocationInfo {
                role: Some(role.to_owned()),
            });
            out.insert(
                key_of(&proto),
                Entry {
                    proto,
                    qty: entry.qty.clone(),
                },
            );
        }
        out
    }

    /// The same resources without `allocation_info`, the form a master
    /// compares against an agent's totals.
    pub fn unallocated(&self) -> Resources {
        let mut out = Resources::new();
        for entry in self.entries.values() {
            let mut proto = entry.proto.clone();
            proto.allocation_info = None;
            out.insert(
                key_of(&proto),
                Entry {
                    proto,
                    qty: entry.qty.clone(),
                },
            );
        }
        out
    }

    /// The resources, in a stable order (name, then role).
    pub fn iter(&self) -> impl Iterator<Item = &Resource> {
        self.entries.values().map(|e| &e.proto)
    }

    /// Number of distinct resources (identities).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    fn saturating_sub(&self, other: &Resources) -> Resources {
        let mut out = self.clone();
        out.sub_in_place(other);
        out
    }

    fn sub_in_place(&mut self, other: &Resources) {
        for (key, want) in &other.entries {
            if let Some(have) = self.entries.get_mut(key) {
                have.qty.sub(&want.qty);
                if have.qty.is_empty() {
                    self.entries.remove(key);
                } else {
                    set_value(&mut have.proto, &have.qty);
                }
            }
        }
    }

    fn insert(&mut self, key: Key, entry: Entry) {
        if entry.qty.is_empty() {
            return;
        }
        match self.entries.get_mut(&key) {
            Some(have) => {
                have.qty.add(&entry.qty);
                set_value(&mut have.proto, &have.qty);
            }
            None => {
                self.entries.insert(key, entry);
            }
        }
    }
}

impl AddAssign<&Resources> for Resources {
    fn add_assign(&mut self, rhs: &Resources) {
        self.add(rhs);
    }
}

impl AddAssign for Resources {
    fn add_assign(&mut self, rhs: Resources) {
        self.add(&rhs);
    }
}

impl Add for Resources {
    type Output = Resources;
    fn add(mut self, rhs: Resources) -> Resources {
        Resources::add(&mut self, &rhs);
        self
    }
}

impl Add<&Resources> for &Resources {
    type Output = Resources;
    fn add(self, rhs: &Resources) -> Resources {
        let mut out = self.clone();
        Resources::add(&mut out, rhs);
        out
    }
}

/// Saturating: never negative; what reaches zero is dropped.
impl SubAssign<&Resources> for Resources {
    fn sub_assign(&mut self, rhs: &Resources) {
        self.sub_in_place(rhs);
    }
}

/// Saturating: never negative; what reaches zero is dropped.
impl SubAssign for Resources {
    fn sub_assign(&mut self, rhs: Resources) {
        self.sub_in_place(&rhs);
    }
}

/// Saturating: never negative; what reaches zero is dropped.
impl Sub for Resources {
    type Output = Resources;
    fn sub(mut self, rhs: Resources) -> Resources {
        self.sub_in_place(&rhs);
        self
    }
}

/// Saturating: never negative; what reaches zero is dropped.
impl Sub<&Resources> for &Resources {
    type Output = Resources;
    fn sub(self, rhs: &Resources) -> Resources {
        self.saturating_sub(rhs)
    }
}

/// Mesos' flag syntax: `cpus:4;mem:8192;ports:[31000-32000];cpus(prod):2`.
/// Reservation details beyond the role are not shown.
impl fmt::Display for Resources {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, (key, entry)) in self.entries.iter().enumerate() {
            if i > 0 {
                f.write_str(";")?;
            }
            f.write_str(&key.name)?;
            if key.role != UNRESERVED {
                write!(f, "({})", key.role)?;
            }
            write!(f, ":{}", describe(&entry.qty))?;
        }
        Ok(())
    }
}

impl std::str::FromStr for Resources {
    type Err = ResourceError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Resources::parse(s)
    }
}

#[cfg(test)]
mod tests;
