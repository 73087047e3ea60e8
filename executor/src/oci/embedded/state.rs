//! The runtime's state directory (`<root>/<id>/`): `state.json`, the
//! `exec.fifo` that holds a `create`d `init` until `start` (a container
//! made by `run` has none); `init` tells `create` it is ready through a pipe.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use rustix::process::{Pid, Signal};
use serde::{Deserialize, Serialize};

use super::RuntimeFailure;
use crate::oci::spec::{OCI_VERSION, Spec, State};

/// What `create` records about a container.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ContainerState {
    /// Container id.
    pub id: String,
    /// The init process' host pid.
    pub pid: i32,
    /// Its start time (`/proc/<pid>/stat` field 22), against pid reuse.
    pub start_time: u64,
    /// The bundle.
    pub bundle: PathBuf,
    /// The container's cgroup directories.
    pub cgroups: Vec<PathBuf>,
    /// The spec it was created from (runc's `state.json` keeps its config
    /// too): `exec` reads it once the bundle's copy is gone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Spec>,
}

pub(crate) fn dir(root: &Path, id: &str) -> Result<PathBuf, RuntimeFailure> {
    if id.is_empty()
        || id.starts_with('.')
        || !id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(RuntimeFailure(format!("invalid container id {id:?}")));
    }
    Ok(root.join(id))
}

pub(crate) fn load(root: &Path, id: &str) -> Result<ContainerState, RuntimeFailure> {
    let path = dir(root, id)?.join("state.json");
    let bytes = std::fs::read(&path)
        .map_err(|_| RuntimeFailure(format!("container {id:?} does not exist")))?;
    serde_json::from_slice(&bytes).map_err(|e| RuntimeFailure::io(path.display(), e))
}

/// Field 22 of `/proc/<pid>/stat` and whether the process is a zombie.
pub(crate) fn proc_stat(pid: i32) -> Option<(u64, bool)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces and parentheses: fields start after the last ')'.
    let after = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    let zombie = fields.first() == Some(&"Z") || fields.first() == Some(&"X");
    Some((fields.get(19)?.parse().ok()?, zombie))
}

fn alive(s: &ContainerState) -> bool {
    proc_stat(s.pid).is_some_and(|(start, zombie)| start == s.start_time && !zombie)
}

pub(crate) fn state(root: &Path, id: &str) -> Result<State, RuntimeFailure> {
    let s = load(root, id)?;
    let running = alive(&s);
    let created = dir(root, id)?.join("exec.fifo").exists();
    Ok(State {
        oci_version: OCI_VERSION.into(),
        id: id.to_owned(),
        status: match (running, created) {
            (true, true) => "created",
            (true, false) => "running",
            _ => "stopped",
        }
        .into(),
        pid: if running { s.pid } else { 0 },
        bundle: s.bundle.display().to_string(),
    })
}

pub(crate) fn start(root: &Path, id: &str) -> Result<(), RuntimeFailure> {
    let s = load(root, id)?;
    let fifo = dir(root, id)?.join("exec.fifo");
    if !fifo.exists() {
        return Err(RuntimeFailure(format!(
            "container {id:?} is not in the created state"
        )));
    }
    if !alive(&s) {
        return Err(RuntimeFailure(format!("container {id:?} has stopped")));
    }
    // Opening the read end lets init's blocked open of the write end return.
    let data = std::fs::read(&fifo).map_err(|e| RuntimeFailure::io(fifo.display(), e))?;
    let _ = std::fs::remove_file(&fifo);
    if data.is_empty() {
        return Err(RuntimeFailure(format!("container {id:?} did not start")));
    }
    Ok(())
}

pub(crate) fn parse_signal(name: &str) -> Option<Signal> {
    let upper = name.to_ascii_uppercase();
    let bare = upper.strip_prefix("SIG").unwrap_or(&upper);
    Some(match bare {
        "TERM" | "15" => Signal::TERM,
        "KILL" | "9" => Signal::KILL,
        "INT" | "2" => Signal::INT,
        "HUP" | "1" => Signal::HUP,
        "QUIT" | "3" => Signal::QUIT,
        "USR1" | "10" => Signal::USR1,
        "USR2" | "12" => Signal::USR2,
        _ => return None,
    })
}

pub(crate) fn kill(root: &Path, id: &str, signal: &str) -> Result<(), RuntimeFailure> {
    let s = load(root, id)?;
    let sig =
        parse_signal(signal).ok_or_else(|| RuntimeFailure(format!("unknown signal {signal:?}")))?;
    if !alive(&s) {
        return Err(RuntimeFailure(format!("container {id:?} is not running")));
    }
    let pid = Pid::from_raw(s.pid).ok_or_else(|| RuntimeFailure("bad pid".into()))?;
    rustix::process::kill_process(pid, sig).map_err(|e| RuntimeFailure::io("kill", e))
}

pub(crate) fn delete(root: &Path, id: &str, force: bool) -> Result<(), RuntimeFailure> {
    let dir = dir(root, id)?;
    let s = match load(root, id) {
        Ok(s) => s,
        Err(e) if !dir.exists() => return Err(e),
        // A create that died half-way: nothing runs, only the directory is left.
        Err(_) => {
            return std::fs::remove_dir_all(&dir).map_err(|e| RuntimeFailure::io(dir.display(), e));
        }
    };
    if alive(&s) {
        if !force {
            return Err(RuntimeFailure(format!(
                "container {id:?} is still running; use --force"
            )));
        }
        if let Some(pid) = Pid::from_raw(s.pid) {
            let _ = rustix::process::kill_process(pid, Signal::KILL);
        }
        let until = Instant::now() + Duration::from_secs(5);
        while alive(&s) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for cg in &s.cgroups {
        remove_cgroup(cg);
    }
    std::fs::remove_dir_all(&dir).map_err(|e| RuntimeFailure::io(dir.display(), e))
}

/// Removes a cgroup directory once its last task is gone (the kernel may
/// take a moment after the exit).
pub(crate) fn remove_cgroup(dir: &Path) {
    let until = Instant::now() + Duration::from_secs(2);
    loop {
        match std::fs::remove_dir(dir) {
            Ok(()) => return,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return,
            Err(_) if Instant::now() < until => std::thread::sleep(Duration::from_millis(5)),
            Err(e) => {
                eprintln!(
                    "mesopod runtime: cannot remove cgroup {}: {e}",
                    dir.display()
                );
                return;
            }
        }
    }
}

pub(crate) fn list(root: &Path) -> Vec<String> {
    let mut ids: Vec<String> = std::fs::read_dir(root)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.path().join("state.json").exists())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    ids.sort();
    ids
}
