//! Why a resource or attribute was rejected. Every message names the resource.

/// A resource or attribute that is malformed, or an operation that does not fit.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ResourceError {
    /// A resource or attribute without a name.
    #[error("resource or attribute without a name in '{item}'")]
    EmptyName {
        /// The offending text or resource, as given.
        item: String,
    },
    /// Text that is not `name(role):value` (or `name:value` for attributes).
    #[error("cannot parse '{item}': {reason}")]
    Syntax {
        /// The offending item.
        item: String,
        /// What was expected.
        reason: String,
    },
    /// A scalar that is negative, not finite, or too large to be exact.
    #[error("resource '{name}': invalid scalar {value}")]
    InvalidScalar {
        /// The resource.
        name: String,
        /// The value given.
        value: f64,
    },
    /// A range whose begin is after its end.
    #[error("resource '{name}': invalid range [{begin}-{end}]")]
    InvalidRange {
        /// The resource.
        name: String,
        /// Range start.
        begin: u64,
        /// Range end.
        end: u64,
    },
    /// A set naming one item twice (Mesos rejects these).
    #[error("resource '{name}': duplicate set item '{item}'")]
    DuplicateSetItem {
        /// The resource.
        name: String,
        /// The repeated item.
        item: String,
    },
    /// The `type` says SCALAR/RANGES/SET but that field is absent.
    #[error("resource '{name}': type {kind} but no {kind} value")]
    MissingValue {
        /// The resource.
        name: String,
        /// The declared type.
        kind: &'static str,
    },
    /// A type resources cannot have (TEXT, or an unknown number).
    #[error("resource '{name}': unsupported type {kind}")]
    UnsupportedType {
        /// The resource.
        name: String,
        /// The type, by name or number.
        kind: String,
    },
    /// A role that Mesos would refuse.
    #[error("resource '{name}': invalid role '{role}'")]
    InvalidRole {
        /// The resource.
        name: String,
        /// The role given.
        role: String,
    },
    /// A subtraction asked for more than there is.
    #[error("resource '{name}' (role '{role}'): {wanted} is not contained in {available}")]
    NotContained {
        /// The resource.
        name: String,
        /// Its role.
        role: String,
        /// What was asked for, in Mesos' text form.
        wanted: String,
        /// What there is, in Mesos' text form ("nothing" if absent).
        available: String,
    },
}
