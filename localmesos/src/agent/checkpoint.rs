//! What an agent checkpoints, laid out as Mesos' agent lays out
//! `<work_dir>/meta` (`src/slave/paths.cpp`), for frameworks with
//! `FrameworkInfo.checkpoint`:
//!
//! ```text
//! meta/slaves/latest.json                       {"<hostname>": "<agent id>"}
//! meta/slaves/<aid>/slave.info                  AgentInfo (hostname, port: the endpoint to rebind)
//!   frameworks/<fid>/framework.info             FrameworkInfo
//!   frameworks/<fid>/executors/<eid>/executor.info
//!     runs/<cid>/pids/forked.pid                "<pid> <start time>" of the executor
//!     runs/<cid>/http.marker                    empty: the executor subscribed
//!     runs/<cid>/tasks/<tid>/task.info          TaskRecord (TaskInfo, role, resources)
//!     runs/<cid>/tasks/<tid>/task.updates       one JSON record a line: {"update":…} | {"ack":"<uuid hex>"}
//! ```
//!
//! Mesos keeps one work dir per agent and a `latest` symlink; localmesos'
//! agents share one work dir, so `latest.json` names each hostname's
//! current agent id. Every file is JSON in Mesos' mapping and is written
//! whole to a temporary file, then renamed over the old one, so a crash
//! leaves the old or the new version, never half of one. (No fsync: the
//! checkpoint survives the process, not the machine.)
//!
//! Nothing here knows the master: it writes what it is given and reads back
//! what is there ([`recover_agent`]).

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

use mesos::proto::{AgentInfo, ExecutorInfo, FrameworkInfo, Resource, TaskInfo, TaskStatus};
use serde::{Deserialize, Serialize};

use super::ExecutorRef;
use super::process::ProcessId;

/// Why a checkpoint could not be written or read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum CheckpointError {
    /// Writing failed.
    #[error("cannot write checkpoint {path}: {source}")]
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
    /// Reading failed.
    #[error("cannot read checkpoint {path}: {source}")]
    Read {
        path: PathBuf,
        source: std::io::Error,
    },
    /// The file is there but does not parse.
    #[error("corrupt checkpoint {path}: {message}")]
    Corrupt { path: PathBuf, message: String },
    /// An id that cannot name a directory (validation refuses these first).
    #[error("id {0:?} cannot name a checkpoint directory")]
    BadId(String),
}

/// A task as the agent checkpoints it (Mesos' `task.info` is a `Task`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub(crate) struct TaskRecord {
    pub(crate) task: TaskInfo,
    pub(crate) role: String,
    /// What the task holds, unallocated.
    pub(crate) resources: Vec<Resource>,
}

/// One line of `task.updates`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
enum UpdateRecord {
    Update(Box<TaskStatus>),
    Ack(String),
}

/// A checkpointed task: what it is, and its updates in order with which
/// were acknowledged.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecoveredTask {
    pub(crate) record: TaskRecord,
    /// The last update the agent took (acknowledged or not).
    pub(crate) latest: Option<TaskStatus>,
    /// Updates not yet acknowledged by the scheduler, oldest first.
    pub(crate) pending: Vec<TaskStatus>,
}

/// A checkpointed executor run.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecoveredExecutor {
    pub(crate) info: ExecutorInfo,
    pub(crate) container_id: String,
    pub(crate) pid: Option<ProcessId>,
    /// `http.marker`: it had subscribed.
    pub(crate) subscribed: bool,
    pub(crate) tasks: Vec<RecoveredTask>,
}

/// A checkpointed framework on one agent.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecoveredFramework {
    pub(crate) info: FrameworkInfo,
    pub(crate) executors: Vec<RecoveredExecutor>,
}

/// Everything one agent checkpointed.
#[derive(Debug)]
pub(crate) struct RecoveredAgent {
    pub(crate) info: AgentInfo,
    pub(crate) frameworks: Vec<RecoveredFramework>,
    /// Frameworks whose checkpoint could not be read: the agent starts
    /// fresh for them (their directory is moved to `meta/corrupt/`).
    pub(crate) skipped: Vec<(String, CheckpointError)>,
}

