//! Pod tasks and the task registry: one Kubernetes pod is one Mesos task.
//!
//! Filled in by the registry issue; nothing here pretends to work yet.
