//! Container anchors: what keeps a container alive and reachable is not
//! the executor's process.
//!
//! Every container run has a shim (`mesopod shim`, [`serve`]), as
//! containerd's shim anchors a container so that it outlives a containerd
//! restart. The shim is the container's parent (a child subreaper), lives
//! outside the executor's cgroup and session, and holds the executor's
//! ends of the container's stdio pipes. The executor talks to it over a
//! packet socket ([`wire`]): the launch hands the shim the pipes and gets
//! the container's pidfd back; the exit comes as a message. When the
//! executor dies, the container keeps running and its output waits in the
//! pipes; a new executor connects to `<bundle>/shim.sock`
//! ([`Shim::adopt`]) and takes over the pidfd and the pipes, then reads
//! on where the dead one stopped.
//!
//! # Invariants
//!
//! - A shim has at most one owner; a new connection replaces the old one.
//! - A shim without an owner for longer than the adoption timeout kills
//!   its container and exits: nothing runs unsupervised for longer. One
//!   nobody could find any more (its socket or bundle deleted) does not
//!   wait for an adopter at all.
//! - A shim only exits once an owner saw its container's exit (or nobody
//!   came in time), so no exit code is lost to an executor's crash.

mod anchor;
mod client;
mod findable;
pub mod serve;
pub mod wire;

pub use client::{Adopted, ContainerEnds, Ended, Shim, Spawn};

/// The shim's socket, in the container's bundle.
pub const SOCKET: &str = "shim.sock";

/// The shim's pid and start time, in the bundle: how an executor tells a
/// live shim (whose container it may adopt) from a dead one's leftovers
/// without connecting (a connection takes the shim over).
pub const PID_FILE: &str = "shim.pid";

/// `"<pid> <start time>"` of a process, the start time in clock ticks
/// since boot (`/proc/<pid>/stat`'s 22nd field): a pid is reused, a pid
/// with its start time is not.
pub(crate) fn pid_record(pid: u32) -> Option<String> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields count from
    // the last `)`.
    let (_, rest) = stat.rsplit_once(')')?;
    let start = rest.split_whitespace().nth(19)?;
    Some(format!("{pid} {start}"))
}

/// Whether the shim that wrote `<bundle>/shim.pid` still runs.
pub(crate) fn alive(bundle: &std::path::Path) -> bool {
    let Ok(text) = std::fs::read_to_string(bundle.join(PID_FILE)) else {
        return false;
    };
    let text = text.trim();
    text.split_once(' ')
        .and_then(|(pid, _)| pid.parse::<u32>().ok())
        .and_then(pid_record)
        .is_some_and(|now| now == text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pid_record_names_this_process_and_no_other() {
        let me = pid_record(std::process::id()).unwrap_or_default();
        assert!(me.starts_with(&format!("{} ", std::process::id())), "{me}");
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert!(!alive(dir.path()), "no pid file");
        std::fs::write(dir.path().join(PID_FILE), &me).unwrap_or_else(|e| panic!("{e}"));
        assert!(alive(dir.path()));
        let (pid, start) = me.split_once(' ').unwrap_or_default();
        let other = format!("{pid} {}", start.parse::<u64>().unwrap_or(0) + 1);
        std::fs::write(dir.path().join(PID_FILE), other).unwrap_or_else(|e| panic!("{e}"));
        assert!(!alive(dir.path()), "a reused pid is another process");
    }
}
