//! `exec`: runs a command in a container and relays its stdio as frames.

/// How this executor enters containers.
#[derive(Debug, Clone)]
pub struct Exec {}
