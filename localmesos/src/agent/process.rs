//! Child processes: executors and command tasks.
//!
//! Each child leads its own process group, so a signal reaches everything a
//! shell command started. stdout and stderr go to files in the sandbox, as
//! Mesos' containerizer does, where `/files/read` serves them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use mesos::proto::CommandInfo;

/// How a child ended.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Exit {
    /// Exited with this code.
    Code(i32),
    /// Killed by this signal.
    Signal(i32),
    /// Waiting on it failed.
    Unknown,
}

impl Exit {
    /// The `wait(2)` status Mesos reports in `Event.Failure.status`.
    pub(crate) fn wait_status(self) -> i32 {
        match self {
            Exit::Code(c) => (c & 0xff) << 8,
            Exit::Signal(s) => s & 0x7f,
            Exit::Unknown => -1,
        }
    }

    pub(crate) fn describe(self) -> String {
        match self {
            Exit::Code(c) => format!("Command exited with status {c}"),
            Exit::Signal(s) => format!("Command terminated with signal {s}"),
            Exit::Unknown => "Command ended, status unknown".to_owned(),
        }
    }
}

/// A running child.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Handle {
    pub(crate) pid: Option<u32>,
}

/// A process named so a reused pid is not mistaken for it: its pid and its
/// start time in clock ticks since boot (`/proc/<pid>/stat`, field 22).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ProcessId {
    pub(crate) pid: u32,
    pub(crate) start_time: u64,
}

impl ProcessId {
    /// The process `pid` as it runs now, if it does.
    pub(crate) fn of(pid: u32) -> Option<ProcessId> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // The command name may hold spaces and parentheses: fields count
        // from the last ')'. After it come state (3) .. starttime (22).
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        if fields.first() == Some(&"Z") {
            return None;
        }
        let start_time = fields.get(19)?.parse().ok()?;
        Some(ProcessId { pid, start_time })
    }

    /// Whether this very process still runs.
    pub(crate) fn alive(self) -> bool {
        ProcessId::of(self.pid) == Some(self)
    }
}

/// Watches a process this one did not start (an executor adopted after a
/// restart): `on_exit` gets [`Exit::Unknown`] once it is gone, as Mesos'
/// agent reaps what it recovered by polling.
pub(crate) fn watch_adopted(
    rt: &tokio::runtime::Handle,
    id: ProcessId,
    on_exit: impl FnOnce(Exit) + Send + 'static,
) {
    rt.spawn(async move {
        while id.alive() {
            tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        }
        on_exit(Exit::Unknown);
    });
}

impl Handle {
    /// Sends SIGTERM to the child's process group.
    pub(crate) fn terminate(self) {
        self.signal("TERM");
    }

    /// Sends SIGKILL to the child's process group.
    pub(crate) fn kill(self) {
        self.signal("KILL");
    }

    fn signal(self, sig: &str) {
        let Some(pid) = self.pid else { return };
        // `kill -SIG -- -PGID` reaches the whole group; the helper process is
        // reaped by tokio's orphan queue.
        let spawned = tokio::process::Command::new("kill")
            .arg(format!("-{sig}"))
            .arg("--")
            .arg(format!("-{pid}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        if let Err(e) = spawned {
            tracing::warn!(pid, error = %e, "could not signal a child");
        }
    }
}

/// What to run and where.
pub(crate) struct Spec {
    pub(crate) command: CommandInfo,
    pub(crate) env: BTreeMap<String, String>,
    pub(crate) sandbox: PathBuf,
    /// Left running when this process ends (a checkpointing framework's
    /// executor, which a restarted agent recovers).
    pub(crate) detach: bool,
}

/// Starts the child and calls `on_exit` once it ends.
///
/// # Errors
/// A command without a value, or the spawn's I/O error.
pub(crate) fn spawn(
    rt: &tokio::runtime::Handle,
    spec: Spec,
    on_exit: impl FnOnce(Exit) + Send + 'static,
) -> std::io::Result<Handle> {
    let Some(value) = spec.command.value.clone().filter(|v| !v.is_empty()) else {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "CommandInfo has no 'value'",
        ));
    };
    let mut cmd = if spec.command.shell.unwrap_or(true) {
        let mut c = tokio::process::Command::new("/bin/sh");
        c.arg("-c").arg(&value);
        c
    } else {
        // With shell=false Mesos execs `value` with `arguments` as the whole
        // argv, argv[0] included.
        let mut c = tokio::process::Command::new(&value);
        c.args(spec.command.arguments.iter().skip(1));
        c
    };
    let env: BTreeMap<String, String> = spec
        .command
        .environment
        .iter()
        .flat_map(|e| e.variables.iter())
        .filter_map(|v| v.value.clone().map(|val| (v.name.clone(), val)))
        .chain(spec.env)
        .collect();
    let _ = rt;
    let stdout = std::fs::File::create(spec.sandbox.join("stdout"))?;
    let stderr = std::fs::File::create(spec.sandbox.join("stderr"))?;
    cmd.envs(env)
        .current_dir(&spec.sandbox)
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr)
        .process_group(0)
        .kill_on_drop(!spec.detach);
    let _guard = rt.enter();
    let mut child = cmd.spawn()?;
    let handle = Handle { pid: child.id() };
    rt.spawn(async move {
        let exit = match child.wait().await {
            Ok(status) => {
                use std::os::unix::process::ExitStatusExt as _;
                match (status.code(), status.signal()) {
                    (Some(c), _) => Exit::Code(c),
                    (None, Some(s)) => Exit::Signal(s),
                    (None, None) => Exit::Unknown,
                }
            }
            Err(_) => Exit::Unknown,
        };
        on_exit(exit);
    });
    Ok(handle)
}

/// Creates a sandbox directory.
pub(crate) fn make_sandbox(path: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(path)
}
