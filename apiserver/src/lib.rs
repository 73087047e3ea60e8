//! The Kubernetes API shim: pods, nodes, events and namespaces, served to `kubectl`.
//!
//! Filled in by the API shim issue; nothing here pretends to work yet.
