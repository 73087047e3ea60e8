//! The one fork of the embedded runtime: `create` forks its container's
//! `init` instead of executing this binary again, which cost a start as
//! much CPU as everything else `create` does (the executable is large, and
//! the loader relocates all of it on every exec).
//!
//! A fork is safe here because the runtime's processes are single-threaded
//! (`mesopod runtime` is dispatched before anything starts a thread), which
//! [`single_threaded`] checks before each fork: the child may then run any
//! code, as its parent could.

use rustix::process::Pid;

use super::RuntimeFailure;

/// Which side of a fork this is.
pub(crate) enum Forked {
    /// The new process.
    Child,
    /// The caller, with the child's pid.
    Parent(Pid),
}

/// Forks this process; refuses in a process with more than one thread.
pub(crate) fn fork() -> Result<Forked, RuntimeFailure> {
    single_threaded()?;
    // SAFETY: the process has one thread (checked just above, and nothing
    // in it starts threads), so no lock can be held by a thread the child
    // lacks; fork itself takes no pointer.
    #[allow(unsafe_code)]
    let pid = unsafe { libc::fork() };
    match pid {
        0 => Ok(Forked::Child),
        p if p > 0 => Pid::from_raw(p)
            .map(Forked::Parent)
            .ok_or_else(|| RuntimeFailure(format!("fork returned pid {p}"))),
        _ => Err(RuntimeFailure::io(
            "fork init",
            std::io::Error::last_os_error(),
        )),
    }
}

/// Errs unless this process has exactly one thread (`/proc/self/status`).
fn single_threaded() -> Result<(), RuntimeFailure> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| RuntimeFailure::io("/proc/self/status", e))?;
    let threads = status
        .lines()
        .find_map(|l| l.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse::<u32>().ok());
    match threads {
        Some(1) => Ok(()),
        other => Err(RuntimeFailure(format!(
            "the runtime must be single-threaded to fork a container's init (threads: {other:?})"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_threaded_process_is_not_forked() {
        // A second thread alive for the whole check, however the harness runs.
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let other = std::thread::spawn(move || rx.recv());
        let forked = fork();
        drop(tx);
        let _ = other.join();
        let e = match forked {
            Err(e) => e,
            Ok(Forked::Child) => std::process::exit(101),
            Ok(Forked::Parent(_)) => panic!("forked a multi-threaded process"),
        };
        assert!(e.0.contains("single-threaded"), "{e}");
    }
}
