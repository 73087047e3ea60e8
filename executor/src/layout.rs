//! Where a pod's files live in the executor's sandbox.
//!
//! ```text
//! <sandbox>/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log
//! <sandbox>/pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log.<YYYYMMDD-hhmmss>
//! ```
//!
//! kubelet's layout under `/var/log/pods`: one CRI log per run of a
//! container ([`crate::logs`]), the older ones its rotated pieces. The
//! agent's `/files/read?path=<sandbox>/pods/...` serves these files, which
//! is how the API shim answers `kubectl logs` (follow = read again from the
//! last offset, from 0 once the file shrank: it was rotated). Every
//! component is checked to be a single safe path segment before a plan
//! exists (see [`crate::pod`]).

use std::path::{Path, PathBuf};

/// The directory under the sandbox that holds one directory per pod.
pub const PODS_DIR: &str = "pods";

/// `pods/<namespace>_<name>_<uid>`, relative to the sandbox.
pub fn pod_dir(namespace: &str, name: &str, uid: &str) -> PathBuf {
    Path::new(PODS_DIR).join(format!("{namespace}_{name}_{uid}"))
}

/// `pods/<namespace>_<name>_<uid>/<container>`, relative to the sandbox.
pub fn container_dir(namespace: &str, name: &str, uid: &str, container: &str) -> PathBuf {
    pod_dir(namespace, name, uid).join(container)
}

/// `pods/<namespace>_<name>_<uid>/<container>/<restartCount>.log`, relative
/// to the sandbox: the CRI log of one run of a container (kubelet's layout);
/// join it to the executor's sandbox directory for `/files/read`.
pub fn run_log(
    namespace: &str,
    name: &str,
    uid: &str,
    container: &str,
    restart_count: i32,
) -> PathBuf {
    container_dir(namespace, name, uid, container).join(run_log_name(restart_count))
}

/// `<restartCount>.log`.
pub fn run_log_name(restart_count: i32) -> String {
    format!("{restart_count}.log")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_paths_follow_the_documented_layout() {
        assert_eq!(
            run_log("prod", "web", "u-1", "app", 0),
            PathBuf::from("pods/prod_web_u-1/app/0.log")
        );
        assert_eq!(
            run_log("prod", "web", "u-1", "app", 3),
            PathBuf::from("pods/prod_web_u-1/app/3.log")
        );
    }
}
