//! What a supervisor writes down so that the next executor can adopt its
//! pod: `<pod dir>/checkpoint.json`, rewritten (atomically) with every
//! update it sends, removed with the pod's last one.
//!
//! It holds the container records as the pod's status is rendered from
//! them (restart counts, last states, container ids, start times), the
//! supervisor's progress (init containers done, back-off attempts), the
//! pod sandbox, and each live run's container: its runtime id and bundle,
//! where its shim listens ([`crate::shim`]).
//!
//! A new executor looks for it in the sandboxes of the agent's other
//! executor runs (`<agent dir>/frameworks/*/executors/*/runs/*/pods/<pod>/`),
//! newest first ([`find`]).

use std::path::{Path, PathBuf};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use super::{Supervisor, Which};
use crate::layout::PODS_DIR;
use crate::oci::runner::AdoptRequest;
use crate::oci::sandbox::PodSandbox;
use crate::status::{Conditions, ContainerRecord};

/// The file, in the pod's directory.
pub(crate) const FILE: &str = "checkpoint.json";

/// A pod as its supervisor last saw it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct Checkpoint {
    pub(super) uid: String,
    pub(super) pod_dir: PathBuf,
    pub(super) start_time: SystemTime,
    pub(super) init: Vec<ContainerRecord>,
    pub(super) main: Vec<ContainerRecord>,
    pub(super) init_attempts: Vec<u32>,
    pub(super) main_attempts: Vec<u32>,
    pub(super) next_init: usize,
    pub(super) started_once: Vec<bool>,
    pub(super) runs: u32,
    pub(super) running_reported: bool,
    /// When each pod condition last changed.
    pub(super) conditions: Conditions,
    pub(super) sandbox: Option<SandboxRecord>,
    /// The containers running when it was written.
    pub(super) live: Vec<(Which, AdoptRequest)>,
}

/// A pod sandbox, by its files.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(super) struct SandboxRecord {
    dir: PathBuf,
    net: Option<PathBuf>,
    ip: Option<std::net::IpAddr>,
}

impl SandboxRecord {
    pub(super) fn of(sandbox: &PodSandbox) -> Self {
        SandboxRecord {
            dir: sandbox.dir.clone(),
            net: sandbox.net.clone(),
            ip: sandbox.ip,
        }
    }

    pub(super) fn sandbox(&self) -> PodSandbox {
        PodSandbox {
            net: self.net.clone(),
            ip: self.ip,
            ..PodSandbox::at(&self.dir)
        }
    }
}

impl Checkpoint {
    /// The pod sandbox's directory, if it had one.
    pub(crate) fn sandbox_dir(&self) -> Option<&Path> {
        self.sandbox.as_ref().map(|s| s.dir.as_path())
    }

    /// The runtime ids of the containers it ran.
    pub(crate) fn container_ids(&self) -> impl Iterator<Item = &str> {
        self.live.iter().map(|(_, r)| r.id.as_str())
    }

    /// The pod's uid.
    pub(crate) fn uid(&self) -> &str {
        &self.uid
    }

    /// The pod's directory.
    pub(crate) fn pod_dir(&self) -> &Path {
        &self.pod_dir
    }
}

impl Supervisor {
    /// The pod as it is now.
    pub(super) fn checkpoint(&self) -> Checkpoint {
        let live = self
            .handles
            .iter()
            .filter_map(|(which, running)| {
                let bundle = running.rootfs.parent()?.to_path_buf();
                Some((
                    *which,
                    AdoptRequest {
                        id: running.id.clone(),
                        bundle,
                        cgroups_path: running.cgroups_path.clone(),
                        image_id: running.image_id.clone(),
                    },
                ))
            })
            .collect();
        Checkpoint {
            uid: self.plan.key.uid.clone(),
            pod_dir: self.pod_dir.clone(),
            start_time: self.start_time,
            init: self.init.clone(),
            main: self.main.clone(),
            init_attempts: self.init_attempts.clone(),
            main_attempts: self.main_attempts.clone(),
            next_init: self.next_init,
            started_once: self.started_once.clone(),
            runs: self.runs,
            running_reported: self.running_reported,
            conditions: self.conditions.clone(),
            sandbox: self.sandbox.get().map(SandboxRecord::of),
            live,
        }
    }

    /// Writes the checkpoint (only where containers can be adopted: not
    /// process mode's host processes, nor a rootless executor's), or
    /// removes it once the pod is over. A failure is logged: it costs only a later adoption.
    pub(super) fn write_checkpoint(&self, over: bool) {
        if !self.oci.as_ref().is_some_and(|o| o.adopts()) {
            return;
        }
        let path = self.pod_dir.join(FILE);
        if over {
            let _ = std::fs::remove_file(&path);
            return;
        }
        let written = serde_json::to_vec(&self.checkpoint())
            .map_err(std::io::Error::other)
            .and_then(|json| write_atomically(&path, &json));
        match written {
            // The pod's first report comes before its directory exists:
            // nothing runs yet, nothing to adopt.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                tracing::warn!(task = %self.task_id, error = %e, "cannot write the pod's checkpoint")
            }
            Ok(()) => {}
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

/// The sandboxes of this agent's other executor runs: every
/// `<agent dir>/frameworks/*/executors/*/runs/*` but `own`.
fn other_runs(agent_dir: &Path, own: &Path) -> Vec<PathBuf> {
    let children = |p: &Path| -> Vec<PathBuf> {
        std::fs::read_dir(p)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path())
            .collect()
    };
    let mut out = Vec::new();
    for framework in children(&agent_dir.join("frameworks")) {
        for executor in children(&framework.join("executors")) {
            out.extend(
                children(&executor.join("runs"))
                    .into_iter()
                    .filter(|r| r != own),
            );
        }
    }
    out
}

fn read(file: &Path) -> Option<Checkpoint> {
    let bytes = std::fs::read(file).ok()?;
    match serde_json::from_slice::<Checkpoint>(&bytes) {
        Ok(cp) => Some(cp),
        Err(e) => {
            tracing::warn!(file = %file.display(), error = %e, "cannot read a pod's checkpoint");
            None
        }
    }
}

/// The newest checkpoint of the pod `pod_dir_name`
/// (`<namespace>_<name>_<uid>`) in another executor run's sandbox on this
/// agent (`agent_dir`); `own` is this executor's sandbox.
pub(crate) fn find(agent_dir: &Path, own: &Path, pod_dir_name: &str) -> Option<Checkpoint> {
    let newest = other_runs(agent_dir, own)
        .into_iter()
        .map(|run| run.join(PODS_DIR).join(pod_dir_name).join(FILE))
        .filter_map(|file| {
            let modified = std::fs::metadata(&file).ok()?.modified().ok()?;
            Some((modified, file))
        })
        .max()?;
    read(&newest.1)
}

/// Every checkpoint in other executor runs' sandboxes on this agent.
pub(crate) fn all(agent_dir: &Path, own: &Path) -> Vec<Checkpoint> {
    let pods = other_runs(agent_dir, own).into_iter().flat_map(|run| {
        std::fs::read_dir(run.join(PODS_DIR))
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join(FILE))
            .collect::<Vec<_>>()
    });
    // An adopted pod's directory is linked from its adopter's sandbox too: one
    // checkpoint, reached twice, is read once.
    let mut seen = std::collections::HashSet::new();
    pods.filter_map(|f| f.canonicalize().ok())
        .filter(|f| seen.insert(f.clone()))
        .filter_map(|f| read(&f))
        .collect()
}
