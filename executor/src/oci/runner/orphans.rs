//! What dead executors left under the runtime's root, and what of it a new
//! executor keeps: the containers, sandboxes and networks of the pods it
//! may adopt ([`crate::shim`]). Everything else is killed and removed
//! before anything is launched; what was kept and not adopted within the
//! adoption timeout goes then ([`Oci::abandon`]).

use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::Oci;
use crate::oci::rootfs::release;
use crate::oci::sandbox;
use crate::shim::Shim;
use crate::supervisor::checkpoint::Checkpoint;

/// What the checkpoints of dead executors' pods hold on to.
#[derive(Debug, Default)]
pub(crate) struct Adoptable {
    ids: HashSet<String>,
    /// Sandbox directories' names (a pod's network record has its name).
    sandboxes: HashSet<String>,
    pod_dirs: HashSet<PathBuf>,
}

impl Adoptable {
    pub(crate) fn of(checkpoints: &[Checkpoint]) -> Self {
        let mut out = Adoptable::default();
        for cp in checkpoints {
            out.ids.extend(cp.container_ids().map(str::to_owned));
            if let Some(name) = cp.sandbox_dir().and_then(Path::file_name) {
                out.sandboxes.insert(name.to_string_lossy().into_owned());
            }
            out.pod_dirs.insert(cp.pod_dir().to_path_buf());
        }
        out
    }

    /// Whether a dead executor's pod directory is kept.
    pub(crate) fn keeps_pod_dir(&self, dir: &Path) -> bool {
        self.pod_dirs.contains(dir)
    }
}

impl Oci {
    /// Kills and deletes every container an earlier executor left under
    /// this root but those `keep` names, and removes the other pods'
    /// sandboxes and networks; returns the containers' ids. Run before
    /// anything is launched.
    pub(crate) fn clean_orphans(&self, keep: &Adoptable) -> Vec<String> {
        let ids: Vec<String> = sandbox::subdirs(&self.root)
            .into_iter()
            .filter(|id| !keep.ids.contains(id))
            .collect();
        for id in &ids {
            self.kill_leftover(id);
        }
        // Networks first: DEL needs the namespaces the sandboxes hold.
        let kept = |name: &str| keep.sandboxes.contains(name);
        for (pod, done) in self.cni.iter().flat_map(|c| c.release_orphans(kept)) {
            match done {
                Ok(()) => tracing::warn!(%pod, "released the network an earlier executor left"),
                Err(e) => tracing::warn!(%pod, error = %e, "cannot release a leftover network"),
            }
        }
        let mut removed = Vec::new();
        for name in sandbox::subdirs(&self.sandboxes) {
            if !kept(&name) {
                sandbox::remove(&self.sandboxes.join(&name));
                removed.push(name);
            }
        }
        if !removed.is_empty() {
            tracing::warn!(
                sandboxes = ?removed,
                "removed the pod sandboxes an earlier executor left"
            );
        }
        ids
    }

    /// Gives up a dead executor's pod nobody adopted: its containers, its
    /// network and sandbox, and its checkpoint. (Its volumes are the
    /// volume leftovers' sweep's.)
    pub(crate) fn abandon(&self, cp: &Checkpoint) {
        tracing::warn!(pod_dir = %cp.pod_dir().display(), "no executor adopted this pod in time; removing what is left of it");
        for id in cp.container_ids() {
            self.kill_leftover(id);
        }
        if let Some(dir) = cp.sandbox_dir() {
            let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
            if let (Some(cni), Some(name)) = (&self.cni, name)
                && let Err(e) = cni.detach(&name)
            {
                tracing::warn!(pod = %name, error = %e, "cannot release a leftover network");
            }
            sandbox::remove(dir);
        }
        let _ = std::fs::remove_file(cp.pod_dir().join(crate::supervisor::checkpoint::FILE));
    }

    /// Kills and deletes a container a dead executor left, and unmounts
    /// its root filesystem.
    fn kill_leftover(&self, id: &str) {
        let bundle = self.bundle_of(id);
        // A live shim is told: it would otherwise hold on to its
        // container's exit until the adoption timeout.
        if let Some(b) = bundle.as_deref().filter(|b| crate::shim::alive(b)) {
            stop_via_shim(b);
        }
        let out = self.cli_sync().args(["delete", "--force", id]).output();
        if let Err(e) = out {
            tracing::warn!(container = %id, error = %e, "cannot delete a leftover container");
        }
        // The dead executor mounted its containers' root filesystems in
        // the agent's mount namespace: unmounted here, or they stay until
        // reboot (and every later mount namespace copies them).
        if let Some(bundle) = bundle {
            release(&bundle);
        }
    }

    /// The bundle of container `id`, from the runtime's `state` (OCI's
    /// state JSON, which runc and the embedded runtime both print).
    fn bundle_of(&self, id: &str) -> Option<PathBuf> {
        let out = self.cli_sync().args(["state", id]).output().ok()?;
        let state: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
        let bundle = PathBuf::from(state.get("bundle")?.as_str()?);
        // Only a bundle this executor's layout names (`.bundle-<id>`).
        bundle
            .file_name()
            .is_some_and(|n| n.to_string_lossy() == format!(".bundle-{id}"))
            .then_some(bundle)
    }
}

/// Takes over a live shim only to kill its container and let it go.
fn stop_via_shim(bundle: &Path) {
    match Shim::adopt(bundle) {
        Ok(adopted) if adopted.exit.is_some() => adopted.shim.release(),
        Ok(adopted) => {
            let _ = rustix::process::pidfd_send_signal(
                &adopted.shim.pidfd,
                rustix::process::Signal::KILL,
            );
            let _ = adopted.shim.wait();
        }
        Err(e) => {
            tracing::warn!(bundle = %bundle.display(), error = %e, "cannot reach a leftover container's shim")
        }
    }
}