fn safe(id: &str) -> Result<&str, CheckpointError> {
    if id.is_empty() || id == "." || id == ".." || id.contains(['/', '\0']) {
        return Err(CheckpointError::BadId(id.to_owned()));
    }
    Ok(id)
}

fn slaves_dir(work_dir: &Path) -> PathBuf {
    work_dir.join("meta").join("slaves")
}

fn agent_dir(work_dir: &Path, agent_id: &str) -> Result<PathBuf, CheckpointError> {
    Ok(slaves_dir(work_dir).join(safe(agent_id)?))
}

fn framework_dir(work_dir: &Path, agent_id: &str, fw: &str) -> Result<PathBuf, CheckpointError> {
    Ok(agent_dir(work_dir, agent_id)?
        .join("frameworks")
        .join(safe(fw)?))
}

fn executor_dir(work_dir: &Path, e: ExecutorRef<'_>) -> Result<PathBuf, CheckpointError> {
    Ok(framework_dir(work_dir, e.agent_id, e.framework_id)?
        .join("executors")
        .join(safe(e.executor_id)?))
}

fn run_dir(work_dir: &Path, e: ExecutorRef<'_>, cid: &str) -> Result<PathBuf, CheckpointError> {
    Ok(executor_dir(work_dir, e)?.join("runs").join(safe(cid)?))
}

