//! A child process whose whole process group ends with the guard.

use std::io;
use std::ops::{Deref, DerefMut};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal, kill_process_group};

/// How long a group has between SIGTERM and SIGKILL, unless told otherwise.
const GRACE: Duration = Duration::from_secs(10);

/// A command that can start its child in a new process group: std's and
/// tokio's.
pub trait GroupCommand {
    /// The child it starts.
    type Child: Reap;
    /// Starts the child as the leader of a new process group.
    fn spawn_in_group(&mut self) -> io::Result<Self::Child>;
}

/// What the guard needs of a child: its pid, and reaping without blocking.
pub trait Reap {
    /// The child's pid, while it has not been reaped.
    fn pid(&self) -> Option<u32>;
    /// Its exit status if it has exited (reaping it), else `None`.
    fn reap(&mut self) -> io::Result<Option<ExitStatus>>;
}

impl GroupCommand for std::process::Command {
    type Child = std::process::Child;
    fn spawn_in_group(&mut self) -> io::Result<Self::Child> {
        std::os::unix::process::CommandExt::process_group(self, 0).spawn()
    }
}

impl Reap for std::process::Child {
    fn pid(&self) -> Option<u32> {
        Some(self.id())
    }
    fn reap(&mut self) -> io::Result<Option<ExitStatus>> {
        self.try_wait()
    }
}

impl GroupCommand for tokio::process::Command {
    type Child = tokio::process::Child;
    fn spawn_in_group(&mut self) -> io::Result<Self::Child> {
        self.process_group(0).spawn()
    }
}

impl Reap for tokio::process::Child {
    fn pid(&self) -> Option<u32> {
        self.id()
    }
    fn reap(&mut self) -> io::Result<Option<ExitStatus>> {
        self.try_wait()
    }
}

/// Owns a child that leads its own process group; dropping the guard ends
/// the group: SIGTERM while the leader lives (so it can stop what it
/// started), SIGKILL to the group once the leader is gone or the grace
/// has passed. The child is reachable through `Deref` for its pipes, its
/// `wait` and its `kill`.
#[derive(Debug)]
pub struct ProcessGuard<C: Reap> {
    child: C,
    group: Option<Pid>,
    grace: Duration,
}

impl<C: Reap> ProcessGuard<C> {
    /// Starts `command` in a new process group.
    ///
    /// # Errors
    ///
    /// When the command cannot start.
    pub fn spawn<G: GroupCommand<Child = C>>(command: &mut G) -> io::Result<Self> {
        let child = command.spawn_in_group()?;
        let group = child
            .pid()
            .and_then(|p| i32::try_from(p).ok())
            .and_then(Pid::from_raw);
        Ok(Self {
            child,
            group,
            grace: GRACE,
        })
    }

    /// The same guard with another time between SIGTERM and SIGKILL.
    pub fn grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }
}

impl<C: Reap> Deref for ProcessGuard<C> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.child
    }
}

impl<C: Reap> DerefMut for ProcessGuard<C> {
    fn deref_mut(&mut self) -> &mut C {
        &mut self.child
    }
}

impl<C: Reap> Drop for ProcessGuard<C> {
    fn drop(&mut self) {
        let Some(group) = self.group else { return };
        let exited = |c: &mut C| !matches!(c.reap(), Ok(None));
        if !exited(&mut self.child) {
            let _ = kill_process_group(group, Signal::TERM);
            let end = Instant::now() + self.grace;
            while !exited(&mut self.child) && Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        // The group outlives its leader while any member lives; its id is
        // not reused before then, so this reaches only what the child started.
        let _ = kill_process_group(group, Signal::KILL);
        let end = Instant::now() + Duration::from_secs(5);
        while !exited(&mut self.child) && Instant::now() < end {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alive(pid: u32) -> bool {
        std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split_whitespace().nth(2) != Some("Z"))
    }

    #[test]
    fn dropping_the_guard_ends_the_child_and_what_it_started() {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let pidfile = dir.path().join("grandchild");
        let script = format!(
            "sleep 60 & echo $! > {0}.tmp; mv {0}.tmp {0}; wait",
            pidfile.display()
        );
        let guard =
            ProcessGuard::spawn(std::process::Command::new("/bin/sh").args(["-c", &script]))
                .expect("sh starts")
                .grace(Duration::from_millis(200));
        let leader = guard.id();
        let grandchild: u32 = crate::wait_until_blocking(
            "the grandchild's pid",
            Duration::from_secs(10),
            || std::fs::read_to_string(&pidfile).ok(),
            Option::is_some,
        )
        .and_then(|s| s.trim().parse().ok())
        .expect("a pid");
        assert!(alive(leader) && alive(grandchild));
        drop(guard);
        // The grandchild is not ours to reap: init does, soon after it dies.
        crate::wait_until_blocking(
            "the grandchild to end",
            Duration::from_secs(10),
            || alive(grandchild),
            |a| !a,
        );
        assert!(!alive(leader));
    }
}
