//! Which containers run here, read from the executor's sandbox and the runtime's state
//! root: a pod lives in `pods/<ns>_<name>_<uid>/`, its containers' runs are the runtime
//! containers `<uid>-<container>-<run>` (the supervisor's names), the last run the one
//! that runs now.

use std::path::PathBuf;
use std::sync::Arc;

use super::{ContainerRef, PodDirectory, StreamError};
use crate::oci::exec::ContainerExec;

/// The [`PodDirectory`] of an executor whose sandbox is `sandbox`.
#[derive(Debug, Clone)]
pub struct SandboxPods {
    sandbox: PathBuf,
    exec: Arc<ContainerExec>,
}

impl SandboxPods {
    /// Pods under `sandbox`, containers in `exec`'s runtime.
    pub fn new(sandbox: PathBuf, exec: Arc<ContainerExec>) -> Self {
        Self { sandbox, exec }
    }

    /// The uids of pods `namespace/pod` in the sandbox, newest directory first.
    fn uids(&self, namespace: &str, pod: &str) -> Vec<String> {
        let prefix = format!("{namespace}_{pod}_");
        let dir = self.sandbox.join(crate::layout::PODS_DIR);
        let mut found: Vec<(std::time::SystemTime, String)> = std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let uid = name.strip_prefix(&prefix)?.to_owned();
                let modified = e.metadata().and_then(|m| m.modified()).ok()?;
                Some((modified, uid))
            })
            .collect();
        found.sort_by_key(|f| std::cmp::Reverse(f.0));
        found.into_iter().map(|(_, uid)| uid).collect()
    }

    /// The latest run of `container` of the pod with `uid` in the runtime's state root.
    fn latest_run(&self, uid: &str, container: &str) -> Option<String> {
        let root = self.exec.state_root()?;
        let prefix = format!("{uid}-{container}-");
        std::fs::read_dir(root)
            .ok()?
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                let run: u64 = name.strip_prefix(&prefix)?.parse().ok()?;
                Some((run, name))
            })
            .max()
            .map(|(_, id)| id)
    }
}

impl PodDirectory for SandboxPods {
    fn container(
        &self,
        namespace: &str,
        pod: &str,
        container: &str,
    ) -> Result<ContainerRef, StreamError> {
        let not_found = || {
            StreamError::NotFound(format!(
                "container {container:?} of pod {namespace}/{pod} is not running on this node"
            ))
        };
        for uid in self.uids(namespace, pod) {
            let dir = self.sandbox.join(crate::layout::container_dir(
                namespace, pod, &uid, container,
            ));
            if self.exec.state_root().is_none() {
                if dir.is_dir() {
                    return Ok(ContainerRef {
                        id: None,
                        bundle: None,
                        pid: None,
                        dir,
                    });
                }
                continue;
            }
            if let Some(id) = self.latest_run(&uid, container) {
                return Ok(ContainerRef {
                    id: Some(id),
                    bundle: None,
                    pid: None,
                    dir,
                });
            }
        }
        Err(not_found())
    }

    fn network(&self, namespace: &str, pod: &str) -> Result<Option<PathBuf>, StreamError> {
        if self.uids(namespace, pod).is_empty() {
            return Err(StreamError::NotFound(format!(
                "pod {namespace}/{pod} is not running on this node"
            )));
        }
        Ok(self
            .exec
            .state_root()
            .and_then(|root| super::portforward::pod_netns(root, namespace, pod)))
    }
}