fn task_dir(
    work_dir: &Path,
    e: ExecutorRef<'_>,
    cid: &str,
    task_id: &str,
) -> Result<PathBuf, CheckpointError> {
    Ok(run_dir(work_dir, e, cid)?
        .join("tasks")
        .join(safe(task_id)?))
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub(crate) fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), CheckpointError> {
    let err = |source| CheckpointError::Write {
        path: path.to_path_buf(),
        source,
    };
    let parent = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(err)?;
    let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("file");
    let tmp = parent.join(format!(".{name}.tmp"));
    std::fs::write(&tmp, bytes).map_err(err)?;
    std::fs::rename(&tmp, path).map_err(err)
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<(), CheckpointError> {
    let bytes = serde_json::to_vec(value).map_err(|e| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    write_atomic(path, &bytes)
}

fn read(path: &Path) -> Result<Vec<u8>, CheckpointError> {
    std::fs::read(path).map_err(|source| CheckpointError::Read {
        path: path.to_path_buf(),
        source,
    })
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, CheckpointError> {
    serde_json::from_slice(&read(path)?).map_err(|e| CheckpointError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })
}

/// The agent ids of the hostnames that checkpointed (`latest.json`).
pub(crate) fn latest(work_dir: &Path) -> Result<BTreeMap<String, String>, CheckpointError> {
    let path = slaves_dir(work_dir).join("latest.json");
    if !path.exists() {
        return Ok(BTreeMap::new());
    }
    read_json(&path)
}

/// Checkpoints an agent: `slave.info`, and its id as its hostname's latest.
pub(crate) fn write_agent(work_dir: &Path, info: &AgentInfo) -> Result<(), CheckpointError> {
    let id = info.id.as_ref().map(|i| i.value.as_str()).unwrap_or("");
    write_json(&agent_dir(work_dir, id)?.join("slave.info"), info)?;
    // A corrupt latest.json is replaced: the agent is starting fresh anyway.
    let mut all = latest(work_dir).unwrap_or_default();
    all.insert(info.hostname.clone(), id.to_owned());
    write_json(&slaves_dir(work_dir).join("latest.json"), &all)
}

/// Checkpoints a framework's info on an agent.
pub(crate) fn write_framework(
    work_dir: &Path,
    agent_id: &str,
    info: &FrameworkInfo,
) -> Result<(), CheckpointError> {
    let fw = info.id.as_ref().map(|i| i.value.as_str()).unwrap_or("");
    write_json(
        &framework_dir(work_dir, agent_id, fw)?.join("framework.info"),
        info,
    )
}

/// Checkpoints a new executor run: its info and its process.
pub(crate) fn write_executor(
    work_dir: &Path,
    executor: ExecutorRef<'_>,
    container_id: &str,
    info: &ExecutorInfo,
    pid: Option<ProcessId>,
) -> Result<(), CheckpointError> {
    write_json(
        &executor_dir(work_dir, executor)?.join("executor.info"),
        info,
    )?;
    let run = run_dir(work_dir, executor, container_id)?;
    let pid = pid.map(|p| format!("{} {}", p.pid, p.start_time));
    write_atomic(
        &run.join("pids").join("forked.pid"),
        pid.unwrap_or_default().as_bytes(),
    )
}

/// Touches `http.marker`: the executor subscribed.
pub(crate) fn mark_subscribed(
    work_dir: &Path,
    executor: ExecutorRef<'_>,
    container_id: &str,
) -> Result<(), CheckpointError> {
    write_atomic(
        &run_dir(work_dir, executor, container_id)?.join("http.marker"),
        b"",
    )
}

/// Checkpoints a task given to an executor run.
pub(crate) fn write_task(
    work_dir: &Path,
    executor: ExecutorRef<'_>,
    container_id: &str,
    record: &TaskRecord,
) -> Result<(), CheckpointError> {
    let tid = record
        .task
        .task_id
        .as_ref()
        .map_or("", |t| t.value.as_str());
    write_json(
        &task_dir(work_dir, executor, container_id, tid)?.join("task.info"),
        record,
    )
}

/// Rewrites a task's updates: the last acknowledged one (if it is not also
/// pending) followed by its ACK, then every pending one.
pub(crate) fn write_updates(
    work_dir: &Path,
    executor: ExecutorRef<'_>,
    container_id: &str,
    task_id: &str,
    acked: Option<&TaskStatus>,
    pending: &[TaskStatus],
) -> Result<(), CheckpointError> {
    let mut text = String::new();
    let mut line = |r: &UpdateRecord| {
        if let Ok(s) = serde_json::to_string(r) {
            text.push_str(&s);
            text.push('\n');
        }
    };
    if let Some(a) = acked {
        line(&UpdateRecord::Update(Box::new(a.clone())));
        line(&UpdateRecord::Ack(hex(a
            .uuid
            .as_deref()
            .unwrap_or_default())));
    }
    for p in pending {
        line(&UpdateRecord::Update(Box::new(p.clone())));
    }
    let dir = task_dir(work_dir, executor, container_id, task_id)?;
    write_atomic(&dir.join("task.updates"), text.as_bytes())
}

/// Forgets a finished task.
pub(crate) fn remove_task(
    work_dir: &Path,
    executor: ExecutorRef<'_>,
    container_id: &str,
    task_id: &str,
) -> Result<(), CheckpointError> {
    remove_dir(&task_dir(work_dir, executor, container_id, task_id)?)
}

/// Forgets an executor that ended, with its tasks.
pub(crate) fn remove_executor(
    work_dir: &Path,
    executor: ExecutorRef<'_>,
) -> Result<(), CheckpointError> {
    remove_dir(&executor_dir(work_dir, executor)?)
}

fn remove_dir(dir: &Path) -> Result<(), CheckpointError> {
    match std::fs::remove_dir_all(dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(CheckpointError::Write {
            path: dir.to_path_buf(),
            source: e,
        }),
        _ => Ok(()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn subdirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<(String, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| Some((e.file_name().into_string().ok()?, e.path())))
        .collect();
    out.sort();
    out
}

/// Reads back everything agent `agent_id` checkpointed. A framework whose
/// files do not parse is skipped (and moved aside); an unreadable
/// `slave.info` fails the whole agent, which then registers as new.
pub(crate) fn recover_agent(
    work_dir: &Path,
    agent_id: &str,
) -> Result<RecoveredAgent, CheckpointError> {
    let dir = agent_dir(work_dir, agent_id)?;
    let info: AgentInfo = read_json(&dir.join("slave.info"))?;
    let mut frameworks = Vec::new();
    let mut skipped = Vec::new();
    for (fid, fdir) in subdirs(&dir.join("frameworks")) {
        match recover_framework(&fdir) {
            Ok(f) => frameworks.push(f),
            Err(e) => {
                let aside = work_dir
                    .join("meta")
                    .join("corrupt")
                    .join(format!("{agent_id}-{fid}-{}", uuid::Uuid::new_v4()));
                let _ = std::fs::create_dir_all(aside.parent().unwrap_or(work_dir));
                let _ = std::fs::rename(&fdir, &aside);
                skipped.push((fid, e));
            }
        }
    }
    Ok(RecoveredAgent {
        info,
        frameworks,
        skipped,
    })
}

fn recover_framework(dir: &Path) -> Result<RecoveredFramework, CheckpointError> {
    let info: FrameworkInfo = read_json(&dir.join("framework.info"))?;
    let mut executors = Vec::new();
    for (_, edir) in subdirs(&dir.join("executors")) {
        let einfo: ExecutorInfo = read_json(&edir.join("executor.info"))?;
        for (cid, rdir) in subdirs(&edir.join("runs")) {
            executors.push(recover_run(&einfo, cid, &rdir)?);
        }
    }
    Ok(RecoveredFramework { info, executors })
}

fn recover_run(
    info: &ExecutorInfo,
    container_id: String,
    dir: &Path,
) -> Result<RecoveredExecutor, CheckpointError> {
    let pid_path = dir.join("pids").join("forked.pid");
    let pid_text = String::from_utf8_lossy(&read(&pid_path)?).into_owned();
    let pid = if pid_text.trim().is_empty() {
        None
    } else {
        let mut words = pid_text.split_whitespace().map(str::parse::<u64>);
        match (words.next(), words.next()) {
            (Some(Ok(pid)), Some(Ok(start_time))) => Some(ProcessId {
                pid: u32::try_from(pid).map_err(|e| CheckpointError::Corrupt {
                    path: pid_path.clone(),
                    message: e.to_string(),
                })?,
                start_time,
            }),
            _ => {
                return Err(CheckpointError::Corrupt {
                    path: pid_path,
                    message: format!("expected '<pid> <start time>', got {pid_text:?}"),
                });
            }
        }
    };
    let mut tasks = Vec::new();
    for (_, tdir) in subdirs(&dir.join("tasks")) {
        tasks.push(recover_task(&tdir)?);
    }
    Ok(RecoveredExecutor {
        info: info.clone(),
        container_id,
        pid,
        subscribed: dir.join("http.marker").exists(),
        tasks,
    })
}

fn recover_task(dir: &Path) -> Result<RecoveredTask, CheckpointError> {
    let record: TaskRecord = read_json(&dir.join("task.info"))?;
    let path = dir.join("task.updates");
    let text = if path.exists() {
        String::from_utf8(read(&path)?).map_err(|e| CheckpointError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?
    } else {
        String::new()
    };
    let mut updates = Vec::new();
    let mut acked = HashSet::new();
    for (n, line) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        match serde_json::from_str::<UpdateRecord>(line) {
            Ok(UpdateRecord::Update(s)) => updates.push(*s),
            Ok(UpdateRecord::Ack(u)) => {
                acked.insert(u);
            }
            Err(e) => {
                return Err(CheckpointError::Corrupt {
                    path,
                    message: format!("line {}: {e}", n + 1),
                });
            }
        }
    }
    let latest = updates.last().cloned();
    let pending = updates
        .into_iter()
        .filter(|u| !acked.contains(&hex(u.uuid.as_deref().unwrap_or_default())))
        .collect();
    Ok(RecoveredTask {
        record,
        latest,
        pending,
    })
}

#[cfg(test)]
#[path = "checkpoint_tests.rs"]
mod tests;
