//! Taking containers down: `delete --force` through the runtime, the bundle's
//! release, and signals to a container's init through its shim's pidfd.

use rustix::process::Signal;

use super::super::rootfs::release;
use super::{AdoptRequest, Oci, Running};

impl Oci {
    /// Deletes a container that could not be adopted (its shim is gone):
    /// whatever is left of it goes (runc's init has no parent-death
    /// signal, and would run on unwatched), and its root filesystem.
    pub(crate) async fn remove_unadopted(&self, live: &AdoptRequest) {
        self.force_delete(&live.id).await;
        let bundle = live.bundle.clone();
        let _ = tokio::task::spawn_blocking(move || release(&bundle)).await;
    }

    /// Deletes a container whose exit came with its adoption.
    pub(crate) async fn remove_exited(&self, running: &Running) {
        running.shim.release();
        self.remove(running).await;
    }

    /// `delete --force`: the container is killed if it runs, and the
    /// runtime forgets it.
    pub(super) async fn force_delete(&self, id: &str) {
        let out = self
            .cli()
            .args(["delete", "--force"])
            .arg(id)
            .output()
            .await;
        if let Ok(o) = &out
            && !o.status.success()
        {
            tracing::warn!(container = %id, stderr = %String::from_utf8_lossy(&o.stderr), "runtime delete failed");
        }
    }

    pub(super) async fn remove(&self, running: &Running) {
        self.force_delete(&running.id).await;
        let rootfs = running.rootfs.clone();
        let _ = tokio::task::spawn_blocking(move || {
            if let Some(bundle) = rootfs.parent() {
                release(bundle);
            }
        })
        .await;
    }
}

/// Sends `signal` to a container's init.
pub(crate) fn signal(running: &Running, sig: Signal) {
    match rustix::process::pidfd_send_signal(&running.shim.pidfd, sig) {
        Ok(()) | Err(rustix::io::Errno::SRCH) => {}
        Err(e) => tracing::warn!(container = %running.id, error = %e, "cannot signal container"),
    }
}
