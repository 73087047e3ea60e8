//! Where a pod's files live in the executor's sandbox.
//!
//! ```text
//! <sandbox>/pods/<namespace>_<name>_<uid>/<container>/stdout
//! <sandbox>/pods/<namespace>_<name>_<uid>/<container>/stderr
//! ```
//!
//! The agent's `/files/read?path=<sandbox>/pods/...` serves these files, which
//! is how the API shim answers `kubectl logs` (follow = read again from the
//! last offset). Files are only ever appended to, restarts included, so an
//! offset stays valid for a follower. Every component is checked to be a
//! single safe path segment before a plan exists (see [`crate::pod`]).

use std::path::{Path, PathBuf};

/// The directory under the sandbox that holds one directory per pod.
pub const PODS_DIR: &str = "pods";

/// One of a container's two log files.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LogStream {
    /// The container's standard output.
    Stdout,
    /// The container's standard error.
    Stderr,
}

impl LogStream {
    /// The file name.
    pub fn file_name(self) -> &'static str {
        match self {
            LogStream::Stdout => "stdout",
            LogStream::Stderr => "stderr",
        }
    }
}

/// `pods/<namespace>_<name>_<uid>`, relative to the sandbox.
pub fn pod_dir(namespace: &str, name: &str, uid: &str) -> PathBuf {
    Path::new(PODS_DIR).join(format!("{namespace}_{name}_{uid}"))
}

/// `pods/<namespace>_<name>_<uid>/<container>`, relative to the sandbox.
pub fn container_dir(namespace: &str, name: &str, uid: &str, container: &str) -> PathBuf {
    pod_dir(namespace, name, uid).join(container)
}

/// `pods/<namespace>_<name>_<uid>/<container>/<stdout|stderr>`, relative to
/// the sandbox: join it to the executor's sandbox directory for `/files/read`.
pub fn log_file(
    namespace: &str,
    name: &str,
    uid: &str,
    container: &str,
    stream: LogStream,
) -> PathBuf {
    container_dir(namespace, name, uid, container).join(stream.file_name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_paths_follow_the_documented_layout() {
        assert_eq!(
            log_file("prod", "web", "u-1", "app", LogStream::Stdout),
            PathBuf::from("pods/prod_web_u-1/app/stdout")
        );
        assert_eq!(
            log_file("prod", "web", "u-1", "app", LogStream::Stderr),
            PathBuf::from("pods/prod_web_u-1/app/stderr")
        );
    }
}
